"""The fleet document as text (a terminal or a log) and as Markdown (a ticket). Pure functions, no colour."""

from __future__ import annotations

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


DIFF_SHOWN = 20      # diff lines shown per group; the JSON document has them all
VARIANT_SHOWN = 8    # address differences shown per topology variant
SAMPLE_WIDTH = 160
REASONS_SHOWN = 20   # unknown/unreadable reasons shown; the JSON document has them all
RENUMBERED = "same shape, different addresses (renumbered buses)"


def short(h: Optional[str]) -> str:
    if not h:
        return "-"
    algo, _, hexd = h.partition(":")
    return f"{algo}:{hexd[:12]}" if hexd else h[:19]


def _val(v: Optional[str]) -> str:
    return "(absent)" if v is None else (v if v != "" else '""')


def diff_lines(diff: list[dict[str, Any]], key: str, limit: int) -> list[str]:
    out = [f"{d[key]}: {_val(d['reference'])} -> {_val(d['value'])}" for d in diff[:limit]]
    if len(diff) > limit:
        out.append(f"(+{len(diff) - limit} more)")
    return out


def _count(n: int, what: str = "node") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _set(s: dict[str, Any]) -> str:
    return _count(s["count"]) + (f" {s['nodes']}" if s["count"] else "")


def headline(doc: dict[str, Any]) -> str:
    n = doc["nodes"]
    parts = [_count(n["reported"], "report")]
    if n["unreadable"]:
        parts.append(f"{n['unreadable']} unreadable")
    if n["expected"] is not None:
        parts.append(f"expected {n['expected']}, missing {n['missing']}")
        if n["unexpected"]:
            parts.append(f"{n['unexpected']} unexpected")
    parts.append(f"{n['pass']} pass, {n['fail']} fail, {n['unknown']} unknown")
    return "; ".join(parts)


def status_line(doc: dict[str, Any]) -> str:
    n = doc["nodes"]
    why = []
    if doc["outliers"]:
        why.append("nodes not alike")
    for key, word in (("fail", "failing"), ("unknown", "unknown"), ("unreadable", "unreadable"),
                      ("missing", "missing")):
        if n[key]:
            why.append(f"{n[key]} {word}")
    if not why:
        why.append("all nodes alike and passing" if n["reported"] else "no reports")
    return f"{doc['status']} (exit {doc['exit_status']}): " + ", ".join(why)


def _reference_text(doc: dict[str, Any]) -> str:
    ref = doc["reference"]
    if ref["source"] == "file":
        where = f"{ref['file']} (shape {short(ref['shape'])})"
        return where + ("" if ref["group"] else "; no node matches it")
    return "the largest group" if ref["source"] == "largest-group" else "none"


def render_text(doc: dict[str, Any]) -> str:
    out: list[str] = [f"gdrcheck fleet summary: {headline(doc)}", ""]
    groups = doc["groups"]
    if groups:
        out.append(f"groups by shape fingerprint (reference: {_reference_text(doc)}):")
        width = max(len(g["label"]) for g in groups)
        cw = max(len(str(g["count"])) for g in groups)
        for g in groups:
            tag = "  reference" if g["reference"] else ""
            out.append(f"  {g['label']:<{width}}  {short(g['shape'])}  {g['count']:>{cw}}  {g['nodes']}{tag}")
            pad = " " * (width + 6)
            for line in diff_lines(g["diff"], "key", DIFF_SHOWN):
                out.append(pad + line)
            for v in g["topology_variants"]:
                out.append(f"{pad}{RENUMBERED}: {_set(v)} (topology {short(v['topology'])})")
                for line in diff_lines(v["positions_diff"], "position", VARIANT_SHOWN):
                    out.append(pad + "  " + line)
        out.append("")
    if doc["findings"]:
        out.append("findings (by severity, then code):")
        nw = max(len(f["name"] or "") for f in doc["findings"])
        cw = max(len(str(f["count"])) for f in doc["findings"])
        for f in doc["findings"]:
            name = f["name"] or ""
            out.append(f"  {f['code']}  {f['severity']:<7}  {name:<{nw}}  {f['count']:>{cw}}  {f['nodes']}")
            s = f["sample"]
            msg = s["message"] if len(s["message"]) <= SAMPLE_WIDTH else s["message"][:SAMPLE_WIDTH - 3] + "..."
            out.append(f"        e.g. {s['node']}: {msg}")
        out.append("")
    else:
        out += ["findings: none", ""]
    if doc["failing"]["count"]:
        out.append(f"failing: {_set(doc['failing'])}")
    for key, title in (("unknown", "unknown (could not decide)"), ("unreadable", "unreadable reports")):
        entries = doc[key]
        if entries:
            out.append(f"{title}: {_count(sum(e['count'] for e in entries))}")
            for e in entries[:REASONS_SHOWN]:
                out.append(f"  {e['reason']}: {_set(e)}")
            if len(entries) > REASONS_SHOWN:
                out.append(f"  (+{len(entries) - REASONS_SHOWN} more reasons)")
    if doc["nodes"]["expected"] is not None:
        out.append(f"missing (no report): {_set(doc['missing'])}")
        if doc["unexpected"]["count"]:
            out.append(f"unexpected (not in --expect): {_set(doc['unexpected'])}")
    out.append(f"status: {status_line(doc)}")
    return "\n".join(out) + "\n"


# what Markdown would read as markup in a cell: a cell boundary, emphasis, code, links, HTML, entities
_MD_SPECIAL = "\\`*_[]<>|~&"


def _cell(text: Any) -> str:
    """Text in a Markdown table cell (or a list item): every Markdown special escaped, so a name or a
    message from a report is shown as it is, never read as markup or as the end of a cell."""
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in str(text).replace("\n", " "))


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`" if text else ""


def _code_cell(text: str) -> str:
    """A code span in a table cell: there a '|' ends the cell even inside the span unless escaped (GFM), so
    it is escaped, and shows as '|'."""
    return _code(text).replace("|", "\\|")


_TICKS = lazy_pattern("`+")


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in ``lines``, which therefore cannot close it."""
    longest = max((len(m) for line in lines for m in _TICKS.findall(line)), default=0)
    return "`" * max(3, longest + 1)


def render_md(doc: dict[str, Any]) -> str:
    n = doc["nodes"]
    out: list[str] = ["# gdrcheck fleet summary", "", f"**Status: {status_line(doc)}**", ""]
    out += ["| nodes | count |", "|---|---:|"]
    rows = [("expected", n["expected"])] if n["expected"] is not None else []
    rows += [("reported", n["reported"]), ("pass", n["pass"]), ("fail", n["fail"]), ("unknown", n["unknown"]),
             ("unreadable", n["unreadable"])]
    if n["expected"] is not None:
        rows += [("missing (no report)", n["missing"]), ("unexpected", n["unexpected"])]
    out += [f"| {k} | {v} |" for k, v in rows] + [""]
    groups = doc["groups"]
    if groups:
        out += ["## Groups by shape fingerprint", "", f"Reference: {_cell(_reference_text(doc))}.", "",
                "| group | shape | count | nodes | |", "|---|---|---:|---|---|"]
        for g in groups:
            out.append(f"| {g['label']} | {_code_cell(short(g['shape']))} | {g['count']} | {_code_cell(g['nodes'])} | "
                       f"{'reference' if g['reference'] else ''} |")
        out.append("")
        for g in groups:
            if g["diff"]:
                lines = diff_lines(g["diff"], "key", DIFF_SHOWN)
                out += [f"### Group {g['label']}: what differs from the reference", "", _fence(lines)]
                out += lines + [_fence(lines), ""]
            for v in g["topology_variants"]:
                lines = diff_lines(v["positions_diff"], "position", VARIANT_SHOWN)
                out += [f"### Group {g['label']}: {RENUMBERED}", "", f"{_set(v)}: {_code(v['nodes'])}", "",
                        _fence(lines)]
                out += lines + [_fence(lines), ""]
    out += ["## Findings", ""]
    if doc["findings"]:
        out += ["| code | severity | rule | count | nodes | sample |", "|---|---|---|---:|---|---|"]
        for f in doc["findings"]:
            s = f["sample"]
            out.append(f"| {_cell(f['code'])} | {_cell(f['severity'])} | {_cell(f['name'] or '')} | {f['count']} | "
                       f"{_code_cell(f['nodes'])} | {_cell(s['node'] + ': ' + s['message'])} |")
    else:
        out.append("None.")
    out.append("")
    lists = []
    if doc["failing"]["count"]:
        lists.append(("Failing", [f"{_count(doc['failing']['count'])}: {_code(doc['failing']['nodes'])}"]))
    for key, title in (("unknown", "Unknown (could not decide)"), ("unreadable", "Unreadable reports")):
        if doc[key]:
            items = [f"{_cell(e['reason'])}: {_count(e['count'])} {_code(e['nodes'])}"
                     for e in doc[key][:REASONS_SHOWN]]
            if len(doc[key]) > REASONS_SHOWN:
                items.append(f"(+{len(doc[key]) - REASONS_SHOWN} more reasons)")
            lists.append((title, items))
    if n["expected"] is not None and doc["missing"]["count"]:
        lists.append(("Missing (no report)", [f"{_count(doc['missing']['count'])}: {_code(doc['missing']['nodes'])}"]))
    if doc["unexpected"]["count"]:
        lists.append(("Unexpected (not in --expect)",
                      [f"{_count(doc['unexpected']['count'])}: {_code(doc['unexpected']['nodes'])}"]))
    for title, items in lists:
        out += [f"## {title}", ""] + [f"- {i}" for i in items] + [""]
    return "\n".join(out).rstrip("\n") + "\n"
