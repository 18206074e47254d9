"""The ``probe`` document (schema: ``gdrcheck/schemas/probe.schema.json``) and its status word."""

from __future__ import annotations

from gdrcheck.probe.plan import DEGRADED_BELOW, Plan
from gdrcheck.status import SEVERITY_RANK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

def compare_across_gpus(checks: list[dict[str, Any]]) -> None:
    """A GPU whose host copies are far below the node's best is degraded beside its peers (in place)."""
    hb = [c for c in checks if c["check"] == "host-bandwidth" and c["status"] in ("ok", "degraded")
          and (c.get("measured") or {}).get("h2d_gb_per_s")]
    if len(hb) < 2:
        return
    best = max(min(c["measured"]["h2d_gb_per_s"], c["measured"].get("d2h_gb_per_s") or 1e9) for c in hb)
    for c in hb:
        m = c["measured"]
        mine = min(m["h2d_gb_per_s"], m.get("d2h_gb_per_s") or 1e9)
        if mine < best * DEGRADED_BELOW:
            m["low_beside_node"] = f"below {int(DEGRADED_BELOW * 100)}% of the node's best GPU ({best} GB/s)"
            c["status"] = "degraded"


def probe_doc(report, plan: Plan, results: Optional[list[dict[str, Any]]], dry_run: bool,
              fail_on: str = "error", elapsed_s: Optional[float] = None) -> dict[str, Any]:
    from gdrcheck.documents.topology import header_doc
    from gdrcheck.rules.probe_rules import probe_findings

    doc = header_doc(report.snap)
    doc["dry_run"] = dry_run
    checks: list[dict[str, Any]] = []
    for i, step in enumerate(plan.steps):
        c = step.to_doc()
        c["measured"] = {}
        c["evidence"] = {}
        if results is not None and i < len(results) and results[i] is not None:
            r = results[i]
            c["status"] = r.get("status", "unknown")
            if r.get("reason"):
                c["reason"] = r["reason"]
            c["measured"] = r.get("measured") or {}
            c["evidence"] = r.get("evidence") or {}
            if r.get("elapsed_s") is not None:
                c["elapsed_s"] = r["elapsed_s"]
        checks.append(c)
    if not dry_run:
        compare_across_gpus(checks)
    doc["checks"] = checks
    if plan.busy:
        doc["busy"] = list(plan.busy)
    doc["refused"] = plan.refused
    if plan.notes:
        doc["notes"] = list(plan.notes)
    findings = [] if dry_run else probe_findings(checks)
    doc["findings"] = [f.to_doc() for f in findings]
    counts: dict[str, int] = {}
    for c in checks:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    doc["summary"] = {"checks": len(checks), "statuses": counts,
                      "findings": {s: sum(1 for f in findings if f.severity == s)
                                   for s in ("error", "warning", "info")}}
    doc["status"] = "planned" if dry_run else probe_status(doc, fail_on)
    doc["summary_line"] = summary_line(doc, fail_on)
    if elapsed_s is not None:
        doc["elapsed_s"] = round(elapsed_s, 2)
    return doc


def probe_status(doc: dict[str, Any], fail_on: str = "error") -> str:
    """pass: nothing at the threshold (or only a plan); fail: a finding at it or a failed check; unknown:
    nothing measured or a check unknown."""
    if doc.get("dry_run"):
        return "pass"
    threshold = SEVERITY_RANK[fail_on]
    statuses = [c["status"] for c in doc["checks"]]
    if any(SEVERITY_RANK[f["severity"]] >= threshold for f in doc["findings"]) or "fail" in statuses:
        return "fail"
    if fail_on == "warning" and "degraded" in statuses:
        return "fail"
    if "unknown" in statuses or doc.get("refused") or not any(s in ("ok", "degraded") for s in statuses):
        return "unknown"
    return "pass"


def summary_line(doc: dict[str, Any], fail_on: str = "error") -> str:
    from gdrcheck.documents.pairs import _fit
    from gdrcheck.rules import by_code

    st = doc["summary"]["statuses"]
    counts = ", ".join(f"{st[s]} {s}" for s in ("ok", "degraded", "fail", "unknown", "skipped", "planned")
                       if st.get(s))
    if doc.get("dry_run"):
        return _fit(f"PLAN {len(doc['checks'])} checks: {counts or 'none'}"
                    + (" (node busy: refused without --force)" if doc.get("refused") else ""))
    if doc.get("refused"):
        return _fit("REFUSED node busy: " + (doc.get("busy") or ["?"])[0])
    word = probe_status(doc, fail_on)
    if word == "pass":
        return _fit("OK probe: " + counts)
    hits = sorted(doc["findings"], key=lambda f: (-SEVERITY_RANK[f["severity"]], f["code"]))
    if word == "fail" and hits:
        f = hits[0]
        rule = by_code().get(f["code"])
        head = f"{f['code']} {rule.name if rule else f['severity']} " + ",".join(f["subject"][:1])
        return _fit(head, f" (+{len(hits) - 1} more)" if len(hits) > 1 else "")
    worst = next((c for s in ("fail", "unknown") for c in doc["checks"] if c["status"] == s), None)
    if worst is not None:
        return _fit(f"{worst['status'].upper()} {worst['check']} {','.join(worst['subjects'][:1])}: "
                    + str(worst.get("reason") or (worst.get("evidence") or {}).get("error") or ""))
    if not doc["checks"]:
        return _fit("UNKNOWN nothing to probe: " + ((doc.get("notes") or ["no checks"])[0]))
    return _fit("UNKNOWN nothing measured: " + counts)
