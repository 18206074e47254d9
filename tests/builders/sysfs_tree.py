"""Fake sysfs trees, laid out the way Linux lays them out, for tests and benchmarks.

A tree is described first and written once::

    t = SysfsTree(tmp_path)
    t.add_root(0, 0x00, numa=0)
    t.add("0000:00:01.0", root=(0, 0x00), cls=0x060400, vendor=0x8086, device=0x2030)   # root port
    t.add("0000:01:00.0", parent="0000:00:01.0", driver="nvidia")                        # a GPU (default ids)
    t.add("0000:00:02.0", root=(0, 0x00), cls=0x020700, vendor=0x15b3, device=0x1021,
          driver="mlx5_core", netdevs=["ib0"], rdma=["mlx5_0"])
    t.write()

``write()`` produces what the kernel shows (``Documentation/ABI/testing/sysfs-bus-pci``):
``/sys/devices/pciDDDD:BB/<bridge>/.../<bdf>/`` with ``vendor``, ``device``, ``class``,
``subsystem_*``, ``revision``, ``numa_node``, ``local_cpus``, ``local_cpulist``, ``resource``,
``*_link_speed``/``*_link_width``, ``config`` and, for bridges, ``secondary_bus_number`` and
``subordinate_bus_number``; relative links ``/sys/bus/pci/devices/<bdf>``, ``driver``,
``subsystem``, ``iommu_group``, ``physfn``/``virtfnN``; ``/sys/class/{net,infiniband,nvme,pci_bus}``
entries; and a minimal ``/sys/devices/system/{cpu,node}`` so that hwloc
(``HWLOC_FSROOT=<dir> HWLOC_COMPONENTS=-x86 lstopo-no-graphics --whole-io --of xml``) reads it.

Config space is generated unless given: a type 0 or type 1 header (bridges carry primary,
secondary and subordinate bus numbers), a PCI Express capability with the port type and the
link state, for bridges a Bridge Subsystem Vendor ID capability holding the subsystem ids,
and, when ``acs`` is given, an ACS extended capability with those control bits.
Bus numbers of bridges are derived from what hangs below them; a bridge with nothing below
gets a free bus number unless ``secondary`` is given. Inconsistent descriptions (a child on
another bus than its siblings, overlapping bridge ranges) raise ValueError: the tree must be
one a kernel could show.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

# PCIe capability port types
ENDPOINT, LEGACY_ENDPOINT, ROOT_PORT, UPSTREAM, DOWNSTREAM, PCIE_TO_PCI, RC_ENDPOINT = 0, 1, 4, 5, 6, 7, 9

# ACS control bits (kernel.md §2.2)
ACS_SV, ACS_TB, ACS_RR, ACS_CR, ACS_UF, ACS_EC, ACS_DT = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40

# sysfs resource flags (include/linux/ioport.h)
BAR_MEM32 = 0x00040200          # 32-bit, non-prefetchable memory
BAR_MEM64_PREF = 0x0014220C     # 64-bit, prefetchable memory
BAR_MEM64 = 0x00140204          # 64-bit, non-prefetchable memory
BAR_IO = 0x00040101
IORESOURCE_MEM_64 = 0x00100000
IORESOURCE_PREFETCH = 0x2000
IORESOURCE_IO = 0x100
IORESOURCE_UNSET = 0x20000000

GPU_BARS = ((16 << 20, BAR_MEM32), (64 << 30, BAR_MEM64_PREF), (32 << 20, BAR_MEM64_PREF))
DEFAULT_LINK = ("16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16)

RootSpec = Union[tuple[int, int], str]
AUTO = "auto"  # default of ``numa`` (the root bus's node) and ``port_type`` (from the structure)
_BDF = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")
_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def split_bdf(bdf: str) -> tuple[int, int, int, int]:
    m = _BDF.match(bdf.lower())
    if not m:
        raise ValueError(f"not a full PCI address (dddd:bb:dd.f): {bdf!r}")
    return int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4))


def root_label(domain: int, bus: int) -> str:
    return f"{domain:04x}:{bus:02x}"


def speed_gen(text: Optional[str]) -> int:
    """``"16.0 GT/s PCIe"`` -> 4 (the PCIe link-speed code); unknown -> 0."""
    m = _SPEED.match(text or "")
    return _GEN.get(float(m.group(1)), 0) if m else 0


def cpumask(cpus: Iterable[int]) -> str:
    """The kernel's ``%*pb``: 32-bit hex words, most significant first, the first unpadded."""
    value = 0
    for c in cpus:
        value |= 1 << c
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    words.reverse()
    return ",".join([f"{words[0]:x}"] + [f"{w:08x}" for w in words[1:]])


def cpulist(cpus: Iterable[int]) -> str:
    """The kernel's ``%*pbl``: ``0-3,8-11``."""
    cs = sorted(set(cpus))
    out: list[str] = []
    i = 0
    while i < len(cs):
        j = i
        while j + 1 < len(cs) and cs[j + 1] == cs[j] + 1:
            j += 1
        out.append(f"{cs[i]}-{cs[j]}" if j > i else f"{cs[i]}")
        i = j + 1
    return ",".join(out)


def config_space(*, vendor: int, device: int, cls: int, revision: int = 0, header_type: int = 0,
                 subsystem: tuple[int, int] = (0, 0), primary: int = 0, secondary: int = 0,
                 subordinate: int = 0, port_type: Optional[int] = ENDPOINT, link: Optional[Sequence] = None,
                 acs: Optional[int] = None, acs_cap: int = 0x5F, bars: Sequence[tuple[int, int, int, int]] = (),
                 size: int = 4096) -> bytes:
    """A little-endian config space image.

    ``bars`` are ``(index, start, size, flags)``; ``link`` is ``(cur_speed, cur_width, max_speed,
    max_width)`` as sysfs strings/ints; ``port_type`` None leaves out the PCIe capability
    (conventional PCI, then ``size`` 256 is what the kernel shows).
    """
    cfg = bytearray(max(size, 64))
    bridge = header_type & 0x7F == 1
    ssvid = bridge and len(cfg) >= 0x90
    struct.pack_into("<HHHH", cfg, 0, vendor, device, 0x0006, 0x0010 if port_type is not None or ssvid else 0)
    cfg[8] = revision & 0xFF
    struct.pack_into("<I", cfg, 8, (cls << 8) | (revision & 0xFF))
    cfg[0x0E] = header_type
    if header_type & 0x7F == 1:
        cfg[0x18], cfg[0x19], cfg[0x1A] = primary, secondary, subordinate
    else:
        struct.pack_into("<HH", cfg, 0x2C, subsystem[0], subsystem[1])
        for index, start, bsize, flags in bars:
            if index > 5:
                continue
            low = (start & 0xFFFFFFF0)
            if flags & IORESOURCE_IO:
                low = (start & 0xFFFFFFFC) | 1
            else:
                low |= (0x4 if flags & IORESOURCE_MEM_64 else 0) | (0x8 if flags & IORESOURCE_PREFETCH else 0)
            struct.pack_into("<I", cfg, 0x10 + 4 * index, low & 0xFFFFFFFF)
            if flags & IORESOURCE_MEM_64 and index < 5:
                struct.pack_into("<I", cfg, 0x14 + 4 * index, (start >> 32) & 0xFFFFFFFF)
    cfg[0x3D] = 1  # interrupt pin A
    if port_type is not None and len(cfg) >= 0x80:
        cap = 0x40
        cfg[0x34] = cap
        cfg[cap], cfg[cap + 1] = 0x10, 0x00
        slot = 0x100 if port_type in (ROOT_PORT, DOWNSTREAM) else 0
        struct.pack_into("<H", cfg, cap + 2, 0x0002 | (port_type << 4) | slot)
        struct.pack_into("<I", cfg, cap + 4, 0x00008FC2)  # devcap: 512-byte payload, role-based errors
        cur_s, cur_w, max_s, max_w = link if link is not None else (None, 0, None, 0)
        struct.pack_into("<I", cfg, cap + 0x0C, speed_gen(max_s) | ((max_w or 0) << 4))
        struct.pack_into("<H", cfg, cap + 0x12, speed_gen(cur_s) | ((cur_w or 0) << 4))
        gens = speed_gen(max_s)
        struct.pack_into("<I", cfg, cap + 0x2C, sum(1 << g for g in range(1, gens + 1)))
    if ssvid:
        # Bridge Subsystem Vendor ID capability: where the kernel reads a bridge's subsystem ids
        # (drivers/pci/probe.c pci_setup_device, PCI_HEADER_TYPE_BRIDGE)
        cfg[0x41 if port_type is not None else 0x34] = 0x80
        cfg[0x80], cfg[0x81] = 0x0D, 0x00
        struct.pack_into("<HH", cfg, 0x84, subsystem[0], subsystem[1])
    if acs is not None and len(cfg) >= 0x108:
        struct.pack_into("<I", cfg, 0x100, 0x000D | (1 << 16))
        struct.pack_into("<HH", cfg, 0x104, acs_cap, acs)
    return bytes(cfg)


@dataclass
class Func:
    """One PCI function as described to :meth:`SysfsTree.add`."""

    bdf: str
    parent: Optional[str]
    root: str
    cls: int
    vendor: int
    device: int
    subsystem: tuple[int, int]
    revision: int
    numa: Optional[int]
    link: Optional[tuple]
    bars: tuple[tuple[int, int], ...]
    driver: Optional[str]
    config: Optional[bytes]
    port_type: Union[int, None, str]
    acs: Optional[int]
    acs_cap: int
    config_size: int
    iommu_group: Optional[Union[int, str]]
    netdevs: tuple[str, ...]
    rdma: tuple[str, ...]
    nvme: tuple[str, ...]
    secondary: Optional[int]
    physfn: Optional[str]
    children: list[str] = field(default_factory=list)
    subordinate: Optional[int] = None

    @property
    def is_bridge(self) -> bool:
        return (self.cls >> 8) in (0x0604, 0x0609)


class SysfsTree:
    """Describe PCI functions, NUMA nodes and class devices; :meth:`write` puts them on disk."""

    def __init__(self, root_dir: Union[str, os.PathLike], *, cpus_per_node: int = 4,
                 resource_files: bool = False) -> None:
        """``resource_files`` creates sparse ``resourceN`` files of each BAR's size (``stat()`` is
        how gdrcheck reads BAR sizes without root); off by default since copying a tree with a
        64 GiB sparse file is not cheap."""
        self.root_dir = Path(root_dir)
        self.cpus_per_node = cpus_per_node
        self.resource_files = resource_files
        self.roots: dict[str, Optional[int]] = {}
        self.funcs: dict[str, Func] = {}
        self.numa_nodes: set = set()
        self._written = False

    # -- describing ------------------------------------------------------------

    def add_root(self, domain: int, bus: int, numa: Optional[int] = None) -> str:
        """A root bus (``/sys/devices/pciDDDD:BB``) on NUMA node ``numa`` (None: the kernel's -1)."""
        label = root_label(domain, bus)
        self.roots[label] = numa
        if numa is not None:
            self.numa_nodes.add(numa)
        return label

    def add_numa_node(self, node: int) -> None:
        """A NUMA node with CPUs but no PCI root bus."""
        self.numa_nodes.add(node)

    def add(self, bdf: str, parent: Optional[str] = None, root: Optional[RootSpec] = None, *,
            cls: int = 0x030200, vendor: int = 0x10DE, device: int = 0x2335,
            subsystem: Optional[tuple[int, int]] = None, revision: int = 0xA1, numa: Union[int, None, str] = AUTO,
            link: Optional[tuple] = DEFAULT_LINK, bars: Optional[Sequence[tuple[int, int]]] = None,
            driver: Optional[str] = None, config: Optional[bytes] = None, port_type: Union[int, None, str] = AUTO,
            acs: Optional[int] = None, acs_cap: int = 0x5F, config_size: int = 4096,
            iommu_group: Optional[Union[int, str]] = None, netdevs: Sequence[str] = (),
            rdma: Sequence[str] = (), nvme: Sequence[str] = (), secondary: Optional[int] = None,
            physfn: Optional[str] = None) -> str:
        """Add one PCI function and return its address.

        ``parent`` is the bridge above it (added before); without one it sits on ``root``
        (``(domain, bus)`` or ``"dddd:bb"``; default: its own domain and bus, created with NUMA
        unknown if new). ``numa`` defaults to the root bus's node; pass None for sysfs ``-1``.
        ``link`` is ``(cur_speed, cur_width, max_speed, max_width)`` as sysfs prints them, or None
        for a conventional PCI function (no link files, no PCIe capability). ``bars`` are
        ``(size, flags)`` pairs in BAR order (a 64-bit BAR takes two slots); default: a GPU's three
        BARs for class 0x03, one 64-bit BAR for endpoints, none for bridges. ``port_type``
        defaults to what the structure says (root port, upstream/downstream port, endpoint,
        root-complex integrated endpoint). ``config`` replaces the generated config space.
        ``physfn`` makes this an SR-IOV VF of that PF (``physfn``/``virtfnN`` links).
        """
        dom, bus, dev, fn = split_bdf(bdf)
        bdf = f"{dom:04x}:{bus:02x}:{dev:02x}.{fn}"
        if bdf in self.funcs:
            raise ValueError(f"{bdf} added twice")
        if parent is not None:
            parent = f"{split_bdf(parent)[0]:04x}:" + parent.lower().split(":", 1)[1]
            p = self.funcs.get(parent)
            if p is None:
                raise ValueError(f"{bdf}: parent {parent} must be added first")
            if not p.is_bridge:
                raise ValueError(f"{bdf}: parent {parent} is not a bridge (class {p.cls:06x})")
            if p.children and split_bdf(p.children[0])[1] != bus:
                raise ValueError(f"{bdf}: siblings below {parent} must share one bus "
                                 f"(bus {split_bdf(p.children[0])[1]:02x})")
            if p.secondary is not None and p.secondary != bus:
                raise ValueError(f"{bdf}: {parent} has secondary bus {p.secondary:02x}")
            if split_bdf(parent)[0] != dom:
                raise ValueError(f"{bdf}: not in the domain of its parent {parent}")
            rlabel = p.root
            p.children.append(bdf)
        else:
            if root is None:
                rlabel = root_label(dom, bus)
            elif isinstance(root, str):
                d, b = root.split(":")
                rlabel = root_label(int(d, 16), int(b, 16))
            else:
                rlabel = root_label(*root)
            if rlabel not in self.roots:
                self.add_root(int(rlabel.split(":")[0], 16), int(rlabel.split(":")[1], 16), None)
            if rlabel != root_label(dom, bus):
                raise ValueError(f"{bdf} sits on root bus {rlabel} but its address says bus {dom:04x}:{bus:02x}")
        if numa == AUTO:
            numa = self.roots[rlabel]
        if numa is not None:
            self.numa_nodes.add(numa)
        is_bridge = (cls >> 8) in (0x0604, 0x0609)
        if bars is None:
            if is_bridge:
                bars = ()
            elif cls >> 16 == 0x03:
                bars = GPU_BARS
            else:
                bars = ((1 << 20, BAR_MEM64_PREF),)
        if subsystem is None:
            subsystem = (0, 0) if is_bridge else (vendor, device)
        self.funcs[bdf] = Func(
            bdf=bdf, parent=parent, root=rlabel, cls=cls, vendor=vendor, device=device, subsystem=subsystem,
            revision=revision, numa=numa, link=tuple(link) if link is not None else None, bars=tuple(bars),
            driver=driver, config=config, port_type=port_type, acs=acs, acs_cap=acs_cap,
            config_size=config_size, iommu_group=iommu_group, netdevs=tuple(netdevs), rdma=tuple(rdma),
            nvme=tuple(nvme), secondary=secondary, physfn=physfn)
        return bdf

    def add_switch(self, upstream: str, downstream: Sequence[str], parent: Optional[str] = None,
                   root: Optional[RootSpec] = None, *, vendor: int = 0x1000, device: int = 0xC030,
                   link: Optional[tuple] = DEFAULT_LINK, acs: Optional[int] = None, **kw) -> list[str]:
        """A switch: its upstream port, then its downstream ports (each with ``acs`` if given)."""
        self.add(upstream, parent, root, cls=0x060400, vendor=vendor, device=device, link=link, **kw)
        return [self.add(d, upstream, cls=0x060400, vendor=vendor, device=device, link=link, acs=acs, **kw)
                for d in downstream]

    # -- derived facts ---------------------------------------------------------------

    def expected(self) -> dict[str, dict[str, Optional[object]]]:
        """``{bdf: {"parent", "root", "numa_node"}}`` as the contract's topology document states them."""
        return {b: {"parent": f.parent, "root": f.root, "numa_node": f.numa} for b, f in self.funcs.items()}

    def _port_type(self, f: Func) -> Optional[int]:
        if f.link is None:
            return None
        if f.port_type != AUTO:
            return f.port_type  # type: ignore[return-value]
        if f.is_bridge:
            if f.parent is None:
                return ROOT_PORT
            if self._port_type(self.funcs[f.parent]) == UPSTREAM:
                return DOWNSTREAM
            if any(self.funcs[c].is_bridge for c in f.children):
                return UPSTREAM
            return UPSTREAM if f.children else DOWNSTREAM
        return RC_ENDPOINT if f.parent is None else ENDPOINT

    def _assign_buses(self) -> None:
        used: dict[int, set] = {}
        for b in list(self.funcs) + [r + ":00.0" for r in self.roots]:
            d, bus = int(b.split(":")[0], 16), int(b.split(":")[1], 16)
            used.setdefault(d, set()).add(bus)
        for f in self.funcs.values():
            if f.is_bridge and f.secondary is not None:
                used[split_bdf(f.bdf)[0]].add(f.secondary)
        for f in self.funcs.values():
            if not f.is_bridge:
                continue
            dom = split_bdf(f.bdf)[0]
            if f.children:
                f.secondary = split_bdf(f.children[0])[1]
            elif f.secondary is None:
                free = [b for b in range(1, 256) if b not in used[dom] and b > split_bdf(f.bdf)[1]]
                if not free:
                    raise ValueError(f"{f.bdf}: no free bus number left for its secondary bus")
                f.secondary = free[0]
                used[dom].add(f.secondary)
        # subordinate = highest bus anywhere below (children before parents: deepest first)
        for f in sorted(self.funcs.values(), key=lambda x: -self._depth(x.bdf)):
            if f.is_bridge:
                sub = f.secondary
                for c in f.children:
                    cf = self.funcs[c]
                    sub = max(sub, split_bdf(c)[1], cf.subordinate or 0)
                f.subordinate = sub
        for f in list(self.funcs.values()) + [None]:
            kids = f.children if f is not None else [b for b, x in self.funcs.items() if x.parent is None]
            ranges = sorted((self.funcs[c].secondary, self.funcs[c].subordinate, c) for c in kids
                            if self.funcs[c].is_bridge)
            for (s1, e1, c1), (s2, e2, c2) in zip(ranges, ranges[1:]):
                if s2 <= e1 and split_bdf(c1)[0] == split_bdf(c2)[0]:
                    raise ValueError(f"bus ranges of {c1} [{s1:02x}-{e1:02x}] and {c2} [{s2:02x}-{e2:02x}] "
                                     "overlap; number the buses depth-first")

    def _depth(self, bdf: str) -> int:
        n, p = 0, self.funcs[bdf].parent
        while p is not None:
            n, p = n + 1, self.funcs[p].parent
        return n

    def _node_cpus(self) -> dict[int, list[int]]:
        nodes = sorted(self.numa_nodes) or [0]
        per = self.cpus_per_node
        return {n: list(range(i * per, (i + 1) * per)) for i, n in enumerate(nodes)}

    # -- writing -------------------------------------------------------------------

    def device_dir(self, bdf: str) -> Path:
        """Where ``bdf`` lives under ``/sys/devices`` (host path)."""
        chain = []
        b: Optional[str] = bdf
        while b is not None:
            chain.append(b)
            b = self.funcs[b].parent
        rd, rb = self.funcs[bdf].root.split(":")
        return self.root_dir.joinpath("sys", "devices", f"pci{rd}:{rb}", *reversed(chain))

    def write(self) -> Path:
        """Write the whole tree under ``root_dir`` and return it."""
        if self._written:
            raise RuntimeError("SysfsTree.write() may be called once")
        self._written = True
        self._assign_buses()
        node_cpus = self._node_cpus()
        all_cpus = [c for cs in node_cpus.values() for c in cs]
        slots: dict[str, int] = {}
        for b in self.funcs:
            slots[b.rsplit(".", 1)[0]] = slots.get(b.rsplit(".", 1)[0], 0) + 1
        self._multi = {b for b in self.funcs if slots[b.rsplit(".", 1)[0]] > 1}
        sysd = self.root_dir / "sys"
        for label in self.roots:
            rd, rb = label.split(":")
            rootdir = sysd / "devices" / f"pci{rd}:{rb}"
            rootdir.mkdir(parents=True, exist_ok=True)
            self._class_link("pci_bus", label, rootdir / "pci_bus" / label, rootdir)
        for n, (bdf, f) in enumerate(self.funcs.items()):
            self._write_func(f, n, node_cpus.get(f.numa, all_cpus) if f.numa is not None else all_cpus)
        self._write_cpus(node_cpus)
        return self.root_dir

    def _write_func(self, f: Func, n: int, cpus: list[int]) -> None:
        d = self.device_dir(f.bdf)
        d.mkdir(parents=True, exist_ok=True)
        sysd = self.root_dir / "sys"
        files = {
            "vendor": f"0x{f.vendor:04x}", "device": f"0x{f.device:04x}", "class": f"0x{f.cls:06x}",
            "subsystem_vendor": f"0x{f.subsystem[0]:04x}", "subsystem_device": f"0x{f.subsystem[1]:04x}",
            "revision": f"0x{f.revision:02x}", "numa_node": str(-1 if f.numa is None else f.numa),
            "local_cpus": cpumask(cpus), "local_cpulist": cpulist(cpus), "enable": "1",
        }
        if f.link is not None:
            cs, cw, ms, mw = f.link
            files.update(current_link_speed=cs, current_link_width=str(cw), max_link_speed=ms,
                         max_link_width=str(mw))
        if f.is_bridge:
            files.update(secondary_bus_number=str(f.secondary), subordinate_bus_number=str(f.subordinate))
        bars = self._bar_layout(f, n)
        nlines = (11 if f.is_bridge else 7)
        lines = [(0, 0, 0)] * nlines
        for index, start, size, flags in bars:
            end = start + size - 1 if size else 0
            lines[index] = (start, end, flags)
        files["resource"] = "".join(f"0x{s:016x} 0x{e:016x} 0x{fl:016x}\n" for s, e, fl in lines).rstrip("\n")
        for name, value in files.items():
            (d / name).write_text(value + "\n")
        dom, bus, dev, fn = split_bdf(f.bdf)
        multi = f.bdf in self._multi
        cfg = f.config
        if cfg is None:
            hdr = (1 if f.is_bridge else 0) | (0x80 if multi else 0)
            port = self._port_type(f)
            size = f.config_size if port is not None else min(f.config_size, 256)
            cfg = config_space(vendor=f.vendor, device=f.device, cls=f.cls, revision=f.revision, header_type=hdr,
                               subsystem=f.subsystem, primary=bus, secondary=f.secondary or 0,
                               subordinate=f.subordinate or 0, port_type=port, link=f.link, acs=f.acs,
                               acs_cap=f.acs_cap, bars=bars, size=size)
        (d / "config").write_bytes(cfg)
        if self.resource_files:
            for index, _start, size, _flags in bars:
                if size and index <= 5:
                    with open(d / f"resource{index}", "wb") as fh:
                        fh.truncate(size)
        self._link(sysd / "bus" / "pci" / "devices" / f.bdf, d)
        self._link(d / "subsystem", sysd / "bus" / "pci")
        if f.driver:
            drv = sysd / "bus" / "pci" / "drivers" / f.driver
            drv.mkdir(parents=True, exist_ok=True)
            self._link(d / "driver", drv)
            self._link(drv / f.bdf, d)
        if f.iommu_group is not None:
            grp = sysd / "kernel" / "iommu_groups" / str(f.iommu_group)
            (grp / "devices").mkdir(parents=True, exist_ok=True)
            if not (grp / "type").exists():
                (grp / "type").write_text("DMA\n")
            self._link(d / "iommu_group", grp)
            self._link(grp / "devices" / f.bdf, d)
        if f.physfn:
            pf = self.funcs[f.physfn]
            pfdir = self.device_dir(pf.bdf)
            self._link(d / "physfn", pfdir)
            k = len([x for x in pfdir.iterdir() if x.name.startswith("virtfn")]) if pfdir.exists() else 0
            pfdir.mkdir(parents=True, exist_ok=True)
            self._link(pfdir / f"virtfn{k}", d)
        if f.is_bridge:
            label = f"{dom:04x}:{f.secondary:02x}"
            self._class_link("pci_bus", label, d / "pci_bus" / label, d)
        for i, name in enumerate(f.netdevs):
            nd = d / "net" / name
            self._class_link("net", name, nd, d)
            ib = name.startswith("ib")
            (nd / "address").write_text((f"80:00:00:{i:02x}:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:{n & 0xff:02x}:01"
                                         if ib else f"02:00:00:00:{n & 0xff:02x}:{i:02x}") + "\n")
            (nd / "type").write_text("32\n" if ib else "1\n")
            (nd / "operstate").write_text("up\n")
            (nd / "flags").write_text("0x1043\n")  # UP, BROADCAST, RUNNING, MULTICAST
        for i, name in enumerate(f.rdma):
            rd = d / "infiniband" / name
            self._class_link("infiniband", name, rd, d)
            (rd / "node_guid").write_text(f"0000:0000:{n:04x}:{i:04x}\n")
            port = rd / "ports" / "1"
            port.mkdir(parents=True, exist_ok=True)
            for k, v in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("link_layer", "InfiniBand"),
                         ("rate", "400 Gb/sec (4X NDR)"), ("lid", "0x1")):
                (port / k).write_text(v + "\n")
        for name in f.nvme:
            nv = d / "nvme" / name
            self._class_link("nvme", name, nv, d)
            (nv / "transport").write_text("pcie\n")
            (nv / "address").write_text(f.bdf + "\n")
            (nv / "model").write_text("Fake NVMe\n")

    def _bar_layout(self, f: Func, n: int) -> list[tuple[int, int, int, int]]:
        out = []
        index = 0
        base = 0x3800_0000_0000 + n * (1 << 37)
        for size, flags in f.bars:
            if index > 5:
                raise ValueError(f"{f.bdf}: more BARs than six registers hold")
            if flags & IORESOURCE_UNSET:
                start = 0
            else:
                align = max(size, 0x1000)
                base = (base + align - 1) // align * align
                start = base
                base += size
            out.append((index, start, size, flags))
            index += 2 if flags & IORESOURCE_MEM_64 else 1
        return out

    def _class_link(self, cls: str, name: str, target_dir: Path, device_dir: Path) -> None:
        """``/sys/class/<cls>/<name>`` -> the object's directory, whose ``device`` points at the PCI function."""
        target_dir.mkdir(parents=True, exist_ok=True)
        self._link(self.root_dir / "sys" / "class" / cls / name, target_dir)
        self._link(target_dir / "device", device_dir)

    @staticmethod
    def _link(at: Path, target: Path) -> None:
        """A relative symlink, as sysfs writes them."""
        at.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(at):
            at.unlink()
        os.symlink(os.path.relpath(target, at.parent), at)

    def _write_cpus(self, node_cpus: dict[int, list[int]]) -> None:
        sysd = self.root_dir / "sys" / "devices" / "system"
        all_cpus = sorted(c for cs in node_cpus.values() for c in cs)
        nodes = sorted(node_cpus)
        cpu_dir = sysd / "cpu"
        cpu_dir.mkdir(parents=True, exist_ok=True)
        for name in ("online", "possible", "present"):
            (cpu_dir / name).write_text(cpulist(all_cpus) + "\n")
        node_dir = sysd / "node"
        node_dir.mkdir(parents=True, exist_ok=True)
        for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
            (node_dir / name).write_text(cpulist(nodes) + "\n")
        for pkg, node in enumerate(nodes):
            cpus = node_cpus[node]
            nd = node_dir / f"node{node}"
            nd.mkdir(parents=True, exist_ok=True)
            (nd / "cpumap").write_text(cpumask(cpus) + "\n")
            (nd / "cpulist").write_text(cpulist(cpus) + "\n")
            (nd / "distance").write_text(" ".join("10" if m == node else "20" for m in nodes) + "\n")
            (nd / "meminfo").write_text(f"Node {node} MemTotal:       16777216 kB\nNode {node} MemFree:"
                                        f"        8388608 kB\n")
            for c in cpus:
                cd = cpu_dir / f"cpu{c}"
                top = cd / "topology"
                top.mkdir(parents=True, exist_ok=True)
                (cd / "online").write_text("1\n")
                vals = {
                    "physical_package_id": str(pkg), "die_id": "0", "core_id": str(c - cpus[0]),
                    "cluster_id": str(c - cpus[0]),
                    "thread_siblings": cpumask([c]), "thread_siblings_list": str(c),
                    "core_cpus": cpumask([c]), "core_cpus_list": str(c),
                    "core_siblings": cpumask(cpus), "core_siblings_list": cpulist(cpus),
                    "package_cpus": cpumask(cpus), "package_cpus_list": cpulist(cpus),
                    "die_cpus": cpumask(cpus), "die_cpus_list": cpulist(cpus),
                }
                for k, v in vals.items():
                    (top / k).write_text(v + "\n")
                self._link(nd / f"cpu{c}", cd)
        proc = self.root_dir / "proc"
        proc.mkdir(parents=True, exist_ok=True)
        (proc / "cpuinfo").write_text("".join(
            f"processor\t: {c}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
            f"physical id\t: {nodes.index(n)}\ncore id\t\t: {c - node_cpus[n][0]}\n\n"
            for n in nodes for c in node_cpus[n]))
