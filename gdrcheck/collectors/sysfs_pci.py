"""PCI functions from sysfs (``/sys/bus/pci/devices``), live or from a ``--from`` tree.

Each ``/sys/bus/pci/devices/<bdf>`` link resolves to ``/sys/devices/pciDDDD:BB/...``;
the path's components are the chain of bridges above the function, so one pass
over the directory gives the whole tree (Documentation/ABI/testing/sysfs-bus-pci in the kernel tree).

Two things the listing does not always hold, read the way hwloc reads them:

* A bridge on a function's path that ``/sys/bus/pci/devices`` does not list (a
  trimmed capture, a bridge hidden by firmware): the function's parent is the
  nearest listed bridge above it (hwloc places it by bus number, which gives the
  same bridge), and the hop is kept in ``unlisted_upstream`` and said in a note.
* A function without a ``numa_node`` file (trimmed captures, POWER9 here) but
  with ``local_cpus`` / ``local_cpulist``: its NUMA node is the one node whose
  CPUs those are (hwloc attaches a PCI bus by its ``local_cpus`` alone:
  ``topology-linux.c`` ``hwloc_linux_backend_get_pci_busid_cpuset`` and
  ``pci-common.c`` ``hwloc_pcidisc_tree_attach`` at hwloc-2.9.0).

Where ``config`` is read (bridges always; endpoints when the command asks), the ids, subsystem
ids, bus numbers and link state come from it, as the kernel fills those attribute files
(:mod:`gdrcheck.collectors.config_header`); the files are read for the rest and wherever config
cannot say (read short without root, an SR-IOV VF, a class a kernel fixup rewrote).

A root bus's NUMA node is that of the functions directly on it (the kernel gives
every function below a root bus the bus's node; hwloc asks the bus's first
function). Only where none of them says anything does a function further down
speak for the bus.
"""

from __future__ import annotations

from gdrcheck.io.source import Source
from gdrcheck.model import Bar, CollectorStatus, Link, PciFunction, is_bdf, norm_bdf
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

DEVICES = "/sys/bus/pci/devices"
_ROOT_RE = lazy_pattern(r"^pci([0-9a-f]{4,}):([0-9a-f]{2})$")
_SPEED_RE = lazy_pattern(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")

# include/linux/ioport.h
IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000
IORESOURCE_MEM_64 = 0x100000
IORESOURCE_UNSET = 0x20000000


def parse_int(text: Optional[str], base: int = 0) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text.strip(), base)
    except ValueError:
        return None


def parse_speed(text: Optional[str]) -> Optional[float]:
    """``16.0 GT/s PCIe`` / ``8 GT/s`` -> 16.0 / 8.0; ``Unknown`` -> None."""
    if not text:
        return None
    m = _SPEED_RE.match(text)
    return float(m.group(1)) if m else None


_NO_REGION = "0x0000000000000000 0x0000000000000000 0x0000000000000000"


def parse_resource(text: Optional[str]) -> tuple[Bar, ...]:
    """sysfs ``resource``: ``start end flags`` per line; only lines holding a region."""
    if not text:
        return ()
    bars = []
    for i, line in enumerate(text.splitlines()):
        if line == _NO_REGION:  # most of the file: the kernel writes every unused resource as zeros
            continue
        parts = line.split()
        if len(parts) != 3:
            continue
        try:
            start, end, flags = (int(p, 16) for p in parts)
        except ValueError:
            continue
        if end == 0 and flags == 0:
            continue
        size = end - start + 1 if end >= start else 0
        bars.append(Bar(index=i, start=start, size=size, flags=flags,
                        is_64bit=bool(flags & IORESOURCE_MEM_64),
                        prefetchable=bool(flags & IORESOURCE_PREFETCH),
                        unset=bool(flags & IORESOURCE_UNSET)))
    return tuple(bars)


def parse_cpumask(text: Optional[str]) -> Optional[frozenset[int]]:
    """sysfs ``local_cpus`` (``%*pb``: 32-bit hex words, most significant first) -> CPU numbers."""
    if not text or not text.strip():
        return None
    value = 0
    for word in text.strip().split(","):
        try:
            value = (value << 32) | int(word or "0", 16)
        except ValueError:
            return None
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def parse_cpulist(text: Optional[str]) -> Optional[frozenset[int]]:
    """sysfs ``local_cpulist`` / node ``cpulist`` (``0-3,8``) -> CPU numbers; ``""`` -> empty."""
    if text is None:
        return None
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            return None
        if hi < lo or hi - lo > 1 << 16:
            return None
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


_NODE_RE = lazy_pattern(r"^node(\d+)$")


class _NodeCpus:
    """``/sys/devices/system/node/node<N>/cpulist``, read once and only when a function needs it."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self._nodes: Optional[dict[int, frozenset[int]]] = None

    def nodes(self) -> dict[int, frozenset[int]]:
        if self._nodes is None:
            self._nodes = {}
            for n in self.src.listdir("/sys/devices/system/node"):
                m = _NODE_RE.match(n)
                if m:
                    cpus = parse_cpulist(self.src.read_line(f"/sys/devices/system/node/{n}/cpulist"))
                    if cpus:
                        self._nodes[int(m.group(1))] = cpus
        return self._nodes

    def node_of(self, cpus: Optional[frozenset[int]]) -> Optional[int]:
        """The one NUMA node whose CPUs these are; None when they span nodes or match none."""
        if not cpus:
            return None
        hit = [n for n, have in self.nodes().items() if have & cpus]
        return hit[0] if len(hit) == 1 else None


def _chain(real: str) -> tuple[Optional[str], list[str]]:
    """Root bus and the PCI functions of a resolved sysfs path, top first.

    A nested root (Intel VMD ``pci10000:00`` below an endpoint) restarts the
    chain: the VMD domain is its own root bus.
    """
    root = None
    chain: list[str] = []
    for comp in real.split("/"):
        m = _ROOT_RE.match(comp)
        if m:
            root = f"{m.group(1)}:{m.group(2)}"
            chain = []
        elif root is not None and is_bdf(comp):
            chain.append(comp)
    return root, chain


def _class_links(src: Source, cls: str) -> dict[str, list[str]]:
    """``/sys/class/<cls>/<name>/device`` -> {bdf: [names]}."""
    out: dict[str, list[str]] = {}
    for name in src.listdir(f"/sys/class/{cls}"):
        real = src.realpath(f"/sys/class/{cls}/{name}/device")
        if not real:
            continue
        comp = real.rstrip("/").rsplit("/", 1)[-1]
        if is_bdf(comp):
            out.setdefault(norm_bdf(comp), []).append(name)
    return out


def _wants_config(cls: Optional[int], endpoint_config: bool, has_nvme: bool) -> bool:
    """Bridges always (port type, ACS); endpoints when asked (Resizable BAR) or, with NVMe
    present, GPUs and NVMe (the kernel's P2PDMA walk looks at their ACS too). Reading a
    passed-through GPU's config space costs about 20 ms in a VM, so it is never done idly."""
    if cls is None or endpoint_config:
        return True
    if (cls >> 8) in (0x0604, 0x0609):
        return True
    return has_nvme and ((cls >> 16) == 0x03 or cls == 0x010802 or (cls >> 8) == 0x1200)


def collect_sysfs_pci(src: Source, endpoint_config: bool = True, cpulists: bool = True
                      ) -> tuple[tuple[PciFunction, ...], dict[str, Optional[int]], CollectorStatus, tuple[str, ...]]:
    """Read every PCI function under ``/sys/bus/pci/devices``: (functions, NUMA node of each root bus,
    status, notes on what the listing did not hold). ``cpulists``: each function's ``local_cpulist`` is read
    (a probe pins its workers by it); without, only where there is no ``numa_node`` to place the function by,
    and a recording source reads it always, so that a snapshot holds it."""
    cpulists = cpulists or src.recording
    names = src.listdir(DEVICES)
    if not names:
        why = src.why(DEVICES)
        return (), {}, CollectorStatus("sysfs-pci", "unavailable",
                                       f"{DEVICES}: {why}" if why != "missing" else f"no {DEVICES}"), ()
    netdevs = _class_links(src, "net")
    rdma = _class_links(src, "infiniband")
    nvme = _class_links(src, "nvme")
    node_cpus = _NodeCpus(src)
    devices: list[PciFunction] = []
    # root bus -> what its functions say of its NUMA node: (on the root bus itself?, bdf, node or None)
    said: dict[str, list[tuple[bool, str, Optional[int]]]] = {}
    from_cpus: list[tuple[str, int]] = []
    unlisted: dict[tuple[tuple[str, ...], Optional[str]], list[str]] = {}
    short_config = 0
    bdfs = {n: norm_bdf(n) for n in names if is_bdf(n)}  # each listed name's address, normalised once
    listed = set(bdfs.values())
    classes = {n: parse_int(src.read_line(f"{DEVICES}/{n}/class"), 16) for n in bdfs}
    has_nvme = any(c == 0x010802 for c in classes.values())
    for name, bdf in bdfs.items():
        base = f"{DEVICES}/{name}"
        placed = _place(src, base, name)
        if placed is None:
            continue
        root_label, chain = placed
        parent, hops = _listed_parent(chain, listed, bdfs)
        if hops:
            unlisted.setdefault((hops, parent), []).append(bdf)
        numa, said_numa, cpulist, by_cpus = _numa(src, base, node_cpus, cpulists)
        if by_cpus:
            from_cpus.append((bdf, numa))
        config = (src.read_bytes(f"{base}/config", 4096)
                  if _wants_config(classes.get(name), endpoint_config, has_nvme) else None)
        if config is not None and len(config) < 256:
            short_config += 1
        physfn = src.realpath(f"{base}/physfn") if src.readlink(f"{base}/physfn") else None
        if said_numa:
            said.setdefault(root_label, []).append((parent is None, bdf, numa))
        else:
            said.setdefault(root_label, [])
        devices.append(_function(src, base, bdf, root_label, parent, hops, classes.get(name), numa, cpulist,
                                 config, physfn, (netdevs, rdma, nvme)))
    root_numa = {r: _root_node(s) for r, s in said.items()}
    devices = _number_gpus(devices)
    detail = f"{len(devices)} functions"
    if short_config:
        detail += f"; config space past 64 bytes unreadable for {short_config} (not root)"
    return (tuple(devices), root_numa, CollectorStatus("sysfs-pci", "ok", detail),
            _notes(unlisted, from_cpus))


def _place(src: Source, base: str, name: str) -> Optional[tuple[str, list[str]]]:
    """(root bus as ``dddd:bb``, the chain of functions from the root down to it) of a listed function; None
    where its link leads nowhere."""
    real = src.realpath(base)
    if real is None:
        return None
    root, chain = _chain(real)
    if root is None or not chain:
        # a device outside any pciDDDD:BB (odd platform): treat its own bus as root
        dom, bus, _ = name.split(":")
        root, chain = f"{dom}:{bus}", [name]
    dom_s, bus_s = root.split(":")
    return f"{int(dom_s, 16):04x}:{int(bus_s, 16):02x}", chain


def _numa(src: Source, base: str, node_cpus: _NodeCpus, cpulists: bool = True
          ) -> tuple[Optional[int], bool, Optional[str], bool]:
    """A function's NUMA node, whether sysfs said one, its ``local_cpulist`` (None when not asked for and not
    needed), and whether the node was taken from its local CPUs (no ``numa_node`` file: the node those CPUs
    belong to, as hwloc does)."""
    numa_text = src.read_line(f"{base}/numa_node")
    numa = parse_int(numa_text)
    cpulist = src.read_line(f"{base}/local_cpulist") if cpulists or numa_text is None else None
    said_numa = numa_text is not None and numa is not None
    if numa is not None and numa < 0:
        numa = None
    if numa_text is not None:
        return numa, said_numa, cpulist, False
    cpus = parse_cpumask(src.read_line(f"{base}/local_cpus"))
    if cpus is None:
        cpus = parse_cpulist(cpulist)
    numa = node_cpus.node_of(cpus)
    return numa, cpus is not None and bool(node_cpus.nodes()), cpulist, numa is not None


# attribute files config space can stand in for: (field, file, parser)
_HEADER_FILES = (("vendor", "vendor", 16), ("device", "device", 16), ("subsys_vendor", "subsystem_vendor", 16),
                 ("subsys_device", "subsystem_device", 16), ("revision", "revision", 16),
                 ("secondary_bus", "secondary_bus_number", 0), ("subordinate_bus", "subordinate_bus_number", 0))


def _config_facts(src: Source, base: str, class_code: Optional[int], config: Optional[bytes],
                  physfn: Optional[str]) -> dict[str, object]:
    """The header and link facts: from ``config`` where it says them as the kernel shows them
    (:mod:`gdrcheck.collectors.config_header`), from the attribute files for the rest. A recording
    source reads the files too, so that a snapshot replays under any command's reading policy."""
    from gdrcheck.collectors.config_header import header_facts, link_facts

    got: dict[str, object] = {}
    if config is not None and physfn is None:
        got.update(header_facts(config, class_code))
        got.update(link_facts(config))
    recording = src.recording
    for key, fname, base_n in _HEADER_FILES:
        if key not in got or recording:
            value = parse_int(src.read_line(f"{base}/{fname}"), base_n)
            got.setdefault(key, value)
    for key, fname in (("cur_speed", "current_link_speed"), ("max_speed", "max_link_speed")):
        if key not in got or recording:
            got.setdefault(key, parse_speed(src.read_line(f"{base}/{fname}")))
    for key, fname in (("cur_width", "current_link_width"), ("max_width", "max_link_width")):
        if key not in got or recording:
            got.setdefault(key, parse_int(src.read_line(f"{base}/{fname}")) or None)
    return got


def _function(src: Source, base: str, bdf: str, root_label: str, parent: Optional[str],
              hops: tuple[str, ...], class_code: Optional[int], numa: Optional[int], cpulist: Optional[str],
              config: Optional[bytes], physfn: Optional[str], links) -> PciFunction:
    """One function's facts from its sysfs directory (``links``: the net, infiniband and nvme class links)."""
    netdevs, rdma, nvme = links
    f = _config_facts(src, base, class_code, config, physfn)
    return PciFunction(
        bdf=bdf,
        root=root_label,
        parent=parent,
        unlisted_upstream=hops,
        class_code=class_code,
        vendor=f["vendor"],
        device=f["device"],
        subsys_vendor=f["subsys_vendor"],
        subsys_device=f["subsys_device"],
        revision=f["revision"],
        numa_node=numa,
        local_cpulist=cpulist,
        bars=parse_resource(src.read_text(f"{base}/resource")),
        link=Link(cur_speed=f["cur_speed"], cur_width=f["cur_width"], max_speed=f["max_speed"],
                  max_width=f["max_width"]),
        driver=src.link_name(f"{base}/driver"),
        iommu_group=src.link_name(f"{base}/iommu_group"),
        physfn=norm_bdf(physfn.rsplit("/", 1)[-1]) if physfn and is_bdf(physfn.rsplit("/", 1)[-1]) else None,
        secondary_bus=f["secondary_bus"],
        subordinate_bus=f["subordinate_bus"],
        config=config,
        netdevs=tuple(sorted(netdevs.get(bdf, ()))),
        rdma_devices=tuple(sorted(rdma.get(bdf, ()))),
        nvme_names=tuple(sorted(nvme.get(bdf, ()))),
    )


def _listed_parent(chain: list[str], listed: set, bdfs: dict[str, str]) -> tuple[Optional[str], tuple[str, ...]]:
    """The nearest bridge above the function that /sys/bus/pci/devices lists, and the bridges between
    the two that it does not list (top first). ``bdfs``: the listed names' addresses, normalised."""
    hops: list[str] = []
    for comp in reversed(chain[:-1]):
        b = bdfs.get(comp) or norm_bdf(comp)
        if b in listed:
            return b, tuple(reversed(hops))
        hops.append(b)
    return None, tuple(reversed(hops))


def _root_node(said: list[tuple[bool, str, Optional[int]]]) -> Optional[int]:
    """A root bus's NUMA node from what its functions say: those directly on the bus decide (all the
    nodes they name agree, or none is known); only when none of them says anything, the functions below."""
    on_bus = [n for top, _b, n in said if top]
    pool = on_bus if on_bus else [n for _top, _b, n in said]
    nodes = {n for n in pool if n is not None}
    return nodes.pop() if len(nodes) == 1 else None


_NOTE_ITEMS = 8  # functions named in one note; the rest are counted
_NOTE_HOPS = 6  # unlisted bridges given a note each; the rest share one


def _named(items: list[str]) -> str:
    more = f" and {len(items) - _NOTE_ITEMS} more" if len(items) > _NOTE_ITEMS else ""
    return ", ".join(items[:_NOTE_ITEMS]) + more


def _notes(unlisted: dict[tuple[tuple[str, ...], Optional[str]], list[str]],
           from_cpus: list[tuple[str, int]]) -> tuple[str, ...]:
    from gdrcheck.model import bdf_key

    notes: list[str] = []
    groups = sorted(unlisted.items(), key=lambda kv: bdf_key(kv[0][0][0]))
    for (hops, parent), below in groups[:_NOTE_HOPS]:
        where = f"placed below {parent}, the nearest bridge listed above" if parent else "placed on the root bus"
        notes.append(f"{_named(sorted(below, key=bdf_key))}: the sysfs path runs through {', '.join(hops)}, "
                     f"which {DEVICES} does not list (a trimmed capture, or a bridge hidden by firmware); {where}")
    if len(groups) > _NOTE_HOPS:
        rest = sorted({h for (hops, _p), _b in groups[_NOTE_HOPS:] for h in hops}, key=bdf_key)
        count = sum(len(b) for _k, b in groups[_NOTE_HOPS:])
        notes.append(f"{count} more functions sit below bridges {DEVICES} does not list ({_named(rest)}); "
                     f"each is placed below the nearest listed bridge (topology --json: unlisted_upstream)")
    if from_cpus:
        shown = [f"{b} -> {n}" for b, n in sorted(from_cpus, key=lambda x: bdf_key(x[0]))]
        notes.append(f"no numa_node file: NUMA node taken from local_cpus, the node those CPUs belong to "
                     f"({_named(shown)})")
    return tuple(notes)


def _number_gpus(devices: list[PciFunction]) -> list[PciFunction]:
    """nvidia-smi numbers NVIDIA GPUs in PCI bus order (its default)."""
    from gdrcheck.model import bus_order
    from gdrcheck.pcie.kinds import is_nvidia_gpu
    from gdrcheck.record import replace

    index = bus_order(d.bdf for d in devices if is_nvidia_gpu(d))
    return [replace(d, gpu_index=index[d.bdf]) if d.bdf in index else d for d in devices]
