"""``gdrcheck topology --format dot``: the PCIe tree of a topology document as Graphviz DOT.

One cluster per NUMA node holding one cluster per root bus; each PCI function a
box labelled with its kind, name and address; links below their maximum drawn
dashed orange with the widths on the edge; bridges that redirect peer traffic
(ACS) drawn red. ``dot -Tsvg`` or ``dot -Tpdf`` makes the picture.
"""

from __future__ import annotations

from gdrcheck.render import tree_model as tm

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

FILL = {"gpu": "#e4f4e2", "nic": "#ddf1f6", "nvme": "#f3e5f5", "nvswitch": "#fff4d6",
        "switch_upstream": "#e8ecf0", "switch_downstream": "#f1f4f6", "root_port": "#ffffff"}
PEN = {"gpu": "#2e7d32", "nic": "#00838f", "nvme": "#8e24aa", "nvswitch": "#c99700", "switch_upstream": "#455a64"}


def q(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _label(dev: dict, names: dict[str, str]) -> str:
    kind = dev.get("kind") or "other"
    head = names.get(dev["bdf"]) or tm.KIND_LABEL.get(kind, kind)
    lines = [head] if dev.get("synthetic") else [head, dev["bdf"]]  # a made-up address is never shown
    ident = tm.ident(dev)
    if ident:
        lines.append(ident if len(ident) <= 40 else ident[:39] + "\u2026")
    extra = tm.names_text(dev)
    if extra:
        lines.append(extra)
    link, _low = tm.link_text(dev)
    if link:
        lines.append(link)
    acs = tm.acs_redirect(dev)
    if acs:
        lines.append(tm.acs_text(dev))
    return "\n".join(lines)


def render_dot(doc: dict, show_all: bool = False) -> str:
    forest = tm.build(doc, show_all=show_all)
    names = tm.device_names(doc)
    host = doc.get("host") or (doc.get("input") or {}).get("label") or "this input"
    out: list[str] = [
        "digraph pcie {",
        f"  graph [rankdir=LR, fontname=\"Helvetica\", fontsize=12, labelloc=t, "
        f"label={q('PCIe topology of ' + host)}, nodesep=0.15, ranksep=0.5];",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, fillcolor="#ffffff", '
        'color="#8a97a3"];',
        '  edge [color="#7b8894", arrowhead=none, fontname="Helvetica"];',
    ]
    shown_roots = {r["root"] for r in doc.get("roots") or []}  # a root bus outside them: placed in no tree shown
    groups: dict[Optional[int], list[tm.Root]] = {}
    unplaced: list[tm.Node] = []
    for r in forest.roots:
        if r.root in shown_roots and not all(n.dev.get("synthetic") for n in r.top):
            groups.setdefault(r.numa, []).append(r)
        else:
            unplaced.extend(r.top)
    edges: list[str] = []
    for n, numa in enumerate(sorted(groups, key=lambda x: (x is None, x if x is not None else 0))):
        title = f"NUMA node {numa}" if numa is not None else "NUMA node not known"
        out.append(f"  subgraph cluster_numa_{n} {{")
        out.append(f'    label={q(title)}; style="filled"; fillcolor="#f4f7fa"; color="#cdd6df";')
        for r in groups[numa]:
            rid = "root:" + r.root
            out.append(f"    subgraph {q('cluster_root_' + r.root)} {{")
            out.append(f'      label={q("root bus " + r.root)}; style="rounded"; color="#607080";')
            out.append(f'      {q(rid)} [label={q("root bus" + chr(10) + r.root)}, shape=cds, fillcolor="#fdfdfd"];')
            stack = [(rid, node) for node in reversed(r.top)]
            while stack:
                parent, node = stack.pop()
                out.append("      " + _node(node.dev, names))
                edges.append("  " + _edge(parent, node.dev))
                stack.extend((node.bdf, c) for c in reversed(node.children))
            out.append("    }")
        out.append("  }")
    if unplaced:  # no made-up root bus: the input does not show where these sit
        out.append("  subgraph cluster_unplaced {")
        out.append(f'    label={q("not placed in a PCIe tree (the input does not show where they sit)")}; '
                   'style="dashed"; color="#8a97a3";')
        for node in unplaced:
            out.append("    " + _node(node.dev, names))
        out.append("  }")
    out.extend(edges)
    if forest.hidden:
        out.append(f"  // {forest.hidden} of {forest.total} PCI functions lead to no GPU, NIC, NVMe or NVSwitch "
                   "(--all draws them)")
    out.append("}")
    return "\n".join(out) + "\n"


def _node(dev: dict, names: dict[str, str]) -> str:
    kind = dev.get("kind") or "other"
    attrs = [f"label={q(_label(dev, names))}", f"fillcolor={q(FILL.get(kind, '#fafafa'))}"]
    acs = tm.acs_redirect(dev)
    if acs:
        attrs += ['color="#c62828"', "penwidth=2.5"]
    elif kind in PEN:
        attrs.append(f"color={q(PEN[kind])}")
    if kind in ("gpu", "nic", "nvme", "switch_upstream"):
        attrs.append('fontname="Helvetica-Bold"' if kind != "switch_upstream" else "penwidth=1.5")
    return f"{q(dev['bdf'])} [{', '.join(attrs)}];"


def _edge(parent: str, dev: dict) -> str:
    link, low = tm.link_text(dev)
    attrs = []
    if low:
        attrs = ['color="#d97a00"', "style=dashed", "penwidth=1.8", f"label={q(link)}", 'fontcolor="#b35c00"',
                 "fontsize=9"]
    return f"{q(parent)} -> {q(dev['bdf'])}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";"
