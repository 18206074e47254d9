"""An NCCL topology XML (``NCCL_TOPO_FILE`` / ``NCCL_TOPO_DUMP_FILE``) as a Snapshot.

The file is NCCL's own reduced view of the machine (``docs/nccl.md``):
``<system version> > <cpu numaid> > <pci busid> > (<pci> | <gpu> | <nic>)``.
What it does and does not say, and how each piece lands in the model:

* **Parents.** Each ``<pci>`` is a PCI function; its parent is the enclosing
  ``<pci>``, or ``None`` directly under ``<cpu>``. NCCL's sysfs walk jumps two
  levels at a time, so a whole switch is one ``<pci>`` (its upstream port) and
  root ports are dropped; a ``<pci>`` holding other ``<pci>`` elements is
  therefore given ``kind_hint="switch_upstream"``.
* **Root buses.** The file names no root bus. gdrcheck uses the bus of the
  top-level ``<pci>`` (``dddd:bb`` of its busid) as the root of everything
  below it. That bus is either the root bus itself (a device integrated on it,
  as in VMs) or the secondary bus of a root port NCCL skipped, so two
  top-level nodes on different buses come out as different roots: NODE when
  they share a ``<cpu>``, SYS across ``<cpu>`` elements with different NUMA
  ids. nvidia-smi might call the first PHB (two root ports of one root bus);
  NCCL calls both cases PHB, and so does its GDR/P2P level test, so the
  verdicts do not change. A vendor-declared switch (``ffff:ff:..`` or vendor
  ``0xffff``/``0x0000``, written by AWS and Azure to describe hardware the VM
  cannot see) has no real bus, so its root is the bus of the lowest real
  address below it. When one bus is claimed by top-level nodes of two NUMA
  nodes (hand-written files), that root's NUMA node is left unknown and a
  note says so; each device keeps its own ``<cpu>``'s NUMA id.
* **NUMA.** ``numa_node`` is the enclosing ``<cpu numaid>`` (``-1`` or
  missing: unknown).
* **Kinds.** ``kind_hint`` is ``gpu`` for a ``<pci>`` holding ``<gpu>``, ``nic``
  for one holding ``<nic>`` (a NIC is recognised this way even when the class
  is missing), ``switch_upstream`` as above.
* **Links.** ``link_speed``/``link_width`` are the usable speed of the hop as
  NCCL computed it; they are recorded as the link's maximum and the current
  state is left unknown. All spellings are accepted (``8 GT/s``,
  ``32 GT/s PCIe/s``, ``""``); width ``0`` is unknown.
* **NVLink.** ``<nvlink target count tclass>`` under ``<gpu>`` becomes an
  :class:`NvLink` to the target GPU, or to ``"nvswitch"`` when the target is an
  NVSwitch or not a GPU (NCCL treats every non-GPU remote as the NVSwitch
  fabric). Links to itself (an Azure artefact) and to a POWER CPU are skipped
  with a note. A file ``shows_nvlink`` only when it holds an ``<nvlink>`` or
  ``<xgmi>`` element, or is RCCL's dump (``<gpu gcn>``: RCCL writes an ``<xgmi>``
  for every one-hop xGMI peer, so one without shows none); otherwise GPU links
  are not shown (NCCL fills a ``<gpu>`` without ``<nvlink>`` from NVML on the
  node, v2.30.7 ``xml.cc:930-995``, so a hand-written file says nothing of
  them; the NCCL rules read NCCL's own dump as NCCL saw it where a decision
  needs it). RCCL's ``<xgmi>`` links become GPU links with ``source="xgmi"``,
  not NVLink; ``<c2c>`` and Broadcom ``<pcilink>`` targets are kept in the
  function's ``extra`` only; ``<gpu>``/``<net>`` attributes likewise
  (``nccl_gpu``, ``nccl_nets``), and a declared switch has ``vendor_declared``.
* ``<system version="2">`` (RCCL) is read like version 1, with a note that
  NCCL itself refuses to load it.

Security: parsed with defusedxml; a DTD, entity declaration or external
reference is refused (:class:`InputError`, one line). The tree is walked
iteratively, and nesting deeper than any PCIe hierarchy can be is refused.
:func:`mask_to_cpulist` is shared with the hwloc reader, and
:func:`gdrcheck.collectors.pastes.xml_safe.parse_xml_safely` with every XML reader.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from types import MappingProxyType

from gdrcheck.collectors.clip import clip_name
from gdrcheck.collectors.pastes.xml_safe import MAX_XML_ELEMENTS, parse_xml_safely  # noqa: F401 - shared here too
from gdrcheck.errors import InputError
from gdrcheck.model import CollectorStatus, Fact, Link, NvLink, PciFunction, Snapshot, bdf_key, frozen_map, norm_bdf
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

MAX_PCI_DEPTH = 64  # PCIe allows 256 buses; no real tree is more than a dozen bridges deep
_SPEED_RE = lazy_pattern(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", re.I)
_RDMA_NAME = lazy_pattern(r"^(mlx\d|mthca|bnxt_re|irdma|i40iw|efa|rdmap|qedr|hfi1|hns|erdma|ionic|rxe|siw|"
                        r"ocrdma|cxgb\d|vmw_pvrdma|mana)", re.I)
NVSWITCH = "nvswitch"

# ---------------------------------------------------------------------------
# shared helpers


def mask_to_cpulist(mask: Optional[str]) -> Optional[str]:
    """``"000000ff,ffff0000"`` / ``"0x00555555"`` / hwloc's ``"0x3,,0x1"`` -> ``"0-7,16-31"`` style list."""
    if not mask:
        return None
    value = 0
    for word in mask.strip().split(","):
        word = word.strip().lower()
        if word.startswith("0x"):
            word = word[2:]
        if "..." in word:
            return None  # hwloc's infinite set
        try:
            value = (value << 32) | (int(word, 16) if word else 0)
        except ValueError:
            return None
    cpus, i = [], 0
    while value:
        if value & 1:
            cpus.append(i)
        value >>= 1
        i += 1
    if not cpus:
        return None
    ranges: list[str] = []
    start = prev = cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        ranges.append(f"{start}-{prev}" if prev != start else f"{start}")
        if c is not None:
            start = prev = c
    return ",".join(ranges)


def parse_speed(text: Optional[str]) -> Optional[float]:
    if not text:
        return None
    m = _SPEED_RE.match(text)
    return float(m.group(1)) if m else None


def is_rdma_name(name: str) -> bool:
    return bool(_RDMA_NAME.match(name))


# ---------------------------------------------------------------------------
# NCCL XML


class _Ctx:
    """Everything the walk has learnt, turned into a Snapshot at the end."""

    def __init__(self, label: str, lines: dict[int, int]) -> None:
        self.label = label
        self.nvidia_numbering = True  # <gpu dev> is the NVML index (not in RCCL files)
        self.lines = lines
        self.notes: list[str] = []
        self.funcs: dict[str, dict] = {}  # bdf -> fields for PciFunction
        self.top_of: dict[str, str] = {}  # bdf -> top-level <pci> bdf
        self.top_numa: dict[str, Optional[int]] = {}
        self.gpu_bdfs: list[str] = []
        self.raw_links: list[tuple[str, str, int, Optional[int], int]] = []  # gpu, target, count, tclass, line
        self.has_gpu_element = False
        self.has_link_element = False  # any <nvlink> or <xgmi>: the file states GPU links
        self.xgmi_links: list[tuple[str, str, int]] = []
        self.first_cpu: Optional[dict[str, object]] = None  # CPU node 0's arch/vendor: NCCL's P2P default keys on it

    def line(self, el: ET.Element) -> int:
        return self.lines.get(id(el), 0)

    def fail(self, el: ET.Element, why: str) -> InputError:
        return InputError(f"{self.label}: line {self.line(el)}: {why}")

    def hex_attr(self, el: ET.Element, name: str) -> Optional[int]:
        v = (el.get(name) or "").strip()
        if not v:
            return None
        try:
            return int(v, 16)
        except ValueError:
            raise self.fail(el, f"<{el.tag}> {name}={v!r} is not a hexadecimal number") from None

    def int_attr(self, el: ET.Element, name: str) -> Optional[int]:
        v = (el.get(name) or "").strip()
        if not v:
            return None
        try:
            return int(v, 0) if v.lower().startswith("0x") else int(v)
        except ValueError:
            raise self.fail(el, f"<{el.tag}> {name}={v!r} is not a number") from None


def _check_text(ctx: _Ctx, el: ET.Element) -> None:
    for chunk in (el.text, *(c.tail for c in el)):
        if chunk and chunk.strip():
            raise ctx.fail(el, f"unexpected text {chunk.strip()[:40]!r} inside <{el.tag}>")


def _is_declared(bdf: str, vendor: Optional[int], device: Optional[int]) -> bool:
    if bdf.startswith("ffff:ff:"):
        return True
    return vendor in (0xFFFF, 0x0000) and device in (0xFFFF, 0x0000, None)


def _add_pci(ctx: _Ctx, el: ET.Element, parent: Optional[str], top: Optional[str],
             numa: Optional[int], cpulist: Optional[str]) -> Optional[str]:
    raw = (el.get("busid") or "").strip()
    try:
        bdf = norm_bdf(raw)
    except ValueError:
        raise ctx.fail(el, f"<pci> busid={raw!r} is not a PCI address") from None
    if bdf in ctx.funcs:
        ctx.notes.append(f"{bdf} appears twice (line {ctx.line(el)}); the first one is kept")
        return None
    _check_text(ctx, el)
    cls = ctx.hex_attr(el, "class")
    vendor = ctx.hex_attr(el, "vendor")
    device = ctx.hex_attr(el, "device")
    hint = _kind_hint({c.tag for c in el}, cls, vendor)
    extra: dict[str, object] = {}
    if _is_declared(bdf, vendor, device) and (hint == "switch_upstream" or (cls or 0) >> 8 == 0x0604):
        extra["vendor_declared"] = True
        ctx.notes.append(f"{bdf} is a switch declared by the file's author (no such hardware address); "
                         "what sits below it is the vendor's statement, not a measured PCIe path")
    width = ctx.int_attr(el, "link_width")
    netdevs: list[str] = []
    rdma: list[str] = []
    gpu_index = None
    for child in el:
        if child.tag == "gpu":
            gpu_index = _add_gpu(ctx, child, bdf, vendor, extra)
        elif child.tag == "pcilink":
            try:  # a Broadcom switch's virtual link to another switch (getBcmLinks)
                extra["pcilinks"] = tuple(extra.get("pcilinks", ())) + (norm_bdf(child.get("target") or ""),)
            except ValueError:
                ctx.notes.append(f"line {ctx.line(child)}: <pcilink> target is not a PCI address; ignored")
        elif child.tag == "nic":
            _add_nic(child, extra, rdma, netdevs)
    ctx.funcs[bdf] = dict(
        bdf=bdf, parent=parent, class_code=cls, vendor=vendor, device=device,
        subsys_vendor=ctx.hex_attr(el, "subsystem_vendor"), subsys_device=ctx.hex_attr(el, "subsystem_device"),
        numa_node=numa, local_cpulist=cpulist, kind_hint=hint,
        link=Link(max_speed=parse_speed(el.get("link_speed")), max_width=width or None),
        netdevs=tuple(sorted(set(netdevs))), rdma_devices=tuple(sorted(set(rdma))), gpu_index=gpu_index,
        extra=MappingProxyType(extra),
    )
    ctx.top_of[bdf] = top or bdf
    return bdf


def _kind_hint(kids: set, cls: Optional[int], vendor: Optional[int]) -> Optional[str]:
    """What a <pci> is, from what it holds (a GPU, a NIC, more <pci>) or its class (an NVSwitch)."""
    if "gpu" in kids:
        return "gpu"
    if "nic" in kids:
        return "nic"
    if "pci" in kids:
        return "switch_upstream"
    if cls is not None and (cls >> 8) == 0x0680 and vendor in (None, 0x10DE):
        return "nvswitch"
    return None


def _add_gpu(ctx: _Ctx, gpu: ET.Element, bdf: str, vendor: Optional[int], extra: dict[str, object]) -> Optional[int]:
    """A <pci>'s <gpu>: its attributes and links into ``extra`` and ``ctx``; the GPU's index where NCCL's is
    the driver's."""
    _check_text(ctx, gpu)
    ctx.has_gpu_element = True
    ctx.gpu_bdfs.append(bdf)
    extra["nccl_gpu"] = MappingProxyType(dict(gpu.attrib))
    if gpu.get("gcn"):  # RCCL's dump writes an <xgmi> for every one-hop xGMI peer (xml.cc:692-719@rocm-6.2.2)
        ctx.has_link_element = True
    gpu_index = ctx.int_attr(gpu, "dev") if ctx.nvidia_numbering and vendor != 0x1002 else None
    xgmi = []
    for link in gpu:
        if link.tag == "nvlink":
            target = (link.get("target") or "").strip()
            count = ctx.int_attr(link, "count")
            tclass = ctx.hex_attr(link, "tclass")
            ctx.raw_links.append((bdf, target, 1 if count is None else count, tclass, ctx.line(link)))
        elif link.tag == "c2c":
            extra["c2c"] = MappingProxyType(dict(link.attrib))
        elif link.tag == "xgmi":
            xgmi.append((link.get("target") or "", ctx.int_attr(link, "count") or 0))
            ctx.xgmi_links.append((bdf, (link.get("target") or "").strip(), ctx.int_attr(link, "count") or 1))
        if link.tag in ("nvlink", "xgmi"):
            ctx.has_link_element = True
    if xgmi:
        extra["xgmi"] = tuple(xgmi)
    return gpu_index


def _add_nic(nic: ET.Element, extra: dict[str, object], rdma: list[str], netdevs: list[str]) -> None:
    """A <pci>'s <nic>: its <net> entries, each name an RDMA device or a network interface."""
    nets = [dict(n.attrib) for n in nic if n.tag == "net"]
    extra["nccl_nets"] = tuple(MappingProxyType(n) for n in nets)
    for n in nets:
        name = clip_name((n.get("name") or "").strip())
        if name:
            (rdma if is_rdma_name(name) else netdevs).append(name)


def _walk(ctx: _Ctx, system: ET.Element) -> None:
    _check_text(ctx, system)
    cpus = 0
    for cpu in system:
        if cpu.tag != "cpu":
            ctx.notes.append(f"<{cpu.tag}> under <system> (line {ctx.line(cpu)}) is not part of NCCL's format; ignored")
            continue
        cpus += 1
        _check_text(ctx, cpu)
        if ctx.first_cpu is None:
            ctx.first_cpu = {"arch": cpu.get("arch"), "vendor": cpu.get("vendor"), "familyid": cpu.get("familyid"),
                             "modelid": cpu.get("modelid"), "line": ctx.line(cpu)}
        numa = ctx.int_attr(cpu, "numaid")
        if numa is not None and numa < 0:
            numa = None
        cpulist = mask_to_cpulist(cpu.get("affinity"))
        # (element, parent bdf, top-level bdf, depth)
        stack: list[tuple[ET.Element, Optional[str], Optional[str], int]] = []
        for child in reversed(list(cpu)):
            if child.tag == "pci":
                stack.append((child, None, None, 1))
            elif child.tag == "nic":
                names = ", ".join(n.get("name") or "?" for n in child if n.tag == "net") or "?"
                ctx.notes.append(f"NIC {names} sits directly under <cpu numaid={cpu.get('numaid')}> with no PCI "
                                 "address: not a PCI function, so it is not listed")
        while stack:
            el, parent, top, depth = stack.pop()
            if depth > MAX_PCI_DEPTH:
                raise ctx.fail(el, f"<pci> elements nest more than {MAX_PCI_DEPTH} deep")
            bdf = _add_pci(ctx, el, parent, top, numa, cpulist)
            if bdf is None:
                continue
            if top is None:
                ctx.top_numa.setdefault(bdf, numa)
            for child in reversed(list(el)):
                if child.tag == "pci":
                    stack.append((child, bdf, top or bdf, depth + 1))
    if not cpus:
        ctx.notes.append("the file has no <cpu> element, so it shows no PCI function")


def _nvlinks(ctx: _Ctx) -> tuple[NvLink, ...]:
    gpus = set(ctx.gpu_bdfs)
    direct: dict[frozenset, tuple[str, str, int]] = {}
    fabric: dict[str, int] = {}
    selfs = 0
    cpu_links = 0
    for gpu, target, count, tclass, _line in ctx.raw_links:
        try:
            tb = norm_bdf(target)
        except ValueError:
            tb = None  # "fffffff:ffff:ff": remote not visible, NCCL assumes an NVSwitch
        if tb == gpu:
            selfs += 1
            continue
        if tclass == 0x068001:
            cpu_links += 1
            continue
        is_gpu = tb is not None and ((tclass is not None and tclass >> 16 in (0x03, 0x12)) or
                                     (tclass is None and tb in gpus))
        if is_gpu:
            key = frozenset((gpu, tb))
            a, b = sorted((gpu, tb), key=bdf_key)
            old = direct.get(key)
            direct[key] = (a, b, max(count, old[2] if old else 0))
        else:
            fabric[gpu] = fabric.get(gpu, 0) + count
    if selfs:
        ctx.notes.append(f"{selfs} <nvlink> element(s) name their own GPU as target; ignored (not a link to "
                         "another GPU)")
    if cpu_links:
        ctx.notes.append(f"{cpu_links} <nvlink> element(s) go to a POWER CPU; not GPU peer links")
    links = [NvLink(a, b, n, source="nccl-xml") for a, b, n in direct.values() if n > 0]
    xgmi: dict[frozenset, tuple[str, str, int]] = {}
    for gpu, target, count in ctx.xgmi_links:  # RCCL's AMD Infinity Fabric links between GPUs
        try:
            tb = norm_bdf(target)
        except ValueError:
            continue
        if tb != gpu and tb in gpus:
            a, b = sorted((gpu, tb), key=bdf_key)
            old = xgmi.get(frozenset((a, b)))
            xgmi[frozenset((a, b))] = (a, b, max(count, old[2] if old else 0))
    links += [NvLink(a, b, n, source="xgmi") for a, b, n in xgmi.values() if n > 0]
    links += [NvLink(g, NVSWITCH, n, source="nccl-xml") for g, n in fabric.items() if n > 0]
    return tuple(sorted(links, key=lambda x: (bdf_key(x.a), x.b)))


def _roots(ctx: _Ctx) -> dict[str, str]:
    """Top-level bdf -> root label (see the module docstring)."""
    below: dict[str, list[str]] = {}
    for bdf, top in ctx.top_of.items():
        if bdf != top and not ctx.funcs[bdf]["extra"].get("vendor_declared") and not bdf.startswith("ffff:ff:"):
            below.setdefault(top, []).append(bdf)
    out = {}
    for top in ctx.top_numa:
        anchor = top
        if ctx.funcs[top]["extra"].get("vendor_declared") and below.get(top):
            anchor = min(below[top], key=bdf_key)
        out[top] = anchor.rsplit(":", 1)[0]
    return out


def _parse_or_close(text: str, label: str):
    """The XML's root and lines; a file cut short is read up to its last complete tag, and the note says where
    it ends (what came after is not in this input)."""
    from gdrcheck.collectors.pastes.xml_safe import close_cut_xml

    try:
        return (*parse_xml_safely(text, label, allow_doctype=False, what="an NCCL topology XML"), "")
    except InputError as e:
        closed = close_cut_xml(text) if "damaged XML" in str(e) else None
        if closed is None:
            raise
    fixed, last_tag, last_line = closed
    root, lines = parse_xml_safely(fixed, label, allow_doctype=False, what="an NCCL topology XML")
    if root.find(".//pci") is None:
        raise InputError(f"{label}: line {last_line}: damaged XML (cut short before any complete <pci> element)")
    return root, lines, (f"the file is cut short: it ends at line {last_line} inside an element; read up to its "
                         f"last complete tag (line {last_tag}), and what came after is not in this input")


def parse_nccl_xml(text: str, label: str) -> Snapshot:
    """Read an NCCL (or RCCL) topology XML; damaged or unsafe input is an InputError."""
    root, lines, cut = _parse_or_close(text, label)
    ctx = _Ctx(label, lines)
    if cut:
        ctx.notes.append(cut)
    if root.tag == "graphs":
        raise InputError(f"{label}: an NCCL graph file (<graphs>, NCCL_GRAPH_FILE), not a topology XML")
    if root.tag != "system":
        raise InputError(f"{label}: not an NCCL topology XML (root element <{root.tag}>, expected <system>)")
    version = ctx.int_attr(root, "version")
    if version is None:
        ctx.notes.append("<system> has no version attribute; NCCL refuses to load such a file")
    elif version == 2:
        ctx.nvidia_numbering = False
        ctx.notes.append("<system version=\"2\"> is RCCL's format, read by RCCL's rules")
    elif version != 1:
        ctx.notes.append(f"<system version=\"{version}\"> is not NCCL's version 1; read as version 1")
    _walk(ctx, root)
    nvlinks = _nvlinks(ctx)
    roots = _roots(ctx)
    root_numa: dict[str, Optional[int]] = {}
    split: list[str] = []
    for top, lab in roots.items():
        n = ctx.top_numa[top]
        if lab in root_numa and root_numa[lab] != n:
            if lab not in split:
                split.append(lab)
        else:
            root_numa.setdefault(lab, n)
    for lab in split:
        root_numa[lab] = None
        ctx.notes.append(f"bus {lab} holds devices of more than one <cpu>; its NUMA node is left unknown and "
                         "pairs across those CPUs on it count as one root bus")
    devices = []
    for bdf, f in ctx.funcs.items():
        devices.append(PciFunction(root=roots[ctx.top_of[bdf]], **f))
    devices.sort(key=lambda d: bdf_key(d.bdf))
    gpus = sum(1 for d in devices if d.kind_hint == "gpu")
    nics = sum(1 for d in devices if d.kind_hint == "nic")
    numa_known = any(d.numa_node is not None for d in devices) or not devices
    return Snapshot(
        input_kind="nccl-xml",
        label=label,
        devices=tuple(devices),
        roots=tuple(sorted(root_numa, key=lambda r: tuple(int(x, 16) for x in r.split(":")))),
        root_numa=frozen_map(root_numa),
        numa_known=numa_known,
        shows_nvlink=ctx.has_link_element,
        nvlinks=nvlinks,
        collectors=(CollectorStatus("nccl-xml", "ok",
                                    f"{len(devices)} PCI functions ({gpus} <gpu>, {nics} <nic>)"),),
        notes=tuple(ctx.notes),
        host=frozen_map({"nccl_cpu": Fact(dict(ctx.first_cpu), source=f"{label}: <cpu> on line "
                                                                       f"{ctx.first_cpu['line']}")})
        if ctx.first_cpu else frozen_map({}),
    )
