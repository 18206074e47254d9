"""NCCL's GPU-NIC GPUDirect RDMA decision: ``ncclTopoCheckGdr`` and the flags it reads.

Sources (``NVIDIA/nccl``):
* the decision, v2.30.7 ``src/graph/paths.cc:468-549``: NIC flag and GPU flag (``:485-486``), MLOPart
  (``:487``, 2.30), the read (send) side (``:489-508``), the level (``:511-513``), PXN (``:514-526``),
  distance > level (``:528``), PCI mode on C2C (``:537-541``). Older: v2.18.1 ``paths.cc:355-397`` (read
  side needs an NVLink peer on every arch), v2.19.1 (only sm < 80), v2.26.2 ``paths.cc:431-437`` (PHB over
  C2C counts as C2C when ``NCCL_NET_GDR_C2C=1``, default 0), v2.27.7 ``paths.cc:443-447`` (P2C counts as
  C2C; ``NCCL_NET_GDR_C2C`` default 1), v2.29.2 (default level P2C).
* P2C, v2.30.7 ``paths.cc:794-810`` (local NICs only; every NIC in v2.27.7 ``paths.cc:676-689``); PXN,
  ``paths.cc:812-843`` (``NCCL_PXN_DISABLE`` ``paths.cc:672``, ``NCCL_PXN_C2C`` default 1 from v2.28.3
  ``paths.cc:620``, 0 in v2.27.x; the peer needs GDR itself from v2.30).
* the NIC flag, v2.30.7 ``src/graph/topo.cc:1651-1655``: peer memory (``src/transport/net_ib/gdr.cc:14-29``;
  v2.22.3 ``net_ib.cc:610-620``; v2.21.5 ``net_ib.cc:558-568``) or DMA-BUF, which needs
  ``comm->dmaBufSupport`` (v2.30.7 ``src/init.cc:399-420``: ``NCCL_DMABUF_ENABLE``, CUDA driver >= 11.7, the
  GPU's ``CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED``; first in v2.13.4 ``init.cc:272-324``) and the IB plugin's
  probe ``ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)`` (``gdr.cc:45-83``).
* the GPU flag, ``cudaDevAttrGPUDirectRDMASupported`` (v2.30.7 ``src/plugin/net.cc:424-494``), as
  ``gdrcheck snapshot`` read it (``gdrcheck.collectors.cuda_attrs``) or from the model.
* MLOPart partitions, ``NCCL_NET_GDR_MLOPART`` (v2.30.7 ``paths.cc:466, 487``; ``mloPart`` from the CUDA
  device name, ``src/init.cc:722-723``).
* which NICs NCCL uses at all: ``NCCL_IB_DISABLE`` (``src/transport/net_ib/init.cc:27, 291``), ``NCCL_IB_HCA``
  (``init.cc:317``), an external plugin (``NCCL_NET_PLUGIN``, default ``libnccl-net.so``,
  ``src/plugin/net.cc:256-263``), ``NCCL_NET`` (the network's name).
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.patterns import lazy_pattern
from gdrcheck.rules.nccl.core import version_str, within
from gdrcheck.rules.nccl.decision import Decision, cause, need, shared_cause

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version

READ_NEEDS_NVLINK_ALL_ARCH_UNTIL = (2, 19, 0)
DMABUF_FROM = (2, 13, 4)
PXN_FROM = (2, 12, 7)
MLOPART_FROM = (2, 30, 7)  # v2.30.7 paths.cc:466, 487; absent from v2.30.3 and v2.30.4 paths.cc


def distance(version: Version, st, t: Optional[str], gpu_c2c: Optional[bool]) -> tuple[Optional[str], str]:
    """The type NCCL compares with the level, after the C2C rewrites of that version, and which rewrite made
    it (``p2c``, ``p2c_as_c2c``, ``phb_as_c2c``; empty where none did): :func:`decide` names it as a cause."""
    if t is None:
        return None, ""
    if t == "PHB" and gpu_c2c:
        if version >= (2, 27, 0):
            # P2C (paths.cc:794-810); 2.27-2.28 then count it as C2C when NCCL_NET_GDR_C2C (default 1)
            if version < (2, 29, 0) and st.param("NCCL_NET_GDR_C2C", 1):
                return "C2C", "p2c_as_c2c"
            return "P2C", "p2c"
        if version >= (2, 26, 0) and st.param("NCCL_NET_GDR_C2C", 0):
            return "C2C", "phb_as_c2c"
    return t, ""


def read_side(version: Version, st, sm: Optional[int], nvlink_peer: Optional[bool],
              single_gpu: bool, nccl_dump: bool = False) -> dict[str, object]:
    """The send side (``read=1``): ``NCCL_NET_GDR_READ`` and its default (v2.30.7 ``paths.cc:489-508``: for
    sm < 80 only with an NVLink peer or a single GPU in NCCL's system). ``nccl_dump``: the input is NCCL's own
    topology dump, whose GPUs are the communicator's on the node and whose ``<nvlink>`` elements are every
    NVLink NCCL found (``xml.cc:930-995@v2.30.7``): without a peer the default is decided."""
    raw = st.env.get("NCCL_NET_GDR_READ")
    value = st.param("NCCL_NET_GDR_READ", -2)
    if value == 0:
        return {"gdr_read": "disabled", "gdr_read_reason": f"NCCL_NET_GDR_READ={raw}"}
    if value > 0:
        return {"gdr_read": "enabled", "gdr_read_reason": f"NCCL_NET_GDR_READ={raw}"}
    needs_nvlink = version < READ_NEEDS_NVLINK_ALL_ARCH_UNTIL
    if not needs_nvlink:
        if sm is None:
            return {"gdr_read": "unknown", "gdr_read_reason": "default: on for sm >= 80; the GPU's compute "
                                                               "capability is not shown"}
        if sm >= 80:
            return {"gdr_read": "enabled", "gdr_read_reason": f"default: sm {sm} >= 80"}
    why = "default before 2.19: only with an NVLink peer" if needs_nvlink else f"default for sm {sm} < 80: only " \
                                                                               "with an NVLink peer"
    if single_gpu or nvlink_peer:
        return {"gdr_read": "enabled", "gdr_read_reason": why + (" (the GPU has one)" if nvlink_peer else
                                                                 " or a single GPU (this node has one)")}
    if nvlink_peer is None:
        return {"gdr_read": "unknown", "gdr_read_reason": why + "; the input cannot show NVLink"}
    if nccl_dump:
        return {"gdr_read": "disabled", "gdr_read_reason": why + ": NCCL's own topology dump lists the "
                "communicator's GPUs on this node (more than one) and no NVLink peer of this GPU (a dump holds "
                "every NVLink NCCL found, xml.cc:930-995@v2.30.7; a hand-written NCCL_TOPO_FILE without <nvlink> "
                "is filled in from NVML on the node)"}
    return {"gdr_read": "unknown", "gdr_read_reason": why + " or a single-GPU communicator",
            "gdr_read_depends_on": ["the communicator has only this GPU on this node"]}


def decide(version: Version, st, *, t: Optional[str], candidates: tuple[str, ...], nic_flag, gpu_flag,
           gpu_c2c: Optional[bool], pxn: Optional[tuple[str, str]], mlopart: Optional[bool] = False,
           mlopart_why: str = "") -> Decision:
    """The receive side's decision (``read=0``), which decides the path NCCL takes and whether ``/GDRDMA``
    appears in its connection lines. ``nic_flag``: (ok, why, needs[, the NIC's name where NCCL's own XML in the
    input set it]); ``gpu_flag``: (ok, why[, read from NCCL's own XML in the input])."""
    nic_ok, nic_why, nic_dep = nic_flag[:3]
    gpu_ok, gpu_why = gpu_flag[:2]
    nic_said = cause("nic_flag", text=nic_why, nic=nic_flag[3] if len(nic_flag) > 3 else None,
                     from_input=len(nic_flag) > 3 and nic_flag[3] is not None)
    gpu_said = cause("gpu_flag", text=gpu_why, from_input=len(gpu_flag) > 2 and bool(gpu_flag[2]))
    if nic_ok is False:
        return Decision("gdr", "disabled", (nic_said,))
    if gpu_ok is False:  # the GPU's cudaDevAttrGPUDirectRDMASupported is 0: no GDR at any distance or level
        return Decision("gdr", "disabled", (gpu_said,), facts={"gpu_gdr_supported": False})
    mlo_off = version >= MLOPART_FROM and not st.param("NCCL_NET_GDR_MLOPART", 0)
    if mlopart and mlo_off:
        return Decision("gdr", "disabled", (cause("gdr.mlopart", why=mlopart_why, setting=st.env.get(
            "NCCL_NET_GDR_MLOPART") or "0 (default)", version=version_str(version)),))
    level, level_src = st.gdr_level, st.gdr_level_source
    depends = tuple(need(code) for code in nic_dep or ())
    via = None
    d, how = distance(version, st, t, gpu_c2c)
    if d is None:
        return _unplaced(version, st, candidates, gpu_c2c, pxn)
    route = shared_cause("gdr.c2c", rewrite=how) if how else None
    if pxn is not None:  # the relay NCCL takes (gdr_pairs._pxn: a path beyond PXB, or a wider relay)
        peer, peer_type = pxn
        d, via = peer_type, peer
        route = cause("gdr.pxn", peer=peer, peer_type=peer_type)
        depends += (need("gdr.pxn_rank", peer=peer),)
    if not within(d, level, version):
        return Decision("gdr", "disabled", (cause("gdr.beyond", distance=d, level=level, source=level_src),),
                        distance=d)
    if nic_ok is None or gpu_ok is None:
        missing = tuple(w for ok, w in ((nic_ok, nic_why), (gpu_ok, gpu_why)) if ok is None)
        open_flags = cause("gdr.open_flags", distance=d, level=level, route=route, missing=missing)
        flags = tuple(need(code, text=w) for code, ok, w in (("nic.flag", nic_ok, nic_why), ("gpu.flag", gpu_ok,
                                                                                              gpu_why)) if ok is None)
        needs = depends + flags
        return Decision("gdr", "unknown", (open_flags,), needs, distance=d, via=via)
    if mlopart is None and mlo_off:
        depends += (need("gdr.mlopart", why=mlopart_why, version=version_str(version)),)
    mode = "PCI" if gpu_c2c and d not in ("P2C", "C2C") else None
    causes = (nic_said, gpu_said, cause("gdr.within", distance=d, level=level, source=level_src))
    return Decision("gdr", "enabled", causes + ((route,) if route else ()), depends, distance=d, via=via, mode=mode)


def _unplaced(version: Version, st, candidates: tuple[str, ...], gpu_c2c: Optional[bool],
              pxn: Optional[tuple[str, str]]) -> Decision:
    """The decision where the input does not show where the GPU and the NIC meet: off when every candidate
    path is beyond the level, else unknown."""
    level, level_src = st.gdr_level, st.gdr_level_source
    outs = {within(distance(version, st, c, gpu_c2c)[0], level, version) for c in candidates}
    if candidates and outs == {False} and pxn is None:
        return Decision("gdr", "disabled", (cause("gdr.every_path_beyond", candidates=tuple(candidates),
                                                  level=level, source=level_src),))
    return Decision("gdr", "unknown", (cause("gdr.unplaced", candidates=tuple(candidates)),),
                    (need("gdr.path_class"),))


def dmabuf_flag(version: Version, st, dmabuf: Optional[dict], driver_version: Optional[str],
                nic_driver_dmabuf: Optional[bool], nic_driver: Optional[str], gpu_dmabuf: Optional[bool] = None,
                cuda_driver: Optional[int] = None) -> tuple[Optional[bool], str]:
    """``comm->dmaBufSupport`` and the IB plugin's DMA-BUF probe for this GPU and NIC. ``gpu_dmabuf`` and
    ``cuda_driver``: the driver's ``CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`` and ``cuDriverGetVersion`` where
    ``gdrcheck snapshot`` read them; else the NVIDIA driver branch and flavour stand in for them."""
    if version < DMABUF_FROM:
        return False, f"NCCL {version_str(version)} has no DMA-BUF support (from 2.13.4)"
    if not st.dmabuf_enabled:
        return False, f"DMA-BUF disabled by NCCL_DMABUF_ENABLE={st.env.get('NCCL_DMABUF_ENABLE')}"
    d = dmabuf if isinstance(dmabuf, dict) else {}
    reasons_no: list[str] = []
    unknown: list[str] = []
    major = None
    if driver_version:
        try:
            major = int(str(driver_version).split(".")[0])
        except ValueError:
            major = None
    if cuda_driver is not None:
        if cuda_driver < 11070:
            reasons_no.append(f"the CUDA driver is {cuda_driver // 1000}.{cuda_driver % 1000 // 10}, older than 11.7")
    elif major is None:
        unknown.append("the NVIDIA driver version (CUDA driver >= 11.7, R515)")
    elif major < 515:
        reasons_no.append(f"NVIDIA driver {driver_version} is older than R515 (CUDA 11.7)")
    open_drv = d.get("open_driver")
    if gpu_dmabuf is False:
        reasons_no.append("the driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0 for this GPU, read by gdrcheck "
                          "snapshot")
    elif gpu_dmabuf is True:
        pass
    elif open_drv is False:
        reasons_no.append("the GPU's DMA-BUF attribute needs the open NVIDIA kernel module (from the driver "
                          "flavour; 'gdrcheck snapshot' reads the attribute itself)")
    elif open_drv is None:
        unknown.append("the GPU's DMA-BUF attribute (open NVIDIA kernel module; 'gdrcheck snapshot' reads it)")
    for key, text in (("kernel_ge_5_12", "Linux 5.12+"), ("ibv_reg_dmabuf_mr", "rdma-core 34+ (ibv_reg_dmabuf_mr)")):
        v = d.get(key)
        if v is False:
            reasons_no.append(f"no {text}")
        elif v is None:
            unknown.append(text)
    if nic_driver_dmabuf is None:
        unknown.append(f"whether the NIC's RDMA driver ({nic_driver or 'unknown'}) implements dma-buf registration")
    elif nic_driver_dmabuf is False:
        reasons_no.append(f"the NIC's RDMA driver ({nic_driver}) does not implement dma-buf registration")
    if reasons_no:
        return False, "no DMA-BUF: " + "; ".join(reasons_no)
    if unknown:
        return None, "DMA-BUF not known: " + "; ".join(unknown)
    gpu_side = "the driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 1, read by gdrcheck snapshot" \
        if gpu_dmabuf else "the GPU's DMA-BUF attribute"
    return True, f"DMA-BUF (NCCL's ibv_reg_dmabuf_mr probe and {gpu_side})"


_VGPU = lazy_pattern(r"\bGRID\b|\bvGPU\b|-\d+[ABCQ]\b")  # vGPU profile names: GRID A100-40C, NVIDIA H100XM-80C
_NO_MODEL = lazy_pattern(r"^(NVIDIA )?(Graphics Device|Device [0-9a-fA-F]{4})$")


def model_cannot_say(name: str) -> str:
    """Why the model name cannot tell ``cudaDevAttrGPUDirectRDMASupported`` (a vGPU profile, whose answer the
    host's vGPU configuration sets; a part the name does not identify), or ''."""
    if _VGPU.search(name):
        return f"{name} is a vGPU profile: its GPUDirect RDMA support is the vGPU configuration's, not the model's"
    if _NO_MODEL.match(name.strip()):
        return f"{name!r} does not name the part"
    return ""


def proc_model(snap, bdf: str) -> Optional[str]:
    """The driver's own model name (``/proc/driver/nvidia/gpus/<bdf>/information``), where collected."""
    return (host_record(snap, "nvidia_gpu_models") or {}).get(bdf)
