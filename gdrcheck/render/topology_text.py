"""``gdrcheck topology`` as a tree: root complexes, ports, switches and the devices that matter."""

from __future__ import annotations

from gdrcheck.render.layout import put, wrap
from gdrcheck.units import human_bytes, speed_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

INTERESTING = ("gpu", "nic", "nvme", "nvswitch")
LABEL = {
    "root_port": "root port", "switch_upstream": "switch", "switch_downstream": "downstream port",
    "bridge": "bridge", "host_bridge": "host bridge", "gpu": "GPU", "nic": "NIC", "nvme": "NVMe",
    "nvswitch": "NVSwitch", "other": "",
}
STYLE = {"gpu": "bold green", "nic": "bold cyan", "nvme": "bold magenta", "nvswitch": "yellow",
         "switch_upstream": "bold"}


def _link_text(dev: dict[str, Any]) -> str:
    link = dev["link"]
    cur_speed, cur_width = link["current_speed_gts"], link["current_width"]
    max_speed, max_width = link["max_speed_gts"], link["max_width"]
    if cur_speed is None and cur_width is None and max_speed is None and max_width is None:
        return ""
    if cur_speed is None and cur_width is None:  # only the maximum shown (an NCCL XML's link_speed/link_width)
        return f"max {speed_text(max_speed)} x{max_width or '?'}"
    cur = f"{speed_text(cur_speed)} x{cur_width or '?'}"
    low = ((cur_width and max_width and cur_width < max_width)
           or (cur_speed and max_speed and cur_speed < max_speed))
    if low:
        return f"{cur} (max {speed_text(max_speed)} x{max_width or '?'}) [below max]"
    return cur


def device_line(dev: dict[str, Any]) -> str:
    """One function of the topology document as a line: address, label, name, Linux names, link, BARs."""
    kind = dev["kind"]
    label = LABEL.get(kind, kind)
    if kind == "gpu" and dev.get("gpu_index") is not None:
        label = f"GPU{dev['gpu_index']}"
    if dev.get("synthetic"):  # a device of a matrix: its name and NUMA node, no made-up address or tree
        numa = dev.get("numa_node")
        names = list(dev.get("rdma_devices", ())) + list(dev.get("netdevs", ()))
        name = (dev.get("name") or "").replace(" of nvidia-smi topo -m", "")
        head = label if kind == "gpu" else f"{label} {', '.join(names) or name}".strip()
        return f"{head}  no bus id in this input  NUMA {'?' if numa is None else numa}"
    parts: list[str] = [dev["bdf"]]
    if label:
        parts.append(label)
    if dev["name"]:
        parts.append(dev["name"])
    elif dev["vendor_id"] is not None and dev["device_id"] is not None:
        parts.append(f"[{dev['vendor_id'][2:]}:{dev['device_id'][2:]}]" + (f" {dev['model']}" if dev.get("model")
                                                                           else ""))
    names = list(dev.get("netdevs", ())) + list(dev.get("rdma_devices", ())) + list(dev.get("nvme_names", ()))
    if names:
        parts.append("(" + ", ".join(names) + ")")
    link = _link_text(dev)
    if link:
        parts.append(link)
    big = [b for b in dev["bars"] if b["size_bytes"] >= (256 << 20) or (kind == "gpu" and b["prefetchable"])]
    if big and kind in INTERESTING:
        parts.append("BAR " + ", ".join(f"{b['index']}:{human_bytes(b['size_bytes'])}{' unset' if b['unset'] else ''}"
                                        for b in big))
    return "  ".join(parts)


class _Tree:
    """The topology document's functions by address and by parent (children in document order)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.by_bdf = {d["bdf"]: d for d in doc["devices"]}
        self.children: dict[Optional[str], list[str]] = {}
        for d in doc["devices"]:
            self.children.setdefault(d["parent"], []).append(d["bdf"])
        self.memo: dict[str, bool] = {}

    def keep(self, bdf: str, show_all: bool) -> bool:
        if show_all:
            return True
        got = self.memo.get(bdf)
        if got is not None:
            return got
        if self.by_bdf[bdf]["kind"] in INTERESTING:
            self.memo[bdf] = True
            return True
        self.memo[bdf] = any(self.keep(c, show_all) for c in self.children.get(bdf, ()))
        return self.memo[bdf]


def render_topology(doc: dict[str, Any], console, show_all: bool = False) -> None:
    """The topology document (with ``input``: ``topology_doc(..., describe_input=True)``) as a tree."""
    from rich.text import Text

    given = doc.get("input") or {}
    put(console, Text(f"PCIe topology of {doc['host'] or given.get('label')} ({given.get('kind')})", style="bold"))
    tree = _Tree(doc)
    shown_roots = {r["root"] for r in doc["roots"]}  # a function on none of them: placed in no tree the input shows
    made_up = [d for d in doc["devices"] if d.get("synthetic") or d["root"] not in shown_roots]
    made_roots = {d["root"] for d in made_up} - {d["root"] for d in doc["devices"] if d not in made_up}
    nodes = []
    for root in doc["roots"]:
        if root["root"] in made_roots:
            continue
        tops = [b for b in tree.children.get(None, ()) if tree.by_bdf[b]["root"] == root["root"]]
        kept = [b for b in tops if tree.keep(b, show_all)]
        if not kept and not show_all:
            continue
        numa = root["numa_node"]
        nodes.append((Text(f"root bus {root['root']}" + (f"  NUMA {numa}" if numa is not None else "  NUMA ?"),
                           style="bold"), kept))
    for i, (label, kept) in enumerate(nodes):
        last = i == len(nodes) - 1
        _branch(console, label, "", last)
        _add(tree, console, kept, show_all, "    " if last else _guides(console)[2])
    if made_up:
        put(console, "not placed in a PCIe tree (the input does not show where they sit):")
        for d in made_up:
            numa = "" if d.get("synthetic") else f"  NUMA {'?' if d.get('numa_node') is None else d['numa_node']}"
            put(console, "  " + device_line(d) + numa, 4)
            tree.memo[d["bdf"]] = True
    if not show_all:
        total = len(tree.by_bdf)
        shown = sum(1 for v in tree.memo.values() if v)
        if total > shown:
            put(console, f"({total - shown} other functions not shown; --all shows every device)")
    for c in doc["collectors"]:
        if c["status"] != "ok":
            hint = f" ({c['hint']})" if c.get("hint") else ""
            put(console, f"note: {c['name']}: {c['status']}: {c['detail']}{hint}", 6)
    for n in doc.get("notes", ()):
        put(console, f"note: {n}", 6)
    if not tree.by_bdf:
        put(console, "no PCI functions found in this input")


UNICODE_GUIDES = ("\u2514\u2500\u2500 ", "\u251c\u2500\u2500 ", "\u2502   ")
ASCII_GUIDES = ("`-- ", "|-- ", "|   ")  # a terminal or log whose encoding has no box drawing (lspci -t's own)


def _guides(console) -> tuple:
    return ASCII_GUIDES if console.options.ascii_only else UNICODE_GUIDES


def _branch(console, label, prefix: str, last: bool) -> None:
    """One tree node: its guide, then its label, wrapped under itself with the guides kept."""
    from rich.text import Text

    g = _guides(console)
    head = prefix + (g[0] if last else g[1])
    more = prefix + ("    " if last else g[2])
    lines = wrap(label, max(console.width - len(head), 20), 0)
    for j, piece in enumerate(lines):
        console.print(Text.assemble((head if j == 0 else more, "dim"), piece), soft_wrap=True)


def _add(tree: _Tree, console, bdfs, show_all: bool, prefix: str) -> None:
    from rich.text import Text

    for i, b in enumerate(bdfs):
        last = i == len(bdfs) - 1
        dev = tree.by_bdf[b]
        _branch(console, Text(device_line(dev), style=STYLE.get(dev["kind"], "")), prefix, last)
        kids = [c for c in tree.children.get(b, ()) if tree.keep(c, show_all)]
        _add(tree, console, kids, show_all, prefix + ("    " if last else _guides(console)[2]))
