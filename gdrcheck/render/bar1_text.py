"""``gdrcheck bar1`` as text: one table row per GPU, then holders, disagreements, findings and notes."""

from __future__ import annotations

from gdrcheck.render.layout import blank, grid, put
from gdrcheck.units import human_bytes, size_range_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
COLLECTORS = ("nvml", "nvidia-smi", "driver-gpus", "sysfs-pci")


def _used(g: dict[str, Any]) -> str:
    if g.get("bar1_used_bytes") is None:
        return "?"
    pct = g.get("bar1_used_pct")
    return f"{human_bytes(g['bar1_used_bytes'])}" + (f" {pct:.0f}%" if pct is not None else "")


def _short(n) -> str:
    """``64 GiB`` -> ``64G``: the ReBAR column holds three sizes."""
    text = human_bytes(n)
    return text.replace(".0 ", " ").replace(" ", "").replace("iB", "") if n is not None else "?"


def _rebar(g: dict[str, Any]) -> str:
    sizes = g.get("rebar_supported_bytes") or []
    cur = g.get("rebar_current_bytes")
    if not sizes and cur is None:
        return "-"
    return f"{_short(cur)} ({size_range_text(sizes, _short)})"


def _bus(g: dict[str, Any]) -> str:
    if g.get("sysfs_bar1_unset"):
        return "UNSET"
    return human_bytes(g["sysfs_bar1_bytes"]) if g.get("sysfs_bar1_bytes") is not None else "?"


def _gpu_name(g: dict[str, Any]) -> str:
    from gdrcheck.render.tree_model import short_name

    return short_name(g.get("name") or "")


def _process_line(p: dict[str, Any]) -> str:
    bits = [f"pid {p['pid']}"]
    if p.get("user"):
        bits.append(p["user"])
    if p.get("used_memory_bytes") is not None:
        bits.append(human_bytes(p["used_memory_bytes"]))
    return f"{p.get('name') or '?'} ({', '.join(bits)})"


def _table(gpus: list[dict[str, Any]], console) -> None:
    """One row per GPU; the name column goes under each row when the table would not fit,
    and the columns split into blocks when even that does not fit. No cell is ever cut."""
    header = ["GPU", "address", "BAR1", "used", "memory", "sysfs", "ReBAR (range)"]
    right = (2, 3, 4, 5)
    rows = [[(f"GPU{g['index']}" if g.get("index") is not None else "GPU?", ""),
             ("no bus id" if g.get("synthetic") else g["bdf"], ""),
             (human_bytes(g.get("bar1_total_bytes")), ""), (_used(g), ""), (human_bytes(g.get("fb_total_bytes")), ""),
             (_bus(g), ""), (_rebar(g), "")] for g in gpus]
    names = [_gpu_name(g) for g in gpus]
    if any(names):
        with_name = grid(header + ["name"], [r + [(n, "")] for r, n in zip(rows, names)], console.width,
                         keys=2, right=right)
        if len(with_name) == 1 and all(len(line.plain) <= console.width for line in with_name[0]):
            for line in with_name[0]:
                console.print(line, soft_wrap=True)
            return
    for b, block in enumerate(grid(header, rows, console.width, keys=2, right=right)):
        if b:
            blank(console)
        console.print(block[0], soft_wrap=True)
        for line, name in zip(block[1:], names):
            console.print(line, soft_wrap=True)
            if name and b == 0:
                put(console, "  " + name, 2)


def render_bar1(doc: dict[str, Any], console) -> None:
    from rich.text import Text

    gpus: list[dict[str, Any]] = doc.get("gpus") or []
    host = doc.get("host") or (doc.get("input") or {}).get("label") or "this node"
    if gpus:
        put(console, Text(f"GPU BAR1 on {host}", style="bold"))
        _table(gpus, console)
        sources = sorted({g.get("source") for g in gpus if g.get("source")})
        bus_names = sorted({f"resource{g['sysfs_bar1_index']}" for g in gpus if g.get("sysfs_bar1_index")})
        blank(console)
        put(console, f"BAR1, used, memory: {', '.join(sources) or 'not read'}; sysfs: the bus's BAR "
                     f"({'/'.join(bus_names) or 'resource'}); ReBAR: the Resizable BAR capability")
    elif doc.get("amd_gpus"):
        n = len(doc["amd_gpus"])
        put(console, f"{n} AMD GPU{'s' if n != 1 else ''}: BAR1 figures not read for them")
    else:
        put(console, "no NVIDIA GPU recognised in this input")
    for g in gpus:
        label = f"GPU{g['index']}" if g.get("index") is not None else g["bdf"]
        procs = g.get("processes") or []
        if procs:
            put(console, f"{label} processes: " + ", ".join(_process_line(p) for p in procs), 4)
        for d in g.get("disagreements") or []:
            said = ", ".join(f"{k} {human_bytes(v)}" for k, v in (d.get("values") or {}).items())
            put(console, f"{label} disagreement on {d['field']}: {said}", 4)
        if g.get("driver_listed") is False:
            put(console, f"{label}: not listed by the NVIDIA driver; sizes are the bus's", 4)
        elif g.get("driver_listed") is None:
            put(console, f"{label}: no driver view in this input; sizes are the bus's where it shows them", 4)
    findings = doc.get("findings") or []
    if findings:
        blank(console)
    for f in findings:
        line = Text()
        line.append(f"{f['severity']:<7} ", style=SEVERITY_STYLE.get(f["severity"], ""))
        line.append(f"{f['code']} {f['message']}")
        put(console, line, 8)
        if f.get("settle"):
            put(console, f"        to settle: {f['settle']}", 19)
    for c in doc.get("collectors") or []:
        if c.get("status") != "ok" and c.get("name") in COLLECTORS:
            put(console, f"note: {c['name']}: {c['status']}: {c['detail']}"
                          + (f" (hint: {c['hint']})" if c.get("hint") else ""), 6)
    for n in doc.get("notes") or []:
        put(console, f"note: {n}", 6)
