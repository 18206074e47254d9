"""The "Measured" section of the HTML report (``report --probe FILE``): each check beside its prediction."""

from __future__ import annotations

import json
from html import escape

from gdrcheck.errors import InputError
from gdrcheck.probe.doc_types import probe_schema, type_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FIGURES = ("h2d_gb_per_s", "d2h_gb_per_s", "p2p_gb_per_s", "staged_gb_per_s", "verified", "driver_api_version",
           "gpu_direct_rdma_supported", "dma_buf_supported", "mode", "rdma_device", "wc_status", "registered_by",
           "replay_counter_delta")


def load_probe(path: str) -> dict[str, Any]:
    """A ``probe --json`` document, or a one-line error."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    except ValueError as e:
        raise InputError(f"{path}: not a probe document (JSON: {e})") from None
    except RecursionError:
        raise InputError(f"{path}: not a probe document (JSON nested too deeply)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("checks"), list) or "dry_run" not in doc:
        raise InputError(f"{path}: not a probe document (gdrcheck probe --json writes one)")
    problem = type_problem(doc, probe_schema())
    if problem:
        raise InputError(f"{path}: not a probe document as gdrcheck probe --json writes it: {problem}")
    return doc


def _measured(c: dict[str, Any]) -> str:
    m = c.get("measured") or {}
    parts: list[str] = []
    for k in FIGURES:
        if k in m:
            v = m[k]
            unit = " GB/s" if k.endswith("_gb_per_s") else ""
            parts.append(f"{k.replace('_gb_per_s', '').replace('_', ' ')}: {v}{unit}")
    for k in ("reg_mr", "reg_dmabuf_mr", "dmabuf_probe", "dmabuf_export"):
        v = m.get(k)
        if isinstance(v, dict):
            parts.append(f"{k}: " + ("ok" if v.get("ok") else str(v.get("errno") or v.get("error") or "failed")))
    ev = c.get("evidence") or {}
    if ev.get("error") and c.get("status") != "ok":
        parts.append(str(ev["error"]))
    if ev.get("left_behind"):
        parts.append("left behind: " + str(ev["left_behind"]))
    if c.get("reason"):
        parts.append(str(c["reason"]))
    return "<br>".join(escape(p) for p in parts)


def _predicted(c: dict[str, Any]) -> str:
    p = c.get("predicted") or {}
    e = c.get("expected") or {}
    parts = []
    if p.get("verdict"):
        nccl = p.get("nccl_p2p") or p.get("nccl_gdr")
        parts.append(f"{p['verdict']} (path {p.get('path')}; NCCL {nccl}: {p.get('nccl_reason') or ''})")
    if e.get("h2d_gb_per_s") is not None:
        parts.append(f"about {e['h2d_gb_per_s']} GB/s each way ({e.get('link', '')})")
    return "<br>".join(escape(x) for x in parts)


def measured_section(doc: dict[str, Any], rules: dict[str, dict[str, Any]]) -> str:
    """``doc``: a probe document; ``rules``: the rules part of its findings (``documents.rules.rules_part``)."""
    when = "planned (dry run)" if doc.get("dry_run") else "measured"
    rows = []
    for c in doc["checks"]:
        st = str(c.get("status", ""))
        took = f"{c['elapsed_s']:.2f} s" if isinstance(c.get("elapsed_s"), (int, float)) else ""
        rows.append(f'<tr><th>{escape(str(c.get("check", "")))}</th>'
                    f'<td class="mono">{escape(" / ".join(map(str, c.get("subjects") or [])))}</td>'
                    f'<td class="v-{escape(st)}">{escape(st)}</td><td>{_measured(c)}</td>'
                    f'<td class="muted">{_predicted(c)}</td><td class="muted">{escape(took)}</td></tr>')
    finds = []
    for f in doc.get("findings") or []:
        rule = rules.get(f.get("code"), {})
        finds.append(f'<li><b>{escape(str(f.get("code")))} {escape(str(rule.get("name", "")))}</b> '
                     f'{escape(", ".join(map(str, f.get("subject") or [])))}: {escape(str(f.get("message", "")))}'
                     + (f'<br><span class="muted">fix: {escape(rule["remediation"])}</span>'
                        if rule.get("remediation") else "") + "</li>")
    head = (f'<section id="measured"><h2>Measured</h2><p class="legend">gdrcheck probe on '
            f'{escape(str(doc.get("host") or "the node"))}, {when}: each check run in a process of its own, '
            f'beside what the static view predicted. {escape(str(doc.get("summary_line", "")))}</p>')
    table = ('<table class="facts"><thead><tr><th>check</th><th>devices</th><th>status</th><th>measured</th>'
             '<th>predicted / expected</th><th>time</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")
    return head + table + (f'<ul>{"".join(finds)}</ul>' if finds else "") + "</section>"
