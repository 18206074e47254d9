"""Each GPU's and NIC's GPUDirect RDMA flag as RCCL sets it (``ROCm/rccl``):

* the GPU's ``gdrSupport``: fine-grained device memory must allocate (``hipExtMallocWithFlags(...,
  hipDeviceMallocFinegrained)``, ``src/init.cc:721-733@rocm-6.2.2``, ``:703-712@rocm-6.1.0``,
  ``:778-790`` develop), then DMA-BUF (2.20+: ``init.cc:726-727@rocm-6.2.2``) or a NIC the IB transport
  gives ``NCCL_PTR_CUDA`` (``src/net.cc:550-553@rocm-6.2.2``: no memory registration test on AMD). Written to
  the dump as ``<gpu gdr>`` (``src/graph/topo.cc:746@rocm-6.2.2``). No GPU-architecture rule (NCCL's "sm < 60"
  has no RCCL counterpart).
* the NIC's ``gdrSupport``: ``NCCL_PTR_CUDA`` (peer memory) or DMA-BUF (``topo.cc:765@rocm-6.2.2``), written as
  ``<net gdr>``.
* peer memory, ``ncclIbGdrSupport`` per release: 2.18.6 the ``amdkfd`` client's
  ``/sys/kernel/mm/memory_peers/amdkfd/version`` (``src/transport/net_ib.cc:295@rocm-6.1.0``); 2.20.5 that file,
  else ``ib_umem_get_peer`` in ``/lib/modules/$(uname -r)/build/include/rdma/ib_umem.h``
  (``net_ib.cc:357-389@rocm-6.2.2``); 2.21.5 ``RCCL_FORCE_ENABLE_GDRDMA=1`` first (``net_ib.cc:562-576``
  develop), then three places of the ``amdkfd`` file (``:587-589``), else the ``ib_register_peer_memory_client``
  symbol in ``/proc/kallsyms`` (``:612-624``). On Hyper-V (``bios_version`` "Hyper-V UEFI Release") peer
  memory is off while ``numa_balancing`` is 1 and ``NCCL_IB_PCI_RELAXED_ORDERING`` is 0 (``:358-364@rocm-6.2.2``).
* DMA-BUF (``src/misc/rocmwrap.cc:103-150@rocm-6.2.2``, the same in all three): ``NCCL_DMABUF_ENABLE=1``
  (default 0), HSA's DMA-BUF attribute and ``hsa_amd_portable_export_dmabuf`` (the node's ROCm runtime only),
  and both ``CONFIG_DMABUF_MOVE_NOTIFY=y`` and ``CONFIG_PCI_P2PDMA=y`` in ``/boot/config-$(uname -r)``; one
  process-wide answer.

Pure: each function takes the snapshot and values it reads.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_fact, host_record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.rules.nccl.settings import NcclSettings
    from gdrcheck.rules.rccl.releases import Release

AMDKFD = "/sys/kernel/mm/memory_peers/amdkfd/version"
AMDKFD_221 = (AMDKFD, "/sys/kernel/memory_peers/amdkfd/version", "/sys/memory_peers/amdkfd/version")
HYPERV = "Hyper-V UEFI Release"


def amd_facts(snap) -> dict:
    """The AMD host fact (``gdrcheck.collectors.host_amd``), empty where the input has none."""
    return dict(host_record(snap, "amd_gpu", known_only=True) or {})


def peer_files(release: Release) -> tuple[str, ...]:
    return AMDKFD_221 if release.version >= (2, 21, 0) else (AMDKFD,)


def peer_memory(release: Release, st: NcclSettings, snap) -> tuple[Optional[bool], str, str]:
    """(RCCL's ncclIbGdrSupport answer, why, how to settle it where unknown)."""
    amd = amd_facts(snap)
    v = release.version
    if v >= (2, 21, 0) and st.param("RCCL_FORCE_ENABLE_GDRDMA", -1) == 1:
        return True, "RCCL_FORCE_ENABLE_GDRDMA=1 (net_ib.cc:572-576, develop)", ""
    files = amd.get("peer_files") or {}
    wanted = peer_files(release)
    if not files:
        return None, "the input does not show the amdkfd peer-memory client", f"ls {' '.join(wanted)}"
    hit = [p for p in wanted if files.get(p)]
    found: Optional[bool] = bool(hit)
    why = f"{hit[0]} exists (the amdkfd peer-memory client)" if hit else f"no {' or '.join(wanted)}"
    settle = ""
    bios = amd.get("bios_version")
    if bios is not None and str(bios).startswith(HYPERV):
        numa = amd.get("numa_balancing")
        relaxed = st.param("NCCL_IB_PCI_RELAXED_ORDERING", 2)
        if numa == "1" and relaxed == 0:
            return False, f"Hyper-V with numa_balancing 1 and NCCL_IB_PCI_RELAXED_ORDERING=0 ({why})", ""
        return found, why, ""
    if not hit and v >= (2, 21, 0):
        found, why = None, (f"{why}; RCCL {'.'.join(map(str, v))} then looks for the "
                            "ib_register_peer_memory_client symbol in /proc/kallsyms, which gdrcheck does not read")
        settle = "grep -w ib_register_peer_memory_client /proc/kallsyms"
    elif not hit and v >= (2, 20, 0):
        umem = amd.get("ib_umem_get_peer")
        if umem is None:
            found, why = None, f"{why}; RCCL then looks for ib_umem_get_peer in the kernel's rdma/ib_umem.h, not shown"
            settle = "grep -c ib_umem_get_peer /lib/modules/$(uname -r)/build/include/rdma/ib_umem.h"
        elif umem:
            found, why = True, f"{why}, but the kernel's rdma/ib_umem.h declares ib_umem_get_peer"
    return found, why, settle


def dmabuf(st: NcclSettings, snap) -> tuple[Optional[bool], str]:
    """RCCL's process-wide DMA-BUF answer (``rocmwrap.cc:103-150@rocm-6.2.2``)."""
    if not st.dmabuf_enabled:
        return False, "DMA-BUF off: NCCL_DMABUF_ENABLE is 0 by default in RCCL (rocmwrap.cc:21)"
    cfg = host_fact(snap, "p2pdma_config")
    if cfg is not None and getattr(cfg, "known", False) and cfg.value is False:
        return False, "DMA-BUF off: the kernel is built without CONFIG_PCI_P2PDMA=y (rocmwrap.cc:145-148)"
    return None, ("NCCL_DMABUF_ENABLE=1: DMA-BUF then rests on the ROCm runtime's DMA-BUF attribute and "
                  "CONFIG_DMABUF_MOVE_NOTIFY=y, CONFIG_PCI_P2PDMA=y in /boot/config-$(uname -r)")


def gpu_flag(xml_gpu, peer: Optional[bool], dma: Optional[bool], release: Release) -> tuple[Optional[bool], str]:
    """The GPU's gdrSupport: the dump's ``<gpu gdr>`` where it shows it, else fine-grained memory (the node only)
    and peer memory or (from 2.20) DMA-BUF."""
    raw = (xml_gpu or {}).get("gdr")
    if raw in ("0", "1"):
        return raw == "1", f"<gpu gdr=\"{raw}\"> in RCCL's topology dump (topo.cc:746@rocm-6.2.2)"
    if release.version < (2, 20, 0) and peer is False:  # init.cc:703-708@rocm-6.1.0: no DMA-BUF shortcut
        return False, "no peer memory: RCCL 2.18 asks only for a NIC with it (init.cc:707@rocm-6.1.0, net.cc)"
    if peer is False and dma is False:
        return False, "neither peer memory nor DMA-BUF (net.cc:550-553, init.cc:726-729@rocm-6.2.2)"
    return None, ("fine-grained device memory must allocate on the GPU (init.cc:721@rocm-6.2.2), which only the "
                  "node shows (rocminfo: 'Fine grained' pools of the GPU agent)")


def nic_flag(nic, rdma: Optional[bool], peer: Optional[bool], peer_why: str, dma: Optional[bool], dma_why: str) \
        -> tuple[Optional[bool], str]:
    """The NIC's gdrSupport: the dump's ``<net gdr>``, else peer memory or DMA-BUF of an RDMA NIC."""
    if nic.xml_gdr is not None:
        return nic.xml_gdr, f"<net gdr=\"{int(nic.xml_gdr)}\"> in RCCL's topology dump (topo.cc:765@rocm-6.2.2)"
    if rdma is False:
        return False, "not an RDMA device RCCL's IB transport lists"
    if peer:
        return True, f"peer memory: {peer_why}"
    if dma:
        return True, dma_why
    if peer is False and dma is False:
        return False, f"no peer memory ({peer_why}) and {dma_why}"
    return None, f"peer memory: {peer_why}; {dma_why}"
