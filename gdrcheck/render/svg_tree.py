"""The PCIe tree as inline SVG: NUMA nodes as bands, root buses, ports, switches and the devices.

Left to right: root bus, root port, switch (its downstream ports folded into the
edges below it), further switches, and the devices aligned in the last column,
one row each. A band taller than a printed page is cut into several ``<svg>``
elements at the seams between root buses or switches, so a page break never
falls through a box; a switch cut in two is drawn again in each, dashed.
"""

from __future__ import annotations

from html import escape

from gdrcheck.record import field, record
from gdrcheck.render import tree_model as tm

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

MARGIN = 8
HEAD = 24  # band label strip
ROW = 34  # one device row
BOX_H = 28
ROOT_W = 84
COL_W = 168  # an inner column: box and the gap for the edges
BOX_W = 136
GAP = COL_W - BOX_W
LEAF_W = 310
ROOT_GAP = 8  # between root buses of one band
PAGE_PX = 700  # printable A4 width at 96 dpi (186 mm), the width the diagram scales to
SLICE_PX = 520  # the most one <svg> may take on a printed page: about half, so pages fill up
CHAR = {10: 5.7, 9: 5.1}  # mean glyph advance of the sans font at these sizes

KIND_CLASS = {"gpu": "k-gpu", "nic": "k-nic", "nvme": "k-nvme", "nvswitch": "k-nvs", "switch_upstream": "k-sw",
              "root_port": "k-rp", "switch_downstream": "k-sw"}


@record
class Item:
    """One drawn box: a root bus, a bridge or a device, with the rows (``lo``..``hi``) of its subtree."""

    node: Optional[tm.Node]  # None: the root bus
    root: str
    col: int
    lo: int = 0
    hi: int = 0
    via: list[dict] = field(default_factory=list)  # folded downstream ports on the edge above
    children: list[Item] = field(default_factory=list)


@record
class Band:
    numa: Optional[int]
    roots: list[Item]
    rows: list[tuple[Item, float]]  # each device row: its item and the y of its centre
    path: list[tuple[int, ...]]  # per row: ids of the items above it (to choose cuts)


def render_svgs(doc: dict, names: Optional[dict[str, str]] = None) -> tuple[list[str], tm.Forest]:
    """The diagram of a topology document: a list of ``<svg>`` elements, and the forest drawn."""
    forest = tm.build(doc)
    names = names if names is not None else tm.device_names(doc)
    bands = _bands(forest)
    depth = max((_depth(r) for b in bands for r in b.roots), default=0)
    leaf_x = MARGIN + ROOT_W + GAP + depth * COL_W
    width = leaf_x + LEAF_W + MARGIN
    scale = min(1.0, PAGE_PX / width)
    per_slice = max(8, int(SLICE_PX / scale) // ROW)
    out: list[str] = []
    for band in bands:
        cuts = _cuts(band, per_slice)
        for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
            out.append(_slice_svg(band, a, b, width, leaf_x, names, cont=i > 0))
    return out, forest


# -- layout --------------------------------------------------------------------

def _fold(node: tm.Node, via: list[dict]) -> list[tuple[tm.Node, list[dict]]]:
    """A node's children with downstream ports folded into the edge: (child, ports passed)."""
    out: list[tuple[tm.Node, list[dict]]] = []
    for c in node.children:
        if c.kind == "switch_downstream" and c.children:
            out.extend(_fold(c, via + [c.dev]))
        else:
            out.append((c, via))
    return out


def _bands(forest: tm.Forest) -> list[Band]:
    groups: dict[Optional[int], list[tm.Root]] = {}
    for r in forest.roots:
        groups.setdefault(r.numa, []).append(r)
    bands = []
    for numa in sorted(groups, key=lambda n: (n is None, n if n is not None else 0)):
        band = Band(numa, [], [], [])
        y = HEAD + ROW / 2
        for r in groups[numa]:
            item = Item(None, r.root, 0)
            band.roots.append(item)
            kids = [(n, []) for n in r.top]
            y = _place(item, kids, band, y, (len(band.roots),))
            y += ROOT_GAP
        bands.append(band)
    return bands


def _place(item: Item, kids, band: Band, y: float, path: tuple[int, ...]) -> float:
    """Give every device below ``item`` a row, depth first; return the next free y."""
    item.lo = len(band.rows)
    if not kids:
        band.rows.append((item, y))
        band.path.append(path)
        item.hi = len(band.rows) - 1
        return y + ROW
    for node, via in kids:
        child = Item(node, item.root, item.col + 1, via=via)
        item.children.append(child)
        grand = _fold(node, [])
        y = _place(child, grand, band, y, path + (id(child),))
    item.hi = len(band.rows) - 1
    return y


def _depth(item: Item) -> int:
    """The deepest column that holds an inner box (a box with children)."""
    best = item.col if item.children else 0
    for c in item.children:
        best = max(best, _depth(c))
    return best


def _cuts(band: Band, per_slice: int) -> list[int]:
    """Row indices where the band is cut into slices: at the shallowest seam in each page's last half."""
    n = len(band.rows)
    cuts = [0]
    while n - cuts[-1] > per_slice:
        start = cuts[-1]
        best, best_score = start + per_slice, None
        for i in range(start + per_slice, start + per_slice // 2, -1):
            a, b = band.path[i - 1], band.path[i]
            shared = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            if best_score is None or shared < best_score:
                best, best_score = i, shared
        cuts.append(best)
    cuts.append(n)
    return cuts


# -- drawing ---------------------------------------------------------------------

def _fit(text: str, width: float, size: int) -> str:
    room = int(width / CHAR[size])
    return text if len(text) <= room else text[:max(room - 1, 1)].rstrip() + "\u2026"


def _text(x: float, y: float, text: str, cls: str, width: float, size: int) -> str:
    return f'<text x="{x:.0f}" y="{y:.1f}" class="{cls}">{escape(_fit(text, width, size))}</text>'


def _slice_svg(band: Band, a: int, b: int, width: float, leaf_x: float, names, cont: bool) -> str:
    ys = [y for _, y in band.rows[a:b]]
    top = ys[0] - ROW / 2 - HEAD
    bottom = ys[-1] + ROW / 2 + 4
    height = bottom - top
    parts: list[str] = []
    title = f"NUMA node {band.numa}" if band.numa is not None else "NUMA node not known"
    parts.append(f'<rect x="0" y="{top:.1f}" width="{width:.0f}" height="{height:.1f}" class="band"/>')
    parts.append(f'<text x="{MARGIN}" y="{top + 16:.1f}" class="bandlabel">{escape(title)}'
                 f'{" (continued)" if cont else ""}</text>')
    for root in band.roots:
        if root.hi < a or root.lo >= b:
            continue
        _draw(root, band, a, b, leaf_x, names, parts, None)
    label = escape(title + (" (continued)" if cont else ""))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="tree" viewBox="0 {top:.1f} {width:.0f} {height:.1f}" '
            f'style="max-width:{width:.0f}px" role="img" aria-label="PCIe tree, {label}">'
            + "".join(parts) + "</svg>")


def _span(item: Item, band: Band, a: int, b: int) -> tuple[float, float]:
    lo, hi = max(item.lo, a), min(item.hi, b - 1)
    return band.rows[lo][1], band.rows[hi][1]


def _draw(item: Item, band: Band, a: int, b: int, leaf_x: float, names, parts: list[str],
          parent_xy: Optional[tuple[float, float]]) -> None:
    y0, y1 = _span(item, band, a, b)
    cut = item.lo < a or item.hi >= b
    if item.node is None:
        x, w = MARGIN, ROOT_W
        top, h = y0 - BOX_H / 2, (y1 - y0) + BOX_H
        parts.append(f'<rect x="{x}" y="{top:.1f}" width="{w}" height="{h:.1f}" rx="5" class="box k-root"/>')
        cy = (y0 + y1) / 2
        parts.append(_text(x + 8, cy - 2, "root bus", "t9 muted", w - 12, 9))
        parts.append(_text(x + 8, cy + 10, item.root, "t10 b", w - 12, 10))
        if cut:
            parts.append(_text(x + 8, cy + 21, "(continued)", "t9 muted", w - 12, 9))
        anchor = (x + w, None)
    else:
        leaf = not item.children
        x = leaf_x if leaf else MARGIN + ROOT_W + GAP + (item.col - 1) * COL_W
        w = LEAF_W if leaf else BOX_W
        full = (band.rows[item.lo][1] + band.rows[item.hi][1]) / 2
        cy = min(max(full, y0), y1)
        ghost = cy != full or (cut and not leaf)
        _box(item, x, cy, w, names, parts, ghost)
        if parent_xy is not None:
            _edge(parent_xy, (x, cy), item.via, item.node.dev, parts)
        anchor = (x + w, cy)
    for c in item.children:
        if c.hi < a or c.lo >= b:
            continue
        if anchor[1] is None:  # from the root bus box: each edge leaves at its child's height
            cy_c = min(max((band.rows[c.lo][1] + band.rows[c.hi][1]) / 2, _span(c, band, a, b)[0]),
                       _span(c, band, a, b)[1])
            _draw(c, band, a, b, leaf_x, names, parts, (anchor[0], cy_c))
        else:
            _draw(c, band, a, b, leaf_x, names, parts, anchor)


def _edge(p: tuple[float, float], c: tuple[float, float], via: list[dict], dev: dict, parts: list[str]) -> None:
    px, py = p
    cx, cy = c
    mx = px + 9
    acs = any(tm.acs_redirect(v) for v in via)
    low = any(tm.link_text(v)[1] for v in via) or tm.link_text(dev)[1]
    cls = "edge" + (" acs" if acs else "") + (" low" if low else "")
    tip = []
    for v in via:
        lt, lo = tm.link_text(v)
        bits = [f"downstream port {v['bdf']}"] + ([lt] if lt else [])
        if tm.acs_redirect(v):
            bits.append(tm.acs_text(v))
        tip.append(", ".join(bits))
    title = f"<title>{escape('; '.join(tip))}</title>" if tip else ""
    parts.append(f'<path d="M{px:.0f} {py:.1f}H{mx:.0f}V{cy:.1f}H{cx:.0f}" class="{cls}">{title}</path>')
    if acs:
        parts.append(f'<text x="{cx - 3:.0f}" y="{cy - 3:.1f}" class="t8 acs-t" text-anchor="end">ACS</text>')


def _box(item: Item, x: float, cy: float, w: float, names, parts: list[str], ghost: bool) -> None:
    dev = item.node.dev
    kind = item.node.kind
    acs = tm.acs_redirect(dev)
    link, low = tm.link_text(dev)
    cls = f"box {KIND_CLASS.get(kind, 'k-other')}" + (" acs" if acs else "") + (" low" if low else "") \
        + (" ghost" if ghost else "")
    top = cy - BOX_H / 2
    tip = [f"{tm.KIND_LABEL.get(kind, kind)} {dev['bdf']}", tm.ident(dev), link,
           tm.acs_text(dev) if acs else "", "ACS not readable" if acs is None else "",
           "drawn again: its devices continue in the next or previous diagram" if ghost else ""]
    parts.append(f'<g><title>{escape(" | ".join(t for t in tip if t))}</title>'
                 f'<rect x="{x:.0f}" y="{top:.1f}" width="{w:.0f}" height="{BOX_H}" rx="4" class="{cls}"/>')
    if item.children:  # a bridge or switch
        label = tm.KIND_LABEL.get(kind, kind)
        second = " \u00b7 ".join(t for t in (link, tm.ident(dev)) if t)
        if acs:
            second = tm.acs_text(dev) + (" \u00b7 " + second if second else "")
        y = top + (12 if second else 17.5)
        parts.append(f'<text x="{x + 6:.0f}" y="{y:.1f}" class="t10"><tspan class="b">'
                     f'{escape(label)}</tspan> {escape(_fit(dev["bdf"], w - 12 - 5.7 * len(label), 10))}</text>')
    else:
        label = names.get(dev["bdf"]) or tm.KIND_LABEL.get(kind, kind)
        extra = tm.names_text(dev)
        head = f"{dev['bdf']}" + (f"  {extra}" if extra else "")
        parts.append(f'<text x="{x + 6:.0f}" y="{top + 12:.1f}" class="t10"><tspan class="b">'
                     f'{escape(label)}</tspan> {escape(_fit(head, w - 16 - 5.7 * len(label), 10))}</text>')
        second = " \u00b7 ".join(t for t in (tm.ident(dev), link) if t)
    if second:
        parts.append(_text(x + 6, top + 24, second, "t9" + (" warn" if low else "") + (" bad" if acs else ""),
                           w - 10, 9))
    parts.append("</g>")
