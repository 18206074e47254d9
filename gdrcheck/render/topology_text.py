"""``gdrcheck topology`` as a tree: root complexes, ports, switches and the devices that matter."""

from __future__ import annotations

from typing import List

from gdrcheck.pcie.topology import Topology
from gdrcheck.render.layout import put, wrap
from gdrcheck.units import human_bytes, speed_text

INTERESTING = ("gpu", "nic", "nvme", "nvswitch")
LABEL = {
    "root_port": "root port", "switch_upstream": "switch", "switch_downstream": "downstream port",
    "bridge": "bridge", "host_bridge": "host bridge", "gpu": "GPU", "nic": "NIC", "nvme": "NVMe",
    "nvswitch": "NVSwitch", "other": "",
}
STYLE = {"gpu": "bold green", "nic": "bold cyan", "nvme": "bold magenta", "nvswitch": "yellow",
         "switch_upstream": "bold"}



def _link_text(topo: Topology, bdf: str) -> str:
    link = topo.by_bdf[bdf].link
    if link.cur_speed is None and link.cur_width is None and link.max_speed is None:
        return ""
    cur = f"{speed_text(link.cur_speed)} x{link.cur_width or '?'}"
    low = ((link.cur_width and link.max_width and link.cur_width < link.max_width)
           or (link.cur_speed and link.max_speed and link.cur_speed < link.max_speed))
    if low:
        return f"{cur} (max {speed_text(link.max_speed)} x{link.max_width or '?'}) [below max]"
    return cur


def device_line(topo: Topology, bdf: str) -> str:
    d = topo.by_bdf[bdf]
    kind = topo.kind[bdf]
    parts: List[str] = [bdf]
    label = LABEL.get(kind, kind)
    if kind == "gpu" and d.gpu_index is not None:
        label = f"GPU{d.gpu_index}"
    if label:
        parts.append(label)
    if d.name:
        parts.append(d.name)
    elif d.vendor is not None and d.device is not None:
        parts.append(f"[{d.vendor:04x}:{d.device:04x}]")
    names = list(d.netdevs) + list(d.rdma_devices) + list(d.nvme_names)
    if names:
        parts.append("(" + ", ".join(names) + ")")
    link = _link_text(topo, bdf)
    if link:
        parts.append(link)
    big = [b for b in d.bars if b.size >= (256 << 20) or (kind == "gpu" and b.prefetchable)]
    if big and kind in INTERESTING:
        parts.append("BAR " + ", ".join(f"{b.index}:{human_bytes(b.size)}{' unset' if b.unset else ''}"
                                        for b in big))
    return "  ".join(parts)


def _keep(topo: Topology, bdf: str, show_all: bool, memo: dict) -> bool:
    if show_all:
        return True
    got = memo.get(bdf)
    if got is not None:
        return got
    if topo.kind[bdf] in INTERESTING:
        memo[bdf] = True
        return True
    memo[bdf] = any(_keep(topo, c, show_all, memo) for c in topo.children.get(bdf, ()))
    return memo[bdf]


def render_topology(topo: Topology, console, show_all: bool = False) -> None:
    from rich.text import Text

    snap = topo.snap
    put(console, Text(f"PCIe topology of {snap.hostname or snap.label} ({snap.input_kind})", style="bold"))
    memo: dict = {}
    nodes = []
    for root in topo.roots():
        tops = [b for b in topo.children.get(None, ()) if topo.by_bdf[b].root == root]
        kept = [b for b in tops if _keep(topo, b, show_all, memo)]
        if not kept and not show_all:
            continue
        numa = topo.root_numa(root) if snap.numa_known else None
        nodes.append((Text(f"root bus {root}" + (f"  NUMA {numa}" if numa is not None else "  NUMA ?"),
                           style="bold"), kept))
    for i, (label, kept) in enumerate(nodes):
        last = i == len(nodes) - 1
        _branch(console, label, "", last)
        _add(topo, console, kept, show_all, memo, "    " if last else "\u2502   ")
    if not show_all:
        total = len(topo.by_bdf)
        shown = sum(1 for v in memo.values() if v)
        if total > shown:
            put(console, f"({total - shown} other functions not shown; --all shows every device)")
    for c in snap.collectors:
        if c.status != "ok":
            put(console, f"note: {c.name}: {c.status}: {c.detail}" + (f" ({c.hint})" if c.hint else ""), 6)
    for n in snap.notes:
        put(console, f"note: {n}", 6)
    if not topo.by_bdf:
        put(console, "no PCI functions found in this input")


def _branch(console, label, prefix: str, last: bool) -> None:
    """One tree node: its guide, then its label, wrapped under itself with the guides kept."""
    from rich.text import Text

    head = prefix + ("\u2514\u2500\u2500 " if last else "\u251c\u2500\u2500 ")
    more = prefix + ("    " if last else "\u2502   ")
    lines = wrap(label, max(console.width - len(head), 20), 0)
    for j, piece in enumerate(lines):
        console.print(Text.assemble((head if j == 0 else more, "dim"), piece), soft_wrap=True)


def _add(topo: Topology, console, bdfs, show_all: bool, memo: dict, prefix: str) -> None:
    from rich.text import Text

    for i, b in enumerate(bdfs):
        last = i == len(bdfs) - 1
        kind = topo.kind[b]
        _branch(console, Text(device_line(topo, b), style=STYLE.get(kind, "")), prefix, last)
        kids = [c for c in topo.children.get(b, ()) if _keep(topo, c, show_all, memo)]
        _add(topo, console, kids, show_all, memo, prefix + ("    " if last else "\u2502   "))
