"""Host-wide pastes: ``numactl --hardware``, ``lscpu``, ``/proc/cpuinfo``, ``/etc/default/grub``, ``gdscheck -p``,
``gdsio``, ``ibv_devinfo``.

Each parser returns a :class:`HostPaste`: the host facts it settles, under the names the live host collector
uses (:data:`gdrcheck.collectors.host.HOST_FACT_KEYS`, ``numa_nodes``), each with its source named, and what the
paste says beside them (notes). Recognisers look at content only; each needs a line only that tool prints.
"""

from __future__ import annotations

import re

from gdrcheck.errors import InputError
from gdrcheck.model import Fact
from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

_HEAD = 65536


@record(frozen=True)
class HostPaste:
    """What one host-wide paste settles: host facts by name, and what it says in words."""

    kind: str
    facts: dict[str, Fact]
    notes: tuple[str, ...] = ()
    gpus: tuple[dict[str, Any], ...] = ()  # GPU rows (index, name, ...) a paste names, for the merge
    extra: dict[str, Any] = field(default_factory=dict)


# -- numactl --hardware ------------------------------------------------------------------------------

_NUMA_AVAIL = lazy_pattern(r"^available:\s*(\d+)\s+nodes?\s*\(([^)]*)\)", re.M)
_NUMA_CPUS = lazy_pattern(r"^node\s+(\d+)\s+cpus:(.*)$", re.M)
_NUMA_DIST_ROW = lazy_pattern(r"^\s*(\d+):((?:\s+\d+)+)\s*$", re.M)


def looks_like_numactl(text: str) -> bool:
    return bool(_NUMA_AVAIL.search(text[:_HEAD])) and "node distances:" in text[:_HEAD]


def _node_list(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        elif part.isdigit():
            out.append(int(part))
    return out


def parse_numactl(text: str, name: str) -> HostPaste:
    m = _NUMA_AVAIL.search(text)
    if m is None:
        raise InputError(f"{name}: numactl --hardware output without its 'available: N nodes' line")
    nodes = _node_list(m.group(2))
    cpus = {int(n): c.strip() for n, c in _NUMA_CPUS.findall(text)}
    dist_text = text.split("node distances:", 1)[1]
    distances = {int(n): [int(x) for x in row.split()] for n, row in _NUMA_DIST_ROW.findall(dist_text)}
    src = f"{name} (numactl --hardware)"
    facts = {"numa_nodes": Fact(nodes, source=src)}
    note = f"{len(nodes)} NUMA node(s): {', '.join(map(str, nodes))}"
    if len(nodes) == 1:
        note += "; every device is on node " + str(nodes[0])
    return HostPaste("numactl", facts, (note,), extra={"numa_cpus": cpus, "numa_distances": distances})


# -- lscpu, /proc/cpuinfo ----------------------------------------------------------------------------

_LSCPU_VENDOR = lazy_pattern(r"^\s*Vendor ID:\s*(.+?)\s*$", re.M)
_LSCPU_MODEL = lazy_pattern(r"^\s*Model name:\s*(.+?)\s*$", re.M)
_LSCPU_ARCH = lazy_pattern(r"^\s*Architecture:\s*(\S+)", re.M)
_LSCPU_FAMILY = lazy_pattern(r"^\s*CPU family:\s*(\d+)", re.M)
_CPUINFO_VENDOR = lazy_pattern(r"^vendor_id\s*:\s*(.+?)\s*$", re.M)
_CPUINFO_MODEL = lazy_pattern(r"^model name\s*:\s*(.+?)\s*$", re.M)
_CPUINFO_FAMILY = lazy_pattern(r"^cpu family\s*:\s*(\d+)", re.M)
_CPUINFO_POWER = lazy_pattern(r"^cpu\s*:\s*(POWER\S*)", re.M)
_CPUINFO_ARM = lazy_pattern(r"^CPU implementer\s*:\s*(0x[0-9a-f]+)", re.M | re.I)


def looks_like_lscpu(text: str) -> bool:
    head = text[:_HEAD]
    return bool(_LSCPU_ARCH.search(head)) and bool(_LSCPU_VENDOR.search(head) or _LSCPU_MODEL.search(head))


def looks_like_cpuinfo(text: str) -> bool:
    head = text[:_HEAD]
    return bool(re.search(r"^processor\s*:\s*\d+", head, re.M)) and bool(
        _CPUINFO_VENDOR.search(head) or _CPUINFO_POWER.search(head) or _CPUINFO_ARM.search(head))


def _cpu_paste(kind: str, name: str, vendor: Optional[str], model: Optional[str], family: Optional[str],
               arch: Optional[str]) -> HostPaste:
    src = f"{name} ({kind})"
    if vendor is None:
        raise InputError(f"{name}: {kind} output that names no CPU vendor")
    facts = {"cpu_vendor": Fact(vendor, source=src)}
    if family is not None:
        facts["cpu_family"] = Fact(int(family), source=src)
    if arch is not None:
        facts["cpu_arch"] = Fact(arch, source=src)
    return HostPaste(kind, facts, (f"CPU {vendor}" + (f", {model}" if model else ""),),
                     extra={"cpu_model": model})


def parse_lscpu(text: str, name: str) -> HostPaste:
    v, m = _LSCPU_VENDOR.search(text), _LSCPU_MODEL.search(text)
    arch, fam = _LSCPU_ARCH.search(text), _LSCPU_FAMILY.search(text)
    vendor = v.group(1) if v else None
    if vendor is None and arch and arch.group(1) in ("aarch64", "ppc64le", "ppc64"):
        vendor = "arm64" if arch.group(1) == "aarch64" else "ppc64"
    elif v and arch and arch.group(1) == "aarch64":
        vendor = "arm64"  # lscpu names the core designer (ARM, NVIDIA, Ampere): NCCL keys on the arch
    return _cpu_paste("lscpu", name, vendor, m.group(1) if m else None, fam.group(1) if fam else None,
                      arch.group(1) if arch else None)


def parse_cpuinfo(text: str, name: str) -> HostPaste:
    v, m, fam = _CPUINFO_VENDOR.search(text), _CPUINFO_MODEL.search(text), _CPUINFO_FAMILY.search(text)
    vendor, arch = (v.group(1), "x86_64") if v else (None, None)
    if vendor is None and _CPUINFO_POWER.search(text):
        vendor, arch = "ppc64", "ppc64le"
    elif vendor is None and _CPUINFO_ARM.search(text):
        vendor, arch = "arm64", "aarch64"
    return _cpu_paste("/proc/cpuinfo", name, vendor, m.group(1) if m else None, fam.group(1) if fam else None,
                      arch)


# -- /etc/default/grub -------------------------------------------------------------------------------

_GRUB_LINE = lazy_pattern(r"^\s*(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)\s*=\s*(['\"]?)(.*?)\2\s*$", re.M)


def looks_like_grub(text: str) -> bool:
    return bool(_GRUB_LINE.search(text[:_HEAD])) and bool(re.search(r"^\s*GRUB_[A-Z_]+=", text[:_HEAD], re.M))


def parse_grub(text: str, name: str) -> HostPaste:
    from gdrcheck.collectors.host_iommu import cmdline_iommu

    tokens = [t for _k, _q, val in _GRUB_LINE.findall(text) for t in val.split()]
    hints, passthrough, disabled = cmdline_iommu(tokens)
    src = f"{name} (/etc/default/grub: the kernel command line as configured; /proc/cmdline shows the one booted)"
    mode = "off" if disabled else ("passthrough" if passthrough else None)
    facts: dict[str, Fact] = {}
    if mode is not None:
        facts["iommu"] = Fact({"mode": mode, "cmdline_hints": hints, "cmdline_passthrough": passthrough,
                               "note": f"configured in /etc/default/grub: {' '.join(hints)}"}, source=src)
    said = ("IOMMU options " + " ".join(hints)) if hints else "no IOMMU option"
    return HostPaste("grub", facts, (f"{said} on the configured kernel command line"
                                     + (f": IOMMU {mode} for every device" if mode else ""),),
                     extra={"iommu_mode": mode, "tokens": tokens})


# -- gdscheck -p -------------------------------------------------------------------------------------

_GDS_FIELD = lazy_pattern(r"^\s*(?:--)?([A-Za-z][\w ./()-]*?)\s*:\s*(.*?)\s*$", re.M)
_GDS_GPU = lazy_pattern(r"^\s*GPU index (\d+) (.+?) bar:(\d+) bar size \(MiB\):\s*(\d+)(.*)$", re.M)


def looks_like_gdscheck(text: str) -> bool:
    head = text[:_HEAD]
    return "GDS release version" in head or ("DRIVER CONFIGURATION:" in head and "nvidia_fs" in head)


def parse_gdscheck(text: str, name: str) -> HostPaste:
    fields = {k.strip(): v for k, v in _GDS_FIELD.findall(text)}
    src = f"{name} (gdscheck -p)"
    facts: dict[str, Fact] = {}
    iommu = (fields.get("IOMMU") or "").lower()
    if iommu in ("disabled", "enabled"):
        mode = "off" if iommu == "disabled" else "translated"
        facts["iommu"] = Fact({"mode": mode, "note": f"gdscheck -p: IOMMU: {iommu}"}, source=src)
    nvfs = re.search(r"nvidia_fs version:\s*([\d.]+)", text)
    peer = fields.get("Mellanox PeerDirect")
    if nvfs:
        facts["nvidia_fs"] = Fact({"loaded": True, "version": nvfs.group(1), "bridges": None, "modules": None,
                                   "devcount": None, "peerdirect": None if peer is None else peer == "Enabled",
                                   "rw_stats_enabled": None}, source=src)
    pd = _peerdirect(fields, src)
    if pd is not None:
        facts["peerdirect"] = pd
    gpus = tuple({"index": int(i), "name": n.strip(), "bar1_total_bytes": int(mib) << 20,
                  "gds": "supports GDS" in rest} for i, n, _bar, mib, rest in _GDS_GPU.findall(text))
    said = [f"{k}: {fields[k]}" for k in ("IOMMU", "NVMe", "NVMe P2PDMA", "Mellanox PeerDirect", "rdma devices")
            if fields.get(k)]
    if nvfs:
        said.insert(0, f"nvidia_fs {nvfs.group(1)}")
    if not said and not gpus:
        raise InputError(f"{name}: gdscheck -p output without its DRIVER CONFIGURATION or PLATFORM INFO")
    return HostPaste("gdscheck", facts, ("as NVIDIA's gdscheck -p sees the node: " + "; ".join(said),), gpus=gpus)


def _peerdirect(fields: dict[str, str], src: str) -> Optional[Fact]:
    """gdscheck's ``--Mellanox PeerDirect`` line: nvidia-fs built against MLNX_OFED's peer-memory API (GDS
    troubleshooting guide, "Checking nvidia-fs.ko Support for Mellanox PeerDirect"; ``Mellanox PeerDirect
    Supported`` in /proc/driver/nvidia-fs/stats). It is not the GPU's peer-memory client: whether nvidia-peermem
    is loaded, what NCCL tests, it does not show. Newer releases add ``--DmaBuf support`` beside it."""
    said = fields.get("Mellanox PeerDirect")
    if said not in ("Enabled", "Disabled"):
        return None
    dmabuf = fields.get("DmaBuf support")
    compat = fields.get("properties.use_compat_mode")
    return Fact({"enabled": said == "Enabled",
                 "dmabuf": None if dmabuf not in ("Enabled", "Disabled") else dmabuf == "Enabled",
                 "use_compat_mode": None if compat not in ("true", "false") else compat == "true",
                 "note": f"gdscheck -p: Mellanox PeerDirect : {said}"}, source=src)


# -- gdsio ---------------------------------------------------------------------------------------------

_GDSIO = lazy_pattern(r"IoType:\s*(\w+)\s+XferType:\s*(\w+)\s+Threads:\s*(\d+).*?Throughput:\s*([\d.]+)\s*GiB/sec",
                      re.S)
_GDSIO_CMD = lazy_pattern(r"gdsio\b.*?-d\s*(\d+)")


def looks_like_gdsio(text: str) -> bool:
    return bool(_GDSIO.search(text[:_HEAD]))


def parse_gdsio(text: str, name: str) -> HostPaste:
    runs = []
    gpu: Optional[int] = None
    for line in text.splitlines():
        c = _GDSIO_CMD.search(line)
        if c:
            gpu = int(c.group(1))
            continue
        m = _GDSIO.search(line)
        if m:
            runs.append({"io": m.group(1), "xfer": m.group(2), "threads": int(m.group(3)),
                         "gib_s": float(m.group(4)), "gpu": gpu})
    by = {}
    for r in runs:
        by.setdefault(r["xfer"], []).append(r["gib_s"])
    said = "; ".join(f"{x}: {len(v)} run(s), {min(v):.1f}-{max(v):.1f} GiB/s" for x, v in sorted(by.items()))
    gpud = "GPUD" in by
    facts = {"gds_measured": Fact({"runs": runs, "gpu_direct": gpud}, source=f"{name} (gdsio)")}
    return HostPaste("gdsio", facts, ("a GDS measurement (gdsio): " + said
                                      + ("; XferType GPUD ran: GPUDirect Storage moved data on this node"
                                         if gpud else ""),))


# -- ibv_devinfo ---------------------------------------------------------------------------------------

_HCA = lazy_pattern(r"^hca_id:\s*(\S+)", re.M)
_PORT = lazy_pattern(r"^\s*port:\s*(\d+)\s*$")
_PORT_STATE = lazy_pattern(r"^\s*state:\s*PORT_(\w+)")
_LINK_LAYER = lazy_pattern(r"^\s*link_layer:\s*(\w+)")


def looks_like_ibv_devinfo(text: str) -> bool:
    head = text[:_HEAD]
    return bool(_HCA.search(head)) and ("transport:" in head or "phys_port_cnt" in head)


def parse_ibv_devinfo(text: str, name: str) -> HostPaste:
    states: dict[str, dict[str, str]] = {}
    layers: dict[str, dict[str, str]] = {}
    dev: Optional[str] = None
    port: Optional[str] = None
    for line in text.splitlines():
        m = _HCA.match(line)
        if m:
            dev, port = m.group(1), None
            states[dev] = {}
            continue
        p = _PORT.match(line)
        if p and dev is not None:
            port = p.group(1)
            continue
        s = _PORT_STATE.match(line)
        if s and dev is not None and port is not None:
            states[dev][port] = s.group(1)  # ACTIVE, DOWN, INIT, ARMED: the sysfs words
            continue
        ll = _LINK_LAYER.match(line)
        if ll and dev is not None and port is not None:
            layers.setdefault(dev, {})[port] = ll.group(1)
    if not states:
        raise InputError(f"{name}: ibv_devinfo output without an hca_id line")
    src = f"{name} (ibv_devinfo)"
    said = ", ".join(f"{d} port {p} {s}" + (f" ({layers.get(d, {}).get(p)})" if layers.get(d, {}).get(p) else "")
                     for d, ports in states.items() for p, s in sorted(ports.items()))
    return HostPaste("ibv_devinfo", {"rdma_port_states": Fact(states, source=src),
                                     "rdma_link_layers": Fact(layers, source=src)},
                     (f"RDMA ports: {said}",) + _link_layer_notes(layers),
                     extra={"rdma_devices": tuple(states)})


# NCCL lists a port whose link layer is InfiniBand or Ethernet (v2.30.7 net_ib/init.cc:363-366, logged as /IB or
# /RoCE, init.cc:444-448); on Ethernet (RoCE) it addresses the peer by a GID: NCCL_IB_GID_INDEX when set, else the
# RoCE v2 (NCCL_IB_ROCE_VERSION_NUM, 2) GID of an address of NCCL_IB_ADDR_FAMILY (AF_INET) found in the port's GID
# table, which holds one only while the port's netdev has such an IP address (connect.cc:12-14, 101-116, 317-333)
ROCE_GID = ("NCCL reaches a RoCE port by a GID: NCCL_IB_GID_INDEX when set, else the RoCE v2 GID of the port's IPv4 "
            "address (NCCL_IB_ROCE_VERSION_NUM=2, NCCL_IB_ADDR_FAMILY=AF_INET by default; v2.30.7 "
            "net_ib/connect.cc:317-333), so its netdev needs an IP address; `show_gids` or `ibv_devinfo -v` lists "
            "the GIDs")


def _link_layer_notes(layers: dict[str, dict[str, str]]) -> tuple[str, ...]:
    """What each link layer means to NCCL, said once per layer with the ports that have it."""
    by: dict[str, list[str]] = {}
    for dev, ports in layers.items():
        for port, layer in sorted(ports.items()):
            by.setdefault(layer, []).append(f"{dev} port {port}")
    out = []
    if by.get("Ethernet"):
        out.append(f"{', '.join(by['Ethernet'])}: link layer Ethernet, so RoCE, not InfiniBand (NCCL logs it "
                   f"/RoCE); {ROCE_GID}")
    if by.get("InfiniBand"):
        out.append(f"{', '.join(by['InfiniBand'])}: link layer InfiniBand (NCCL logs it /IB; GID index 0 unless "
                   "a routable FLID GID is present, v2.30.7 net_ib/connect.cc:302-315)")
    other = [k for k in by if k not in ("Ethernet", "InfiniBand")]
    for k in other:
        out.append(f"{', '.join(by[k])}: link layer {k}: NCCL's IB transport lists only InfiniBand and Ethernet "
                   "ports (v2.30.7 net_ib/init.cc:364-366), so not this one")
    return tuple(out)
