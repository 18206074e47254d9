"""NCCL's view of one node at one version: settings, versions found, GPU and NIC flags, per-pair decisions.

Pure: reads the snapshot and topology only. ``NodeNccl.build`` is called once per report (and once per
other NCCL version found, to say which pairs would be decided differently under it).
"""

from __future__ import annotations

import re
from collections import abc

from gdrcheck.device_models import gpu_model, grace_part
from gdrcheck.record import field, record, replace
from gdrcheck.rules.nccl import bcm
from gdrcheck.rules.nccl import cpu as cpu_rules
from gdrcheck.rules.nccl import gdr as gdr_rules
from gdrcheck.rules.nccl import ib as ib_rules
from gdrcheck.rules.nccl import p2p as p2p_rules
from gdrcheck.rules.nccl import pxn as pxn_rules
from gdrcheck.rules.nccl.core import (
    NEWEST,
    nccl_type,
    parse_version,
    peermem_files,
    rank_in,
    version_str,
    within,
)
from gdrcheck.rules.nccl.cpu import cpu_kind, node_cpu
from gdrcheck.rules.nccl.settings import NcclSettings, effective_env, param, settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Tuple

    from gdrcheck.rules.nccl.core import Version

SPEED_CODES = ((2.5, 15), (5.0, 30), (8.0, 60), (16.0, 120), (32.0, 240), (64.0, 480))  # topo.cc:545-556
NVLINK_BW = ((100, 40.1), (90, 20.6), (87, 20.0), (86, 12.0), (80, 20.0), (70, 20.0), (60, 18.0))  # topo.h:274-282
NIC_RDMA_DRIVER = {"mlx5_core": "mlx5_ib", "bnxt_en": "bnxt_re", "ice": "irdma", "i40e": "irdma", "efa": "efa",
                   "ionic": "ionic"}
DMABUF_RDMA = {"mlx5_ib", "efa", "bnxt_re", "irdma", "ionic"}
_SM_BY_NAME = ((r"\bG?B(100|200|300)\b", 100), (r"\bG?H(100|200|800|20)\b", 90), (r"\bL(4|40S?|20)\b", 89),
               (r"RTX [0-9]+ Ada|\bRTX 40[0-9]0\b", 89), (r"\bA(100|800|30)\b", 80),
               (r"\bA(10|16|2|40)\b|RTX A[0-9]+|RTX 30[0-9]0", 86), (r"\bT4\b|RTX 20[0-9]0|Quadro RTX", 75),
               (r"\bV100\b|TITAN V", 70), (r"\bP100\b", 60))


def _speed_code(gt: Optional[float]) -> int:
    if gt is None:
        return 60  # topo.cc: an unknown speed string counts as 60 (Gen3)
    for s, code in SPEED_CODES:
        if abs(gt - s) < 0.01:
            return code
    return 60


def link_bw(dev, parent=None) -> Optional[float]:
    """GB/s of one PCIe hop as NCCL computes it: min(device, upstream port) max speed x width / 80."""
    if dev is None or dev.link.max_speed is None:
        return None
    speeds = [dev.link.max_speed] + ([parent.link.max_speed] if parent is not None and parent.link.max_speed else [])
    widths = [dev.link.max_width or 16] + ([parent.link.max_width] if parent is not None and parent.link.max_width
                                           else [])
    return min(widths) * _speed_code(min(speeds)) / 80.0


def rate_gbytes(text: Optional[str]) -> Optional[float]:
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec", text or "")
    return float(m.group(1)) / 8.0 if m else None


@record
class GpuInfo:
    bdf: str
    name: Optional[str]
    sm: Optional[int]
    sm_source: str
    gdr: Optional[bool]
    gdr_source: str
    c2c: Optional[bool]
    mlopart: Optional[bool] = None  # an MLOPart partition (NCCL 2.30 leaves such GPUs without GDR by default)
    mlopart_source: str = ""
    dmabuf: Optional[bool] = None  # the driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, where gdrcheck read it
    cuda_driver: Optional[int] = None  # cuDriverGetVersion, where gdrcheck read it (11070 = 11.7)


@record
class NicInfo:
    bdf: str
    rdma: Tuple[str, ...]
    driver: Optional[str]
    rdma_driver: Optional[str]
    rate: Optional[float]  # GB/s, best port
    xml_gdr: Optional[bool] = None  # an NCCL XML's (or topology file's) <net gdr>


@record
class NodeNccl:
    version: Version
    version_reason: str
    versions_found: List[Dict[str, object]]
    st: NcclSettings
    cpu: Optional[str]
    cpu_source: str
    gpus: Dict[str, GpuInfo]
    nics: Dict[str, NicInfo]
    plugins: Tuple[str, ...]
    topo_files: Dict[str, str] = field(default_factory=dict)  # path -> what was applied from it
    data_direct: List[str] = field(default_factory=list)  # the node's mlx5 data-direct DMA functions
    file_classes: Dict[Tuple[str, str], str] = field(default_factory=dict)  # pairs the topology file decides
    file_flat: frozenset = frozenset()  # of those, the pairs that are PIX because NCCL fused Broadcom switches
    rdma: Dict[str, Optional[bool]] = field(default_factory=dict)  # NIC -> an RDMA device NCCL's IB lists
    gdr_view: Dict[Tuple[str, str], dict] = field(default_factory=dict)
    p2p_view: Dict[Tuple[str, str], dict] = field(default_factory=dict)
    types: Dict[Tuple[str, str], tuple] = field(default_factory=dict)  # pair -> pair_type(): asked once
    job_gpus: Optional[int] = None  # the node's GPUs in the job's communicator, where known
    job: Optional[object] = None  # cuda_visible.JobGpus: which GPUs, where the job sets CUDA_VISIBLE_DEVICES


# ---------------------------------------------------------------------------
# versions


def versions_found(snap) -> List[Dict[str, object]]:
    f = snap.host.get("nccl_versions")
    out: List[Dict[str, object]] = []
    if f is not None and getattr(f, "known", False) and isinstance(f.value, dict):
        out = [dict(e) for e in f.value.get("found", ())]
    # NVIDIA's containers record the NCCL they ship as NCCL_VERSION in their environment
    env = _recorded_env(snap)
    v = env.get("NCCL_VERSION") if env else None
    if v and not any(str(e.get("version")) == v for e in out):
        try:
            parse_version(v)
        except ValueError:
            return out
        out.append({"version": v, "kind": "environment", "where": "NCCL_VERSION in the environment"})
    return out


def _recorded_env(snap) -> Dict[str, str]:
    conf = snap.host.get("nccl_conf")
    if conf is not None and getattr(conf, "known", False) and isinstance(conf.value, dict) \
            and isinstance(conf.value.get("env"), dict):
        return conf.value["env"]
    fact = snap.host.get("nccl_env")
    if fact is not None and isinstance(fact.value, dict):
        return {k: str(v["value"]) if isinstance(v, dict) and "value" in v else str(v) for k, v in fact.value.items()}
    return {}


def choose_version(requested: Optional[str], found: List[Dict[str, object]]) -> Tuple[Version, str]:
    if requested:
        return parse_version(requested), "--nccl-version"
    good = []
    for e in found:
        try:
            good.append((parse_version(str(e["version"])), e))
        except ValueError:
            continue
    if good:
        v, e = max(good, key=lambda x: x[0])
        extra = "" if v <= NEWEST else f"; newer than the newest rules gdrcheck knows ({version_str(NEWEST)}), " \
                                       f"judged with those"
        return v, f"the newest NCCL found on the node ({e['kind']}: {e['where']}){extra}"
    return NEWEST, (f"no NCCL found on the node (library, pip wheel or PyTorch): the newest rules gdrcheck knows "
                    f"({version_str(NEWEST)})")


# ---------------------------------------------------------------------------
# settings in force for a version


def settings_for(snap, version: Version, options_env: Mapping[str, str], cpu: Optional[str], n_gpus: int,
                 version_reason: str, job_gpus: Optional[int] = None) -> NcclSettings:
    conf = snap.host.get("nccl_conf")
    if conf is not None and getattr(conf, "known", False) and isinstance(conf.value, dict):
        v = conf.value
        got, read = effective_env(version, v.get("env"), v.get("env_source") or "environment",
                                  v.get("files") or {}, v.get("home") or {}, options_env)
        env = {k: s.value for k, s in got.items()}
        sources = {k: s.source for k, s in got.items()}
    else:  # an input without the raw layers: the collected values (newest file rules) and the options
        env, sources, read = {}, {}, []
        fact = snap.host.get("nccl_env")
        if fact is not None and isinstance(fact.value, dict):
            for k, val in fact.value.items():
                env[k] = str(val["value"]) if isinstance(val, dict) and "value" in val else str(val)
                sources[k] = val.get("source", "") if isinstance(val, dict) else ""
        for k, val in options_env.items():
            env[k], sources[k] = val, "gdrcheck options"
    return settings(version, env, cpu, n_gpus, sources=sources, version_reason=version_reason, files_read=read,
                    job_gpus=job_gpus)


# ---------------------------------------------------------------------------
# GPU and NIC flags


def _driver_gpu(snap, bdf):
    for g in snap.gpus:
        if g.bdf == bdf:
            return g
    return None


def cuda_attrs(snap) -> Tuple[Dict[str, dict], Optional[int]]:
    """The CUDA driver's flags per GPU bus id and its version, as ``gdrcheck snapshot`` read them
    (``gdrcheck.collectors.cuda_attrs``); empty where the input has no such record."""
    f = snap.host.get("cuda_attrs")
    if f is None or not getattr(f, "known", False) or not isinstance(f.value, dict):
        return {}, None
    gpus = f.value.get("gpus")
    drv = f.value.get("driver_version")
    return (dict(gpus) if isinstance(gpus, abc.Mapping) else {}), (drv if isinstance(drv, int) else None)


_MLOPART_PARTS = r"\bG?B(100|200|300)\b"  # multi-die parts: more than one locality domain


def mlopart_info(name: Optional[str], sm: Optional[int], xml_gpu, cuda: Optional[dict]) -> Tuple[Optional[bool], str]:
    """Whether NCCL sees the GPU as an MLOPart partition: ``mloPart`` is the number after ``MLOPart`` in the CUDA
    device name (v2.30.7 ``src/init.cc:722-723``), written to the XML as ``<gpu mlopart>`` (``topo.cc:1808``,
    read back at ``topo.cc:516, 596, 784``). ``None``: the input cannot show it and the part can be
    partitioned (MPS MLOPart, a job-side setting); ``False`` with an empty reason: a part without partitions."""
    raw = xml_gpu.get("mlopart") if xml_gpu else None
    if raw is not None and raw.strip().lstrip("-").isdigit():
        part = int(raw)
        return (part != -1), f"<gpu mlopart=\"{raw}\"> in NCCL's XML"
    names = (cuda or {}).get("names") or []
    if names:
        hit = [n for n in names if "MLOPart" in n]
        if hit:
            return True, f"the CUDA device name {hit[0]!r} (read by gdrcheck snapshot) names an MLOPart partition"
        return False, "the CUDA device names (read by gdrcheck snapshot) name no MLOPart partition"
    if (name and re.search(_MLOPART_PARTS, name)) or sm in (100, 103):
        return None, (f"{name or 'the GPU'} can be split into MLOPart partitions (MPS MLOPart), which the input "
                      "cannot show")
    return False, ""


def gpu_info(snap, topo, bdf: str, cpu: Optional[str], topo_gpu: Mapping[str, str]) -> GpuInfo:
    d = topo.by_bdf[bdf]
    dg = _driver_gpu(snap, bdf)
    attrs, cuda_driver = cuda_attrs(snap)
    cuda = attrs.get(bdf)
    name = (dg.name if dg is not None and dg.name else None) or gdr_rules.proc_model(snap, bdf) or d.name
    known = gpu_model(d)  # "Device 2335" (an lspci with an older pci.ids) is an H200 SXM by its id
    if known and not (dg is not None and dg.name):
        name = f"{name} [{known}]" if name else known
    xml_gpu = d.extra.get("nccl_gpu") if d.extra else None
    sm, sm_src = None, ""
    if dg is not None and dg.cuda_compute:
        sm, sm_src = dg.cuda_compute[0] * 10 + dg.cuda_compute[1], "NVML compute capability"
    elif xml_gpu and str(xml_gpu.get("sm", "")).isdigit():
        sm, sm_src = int(xml_gpu["sm"]), "NCCL XML <gpu sm>"
    elif name:
        for pat, value in _SM_BY_NAME:
            if re.search(pat, name):
                sm, sm_src = value, f"from the model name {name!r}"
                break
    gdr, gdr_src = None, ""
    if bdf in topo_gpu:
        gdr = topo_gpu[bdf] not in ("0", "")
        gdr_src = f"<gpu gdr=\"{topo_gpu[bdf]}\"> in the topology file (kept by NCCL: topo.cc, xmlInitAttrInt)"
    elif xml_gpu and xml_gpu.get("gdr") in ("0", "1"):
        gdr = xml_gpu["gdr"] == "1"
        gdr_src = f"NCCL's own <gpu gdr=\"{xml_gpu['gdr']}\"> in the input"
    else:
        gdr, gdr_src = _gdr_flag(name, cuda, cuda_driver)
    c2c: Optional[bool] = None
    if d.extra and d.extra.get("c2c"):
        c2c = True
    elif grace_part(name):
        c2c = True  # GH200/GB200/GB300; a chip name (GH100, GB202) is a GPU in any machine, x86 too
    elif cpu is not None and cpu != "arm":
        c2c = False
    elif name:
        c2c = False
    mlo, mlo_src = mlopart_info(name, sm, xml_gpu, cuda)
    dmabuf = None
    if cuda and cuda.get("dmabuf") in (0, 1):
        dm = snap.host.get("dmabuf")
        model = dm.value.get("open_driver") if dm is not None and isinstance(dm.value, dict) else None
        # as with the GDR flag: the recorded attribute speaks where the model cannot or disagrees
        if model is None or (cuda["dmabuf"] == 1) != bool(model):
            dmabuf = cuda["dmabuf"] == 1
    # the CUDA driver's version speaks where the attribute does, or where it rules DMA-BUF out (before 11.7)
    speaks = cuda_driver is not None and (dmabuf is not None or cuda_driver < 11070)
    return GpuInfo(bdf, name, sm, sm_src, gdr, gdr_src, c2c, mlo, mlo_src, dmabuf, cuda_driver if speaks else None)


def _gdr_flag(name: Optional[str], cuda: Optional[dict], cuda_driver: Optional[int]) -> Tuple[Optional[bool], str]:
    """The GPU's ``cudaDevAttrGPUDirectRDMASupported`` as NCCL reads it (CUDA driver 11.3+, v2.30.7
    ``src/plugin/net.cc:424-436``). A live run decides from the model (GeForce and TITAN parts answer 0): reading
    the attribute needs ``cuInit``, some 200 ms. ``gdrcheck snapshot`` records the driver's answer; it speaks where
    the model cannot (no name) or where it disagrees (a vGPU or a part the model misjudges), so a snapshot's
    replay says what the live run says wherever the two agree."""
    read = cuda.get("gdr") if cuda and (cuda_driver is None or cuda_driver >= 11030) else None
    model: Optional[bool] = None
    if name and not gdr_rules.model_cannot_say(name):
        model = not ("GeForce" in name or "TITAN" in name.upper())
    if read in (0, 1) and (model is None or (read == 1) != model):
        said = f"the driver's cudaDevAttrGPUDirectRDMASupported = {read}, read by gdrcheck snapshot"
        return read == 1, said + (f" (its model, {name}, says {'yes' if model else 'no'})" if name else "")
    settle = "; gdrcheck snapshot reads the driver's cudaDevAttrGPUDirectRDMASupported"
    if model is False:
        return False, (f"the GPU's cudaDevAttrGPUDirectRDMASupported is 0 on GeForce/TITAN parts ({name}; from "
                       f"the model{settle})")
    if model:
        return True, f"the GPU supports GPUDirect RDMA ({name}; from the model{settle})"
    why = gdr_rules.model_cannot_say(name) if name else "the GPU's GPUDirect RDMA attribute (its model is not shown)"
    return None, why + "; the driver's cudaDevAttrGPUDirectRDMASupported decides (gdrcheck snapshot reads it)"


def nic_info(snap, topo, bdf: str, rates: Mapping[str, Mapping[str, str]], topo_net: Mapping[str, str]) -> NicInfo:
    d = topo.by_bdf[bdf]
    best = None
    for dev in d.rdma_devices:
        for r in (rates.get(dev) or {}).values():
            g = rate_gbytes(r)
            if g is not None and (best is None or g > best):
                best = g
    xml_gdr = None
    nets = d.extra.get("nccl_nets") if d.extra else None
    for n in nets or ():
        if n.get("speed", "").lstrip("-").isdigit() and best is None and int(n["speed"]) > 0:
            best = int(n["speed"]) / 8000.0
        if n.get("gdr") in ("0", "1"):
            xml_gdr = n["gdr"] == "1"
    for dev in d.rdma_devices:
        if dev in topo_net:
            xml_gdr = topo_net[dev] not in ("0", "")
    rdma_driver = NIC_RDMA_DRIVER.get(d.driver or "")
    return NicInfo(bdf, tuple(d.rdma_devices), d.driver, rdma_driver, best, xml_gdr)


def net_selection(st: NcclSettings, plugins: Tuple[str, ...]) -> Tuple[Optional[str], str]:
    """Which network NCCL's net layer uses: ``ib``, ``socket``, ``plugin`` (decides its own GDR)."""
    env = st.env
    want = env.get("NCCL_NET")
    plugin_env = env.get("NCCL_NET_PLUGIN")
    # NCCL_NET_PLUGIN=X loads libnccl-net-X.so; unset, NCCL tries libnccl-net.so (src/plugin/net.cc:256-263)
    has_plugin = (plugin_env not in (None, "", "none")) or any(p.rsplit("/", 1)[-1] == "libnccl-net.so"
                                                               for p in plugins)
    if want is not None and want != "":
        if want.lower() == "socket":
            return "socket", f"NCCL_NET={want}: sockets, host memory only (net_socket.cc: NCCL_PTR_HOST)"
        if want.upper() != "IB":
            return "plugin", f"NCCL_NET={want}: the network named so decides GPUDirect RDMA itself"
    if has_plugin and (want or "").upper() != "IB":
        what = plugin_env if plugin_env not in (None, "") else ", ".join(plugins)
        return "plugin", f"external net plugin ({what}): NCCL asks the plugin, whose answer the input does not show"
    if param(env, "NCCL_IB_DISABLE", 0)[0]:
        return "socket", (f"NCCL_IB_DISABLE={env.get('NCCL_IB_DISABLE')}: the IB transport is off, sockets carry "
                          "the traffic through host memory")
    return "ib", "NCCL's IB transport"


def nic_flag(node: "NodeNccl", snap, nic: NicInfo, gpu: GpuInfo) -> Tuple[Optional[bool], str, List[str]]:
    """NCCL's ``net.gdr`` for this NIC, seen from this GPU (DMA-BUF needs the GPU's attribute)."""
    st = node.st
    if node.rdma.get(nic.bdf) is False:
        return False, ("not an RDMA device (no /sys/class/infiniband entry): NCCL's IB transport does not list it, "
                       "and a socket NIC carries no GPUDirect RDMA (net_socket.cc: NCCL_PTR_HOST)"), []
    kind, why = net_selection(st, node.plugins)
    if kind == "socket":
        return False, why, []
    if kind == "plugin":
        return None, why, ["the net plugin's ptrSupport (NCCL_PTR_CUDA / NCCL_PTR_DMABUF)"]
    hca = st.env.get("NCCL_IB_HCA")
    if hca:
        used = ib_rules.hca_match(hca, nic.rdma, ib_rules.port_states(snap))
        if used is False:
            names = ", ".join(nic.rdma) or nic.bdf
            return False, f"NCCL_IB_HCA={hca} leaves {names} out: NCCL does not use this NIC", []
    down = ib_rules.ports_down(snap, nic.rdma)
    if down:
        return False, (f"no port of {down} is ACTIVE: NCCL's IB transport lists only ACTIVE ports "
                       "(v2.30.7 net_ib/init.cc:363), so it does not use this NIC"), []
    if nic.xml_gdr is not None:
        return nic.xml_gdr, f"NIC {'/'.join(nic.rdma) or nic.bdf}: <net gdr=\"{int(nic.xml_gdr)}\"> in the input", []
    pm = snap.host.get("peermem")
    files = peermem_files(node.version)
    pm_ok: Optional[bool] = None
    if pm is not None and getattr(pm, "known", False) and isinstance(pm.value, dict) and \
            isinstance(pm.value.get("nccl_files"), dict):
        present = [p for p in files if pm.value["nccl_files"].get(p)]
        if present:
            return True, f"peer memory ({present[0]} exists)", []
        pm_ok = False
    dm = snap.host.get("dmabuf")
    drv = snap.host.get("nvidia_driver_version")
    nic_dmabuf: Optional[bool] = None
    if nic.rdma_driver:
        nic_dmabuf = nic.rdma_driver in DMABUF_RDMA
    elif dm is not None and isinstance(dm.value, dict) and dm.value.get("rdma_driver_dmabuf"):
        nic_dmabuf = True
    ok, dwhy = gdr_rules.dmabuf_flag(node.version, st, dm.value if dm is not None else None,
                                     drv.value if drv is not None and getattr(drv, "known", False) else None,
                                     nic_dmabuf, nic.rdma_driver or nic.driver, gpu.dmabuf, gpu.cuda_driver)
    if ok:
        return True, dwhy, []
    if pm_ok is False and ok is False:
        return False, f"none of {', '.join(files)} exists (NCCL {version_str(node.version)}) and {dwhy}", []
    if pm_ok is None:
        return None, "peer-memory files not shown" + (f"; {dwhy}" if ok is None else ""), \
            ["peer-memory module files (/sys/module/nvidia_peermem, /sys/kernel/mm/memory_peers)"]
    return None, f"no peer-memory file of NCCL {version_str(node.version)}; {dwhy}", []


# ---------------------------------------------------------------------------
# mlx5 Data Direct (NCCL_IB_DATA_DIRECT, 2.27+)

DATA_DIRECT_FROM = (2, 27, 0)
# Linux drivers/infiniband/hw/mlx5/data_direct.c, mlx5_data_direct_pci_table: the `mlx5_data_direct` PCI driver
DATA_DIRECT_IDS = ((0x15B3, 0x2100),)  # ConnectX-8 Data Direct


def data_direct_functions(snap) -> List[str]:
    """The node's data-direct DMA functions (a PCI function with a ``mlx5_data_direct`` device id)."""
    return sorted(d.bdf for d in snap.devices if (d.vendor, d.device) in DATA_DIRECT_IDS)


def data_direct(node: "NodeNccl", snap, nic: NicInfo) -> str:
    """Why NCCL may judge this mlx5 NIC on a data-direct DMA function's PCI path instead of its own, or ''.

    NCCL asks ``mlx5dv_get_data_direct_sysfs_path`` for each mlx5 device whose DMA-BUF probe passes
    (v2.30.7 ``net_ib/init.cc:13, 152-170, 373-427``; v2.27.3 ``net_ib.cc:128, 650-660``): with an answer it
    lists the device as ``<dev>_dma`` with the data-direct function's PCI path (2.27: beside the device itself;
    from 2.28.3 instead of it unless ``NCCL_IB_DATA_DIRECT=2``). Which function serves which NIC is known
    only to a process that opens the device (no sysfs file shows it)."""
    v = node.version
    fns = node.data_direct
    if v < DATA_DIRECT_FROM or not fns:
        return ""
    if not (nic.driver == "mlx5_core" or any(r.startswith("mlx5") for r in nic.rdma)):
        return ""
    if snap.input_kind == "nccl-xml" or nic.bdf in fns or any(r.endswith("_dma") for r in nic.rdma):
        return ""  # NCCL's own dump lists the devices it chose, a `_dma` one where it did
    value = node.st.param("NCCL_IB_DATA_DIRECT", 1)
    if (value == 0) if v < (2, 28, 3) else (value <= 0):
        return ""
    dm = snap.host.get("dmabuf")
    d = dm.value if dm is not None and isinstance(dm.value, dict) else {}
    if d.get("kernel_ge_5_12") is False or d.get("ibv_reg_dmabuf_mr") is False:
        return ""  # ncclMlx5dvDmaBufCapable fails: no data direct (net_ib/init.cc:152-170, 378)
    names = "/".join(nic.rdma) or nic.bdf
    how = ("lists it a second time as " if v < (2, 28, 3) or value == 2 else "lists it only as ") + f"{names}_dma"
    return (f"the node has a Data Direct DMA function ({', '.join(fns)}, Linux mlx5_data_direct) and "
            f"NCCL_IB_DATA_DIRECT={node.st.env.get('NCCL_IB_DATA_DIRECT') or '1 (default)'}: if {names} answers "
            f"mlx5dv_get_data_direct_sysfs_path, NCCL {version_str(v)} {how} with that function's PCI path and "
            "judges GDR on it (net_ib/init.cc:373-427)")


# ---------------------------------------------------------------------------
# topology file


def topo_file_attrs(snap, st: NcclSettings, tree: Optional[dict] = None) \
        -> Tuple[Dict[str, str], Dict[str, str], Dict[str, str]]:
    """``<gpu gdr>`` by GPU busid and ``<net gdr>`` by NIC name from the topology file NCCL loads first
    (NCCL_TOPO_FILE, else /var/run/nvidia-topologyd/virtualTopology.xml from 2.10.3; v2.30.7
    ``src/graph/topo.cc:1765-1790``). Its attributes are not overwritten by detection (``xmlInitAttr*`` only
    fills missing ones). ``tree``, when given, receives the file's path and parsed root (its PCI tree)."""
    f = snap.host.get("nccl_topo_file")
    if f is None or not isinstance(f.value, dict):
        return {}, {}, {}
    files = f.value.get("files") or {}
    path = st.env.get("NCCL_TOPO_FILE")
    if not path and st.version >= (2, 10, 3):
        path = "/var/run/nvidia-topologyd/virtualTopology.xml"
    text = files.get(path) if path else None
    if not text:
        return {}, {}, {}
    from gdrcheck.collectors.pastes.nccl_xml import parse_xml_safely
    from gdrcheck.errors import InputError

    try:
        root, _lines = parse_xml_safely(text, path, allow_doctype=False, what="an NCCL topology file")
    except InputError as e:
        return {}, {}, {path: f"not applied: {e}"}
    if tree is not None:
        tree.update(path=path, root=root)
    gpus: Dict[str, str] = {}
    nets: Dict[str, str] = {}
    for pci in root.iter("pci"):
        for child in pci:
            if child.tag == "gpu" and child.get("gdr") is not None:
                gpus[(pci.get("busid") or "").lower()] = child.get("gdr")
    for net in root.iter("net"):
        if net.get("gdr") is not None and net.get("name"):
            nets[net.get("name")] = net.get("gdr")
    applied = [f"gdr of {len(gpus)} GPU(s) and {len(nets)} NIC(s)"] if (gpus or nets) else ["no gdr attributes"]
    return gpus, nets, {path: "applied: " + ", ".join(applied)}


def topo_file_classes(tree: dict, topo, pairs, applied: Dict[str, str], version: Version = NEWEST) \
        -> Tuple[Dict[Tuple[str, str], str], frozenset]:
    """NCCL's PCIe class of each pair the topology file's PCI tree decides (``gdrcheck.rules.nccl.topo_file``),
    and the pairs among them that are PIX because NCCL fused Broadcom switches of that tree; ``applied``
    (``nccl.topology_files``) says which devices the file places and which tree decided."""
    if not tree.get("root"):
        return {}, frozenset()
    from gdrcheck.rules.nccl import topo_file

    ft = topo_file.FileTree(tree["root"])
    placed = [f"{b} ({how})" for b in topo.of_kind("gpu", "nic") if (how := ft.placed(topo, b))]
    classes, flat = topo_file.pair_classes(ft, topo, pairs, version, bcm_virtual_links(topo))
    path = tree["path"]
    if placed:
        applied[path] += (f"; its PCI tree places {', '.join(placed)}: NCCL keeps the file's place for these and "
                          f"hangs the rest from the node's sysfs tree onto it, so {len(classes)} pair(s) take "
                          "their path type from the file's tree, the others from the node's")
    else:
        applied[path] += ("; its PCI tree places none of the node's GPUs and NICs" +
                          (f", but {len(classes)} pair(s) meet it on the way up and take their path type from it"
                           if classes else ": every pair keeps the node's tree"))
    return classes, flat


# ---------------------------------------------------------------------------
# building the node view


def build(snap, topo, pairs, options, version: Version, version_reason: str,
          found: List[Dict[str, object]]) -> NodeNccl:
    gpus_bdf = topo.of_kind("gpu")
    cpu, cpu_src = node_cpu(snap)
    from gdrcheck.rules import cuda_visible

    job = cuda_visible.select(options.env, cuda_visible.gpu_ids(snap, topo))  # the job's CUDA_VISIBLE_DEVICES
    job_gpus = job.count if job is not None and job.count is not None else getattr(options, "job_gpus", None)
    st = settings_for(snap, version, dict(options.env), cpu, len(gpus_bdf), version_reason, job_gpus)
    if job is not None and not st.user_p2p_level:
        st = replace(st, p2p_level_source=f"{st.p2p_level_source}; {cuda_visible.numbering(job)}")
    tree: dict = {}
    topo_gpu, topo_net, topo_applied = topo_file_attrs(snap, st, tree)
    from gdrcheck.rules.nccl.job_log import hca_evidence

    for name, gdr in hca_evidence(snap).items():  # a job's NCCL log: each HCA's flag as NCCL set it
        topo_net.setdefault(name, gdr)
    pf = snap.host.get("nccl_versions")
    plugins = tuple(pf.value.get("net_plugins", ())) if pf is not None and isinstance(pf.value, dict) else ()
    rf = snap.host.get("rdma_port_rates")
    rates = rf.value if rf is not None and isinstance(rf.value, dict) else {}
    gpus = {b: gpu_info(snap, topo, b, cpu, topo_gpu) for b in gpus_bdf}
    nics = {b: nic_info(snap, topo, b, rates, topo_net) for b in topo.of_kind("nic")}
    node = NodeNccl(version, version_reason, found, st, cpu, cpu_src, gpus, nics, plugins, topo_applied,
                    job_gpus=job_gpus, job=job)
    node.data_direct = data_direct_functions(snap)
    from gdrcheck.rules.base import Context
    from gdrcheck.rules.link_nic import rdma_capable

    ctx = Context(snap=snap, topo=topo, pairs=())
    node.rdma = {b: rdma_capable(ctx, b) for b in nics}
    file_cls, file_flat = topo_file_classes(tree, topo, pairs, node.topo_files, version) if tree else ({}, frozenset())
    types = pair_types(topo, pairs, version, st, file_cls, file_flat)
    _path_choice(node, topo, pairs, types)
    node.types = types
    node.file_classes = file_cls
    node.file_flat = file_flat
    _decide_gdr(node, snap, topo, pairs, types)
    _decide_p2p(node, snap, topo, pairs, types)
    if file_cls:
        _say_file_tree(node, tree["path"], types, file_cls, pairs)
    return node


def _path_choice(node: NodeNccl, topo, pairs, types) -> None:
    """NVB against a PCIe switch path up to 2.30.4 (:func:`pxn.nvb_or_pcie`)."""
    for p in pairs:
        t, cands, flat, via = types.get((p.a, p.b), (None,) * 4)
        if t != "NVB" or node.version >= pxn_rules.BEST_TYPE_FROM:
            continue
        sm = node.gpus[p.a].sm
        per = next((bw for s, bw in NVLINK_BW if sm is not None and sm >= s), None)
        links = [_nvl(topo, p.a, via), _nvl(topo, via, p.b)]
        nvb_bw = min(links) * per if per and all(links) else None
        pcie = nccl_type(p.pcie_path, None, flat)
        kept, why = pxn_rules.nvb_or_pcie(node.version, pcie, nvb_bw, _pcie_bw(topo, p.a, p.b, p.bridges))
        if kept != "NVB":
            types[(p.a, p.b)] = (kept, (pcie, "NVB") if kept is None else cands, flat, None)


def _say_file_tree(node: NodeNccl, path: str, types, file_cls, pairs) -> None:
    """The pairs whose path type the topology file's tree gave: the type, which tree, and the level check."""
    for p in pairs:
        key = (p.a, p.b)
        if key not in file_cls:
            continue
        view = node.gdr_view.get(key) if p.kind == "gpu-nic" else node.p2p_view.get(key)
        if view is None:
            continue
        t = types[key][0]
        if t in (None, "NVL", "NVB"):
            continue  # NVLink decides, not the PCI tree
        view["path_type"] = t
        view["path_tree"] = f"NCCL_TOPO_FILE {path}"
        if p.kind == "gpu-gpu":
            level = node.st.user_p2p_level or (node.st.p2p_level if "|" not in node.st.p2p_level else None)
            view["within_p2p_level"] = within(t, level, node.version)
        elif not view.get("distance"):
            view["within_gdr_level"] = within(t, node.st.gdr_level, node.version)
        if isinstance(view.get("reason"), str):
            view["reason"] += (f" (path type {t} in NCCL's tree: the topology file {path}, which NCCL loads "
                               "first, with what it lacks hung from the node's sysfs tree; the node's tree alone "
                               f"says {nccl_type(p.pcie_path, None) or 'no single type'})")


def fusion(topo, version: Version, drives: bool = False):
    """NCCL's Broadcom switch flattening on the node's tree at ``version`` (:mod:`gdrcheck.rules.nccl.bcm`), or
    None where no function of the node is such a part. Kept on the topology, one per version. NCCL's tree holds
    GPUs and NICs only; ``drives``: NVMe drives too, placed as NCCL places a NIC (a GPU-NVMe pair's path type
    is what NCCL's would be, had it such a device)."""
    if not _has_bcm(topo):
        return None
    cache = topo.__dict__.setdefault("_bcm_fusion", {})
    got = cache.get((version, drives))
    if got is None:
        if topo.snap.input_kind == "nccl-xml":  # its <pci> switches are NCCL's PCI nodes themselves
            def chain(b):
                return topo.ancestors(b)
        else:
            def chain(b):
                return bcm.sysfs_chain(topo, b)
        devices = topo.of_kind("gpu") + topo.gpudirect_nics() + (topo.of_kind("nvme") if drives else [])
        chains = {b: chain(b) for b in devices}  # in the order NCCL fills its XML: GPUs, then NICs
        virtual = bcm_virtual_links(topo) if version >= bcm.LINKS_FROM else {}
        got = cache[(version, drives)] = bcm.build(chains, lambda b: bcm.function_id(topo, b), virtual, version)
    return got


def _flattened(topo, a: str, b: str, version: Version, drives: bool = False) -> bool:
    """NCCL fuses the Broadcom switches between ``a`` and ``b`` (a PXB path) into one: PIX."""
    fu = fusion(topo, version, drives)
    return fu is not None and fu.meet(a, b) == "PIX"


def _has_bcm(topo) -> bool:
    """Whether any function of the node is a Broadcom switch part NCCL may flatten (kept on the topology: when
    none is, no path is flattened, and a large node need not look at each path's switches)."""
    got = topo.__dict__.get("_has_bcm")
    if got is None:
        got = topo.__dict__["_has_bcm"] = any(bcm.is_part(bcm.function_id(topo, b)) for b in topo.by_bdf)
    return got


def pair_types(topo, pairs, version: Version, st, file_cls: Dict[Tuple[str, str], str],
               file_flat: frozenset = frozenset()) -> Dict[Tuple[str, str], tuple]:
    """:func:`pair_type` of every pair. Where no Broadcom switch can flatten the path (a PXB path on a node with
    such a part) or link it (a node with virtual links), and NCCL cannot route through a third GPU (NVB), the
    answer follows from the pair's kind, class, file class, NVLink count, candidates and whether NVLink is
    unseen: pairs alike in those share one answer, worked out once."""
    linked = bool(bcm_links(topo))
    bcm = _has_bcm(topo)
    nvb = topo.snap.shows_nvlink  # a GPU pair without NVLink may go through a third GPU: its own answer
    shared: Dict[tuple, tuple] = {}
    out: Dict[Tuple[str, str], tuple] = {}
    for p in pairs:
        key = (p.a, p.b)
        fc = file_cls.get(key)
        gg = p.kind == "gpu-gpu"
        if linked or (gg and nvb) or (bcm and fc is None and p.pcie_path == "PXB") or key in file_flat:
            out[key] = pair_type(topo, p, version, st, fc, key in file_flat)
            continue
        said = (fc, p.pcie_path, gg, p.nvlinks if gg else None, p.candidates, gg and bool(p.nvlink_unknown))
        got = shared.get(said)
        if got is None:
            got = shared[said] = pair_type(topo, p, version, st, fc)
        out[key] = got
    return out


def pair_type(topo, p, version: Version, st, file_class: Optional[str] = None, file_flat: bool = False) \
        -> Tuple[Optional[str], Tuple[str, ...], bool, Optional[str]]:
    """(NCCL path type, candidates, Broadcom-flattened, NVB intermediate GPU). ``file_class``: the PCIe class
    the topology file's PCI tree gives the pair (``topo_file``), which replaces the node's; ``file_flat``: that
    class is PIX because NCCL fused the file's Broadcom switches."""
    pcie = p.pcie_path if file_class is None else file_class
    if file_class is not None:
        flat = file_flat
    else:
        flat = p.pcie_path == "PXB" and _flattened(topo, p.a, p.b, version, p.kind == "gpu-nvme")
    t = nccl_type(pcie, p.nvlinks if p.kind == "gpu-gpu" else None, flat)
    cands = tuple(sorted({nccl_type(c, None) for c in p.candidates}, key=lambda x: rank_in(version).get(x, 99))) \
        if pcie is None else ()
    if p.kind == "gpu-gpu" and getattr(p, "nvlink_unknown", ""):
        # NVLink parts in an input that cannot show links: NVL, or the PCIe path
        cands = tuple(dict.fromkeys(("NVL",) + ((t,) if t else cands)))
        t = None
    if file_class is None and t in ("PHB", "SYS") and version >= bcm.LINKS_FROM and _bcm_linked(topo, p.a, p.b):
        # the two Broadcom switches are joined by a virtual link: NCCL's path stays on PCI switches, and is PIX
        # where NCCL took the far switch into the near one
        fu = fusion(topo, version)
        met = fu.meet(p.a, p.b) if fu is not None else None
        t, flat = (met, True) if met == "PIX" else ("PXB", flat)
    via = None
    if p.kind == "gpu-gpu" and not p.nvlinks and topo.snap.shows_nvlink:
        nvb_off = version >= p2p_rules.NVB_DISABLE_FROM and st.param("NCCL_NVB_DISABLE", 0)
        if not nvb_off:
            for k in topo.of_kind("gpu"):
                if k in (p.a, p.b):
                    continue
                if _direct_nvlink(topo, p.a, k) and _direct_nvlink(topo, k, p.b):
                    via, t = k, "NVB"
                    break
    return t, cands, flat, via




def bcm_virtual_links(topo) -> dict:
    """Virtual links between Broadcom switch ports, from the port that lists them: the host's sysfs
    (``bcm_switch_links``) or an NCCL XML's ``<pcilink target>`` (v2.30.7 ``topo.cc:873-890``: a LOC link from
    the PCI switch node that holds it to the target)."""
    cache = topo.__dict__.get("_bcm_virtual")
    if cache is not None:
        return cache
    links: dict = {}
    f = topo.snap.host.get("bcm_switch_links")
    if f is not None and isinstance(f.value, dict):
        for a, peers in f.value.items():
            links.setdefault(a, set()).update(peers)
    for bdf, d in topo.by_bdf.items():
        for b in (d.extra or {}).get("pcilinks", ()):
            if b:
                links.setdefault(bdf, set()).add(b)
    topo.__dict__["_bcm_virtual"] = links
    return links


def bcm_links(topo) -> dict:
    """:func:`bcm_virtual_links` both ways."""
    cache = topo.__dict__.get("_bcm_links")
    if cache is not None:
        return cache
    links: dict = {}
    for a, peers in bcm_virtual_links(topo).items():
        for b in peers:
            links.setdefault(a, set()).add(b)
            links.setdefault(b, set()).add(a)
    topo.__dict__["_bcm_links"] = links
    return links


def _bcm_linked(topo, a: str, b: str) -> bool:
    links = bcm_links(topo)
    if not links:
        return False
    above_b = set(topo.ancestors(b))
    return any(x in links and links[x] & above_b for x in topo.ancestors(a))


def _direct_nvlink(topo, a: str, b: str) -> bool:
    return topo.direct_nvlink(a, b)


def _nvl(topo, a: str, b: str) -> Optional[int]:
    return topo.nvlink_count(a, b)


def _pcie_bw(topo, a: str, b: str, bridges) -> Optional[float]:
    parts = [a, b] + [x for x in bridges if topo.device_kind.get(x) == "switch_upstream"]
    bws = []
    for x in parts:
        d = topo.by_bdf.get(x)
        parent = topo.by_bdf.get(topo.parent(x)) if topo.parent(x) else None
        bw = link_bw(d, parent)
        if bw is None:
            return None
        bws.append(bw)
    return min(bws) if bws else None


def _decide_gdr(node: NodeNccl, snap, topo, pairs, types) -> None:
    st, v = node.st, node.version
    order = rank_in(v)
    single = len(node.gpus) == 1
    pxn_off = v < gdr_rules.PXN_FROM or st.param("NCCL_PXN_DISABLE", 0) == 1
    # NCCL_PXN_C2C: default 0 in 2.27.x (v2.27.3 paths.cc:609), 1 from 2.28.3 (paths.cc:620)
    pxn_type = "P2C" if v >= (2, 27, 0) and st.param("NCCL_PXN_C2C", int(v >= (2, 28, 0))) else "PXB"
    mine = [p for p in pairs if p.kind == "gpu-nic" and p.b in node.nics]  # the GPU-NIC pairs NCCL decides
    by_nic: Dict[str, List] = {}
    for p in mine:
        by_nic.setdefault(p.b, []).append(p)
    flags: Dict[Tuple[str, str], tuple] = {}
    asked: Dict[tuple, tuple] = {}  # nic_flag reads of the GPU only its DMA-BUF attribute and CUDA driver
    for p in mine:
        g = node.gpus[p.a]
        key = (p.b, g.dmabuf, g.cuda_driver)
        if key not in asked:
            asked[key] = nic_flag(node, snap, node.nics[p.b], g)
        flags[(p.a, p.b)] = asked[key]
    # PXN: NCCL's one relay GPU per NIC (pxn.Relays.local_gpu, v2.30.7 paths.cc:812-843), if close enough to
    # the NIC and able to do GDR with it; whether its path to the GPU that wants the NIC is NVLink after NCCL's
    # P2P decision (paths.cc:761-773, 832) is asked per pair below
    rl = pxn_rules.Relays(node, snap, topo, pairs, types)
    relay: Dict[str, Tuple[str, str, bool]] = {}
    for n in by_nic:
        q = rl.local_gpu(n)
        if q is None or (q, n) not in flags:
            continue
        qt = gdr_rules.distance(v, st, types[(q, n)][0], node.gpus[q].c2c)[0]
        raw = "P2C" if qt == "C2C" and types[(q, n)][0] == "PHB" else qt  # NCCL compares the path's own type
        if raw is None or order.get(raw, 99) > order.get(pxn_type, order["PXB"]):
            continue
        if node.gpus[q].gdr is False or flags[(q, n)][0] is False:
            continue
        # 2.30 asks ncclTopoCheckGdr(peer, read=1) too (paths.cc:825-830): its level and send side
        usable = not (v >= (2, 30, 0) and (gdr_rules.read_side(v, st, node.gpus[q].sm, rl.nvlink_peer(q), single)
                                           ["gdr_read"] == "disabled" or not within(qt, st.gdr_level, v)))
        if usable:
            relay[n] = (q, qt)
    nvpeers: Dict[str, Optional[bool]] = {}
    # gdr_rules.decide by what it reads (the NIC flag by identity: one object per answer in ``asked``); the
    # pairs of a large node ask it a few distinct questions thousands of times
    decided: Dict[tuple, Dict[str, object]] = {}
    read_sides: Dict[tuple, Dict[str, object]] = {}  # gdr_rules.read_side by (sm, NVLink peer)
    distances: Dict[tuple, Optional[str]] = {}  # gdr_rules.distance's type by (path type, C2C)
    for p in mine:
        g = node.gpus[p.a]
        t, cands, _flat, _ = types[(p.a, p.b)]
        c2c = g.c2c and rl.p2c_local(p.a, p.b)  # from 2.29.2 P2C only for the GPU's local NICs
        if (t, c2c) in distances:
            d_own = distances[(t, c2c)]
        else:
            d_own = distances[(t, c2c)] = gdr_rules.distance(v, st, t, c2c)[0]
        pxn = None
        maybe_pxn = None  # a relay NCCL would take if NVLink joins them, in an input that cannot show NVLink
        r = relay.get(p.b)
        if not pxn_off and r is not None and r[0] != p.a and (d_own is None or order.get(d_own, 99) > order["PXB"]):
            linked = rl.nvlinked(p.a, r[0])
            pxn = r if linked else None
            maybe_pxn = r[0] if linked is None else None
        nic = flags[(p.a, p.b)]
        said = (t, cands, id(nic), g.gdr, g.gdr_source, c2c, pxn, g.mlopart, g.mlopart_source)
        view = decided.get(said)
        if view is None:
            view = decided[said] = gdr_rules.decide(v, st, t=t, candidates=cands, nic_flag=nic,
                                                    gpu_flag=(g.gdr, g.gdr_source), gpu_c2c=c2c, pxn=pxn,
                                                    mlopart=g.mlopart, mlopart_why=g.mlopart_source)
        view = dict(view)  # each pair's own: what follows adds to it
        if maybe_pxn and pxn is None and view["gdr"] == "disabled" and d_own is not None \
                and not within(d_own, st.gdr_level, v):
            view["gdr"] = "unknown"
            view["reason"] = (f"{view.get('reason', '')}; but if NCCL keeps an NVLink path between this GPU and "
                              f"{maybe_pxn}, the NIC's local GPU (the input cannot show it), NCCL reaches the NIC "
                              "through that GPU (PXN, paths.cc:812-843)")
            view["depends_on"] = list(view.get("depends_on", ())) + [
                f"whether NVLink joins {p.a} and {maybe_pxn} and NCCL keeps P2P on it (nvidia-smi topo -m, NVML)"]
        dd = data_direct(node, snap, node.nics[p.b]) if node.data_direct else ""
        mlo_block = g.mlopart and v >= gdr_rules.MLOPART_FROM and not st.param("NCCL_NET_GDR_MLOPART", 0)
        if dd and flags[(p.a, p.b)][0] is not False and g.gdr is not False and not mlo_block:
            if view["gdr"] != "unknown":
                view["reason"] = f"{view.get('reason', '')}; but {dd}"
            view["gdr"] = "unknown"
            view["depends_on"] = list(view.get("depends_on", ())) + [
                f"whether NCCL uses a Data Direct DMA function for {'/'.join(node.nics[p.b].rdma) or p.b} and where "
                f"it sits (NCCL_DEBUG=INFO prints 'NET/IB: Data Direct DMA Interface is detected for device "
                f"{(node.nics[p.b].rdma or ('<dev>',))[0]}'; then NCCL_TOPO_DUMP_FILE shows the _dma device's "
                "PCI path; NCCL_IB_DATA_DIRECT=0 turns it off)"]
        if p.a not in nvpeers:
            nvpeers[p.a] = rl.nvlink_peer(p.a)  # NVLink after NCCL's P2P decision (paths.cc:497-503, 761-773)
        nvpeer = nvpeers[p.a]
        if view["gdr"] == "enabled":
            side = read_sides.get((g.sm, nvpeer))
            if side is None:
                side = read_sides[(g.sm, nvpeer)] = gdr_rules.read_side(v, st, g.sm, nvpeer, single)
            view.update(side)
        node.gdr_view[(p.a, p.b)] = view


def _decide_p2p(node: NodeNccl, snap, topo, pairs, types) -> None:
    st, v = node.st, node.version
    default = p2p_rules.default_p2p_level(v, cpu_kind(node.cpu), len(node.gpus), node.job_gpus)
    nets: Dict[str, Tuple[float, bool]] = {}  # GPU -> _best_net(), asked for each of its pairs
    for p in pairs:
        if p.kind != "gpu-gpu":
            continue
        t, cands, _flat, via = types[(p.a, p.b)]
        faster, detail = _net_faster(node, topo, p, t, nets)
        facts = p2p_rules.PairFacts(t, cands, via, pxn_rules.nvml_hops(snap, p.a, p.b, via), faster, detail)
        view = p2p_rules.decide(v, st, default, facts)
        if t is None and getattr(p, "nvlink_unknown", "") and view["p2p"] == "unknown":
            view["reason"] = f"{p.nvlink_unknown}; NCCL decides P2P over NVLink or over PCIe ({', '.join(cands)})"
            view["depends_on"] = ["whether NVLink joins the two GPUs (nvidia-smi nvlink -s, NVML)"]
        elif (p.path or "").startswith("XGMI") and isinstance(view.get("reason"), str):
            view["reason"] = view["reason"].replace("NVLink", "xGMI")
        if node.job is not None:
            from gdrcheck.rules.cuda_visible import pair_in_job

            pair_in_job(node.job, p.a, p.b, view)
        node.p2p_view[(p.a, p.b)] = view


def _best_net(node: NodeNccl, topo, g: str) -> Tuple[float, bool]:
    """The best bandwidth from GPU ``g`` to a NIC NCCL would reach at PXB or closer with GDR, and whether a
    close NIC's bandwidth or GDR is not known."""
    order = rank_in(node.version)
    best, undecided = 0.0, False
    for n, nic in node.nics.items():
        view = node.gdr_view.get((g, n))
        from_file = node.file_classes.get((g, n))
        cls = from_file or topo.pcie_class(g, n)[0]
        if view is None or cls is None:
            continue
        nt = nccl_type(cls, None, (g, n) in node.file_flat if from_file
                       else cls == "PXB" and _flattened(topo, g, n, node.version))
        if order.get(nt, 99) > order["PXB"]:
            continue
        if view["gdr"] == "disabled":
            continue
        bw = _pcie_bw(topo, g, n, topo.path_bridges(g, n))
        if view["gdr"] == "unknown" or bw is None or nic.rate is None:
            undecided = True
            continue
        best = max(best, min(bw, nic.rate))
    return best, undecided


def _net_faster(node: NodeNccl, topo, p, t: Optional[str],
                nets: Optional[Dict[str, Tuple[float, bool]]] = None) -> Tuple[Optional[bool], str]:
    """``ncclTopoCheckNet``: both GPUs reach a NIC at PXB or closer (with GDR, else NCCL's path to it goes
    through the CPU) faster than they reach each other. ``nets``: each GPU's :func:`_best_net`, kept by the
    caller across pairs (it depends on the GPU alone)."""
    if t is None or not node.nics:
        return False, ""
    nets = {} if nets is None else nets

    def best_net(g: str) -> Tuple[float, bool]:
        got = nets.get(g)
        if got is None:
            got = nets[g] = _best_net(node, topo, g)
        return got

    if t in ("NVL", "NVB"):
        sm = node.gpus[p.a].sm
        per = next((bw for s, bw in NVLINK_BW if sm is not None and sm >= s), None)
        speed = (p.nvlinks or 1) * per if per else None
    else:
        speed = _pcie_bw(topo, p.a, p.b, p.bridges)
        if speed is not None and t == "SYS":  # the CPU link caps it (cpu.inter_cpu_bw: per CPU model and version)
            bws, why = cpu_rules.inter_cpu_bw(node.version, cpu_kind(node.cpu), *cpu_rules.cpu_model(topo.snap))
            if len({min(best_net(p.a)[0], best_net(p.b)[0]) > min(speed, b) for b in bws}) > 1:
                return None, f"NCCL's CPU-to-CPU bandwidth decides: {why}"
            speed = min(speed, bws[0])
    n1, u1 = best_net(p.a)
    n2, u2 = best_net(p.b)
    if speed is not None and n1 > speed and n2 > speed:
        return True, f"NIC paths {n1:g} and {n2:g} GB/s against {speed:g} GB/s between the GPUs"
    if speed is None and (n1 or n2 or u1 or u2):
        return None, "the GPU-GPU path bandwidth is not shown"
    if (u1 or u2) and speed is not None:
        if (n1 > speed or u1) and (n2 > speed or u2):
            return None, "a close NIC's bandwidth or GDR is not known"
    return False, ""
