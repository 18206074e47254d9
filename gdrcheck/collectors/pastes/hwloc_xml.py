"""An hwloc XML (``lstopo --of xml``, hwloc 1.x, 2.x and 3.0) as a Snapshot.

How the file maps onto the model:

* **PCI functions** are ``Bridge`` objects with a ``pci_busid`` and ``PCIDev``
  objects. ``pci_type="CCSS [VVVV:DDDD] [SVVV:SDDD] RR[ PP]"`` gives class,
  ids, subsystem, revision and, in hwloc 3.0, the prog-if. hwloc 1.x/2.x omit
  the prog-if; class ``0108`` is then taken as NVM Express (``0x010802``), the
  only non-volatile-memory interface servers ship. An all-zero ``pci_type``
  (unreadable ids) leaves class and ids unknown.
* **Root buses**: a host bridge is a ``Bridge`` with ``bridge_type="0-1"``,
  ``bridge_pci="DDDD:[BB-SS]"`` and no ``pci_busid``; it is not a PCI function.
  Its root bus is ``DDDD:BB``, and the functions directly below it sit on that
  bus (``parent`` None). Every other function's parent is the enclosing bridge.
* **NUMA** comes from the CPU-side object the host bridge hangs under: its
  ``nodeset``, mapped to a NUMA os_index through the ``NUMANode`` objects (a
  nodeset bit is a NUMA os_index when no NUMANode says otherwise). A nodeset
  naming several NUMA nodes (I/O attached to the whole machine) is unknown.
* ``pci_link_speed`` is hwloc's GB/s figure (lanes x per-lane rate), which
  cannot be split into speed and width: it is kept in ``extra`` as
  ``hwloc_link_gb_s`` and the link itself is left unknown.
* **OS devices** name the Linux devices: network interfaces -> ``netdevs``,
  OpenFabrics devices (``mlx5_0``) -> ``rdma_devices``, NVMe block devices
  (``nvme0n1``) -> ``nvme_names`` (controller ``nvme0``), ``nvmlN`` -> the GPU's
  NVML index. ``osdev_type`` is an enum before hwloc 3.0 and a bit mask since.
* **NVLink**: hwloc stores it as the ``NVLinkBandwidth`` distance matrix (MB/s,
  filled by its NVML backend). A GPU-GPU entry becomes an :class:`NvLink`; GPU
  to NVSwitch entries are summed into one link to ``"nvswitch"``; GPU to CPU
  (POWER) links are left out with a note. Links are counted at 20000 MB/s
  (NVLink 1, P100) or 25000 MB/s (NVLink 2-4), the figures hwloc uses. A file
  made without the NVML backend cannot show NVLink (``shows_nvlink`` False).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from types import MappingProxyType

from gdrcheck.collectors.clip import clip_name
from gdrcheck.collectors.pastes.nccl_xml import NVSWITCH, is_rdma_name, mask_to_cpulist
from gdrcheck.collectors.pastes.xml_safe import parse_xml_safely
from gdrcheck.errors import InputError
from gdrcheck.model import CollectorStatus, Link, NvLink, PciFunction, Snapshot, bdf_key, frozen_map, norm_bdf
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

MAX_DEPTH = 512  # objects: machine/package/caches/... plus the PCI tree
_PCI_TYPE = lazy_pattern(r"^\s*([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\] \[([0-9a-f]{4}):([0-9a-f]{4})\] "
                       r"([0-9a-f]{2})(?: ([0-9a-f]{2}))?", re.I)
_BRIDGE_PCI = lazy_pattern(r"^\s*([0-9a-f]{1,8}):\[([0-9a-f]{2})-([0-9a-f]{2})\]", re.I)
_NVME_BLOCK = lazy_pattern(r"^(nvme\d+)(?:c\d+)?n\d+$")
_NVML = lazy_pattern(r"^nvml(\d+)$")
PER_LINK_MBS = {1: 20000, 2: 25000}


def _nodeset_bits(text: Optional[str]) -> Optional[list[int]]:
    cpulist = mask_to_cpulist(text)
    if cpulist is None:
        return None
    bits: list[int] = []
    for part in cpulist.split(","):
        a, _, b = part.partition("-")
        bits.extend(range(int(a), int(b or a) + 1))
    return bits


class _Dev:
    """Fields of one PCI function while the walk is under way."""

    def __init__(self, bdf: str, parent: Optional[str], root: str, numa: Optional[int], el: ET.Element) -> None:
        self.bdf, self.parent, self.root, self.numa, self.el = bdf, parent, root, numa, el
        self.netdevs: list[str] = []
        self.rdma: list[str] = []
        self.nvme: list[str] = []
        self.gpu_index: Optional[int] = None
        self.gpu_model: Optional[str] = None
        self.nvml = False


def _osdev_kinds(el: ET.Element, major: int) -> tuple[bool, bool, bool, bool]:
    """(network, openfabrics, storage, gpu) from osdev_type, by hwloc generation."""
    try:
        t = int(el.get("osdev_type") or "-1")
    except ValueError:
        t = -1
    if major >= 3:
        return bool(t & 16) and t >= 0, bool(t & 32) and t >= 0, bool(t & 1) and t >= 0, bool(t & 4) and t >= 0
    return t == 2, t == 3, t == 0, t == 1


def _infos(el: ET.Element) -> dict[str, str]:
    return {i.get("name") or "": i.get("value") or "" for i in el if i.tag == "info"}


class _Reader:
    def __init__(self, label: str, lines: dict[int, int], major: int) -> None:
        self.label, self.lines, self.major = label, lines, major
        self.devs: dict[str, _Dev] = {}
        self.by_gp: dict[str, tuple[str, str]] = {}  # "Type:gp" -> ("pci", bdf) | ("cpu", "") | ("other", "")
        self.numa_of_bit: dict[int, int] = {}
        self.root_numa: dict[str, Optional[int]] = {}
        self.notes: list[str] = []
        self.nvml_seen = False

    def fail(self, el: ET.Element, why: str) -> InputError:
        return InputError(f"{self.label}: line {self.lines.get(id(el), 0)}: {why}")

    def numa_of(self, nodeset: Optional[str]) -> Optional[int]:
        bits = _nodeset_bits(nodeset)
        if not bits or len(bits) != 1:
            return None
        return self.numa_of_bit.get(bits[0], bits[0])

    def walk(self, top: ET.Element) -> None:
        for el in top.iter("object"):  # NUMANode map first (iterative in C)
            if el.get("type") == "NUMANode" and el.get("os_index") is not None:
                bits = _nodeset_bits(el.get("nodeset"))
                if bits and len(bits) == 1 and (el.get("os_index") or "").isdigit():
                    self.numa_of_bit[bits[0]] = int(el.get("os_index") or 0)
        # (element, nodeset of the nearest CPU-side object, parent bdf, root, depth)
        stack: list[tuple[ET.Element, Optional[str], Optional[str], Optional[str], int]] = [
            (c, None, None, None, 1) for c in reversed(list(top)) if c.tag == "object"]
        while stack:
            el, nodeset, parent, root, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise self.fail(el, f"objects nest more than {MAX_DEPTH} deep")
            typ = el.get("type") or ""
            gp = el.get("gp_index")
            if el.get("nodeset") is not None and typ not in ("Bridge", "PCIDev", "OSDev"):
                nodeset = el.get("nodeset")
                if gp:
                    self.by_gp[f"{typ}:{gp}"] = ("cpu", "")
            child_parent, child_root = parent, root
            if typ == "Bridge" and not el.get("pci_busid"):
                m = _BRIDGE_PCI.match(el.get("bridge_pci") or "")
                if not m:
                    raise self.fail(el, f"host bridge without a readable bridge_pci ({el.get('bridge_pci')!r})")
                child_root = f"{int(m.group(1), 16):04x}:{m.group(2).lower()}"
                child_parent = None
                self.root_numa.setdefault(child_root, self.numa_of(nodeset))
            elif typ in ("Bridge", "PCIDev"):
                dev = self._add(el, nodeset, parent, root)
                if dev is not None:
                    child_parent, child_root = dev.bdf, dev.root
                    if gp:
                        self.by_gp[f"{typ}:{gp}"] = ("pci", dev.bdf)
            elif typ == "OSDev":
                self._osdev(el, parent, gp)
            for c in reversed(list(el)):
                if c.tag == "object":
                    stack.append((c, nodeset, child_parent, child_root, depth + 1))

    def _add(self, el: ET.Element, nodeset: Optional[str], parent: Optional[str],
             root: Optional[str]) -> Optional[_Dev]:
        raw = el.get("pci_busid") or ""
        try:
            bdf = norm_bdf(raw)
        except ValueError:
            raise self.fail(el, f"pci_busid={raw!r} is not a PCI address") from None
        if bdf in self.devs:
            self.notes.append(f"{bdf} appears twice; the first one is kept")
            return None
        if root is None:  # no host bridge above it: its own bus is the root bus
            root = bdf.rsplit(":", 1)[0]
            parent = None
            self.root_numa.setdefault(root, self.numa_of(nodeset))
        dev = _Dev(bdf, parent, root, self.numa_of(nodeset), el)
        self.devs[bdf] = dev
        return dev

    def _osdev(self, el: ET.Element, parent: Optional[str], gp: Optional[str]) -> None:
        name = clip_name((el.get("name") or "").strip())
        net, ofed, storage, gpu = _osdev_kinds(el, self.major)
        sub = el.get("subtype") or ""
        dev = self.devs.get(parent) if parent else None
        m = _NVML.match(name)
        if m or sub == "NVML":
            self.nvml_seen = True
        if gp:
            self.by_gp[f"OSDev:{gp}"] = ("pci", dev.bdf) if dev is not None and (gpu or m) else ("other", "")
        if dev is None or not name:
            return
        if ofed or (not net and not storage and not gpu and is_rdma_name(name) and el.get("osdev_type") is None):
            dev.rdma.append(name)
        elif net:
            dev.netdevs.append(name)
        elif storage:
            mm = _NVME_BLOCK.match(name)
            if mm and mm.group(1) not in dev.nvme:
                dev.nvme.append(mm.group(1))
        if m:
            dev.nvml = True
            dev.gpu_index = int(m.group(1))
        if gpu:
            dev.gpu_model = dev.gpu_model or _infos(el).get("GPUModel")

    # -- NVLink ----------------------------------------------------------------

    def nvlinks(self, top: ET.Element) -> tuple[bool, tuple[NvLink, ...]]:
        found = False
        direct: dict[tuple[str, str], int] = {}
        fabric: dict[str, int] = {}
        cpu_links = 0
        for dist in top:
            if dist.tag not in ("distances2", "distances2hetero") or dist.get("name") != "NVLinkBandwidth":
                continue
            found = True
            keys, values = self._matrix(dist)
            n = len(keys)
            for i in range(n):
                for j in range(i + 1, n):
                    bw = max(values[i * n + j], values[j * n + i])
                    if bw <= 0:
                        continue
                    ki, kj = self.by_gp.get(keys[i], ("other", "")), self.by_gp.get(keys[j], ("other", ""))
                    gi = ki[0] == "pci" and self._is_gpu(ki[1])
                    gj = kj[0] == "pci" and self._is_gpu(kj[1])
                    if gi and gj:
                        a, b = sorted((ki[1], kj[1]), key=bdf_key)
                        direct[(a, b)] = direct.get((a, b), 0) + self._links(a, bw)
                    elif gi or gj:
                        g, other = (ki, kj) if gi else (kj, ki)
                        if other[0] == "cpu":
                            cpu_links += 1
                        else:
                            fabric[g[1]] = fabric.get(g[1], 0) + self._links(g[1], bw)
        if cpu_links:
            self.notes.append(f"{cpu_links} GPU-to-CPU NVLink connection(s) (POWER) are not GPU peer links; "
                              "not counted")
        links = [NvLink(a, b, c, source="hwloc-xml") for (a, b), c in direct.items()]
        links += [NvLink(g, NVSWITCH, c, source="hwloc-xml") for g, c in fabric.items()]
        return found, tuple(sorted(links, key=lambda x: (bdf_key(x.a), x.b)))

    def _matrix(self, dist: ET.Element) -> tuple[list[str], list[int]]:
        hetero = dist.tag == "distances2hetero"
        typ = dist.get("type") or "OSDev"
        keys: list[str] = []
        values: list[int] = []
        for part in dist:
            words = (part.text or "").split()
            if part.tag == "indexes":
                keys.extend(w if hetero else f"{typ}:{w}" for w in words)
            elif part.tag in ("u64values", "values"):
                try:
                    values.extend(int(float(w)) for w in words)
                except ValueError:
                    raise self.fail(part, "NVLinkBandwidth holds a value that is not a number") from None
        try:
            n = int(dist.get("nbobjs") or len(keys))
        except ValueError:
            n = len(keys)
        if n != len(keys) or len(values) != n * n:
            raise self.fail(dist, f"NVLinkBandwidth matrix is inconsistent ({len(keys)} objects, "
                                  f"{len(values)} values for nbobjs={n})")
        return keys, values

    def _is_gpu(self, bdf: str) -> bool:
        d = self.devs.get(bdf)
        return d is not None and d.nvml

    def _links(self, gpu: str, bw: int) -> int:
        model = (self.devs[gpu].gpu_model or "") if gpu in self.devs else ""
        if "P100" in model:
            per = PER_LINK_MBS[1]
        elif bw % PER_LINK_MBS[2] == 0:
            per = PER_LINK_MBS[2]
        elif bw % PER_LINK_MBS[1] == 0:
            per = PER_LINK_MBS[1]
        else:
            per = PER_LINK_MBS[2]
            self.notes.append(f"NVLink bandwidth {bw} MB/s at {gpu} is not a whole number of links; rounded")
        return max(1, round(bw / per))

    # -- result ------------------------------------------------------------------

    def function(self, d: _Dev) -> PciFunction:
        el = d.el
        m = _PCI_TYPE.match(el.get("pci_type") or "")
        cls = vendor = device = sv = sd = rev = None
        if m:
            base, vendor, device, sv, sd, rev = (int(m.group(i), 16) for i in range(1, 7))
            progif = int(m.group(7), 16) if m.group(7) else (0x02 if base == 0x0108 else 0x00)
            cls = (base << 8) | progif
            if not (base or vendor or device):
                cls = vendor = device = sv = sd = rev = None
                self.notes.append(f"{d.bdf}: pci_type is all zeros (ids unreadable when the file was made)")
        elif el.get("pci_type"):
            raise self.fail(el, f"pci_type={el.get('pci_type')!r} is not hwloc's format")
        hint = "nvswitch" if (el.get("subtype") or "") == "NVSwitch" else ("gpu" if d.nvml else None)
        info = _infos(el)
        name = " ".join(x for x in (info.get("PCIVendor"), info.get("PCIDevice")) if x) or None
        extra: dict[str, object] = {}
        try:
            extra["hwloc_link_gb_s"] = float(el.get("pci_link_speed") or "")
        except ValueError:
            pass
        return PciFunction(
            bdf=d.bdf, root=d.root, parent=d.parent, class_code=cls, vendor=vendor, device=device,
            subsys_vendor=sv, subsys_device=sd, revision=rev, numa_node=d.numa, name=clip_name(name), kind_hint=hint,
            link=Link(), netdevs=tuple(sorted(set(d.netdevs))), rdma_devices=tuple(sorted(set(d.rdma))),
            nvme_names=tuple(sorted(d.nvme)), gpu_index=d.gpu_index, extra=MappingProxyType(extra),
        )


def parse_hwloc_xml(text: str, label: str) -> Snapshot:
    """Read an hwloc XML export; damaged or unsafe input is an InputError."""
    top, lines = parse_xml_safely(text, label, allow_doctype=True)
    if top.tag != "topology":
        raise InputError(f"{label}: not an hwloc XML (root element <{top.tag}>, expected <topology>)")
    version = (top.get("version") or "1").strip()
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise InputError(f"{label}: <topology version={version!r}> is not a version number") from None
    r = _Reader(label, lines, major)
    r.walk(top)
    has_matrix, nvlinks = r.nvlinks(top)
    shows_nvlink = has_matrix or r.nvml_seen
    if not shows_nvlink:
        r.notes.append("made without hwloc's NVML backend: the file cannot show NVLink")
    devices = tuple(sorted((r.function(d) for d in r.devs.values()), key=lambda x: bdf_key(x.bdf)))
    roots = set(r.root_numa) | {d.root for d in devices}
    gpus = sum(1 for d in r.devs.values() if d.nvml)
    return Snapshot(
        input_kind="hwloc-xml",
        label=label,
        devices=devices,
        roots=tuple(sorted(roots, key=lambda x: tuple(int(p, 16) for p in x.split(":")))),
        root_numa=frozen_map(r.root_numa),
        numa_known=any(d.numa_node is not None for d in devices) or not devices,
        shows_nvlink=shows_nvlink,
        nvlinks=nvlinks,
        collectors=(CollectorStatus("hwloc-xml", "ok", f"hwloc {version}: {len(devices)} PCI functions"
                                    + (f", {gpus} NVML GPUs" if gpus else "")),),
        notes=tuple(r.notes),
    )
