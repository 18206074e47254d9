"""The immutable facts gdrcheck reasons about.

Collectors build these; topology, rules and renderers only read them. Every
field that can be missing is ``None`` (never a guessed default), and every
fact that came from somewhere says where.
"""

from __future__ import annotations

from functools import lru_cache
from types import MappingProxyType

from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, Optional

# ---------------------------------------------------------------------------
# PCI addresses


_BDF_RE = lazy_pattern(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def norm_bdf(text: str) -> str:
    """Normalise a PCI address to ``dddd:bb:dd.f`` (lower case, domain >= 4 digits).

    Accepts NVML's ``00000000:3B:00.0``, lspci's ``3b:00.0`` (domain 0) and sysfs
    forms. Raises ValueError on anything else.
    """
    m = _BDF_RE.match(text.strip())
    if not m:
        raise ValueError(f"not a PCI address: {text!r}")
    dom = int(m.group(1) or "0", 16)
    bus = int(m.group(2), 16)
    dev = int(m.group(3), 16)
    fn = int(m.group(4))
    if dev > 0x1F:
        raise ValueError(f"not a PCI address: {text!r}")
    return f"{dom:04x}:{bus:02x}:{dev:02x}.{fn}"


def root_of(domain: int, bus: int) -> str:
    """The contract's root-bus label ``dddd:bb``."""
    return f"{domain:04x}:{bus:02x}"


def address_known(fn) -> bool:
    """Whether a function's PCI address is the machine's own; False for one gdrcheck made up (a device an input
    names without a bus id, as nvidia-smi topo -m does, gets an address in domain ffff marked ``synthetic``)."""
    return not (fn.extra and fn.extra.get("synthetic"))


def address_on_node(fn) -> bool:
    """Whether the function is one the node itself has at its address: False for an address gdrcheck made up
    (:func:`address_known`) and for a switch an input declares for hardware the node does not show (an NCCL
    topology file's ``ffff:ff:..`` bridge, marked ``vendor_declared`` by the collector)."""
    return address_known(fn) and not (fn.extra and fn.extra.get("vendor_declared"))


@lru_cache(maxsize=1 << 14)
def bdf_key(bdf: str) -> tuple[int, int, int, int]:
    """Numeric (domain, bus, device, function) sort key (kept: a large node sorts by it thousands of times)."""
    dom, bus, rest = bdf.rsplit(":", 2) if bdf.count(":") == 2 else ("0", *bdf.split(":"))
    dev, fn = rest.split(".")
    return int(dom, 16), int(bus, 16), int(dev, 16), int(fn)


def bus_order(bdfs: Iterable[str]) -> dict[str, int]:
    """nvidia-smi's default GPU numbering: PCI bus order."""
    return {b: i for i, b in enumerate(sorted(bdfs, key=bdf_key))}

def is_bdf(text: str) -> bool:
    return bool(_BDF_RE.match(text)) and text.count(":") == 2


# ---------------------------------------------------------------------------
# Facts with provenance


UNKNOWN = "unknown"


@record(frozen=True)
class Fact:
    """One host-level fact: a value, where it came from, or why it is unknown.

    ``value is None`` means unknown; ``reason`` then says why and ``settle``
    says what would settle it (for example "run as root").
    """

    value: Any
    source: str = ""
    reason: str = ""
    settle: str = ""

    @property
    def known(self) -> bool:
        return self.value is not None


def unknown(reason: str, settle: str = "", source: str = "") -> Fact:
    return Fact(None, source=source, reason=reason, settle=settle)


# ---------------------------------------------------------------------------
# PCI functions


@record(frozen=True)
class Bar:
    """One line of sysfs ``resource`` that holds a region (or a BAR from lspci/XML)."""

    index: int
    start: int
    size: int
    flags: int = 0
    is_64bit: bool = False
    prefetchable: bool = False
    unset: bool = False  # IORESOURCE_UNSET: no address assigned


@record(frozen=True)
class Link:
    """PCIe link state; speeds in GT/s, widths in lanes, ``None`` when not shown."""

    cur_speed: Optional[float] = None
    cur_width: Optional[int] = None
    max_speed: Optional[float] = None
    max_width: Optional[int] = None


@record(frozen=True)
class PciFunction:
    """A PCI function as the input shows it.

    ``parent`` is the bridge directly upstream (``None`` on a root bus);
    ``root`` is the root bus ``dddd:bb`` the function hangs under.
    ``unlisted_upstream``: bridges between ``parent`` and this function that
    the input names on its path but does not list as functions (sysfs: a
    trimmed capture, or a bridge hidden by firmware), top first; ``parent``
    is then the nearest listed bridge above.
    """

    bdf: str
    root: str
    parent: Optional[str] = None
    unlisted_upstream: tuple[str, ...] = ()
    class_code: Optional[int] = None  # 24-bit, e.g. 0x030200
    vendor: Optional[int] = None
    device: Optional[int] = None
    subsys_vendor: Optional[int] = None
    subsys_device: Optional[int] = None
    revision: Optional[int] = None
    numa_node: Optional[int] = None  # sysfs -1 -> None
    local_cpulist: Optional[str] = None
    name: Optional[str] = None  # human name as the input printed it (lspci -tv, pci.ids)
    kind_hint: Optional[str] = None  # what the input itself declares (NCCL <gpu>, <nic>)
    bars: tuple[Bar, ...] = ()
    link: Link = Link()
    driver: Optional[str] = None
    iommu_group: Optional[str] = None
    physfn: Optional[str] = None  # SR-IOV VF -> PF address
    secondary_bus: Optional[int] = None
    subordinate_bus: Optional[int] = None
    config: Optional[bytes] = None  # config space as readable (64 bytes without root, 4096 with)
    netdevs: tuple[str, ...] = ()
    rdma_devices: tuple[str, ...] = ()
    nvme_names: tuple[str, ...] = ()
    gpu_index: Optional[int] = None  # nvidia-smi's numbering
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def is_bridge(self) -> bool:
        if self.class_code is not None:
            return (self.class_code >> 8) == 0x0604 or (self.class_code >> 8) == 0x0609
        return self.kind_hint in ("bridge", "switch_upstream", "switch_downstream", "root_port")


@record(frozen=True)
class NvLink:
    """An NVLink connection between two GPUs (or a GPU and an NVSwitch fabric)."""

    a: str
    b: str
    count: int
    source: str = ""


# ---------------------------------------------------------------------------
# GPUs as the driver sees them (NVML / nvidia-smi)


@record(frozen=True)
class GpuProcess:
    pid: int
    name: Optional[str] = None
    user: Optional[str] = None
    used_memory_bytes: Optional[int] = None


@record(frozen=True)
class DriverGpu:
    """One GPU as NVML or nvidia-smi reports it."""

    bdf: str
    index: Optional[int] = None
    name: Optional[str] = None
    uuid: Optional[str] = None
    serial: Optional[str] = None
    bar1_total_bytes: Optional[int] = None
    bar1_used_bytes: Optional[int] = None
    bar1_free_bytes: Optional[int] = None
    fb_total_bytes: Optional[int] = None
    source: str = ""  # "nvml", "nvidia-smi -q", "nvidia-smi -q -x"
    cuda_compute: Optional[tuple[int, int]] = None
    processes: tuple[GpuProcess, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@record(frozen=True)
class CollectorStatus:
    """What one collector managed: ``ok``, ``unavailable`` (with why) or ``error``."""

    name: str
    status: str
    detail: str = ""
    hint: str = ""


# ---------------------------------------------------------------------------
# The snapshot


@record(frozen=True)
class PathFact:
    """A pair's PCIe path class as an input states it (an ``nvidia-smi topo -m`` cell), not as a tree implies it.

    ``tree`` is what the PCIe tree of the same node said when it disagreed (or
    the classes it left open, joined by ``/``); ``why`` says why the stated
    class was trusted.
    """

    cls: str  # PIX, PXB, PHB, NODE, SYS
    source: str
    tree: Optional[str] = None
    why: str = ""


@record(frozen=True)
class Snapshot:
    """Everything gdrcheck knows about one node, read once.

    ``input_kind`` is how the facts arrived; ``shows_nvlink`` says whether the
    input *could* show NVLink (an lspci tree cannot), so an empty ``nvlinks``
    means "none" only when it is True. ``numa_known`` is False when the input
    says nothing about NUMA (an lspci paste).
    """

    input_kind: str
    label: str
    devices: tuple[PciFunction, ...]
    roots: tuple[str, ...] = ()  # every root bus the input shows, 'dddd:bb'
    root_numa: Mapping[str, Optional[int]] = field(default_factory=lambda: MappingProxyType({}))
    numa_known: bool = True
    shows_nvlink: bool = False
    nvlinks: tuple[NvLink, ...] = ()
    gpus: tuple[DriverGpu, ...] = ()  # driver view (NVML / nvidia-smi)
    p2p_status: Mapping[tuple[str, str, str], str] = field(default_factory=lambda: MappingProxyType({}))
    host: Mapping[str, Fact] = field(default_factory=lambda: MappingProxyType({}))
    collectors: tuple[CollectorStatus, ...] = ()
    hostname: Optional[str] = None
    notes: tuple[str, ...] = ()
    # pastes (--from given several times, nvidia-smi topo -m): classes stated per pair, keyed (a, b) as
    # (lower, higher) bus id; functions the input shows without their place in the PCIe tree
    path_facts: Mapping[tuple[str, str], PathFact] = field(default_factory=lambda: MappingProxyType({}))
    unplaced: tuple[str, ...] = ()
    input_kinds: tuple[str, ...] = ()  # the kind of every input merged (gdrcheck.reach: what each can show)

    def device(self, bdf: str) -> Optional[PciFunction]:
        for d in self.devices:
            if d.bdf == bdf:
                return d
        return None

    def fact(self, name: str) -> Fact:
        f = self.host.get(name)
        if f is None:
            return unknown(f"not shown by the {self.input_kind} input")
        return f


def frozen_map(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))
