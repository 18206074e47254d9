"""The node's flags as NCCL reads them: each GPU's compute capability, GPUDirect RDMA and DMA-BUF attributes,
C2C and MLOPart; each NIC's RDMA devices, driver, rate and ``<net gdr>``; the network NCCL's net layer uses
and each NIC's ``net.gdr`` (peer memory, DMA-BUF; v2.30.7 ``src/transport/net_ib/``, ``src/plugin/net.cc``).

Pure: each function takes the snapshot, topology and values it reads.
"""

from __future__ import annotations

import re
from collections import abc

from gdrcheck.device_models import gpu_model, grace_part
from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.record import record
from gdrcheck.rules.nccl import gdr as gdr_rules
from gdrcheck.rules.nccl import ib as ib_rules
from gdrcheck.rules.nccl.core import peermem_files, version_str
from gdrcheck.rules.nccl.settings import NcclSettings, param
from gdrcheck.rules.nccl.speed import rate_gbytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version

NIC_RDMA_DRIVER = {"mlx5_core": "mlx5_ib", "bnxt_en": "bnxt_re", "ice": "irdma", "i40e": "irdma", "efa": "efa",
                   "ionic": "ionic", "qede": "qedr"}
DMABUF_RDMA = {"mlx5_ib", "efa", "bnxt_re", "irdma", "ionic"}
_SM_BY_NAME = ((r"\bG?B(100|200|300)\b", 100), (r"\bG?H(100|200|800|20)\b", 90), (r"\bL(4|40S?|20)\b", 89),
               (r"RTX [0-9]+ Ada|\bRTX 40[0-9]0\b", 89), (r"\bA(100|800|30)\b", 80),
               (r"\bA(10|16|2|40)\b|RTX A[0-9]+|RTX 30[0-9]0", 86), (r"\bT4\b|RTX 20[0-9]0|Quadro RTX", 75),
               (r"\bV100\b|TITAN V", 70), (r"\bP100\b", 60))


@record(frozen=True)
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
    gdr_from_input: bool = False  # the GPU flag is NCCL's own <gpu gdr> in the input (a job's log can say it)


@record(frozen=True)
class NicInfo:
    bdf: str
    rdma: tuple[str, ...]
    driver: Optional[str]
    rdma_driver: Optional[str]
    rate: Optional[float]  # GB/s, best port
    xml_gdr: Optional[bool] = None  # an NCCL XML's (or topology file's) <net gdr>

    @property
    def names(self) -> str:
        """The NIC as NCCL names it: its RDMA devices, else its bus id."""
        return "/".join(self.rdma) or self.bdf


def _driver_gpu(snap, bdf):
    for g in snap.gpus:
        if g.bdf == bdf:
            return g
    return None


def cuda_attrs(snap) -> tuple[dict[str, dict], Optional[int]]:
    """The CUDA driver's flags per GPU bus id and its version, as ``gdrcheck snapshot`` read them
    (``gdrcheck.collectors.cuda_attrs``); empty where the input has no such record."""
    attrs = host_record(snap, "cuda_attrs", known_only=True)
    if attrs is None:
        return {}, None
    gpus = attrs.get("gpus")
    drv = attrs.get("driver_version")
    return (dict(gpus) if isinstance(gpus, abc.Mapping) else {}), (drv if isinstance(drv, int) else None)


_MLOPART_PARTS = r"\bG?B(100|200|300)\b"  # multi-die parts: more than one locality domain


def mlopart_info(name: Optional[str], sm: Optional[int], xml_gpu, cuda: Optional[dict]) -> tuple[Optional[bool], str]:
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
    gdr, gdr_src, from_xml = None, "", False
    if bdf in topo_gpu:
        gdr = topo_gpu[bdf] not in ("0", "")
        gdr_src = f"<gpu gdr=\"{topo_gpu[bdf]}\"> in the topology file (kept by NCCL: topo.cc, xmlInitAttrInt)"
    elif xml_gpu and xml_gpu.get("gdr") in ("0", "1"):
        gdr = xml_gpu["gdr"] == "1"
        gdr_src = f"NCCL's own <gpu gdr=\"{xml_gpu['gdr']}\"> in the input"
        from_xml = True
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
        model = (host_record(snap, "dmabuf") or {}).get("open_driver")
        # as with the GDR flag: the recorded attribute speaks where the model cannot or disagrees
        if model is None or (cuda["dmabuf"] == 1) != bool(model):
            dmabuf = cuda["dmabuf"] == 1
    # the CUDA driver's version speaks where the attribute does, or where it rules DMA-BUF out (before 11.7)
    speaks = cuda_driver is not None and (dmabuf is not None or cuda_driver < 11070)
    return GpuInfo(bdf, name, sm, sm_src, gdr, gdr_src, c2c, mlo, mlo_src, dmabuf, cuda_driver if speaks else None,
                   gdr_from_input=from_xml)


def _gdr_flag(name: Optional[str], cuda: Optional[dict], cuda_driver: Optional[int]) -> tuple[Optional[bool], str]:
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


def net_selection(st: NcclSettings, plugins: tuple[str, ...]) -> tuple[Optional[str], str]:
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


def nic_dmabuf(nic: NicInfo, snap) -> Optional[bool]:
    """Whether the NIC's RDMA driver registers DMA-BUF memory, where the input shows it."""
    if nic.rdma_driver:
        return nic.rdma_driver in DMABUF_RDMA
    if (host_record(snap, "dmabuf") or {}).get("rdma_driver_dmabuf"):
        return True
    return None


def nic_flag(version: Version, st: NcclSettings, plugins: tuple[str, ...], snap, nic: NicInfo, rdma: Optional[bool],
             gpu_dmabuf: Optional[bool], cuda_driver: Optional[int],
             listed: tuple[Optional[bool], ...] = ()) -> tuple[Optional[bool], str, tuple[str, ...]]:
    """NCCL's ``net.gdr`` for this NIC, seen from a GPU with these DMA-BUF attribute and CUDA driver (DMA-BUF
    needs them): (flag, why, the codes of what it depends on: ``nic.plugin_ptr``, ``nic.ip_interface``,
    ``nic.peer_memory``, each a need of the decision). ``rdma``: whether the NIC is an RDMA device NCCL's IB lists;
    ``listed``: ``nic_dmabuf`` of every NIC NCCL's IB lists (up to 2.22.3 the first one's answer is everyone's)."""
    if rdma is False:
        return False, ("not an RDMA device (no /sys/class/infiniband entry): NCCL's IB transport does not list it, "
                       "and a socket NIC carries no GPUDirect RDMA (net_socket.cc: NCCL_PTR_HOST)"), ()
    kind, why = net_selection(st, plugins)
    if kind == "socket":
        return False, why, ()
    if kind == "plugin":
        return None, why, ("nic.plugin_ptr",)
    down = ib_rules.ports_down(snap, nic.rdma)
    if down:  # before the IP interface: with or without one, NCCL's IB transport does not use this NIC
        return False, (f"no port of {down} is ACTIVE: NCCL's IB transport lists only ACTIVE ports "
                       "(v2.30.7 net_ib/init.cc:363), so it does not use this NIC"), ()
    found, why_ip = ib_rules.ip_interface_found(version, st.env, ib_rules.ip_interfaces(snap))
    if found is not True:
        return found, why_ip, (() if found is False else ("nic.ip_interface",))
    hca = st.env.get("NCCL_IB_HCA")
    if hca:
        used = ib_rules.hca_match(hca, nic.rdma, ib_rules.port_states(snap))
        if used is False:
            names = ", ".join(nic.rdma) or nic.bdf
            return False, f"NCCL_IB_HCA={hca} leaves {names} out: NCCL does not use this NIC", ()
    if nic.xml_gdr is not None:
        return nic.xml_gdr, f"NIC {nic.names}: <net gdr=\"{int(nic.xml_gdr)}\"> in the input", (), nic.names
    pm = host_record(snap, "peermem", known_only=True)
    files = peermem_files(version)
    pm_ok: Optional[bool] = None
    if pm is not None and isinstance(pm.get("nccl_files"), dict):
        present = [p for p in files if pm["nccl_files"].get(p)]
        if present:
            return True, f"peer memory ({present[0]} exists)", ()
        pm_ok = False
    dm = host_fact(snap, "dmabuf")
    drv = host_fact(snap, "nvidia_driver_version")
    own = nic_dmabuf(nic, snap)

    def flag(probe: Optional[bool]) -> tuple[Optional[bool], str]:
        return gdr_rules.dmabuf_flag(version, st, dm.value if dm is not None else None,
                                     drv.value if drv is not None and getattr(drv, "known", False) else None,
                                     probe, nic.rdma_driver or nic.driver, gpu_dmabuf, cuda_driver)

    ok, dwhy = flag(own)
    shared = ib_rules.dmabuf_probe_answers(version, own, list(listed))
    if shared and len({flag(answer)[0] for answer in shared}) > 1:
        ok, dwhy = None, ib_rules.DMABUF_ONCE_WHY
    if ok:
        return True, dwhy, ()
    if pm_ok is False and ok is False:
        return False, f"none of {', '.join(files)} exists (NCCL {version_str(version)}) and {dwhy}", ()
    if pm_ok is None:
        return None, "peer-memory files not shown" + (f"; {dwhy}" if ok is None else ""), \
            ("nic.peer_memory",)
    return None, f"no peer-memory file of NCCL {version_str(version)}; {dwhy}", ()


# Linux drivers/infiniband/hw/mlx5/data_direct.c, mlx5_data_direct_pci_table: the `mlx5_data_direct` PCI driver
DATA_DIRECT_IDS = ((0x15B3, 0x2100),)  # ConnectX-8 Data Direct


def data_direct_functions(snap) -> list[str]:
    """The node's data-direct DMA functions (a PCI function with a ``mlx5_data_direct`` device id)."""
    return sorted(d.bdf for d in snap.devices if (d.vendor, d.device) in DATA_DIRECT_IDS)
