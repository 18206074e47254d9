"""``gdrcheck probe`` as text: grouped by check, each with its subjects, status, figures and prediction."""

from __future__ import annotations

from gdrcheck.probe import CHECKS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STYLE = {"ok": "green", "degraded": "yellow", "fail": "bold red", "unknown": "magenta", "skipped": "dim",
         "planned": "cyan"}
SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _figures(d: dict[str, Any]) -> str:
    parts = []
    for k, v in d.items():
        if k == "basis" or isinstance(v, (dict, list)):
            continue
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def _nested(d: dict[str, Any]) -> str:
    parts = []
    for k, v in d.items():
        if isinstance(v, dict) and "ok" in v:
            ok = v.get("ok")
            word = "ok" if ok else (v.get("errno") or v.get("error") or ("failed" if ok is False else "?"))
            parts.append(f"{k}: {word}")
    return "; ".join(parts)


def render_probe(doc, console) -> None:
    from rich.text import Text

    head = "Probe plan" if doc.get("dry_run") else "Probe"
    console.print(Text(f"{head} for {doc.get('host') or 'this node'}", style="bold"))
    for b in doc.get("busy") or ():
        console.print(Text(f"busy: {b}", style="yellow"))
    if doc.get("refused"):
        console.print(Text("refused: the node is busy; --force probes anyway", style="bold yellow"))
    for n in doc.get("notes") or ():
        console.print(Text(n, style="dim"))
    for check in CHECKS:
        items = [c for c in doc["checks"] if c["check"] == check]
        if items:
            _check_section(doc, check, items, console)
    if doc["findings"]:
        _findings(doc["findings"], console)
    console.print()
    console.print(Text(doc["summary_line"], style="bold"))


def _check_section(doc, check: str, items, console) -> None:
    """One check: its name, why it is planned (in a plan), then each subject's line and details."""
    from rich.text import Text

    from gdrcheck.render.layout import put

    console.print()
    console.print(Text(check, style="bold"))
    if doc.get("dry_run") and items:
        put(console, Text(f"  why: {items[0]['why']}", style="dim"), 7)
    for c in items:
        line = Text("  ")
        line.append(f"{c['status']:<8}", style=STYLE.get(c["status"], ""))
        line.append(" " + " <-> ".join(c["subjects"]))
        if c.get("numa_node") is not None or c.get("cpus"):
            line.append(f"  (NUMA {c.get('numa_node', '?')}, CPUs {c.get('cpus') or '?'})", style="dim")
        if c.get("elapsed_s") is not None:
            line.append(f"  ({c['elapsed_s']:.2f} s)", style="dim")
        put(console, line, 11)
        if c.get("reason"):
            put(console, Text(f"           {c['reason']}", style="dim"))
        _measured(c, console)
        _expected_and_predicted(c, console)
        _evidence(c, console)


def _measured(c: dict[str, Any], console) -> None:
    from rich.text import Text

    from gdrcheck.render.layout import put

    m = c.get("measured") or {}
    if m:
        figs = _figures(m)
        if figs:
            put(console, Text(f"           measured: {figs}"))
        nest = _nested(m)
        if nest:
            put(console, Text(f"           {nest}"))


def _expected_and_predicted(c: dict[str, Any], console) -> None:
    from rich.text import Text

    from gdrcheck.render.layout import put

    e = c.get("expected") or {}
    if e.get("h2d_gb_per_s") is not None:
        put(console, Text(f"           expected: about {e['h2d_gb_per_s']} GB/s each way ({e['basis']})",
                           style="dim"))
    elif e.get("basis"):
        put(console, Text(f"           expected: {e['basis']}", style="dim"))
    p = c.get("predicted") or {}
    if p.get("verdict") or p.get("nccl_reason"):
        nccl = p.get("nccl_p2p") or p.get("nccl_gdr")
        put(console, Text(f"           predicted: {p.get('verdict')} (path {p.get('path')}; NCCL "
                           f"{nccl or '?'}: {p.get('nccl_reason') or ''})", style="dim"))


def _evidence(c: dict[str, Any], console) -> None:
    from rich.text import Text

    from gdrcheck.render.layout import put

    ev = c.get("evidence") or {}
    if ev.get("error") and c["status"] not in ("ok",):
        put(console, Text(f"           evidence: {ev['error']}", style="dim"))
    for line in (ev.get("cufile_log") or [])[-2:]:
        put(console, Text(f"           cufile.log: {line}", style="dim"))
    if ev.get("left_behind"):
        put(console, Text(f"           left behind: {ev['left_behind']}", style="yellow"))


def _findings(findings, console) -> None:
    from rich.text import Text

    from gdrcheck.render.layout import put

    console.print()
    console.print(Text("Findings", style="bold"))
    for f in findings:
        line = Text("  ")
        line.append(f"{f['code']} {f['severity']:<7}", style=SEV_STYLE.get(f["severity"], ""))
        line.append(" " + ", ".join(f["subject"]) + ": " + f["message"])
        put(console, line, 11)
    console.print(Text("  gdrcheck explain CODE gives the fix", style="dim"))
