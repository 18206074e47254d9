"""The PCIe tree of a ``topology`` document, pruned to what matters, for the diagram renderers.

Pure functions of the document (no snapshot): the SVG of ``gdrcheck report`` and
``gdrcheck topology --format dot`` draw the same tree from the same JSON.
"""

from __future__ import annotations

from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import field, record
from gdrcheck.units import speed_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

INTERESTING = ("gpu", "nic", "nvme", "nvswitch")
KIND_LABEL = {
    "root_port": "Root port", "switch_upstream": "Switch", "switch_downstream": "Downstream port",
    "bridge": "Bridge", "host_bridge": "Host bridge", "gpu": "GPU", "nic": "NIC", "nvme": "NVMe",
    "nvswitch": "NVSwitch", "other": "Function",
}
GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# words pci.ids vendor names carry that a label has no room for ("NVIDIA Corporation AD102GL")
SHORTER = lazy_pattern(r"(?<=\w) (?:Corporation|Technologies|Electronics Co Ltd|Co\., Ltd\.|Inc\.)(?= )")


@record
class Node:
    dev: dict[str, Any]
    children: list[Node] = field(default_factory=list)

    @property
    def bdf(self) -> str:
        return self.dev["bdf"]

    @property
    def kind(self) -> str:
        return self.dev.get("kind") or "other"


@record
class Root:
    root: str
    numa: Optional[int]
    top: list[Node]


@record
class Forest:
    roots: list[Root]
    hidden: int  # functions not drawn (nothing of interest below them)
    total: int


def build(doc: dict[str, Any], show_all: bool = False) -> Forest:
    """The forest of ``doc['devices']``; without ``show_all`` only paths to GPUs, NICs, NVMe, NVSwitches."""
    devices = doc.get("devices") or []
    by_bdf = {d["bdf"]: d for d in devices}
    kids: dict[Optional[str], list[str]] = {}
    for d in devices:
        p = d.get("parent")
        kids.setdefault(p if p in by_bdf else None, []).append(d["bdf"])
    keep = _kept(by_bdf, kids, show_all)
    nodes = {d["bdf"]: Node(d) for d in devices if d["bdf"] in keep}
    for b, node in nodes.items():
        p = node.dev.get("parent")
        if p in nodes:
            nodes[p].children.append(node)
    numa = {r["root"]: r.get("numa_node") for r in doc.get("roots") or []}
    order = [r["root"] for r in doc.get("roots") or []]
    for d in devices:
        if d["root"] not in numa:
            numa[d["root"]] = None
            order.append(d["root"])
    tops = [b for b in kids.get(None, ()) if b in nodes]
    tops += _orphans(nodes, tops)
    roots = []
    for r in order:
        top = [nodes[b] for b in tops if by_bdf[b]["root"] == r]
        if top or show_all:
            roots.append(Root(r, numa[r], top))
    return Forest(roots, len(devices) - len(keep), len(devices))


def _orphans(nodes: dict[str, Node], tops: list[str]) -> list[str]:
    """Functions whose parents loop (damaged input): cut the loop and draw them on their root bus."""
    seen = set()
    stack = list(tops)
    while stack:
        b = stack.pop()
        if b not in seen:
            seen.add(b)
            stack.extend(c.bdf for c in nodes[b].children)
    out = []
    for b, node in nodes.items():
        if b not in seen:
            parent = nodes.get(node.dev.get("parent"))
            if parent is not None and node in parent.children:
                parent.children.remove(node)
            out.append(b)
            stack = [b]
            while stack:
                x = stack.pop()
                if x not in seen:
                    seen.add(x)
                    stack.extend(c.bdf for c in nodes[x].children)
    return out


def _kept(by_bdf, kids, show_all: bool) -> set:
    """Functions to draw: every one with ``show_all``, else those with something of interest at or below."""
    if show_all:
        return set(by_bdf)
    keep = set()
    for b, d in by_bdf.items():
        if d.get("kind") not in INTERESTING:
            continue
        seen = set()
        while b is not None and b not in keep and b not in seen:  # parents may loop in damaged input
            seen.add(b)
            keep.add(b)
            p = by_bdf[b].get("parent")
            b = p if p in by_bdf else None
    return keep


def device_names(doc: dict[str, Any]) -> dict[str, str]:
    """Short names as ``gdrcheck pairs`` prints them (GPU<index>, NIC<n>, NVMe<n>): the one numbering,
    :func:`gdrcheck.documents.labels.device_labels` (a NIC that is not a GPUDirect NIC gets no number)."""
    from gdrcheck.documents.labels import device_labels

    return device_labels(list(doc.get("devices") or []))


def _speed(v) -> str:
    g = GEN.get(float(v)) if v is not None else None
    return f"Gen{g}" if g else speed_text(v)


def link_text(dev: dict[str, Any]) -> tuple[str, bool]:
    """(``Gen4 x16`` or ``Gen4 x8 (max Gen4 x16)``, whether the link runs below its maximum)."""
    link = dev.get("link") or {}
    cs, cw, ms, mw = (link.get(k) for k in ("current_speed_gts", "current_width", "max_speed_gts", "max_width"))
    cur = _link(cs, cw)
    if not cur:  # the input does not say (an lspci tree, an XML with empty link attributes)
        return "", False
    low = bool((cw and mw and cw < mw) or (cs and ms and cs < ms))
    if low and dev.get("kind") == "gpu" and not (cw and mw and cw < mw):
        # an idle GPU lowers its link speed to save power (Gen1 at rest): normal, not a degraded link
        return f"{cur} (idle; max {_link(ms, mw)})", False
    if low:
        return f"{cur} (max {_link(ms, mw)})", True
    return cur, False


def _link(speed, width) -> str:
    return " ".join(t for t in (_speed(speed) if speed else "", f"x{width}" if width else "") if t)


def acs_redirect(dev: dict[str, Any]) -> Optional[bool]:
    """True when the bridge's ACS sends peer traffic up to the root complex; None when not readable."""
    acs = dev.get("acs")
    if not acs:
        return False
    return acs.get("redirect")


def acs_text(dev: dict[str, Any]) -> str:
    acs = dev.get("acs") or {}
    bits = acs.get("redirect_bits") or []
    return "ACS redirect" + (f" ({' '.join(bits)})" if bits else "")


def names_text(dev: dict[str, Any]) -> str:
    return " ".join(list(dev.get("rdma_devices") or []) + list(dev.get("netdevs") or [])
                    + list(dev.get("nvme_names") or []))


def short_name(name: str) -> str:
    """A device name without the company-form words pci.ids carries; the vendor word stays
    ("NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]" -> "NVIDIA AD102GL [RTX 6000 Ada Generation]")."""
    return SHORTER.sub("", name)


def ident(dev: dict[str, Any]) -> str:
    """The device's name as the input gave it, else its vendor:device IDs."""
    if dev.get("model"):  # a GPU the input names by its device id only: its model from gdrcheck's table
        return f"NVIDIA {dev['model']}"
    if dev.get("name"):
        return short_name(dev["name"])
    v, d = dev.get("vendor_id"), dev.get("device_id")
    if v and d:
        return f"[{v[2:]}:{d[2:]}]"
    return ""
