"""The peer-memory path: how the RDMA stack reaches GPU memory (nvidia-peermem, nv_peer_mem, DMA-BUF)."""

from __future__ import annotations

from gdrcheck.rules import nccl
from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

NO_PEER_MEMORY = Rule(
    "GDR020", "no-peer-memory-path", "error", "pair",
    "No peer-memory path: NCCL will not use GPUDirect RDMA on any NIC",
    "NCCL enables GPUDirect RDMA on a NIC only when a peer-memory module is registered (it tests for "
    "/sys/kernel/mm/memory_peers/nv_mem/version, .../nv_mem_nc/version or /sys/module/nvidia_peermem/"
    "version, depending on its version) or DMA-BUF works (open NVIDIA kernel module, Linux 5.12+, "
    "rdma-core 34+). Without either, every inter-node transfer is staged through host memory.",
    "Load the module: `modprobe nvidia-peermem` (and add `nvidia-peermem` to /etc/modules-load.d/ to "
    "keep it); if that fails with 'Invalid argument', MLNX_OFED/DOCA-OFED was installed after the GPU "
    "driver: reinstall the driver. Or use DMA-BUF: the open NVIDIA kernel modules with Linux 5.12+.",
    origin="nccl", pair_kinds=("gpu-nic",))
PEER_MEMORY_UNKNOWN = Rule(
    "GDR021", "peer-memory-unknown", "info", "pair",
    "Whether a peer-memory path exists is not known",
    "GPUDirect RDMA needs nvidia-peermem (or nv_peer_mem) or DMA-BUF; the input does not show the "
    "kernel modules or the files NCCL checks.",
    "Run gdrcheck on the node (it reads /sys/module and /sys/kernel/mm/memory_peers), or send a snapshot.",
    origin="nccl", pair_kinds=("gpu-nic",))
LEGACY_NV_PEER_MEM = Rule(
    "GDR022", "legacy-nv-peer-mem", "warning", "host",
    "The legacy nv_peer_mem module is loaded",
    "nv_peer_mem (Mellanox/nv_peer_memory) is deprecated: since R470 the driver ships nvidia-peermem, "
    "persistent mappings need it (CUDA 12.2 notes), NCCL 2.23+ never tests /sys/module/nv_peer_mem and "
    "GPU-initiated networking rejects it. The two must never be loaded together.",
    "`rmmod nv_peer_mem && modprobe nvidia-peermem`; remove the nvidia-peer-memory package and its "
    "service (`systemctl disable nv_peer_mem`).")
PEERMEM_INVISIBLE = Rule(
    "GDR023", "peermem-invisible-to-nccl", "error", "pair",
    "nvidia-peermem is loaded, but this NCCL version does not see it",
    "NCCL up to 2.22 looks only under /sys/kernel/mm/memory_peers/, which exists only with MLNX_OFED/"
    "DOCA-OFED's ib_core; with inbox RDMA drivers it reports 'GPU Direct RDMA Disabled' although the "
    "module is loaded (NVIDIA/nccl#1676: about 10x slower).",
    "Upgrade NCCL to 2.23 or newer (it also tests /sys/module/nvidia_peermem/version), or install "
    "MLNX_OFED/DOCA-OFED so the memory_peers files exist.",
    origin="nccl", pair_kinds=("gpu-nic",))
IBGDA_OVERRIDE = Rule(
    "GDR024", "ibgda-needs-peer-mapping-override", "info", "host",
    "GPU-initiated networking (IBGDA) prerequisites are not set",
    "NVSHMEM's and NCCL's GPU-initiated (IBGDA) transports need the driver option "
    "PeerMappingOverride=1; without it they fall back to CPU-proxied transfers.",
    "Add `options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\"` to /etc/modprobe.d/nvidia.conf, "
    "rebuild the initramfs and reboot; check `grep RegistryDwords /proc/driver/nvidia/params`.",
    origin="nvidia-docs")


def dmabuf_possible(ctx: Context) -> Optional[bool]:
    d = value(ctx, "dmabuf")
    if isinstance(d, dict):
        for key in ("possible", "likely"):
            p = d.get(key)
            if isinstance(p, bool):
                return p
    return None


def nic_gdr(ctx: Context) -> tuple[Optional[bool], str]:
    """NCCL's NIC-side GDR flag for this node, and why."""
    pm = value(ctx, "peermem")
    version = ctx.nccl.version if ctx.nccl else nccl.NEWEST
    files = nccl.peermem_files(version)
    dmabuf = dmabuf_possible(ctx) if (ctx.nccl is None or ctx.nccl.dmabuf_enabled) else False
    if not isinstance(pm, dict) or not isinstance(pm.get("nccl_files"), dict):
        if dmabuf:
            return True, "DMA-BUF"
        return None, "peer-memory facts not collected" + _peerdirect_said(ctx)
    present = [f for f in files if pm["nccl_files"].get(f)]
    if present:
        return True, f"peer memory ({present[0]})"
    if dmabuf:
        return True, "DMA-BUF"
    if dmabuf is None:
        return None, "no peer-memory file; DMA-BUF support not known"
    return False, "none of " + ", ".join(files) + " exists and DMA-BUF is not available"


def _peerdirect_said(ctx: Context) -> str:
    """What gdscheck -p's PeerDirect line adds where the modules are not in the input: MLNX_OFED's peer-memory API
    (which NCCL up to 2.22 needs for nvidia-peermem to be seen), never whether nvidia-peermem is loaded."""
    pd = value(ctx, "peerdirect")
    if not isinstance(pd, dict) or pd.get("enabled") is None:
        return ""
    if pd["enabled"]:
        return ("; gdscheck -p shows Mellanox PeerDirect Enabled: MLNX_OFED's peer-memory API is in place "
                "(nvidia-fs uses it), not whether nvidia-peermem, the module NCCL tests for, is loaded")
    return ("; gdscheck -p shows Mellanox PeerDirect Disabled: nvidia-fs has no MLNX_OFED peer-memory API, which "
            "says nothing of nvidia-peermem or DMA-BUF, what NCCL tests")


def nccl_saw_gdr(ctx: Context, nic: str) -> bool:
    """Whether NCCL's own topology dump says GPUDirect RDMA works for this NIC: ``<net gdr="1">``, which NCCL
    writes when the network's ``ptrSupport`` has NCCL_PTR_CUDA or NCCL_PTR_DMABUF (v2.30.7 ``src/graph/topo.cc:
    1651-1655``); the IB transport sets them when a peer-memory file exists or the DMA-BUF probe passes
    (``net_ib/init.cc:546-553``)."""
    d = ctx.topo.by_bdf.get(nic)
    nets = d.extra.get("nccl_nets") if d is not None and d.extra else None
    if any(n.get("gdr") == "1" for n in nets or ()):
        return True
    from gdrcheck.rules.nccl.job_log import hca_evidence  # the job's log: the HCA line, or /GDRDMA used through it

    seen = hca_evidence(ctx.snap)
    return d is not None and any(seen.get(n) == "1" for n in d.rdma_devices)


def _check(ctx: Context) -> Iterable[Finding]:
    pairs = tuple((p.a, p.b) for p in ctx.pairs_of("gpu-nic"))
    pm = value(ctx, "peermem")
    if isinstance(pm, dict) and pm.get("nv_peer_mem_loaded"):
        yield Finding(LEGACY_NV_PEER_MEM.code, "warning", ("nv_peer_mem",), "the legacy nv_peer_mem module is "
                      "loaded" + (" together with nvidia_peermem" if pm.get("nvidia_peermem_loaded") else ""))
    if not pairs:
        return
    from gdrcheck.rules.rccl.releases import node_reason

    if node_reason(ctx.snap, ctx.topo):  # RCCL's peer memory: rules.rccl_rules
        return
    ok, why = nic_gdr(ctx)
    if ok is None:
        # NCCL's own dump: <net gdr="1"> is NCCL having found peer memory or DMA-BUF working for that NIC
        saw = {n: nccl_saw_gdr(ctx, n) for n in {k[1] for k in pairs}}  # asked once per NIC, not per pair
        pairs = tuple(k for k in pairs if not saw[k[1]])
        if pairs:
            yield Finding(PEER_MEMORY_UNKNOWN.code, "info", ("peer-memory",), f"peer-memory path unknown: {why}",
                          pairs=pairs, effect="unknown", settle="run gdrcheck on the node or send a snapshot")
    elif ok is False:
        v = nccl.version_str(ctx.nccl.version)
        if isinstance(pm, dict) and pm.get("nvidia_peermem_loaded"):
            yield Finding(PEERMEM_INVISIBLE.code, "error", ("nvidia_peermem",),
                          f"nvidia_peermem is loaded but NCCL {v} checks only " + ", ".join(
                              nccl.peermem_files(ctx.nccl.version)) + ", none of which exists",
                          pairs=pairs, effect="fail")
        else:
            yield Finding(NO_PEER_MEMORY.code, "error", ("peer-memory",),
                          f"no peer-memory path for NCCL {v}: {why}", pairs=pairs, effect="fail")
    override = value(ctx, "peer_mapping_override")
    if override is False and ctx.gpu_bdfs():
        yield Finding(IBGDA_OVERRIDE.code, "info", ("nvidia",),
                      "PeerMappingOverride=1 is not set in the NVIDIA driver's RegistryDwords (needed for IBGDA)")


CHECKS = (
    (NO_PEER_MEMORY, _check),
    (PEER_MEMORY_UNKNOWN, None),
    (LEGACY_NV_PEER_MEM, None),
    (PEERMEM_INVISIBLE, None),
    (IBGDA_OVERRIDE, None),
)
