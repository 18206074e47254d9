"""The node_exporter textfile: ``gdrcheck_*`` metrics with bounded labels, no timestamps.

Pure function of the documents the other formats print. Series per node are
bounded by device and finding-code counts; per-pair series only on request
(``--per-pair-metrics``: 124 series on an 8 GPU, 8 NIC, 4 NVMe node, which across
thousands of nodes is a cardinality decision for the site). No host label:
Prometheus adds ``instance``. Timestamps are values, never sample timestamps
(node_exporter skips a textfile that carries them).
"""

from __future__ import annotations

from gdrcheck.pair_classes import PAIR_KIND

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Optional


CAPABILITY = {kind: cap for cap, kind in PAIR_KIND.items()}  # pair kind -> the capability it is about
RESULT = {"ok": "supported", "degraded": "supported", "fail": "unsupported", "unknown": "unknown"}


def _esc(v: object) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict[str, object]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items()) + "}"


def _num(v: float) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int) or float(v).is_integer():
        return str(int(v))
    return repr(float(v))


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[dict[str, object], float]]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            self.lines.append(f"{name}{_labels(labels)} {_num(value)}")


def check_results(doc: dict[str, Any]) -> dict[str, str]:
    """pass / fail / unknown per capability (gdr, p2p, gds): fail when a pair of that kind fails or an
    error-level finding concerns one (ACS redirect leaves a path working but is still a failed check)."""
    from gdrcheck.status import GATE_OF_ANSWER, node_status

    errors = {f["code"] for f in doc["findings"] if f["severity"] == "error"}
    unmet = {f["code"] for f in doc["findings"] if f["code"] in UNMET_CODES}
    out: dict[str, str] = {}
    nothing_read = bool(doc.get("timed_out")) and not doc["pairs"]  # the --timeout ran out before any pair
    for kind, cap in CAPABILITY.items():
        mine = [p for p in doc["pairs"] if p["kind"] == kind]
        severities = ["error" for p in mine for c in p["findings"] if c in errors]
        if unmet & UNMET_CODES_OF[cap]:
            severities.append("error")
        out[cap] = node_status((p["verdict"] for p in mine), severities, facts_missing=nothing_read)
        if out[cap] == "pass" and REACH_OF[cap] & set(doc.get("not_in_input") or ()):
            out[cap] = "unknown"  # the devices it needs are not in this input: not a pass
        answer = (doc.get("capabilities") or {}).get(cap, {}).get("answer")
        # as check --require reads the answer (a pass only on yes), except a capability the node has nothing
        # for (not-applicable: no NVMe for gds), which no one asked of it here: it stays as its pairs say
        if answer not in (None, "not-applicable") and out[cap] != "fail":
            out[cap] = GATE_OF_ANSWER[answer] if out[cap] == "pass" or GATE_OF_ANSWER[answer] == "fail" else out[cap]
    return out


_FACT_OF_KIND = {"gpu": "gpus", "nic": "nics", "nvme": "nvme"}
# the facts (gdrcheck.reach) each capability's pairs need the input to show
REACH_OF = {"gdr": {"gpus", "nics"}, "p2p": {"gpus"}, "gds": {"gpus", "nvme"}}


# the requirement findings (gdrcheck.rules.requirements) that fail each capability's check
UNMET_CODES_OF = {"gdr": {"GDR010", "GDR011"}, "p2p": {"GDR010", "GDR012"}, "gds": {"GDR010", "GDR013"}}
UNMET_CODES = set().union(*UNMET_CODES_OF.values())


def link_degraded(topology: dict[str, Any]) -> list[tuple[str, bool]]:
    """GPUs, NICs and NVMe drives whose link state the input shows, and whether the link runs below its maximum.

    Width below max counts for all; speed only for NICs and drives (an idle GPU
    lowers its speed to save power).
    """
    out = []
    for d in topology["devices"]:
        if d["kind"] not in ("gpu", "nic", "nvme"):
            continue
        k = d.get("link") or {}
        cw, mw, cs, ms = (k.get("current_width"), k.get("max_width"), k.get("current_speed_gts"),
                          k.get("max_speed_gts"))
        if not (cw and mw) or d.get("synthetic"):
            continue  # the input does not show this link's state (an lspci tree, a matrix): no series, never 0
        low = bool(cw and mw and cw < mw)
        if d["kind"] != "gpu" and cs and ms and cs < ms:
            low = True
        out.append((d["bdf"], low))
    return out


def _capability_metrics(o: _Out, caps: dict[str, Any]) -> None:
    """The document's ``capabilities``: each answer, each expected answer, and the units counted."""
    names = [cap for cap in ("gdr", "p2p", "gds") if cap in caps]
    o.metric("gdrcheck_capability", "gauge",
             "Whether the node uses each capability (gdr, p2p, gds), as the document's capabilities answer: "
             "1 for the answer in force.",
             [({"capability": cap, "answer": caps[cap]["answer"]}, 1) for cap in names])
    o.metric("gdrcheck_capability_expected", "gauge",
             "The answer expected with every fact the input does not show taken at its GPUDirect-ready value "
             "(1 for the answer in force).",
             [({"capability": cap, "answer": caps[cap]["expected"]}, 1) for cap in names])
    o.metric("gdrcheck_capability_units", "gauge",
             "The GPUs (gdr, gds) or GPU pairs (p2p) each answer rests on, by state (with, without, undecided).",
             [({"capability": cap, "state": st}, caps[cap][st]) for cap in names
              if caps[cap]["with"] is not None for st in ("with", "without", "undecided")])


def render_prometheus(pairs: dict[str, Any], bar1: Optional[dict[str, Any]], topology: dict[str, Any],
                      version: str, duration: float, now: float, per_pair: bool = False) -> str:
    o = _Out()
    o.metric("gdrcheck_build_info", "gauge", "gdrcheck version (always 1).", [({"version": version}, 1)])
    fp = pairs.get("fingerprint") or {}
    o.metric("gdrcheck_topology_info", "gauge",
             "The node's fingerprint: nodes built alike share 'fingerprint' (shape) (always 1).",
             [({"fingerprint": str(fp.get("shape", ""))[:23], "topology": str(fp.get("topology", ""))[:23]}, 1)])
    kinds = {"gpu": 0, "nic": 0, "nvme": 0}
    for d in topology["devices"]:
        if d["kind"] in kinds:
            kinds[d["kind"]] += 1
    hidden = set(pairs.get("not_in_input") or ())  # a kind the input cannot show has no count, not 0
    o.metric("gdrcheck_devices", "gauge", "GPUs, NICs and NVMe drives seen on PCIe (none for a kind the input "
             "cannot show).", [({"kind": k}, n) for k, n in kinds.items() if _FACT_OF_KIND[k] not in hidden])
    counts: dict[tuple[str, str], int] = {}
    for p in pairs["pairs"]:
        key = (p["kind"], RESULT[p["verdict"]])
        counts[key] = counts.get(key, 0) + 1
    o.metric("gdrcheck_pairs", "gauge", "Pairs by kind, capability and result.",
             [({"kind": kind, "capability": cap, "result": res}, counts.get((kind, res), 0))
              for kind, cap in CAPABILITY.items() for res in ("supported", "unsupported", "unknown")])
    results = check_results(pairs)
    o.metric("gdrcheck_check_result", "gauge",
             "Result of each check (gdr, p2p, gds): 1 for the result in force, 0 for the others.",
             [({"check": cap, "result": res}, 1 if results[cap] == res else 0)
              for cap in ("gdr", "p2p", "gds") for res in ("pass", "fail", "unknown")])
    _capability_metrics(o, pairs.get("capabilities") or {})
    status = pairs.get("status", "unknown")
    o.metric("gdrcheck_status", "gauge", "The node's status (pass, fail, unknown): 1 for the one in force.",
             [({"status": s}, 1 if status == s else 0) for s in ("pass", "fail", "unknown")])
    codes: dict[tuple[str, str], int] = {}
    for f in pairs["findings"]:
        key = (f["code"], f["severity"])
        # a finding folded from per-pair ones counts each pair's two devices, as they were before folding
        said = 2 * f["folded"] if f.get("folded") else max(1, len(f.get("subject") or ()))
        codes[key] = codes.get(key, 0) + said
    o.metric("gdrcheck_findings", "gauge", "Subjects (devices, pairs, facilities) per finding code.",
             [({"code": c, "severity": s}, n) for (c, s), n in sorted(codes.items())])
    gpus = (bar1 or {}).get("gpus") or []
    o.metric("gdrcheck_bar1_total_bytes", "gauge", "BAR1 aperture per GPU.",
             [({"gpu": g["bdf"]}, g["bar1_total_bytes"]) for g in gpus if g.get("bar1_total_bytes") is not None])
    o.metric("gdrcheck_bar1_used_bytes", "gauge", "BAR1 in use per GPU.",
             [({"gpu": g["bdf"]}, g["bar1_used_bytes"]) for g in gpus if g.get("bar1_used_bytes") is not None])
    o.metric("gdrcheck_pcie_link_degraded", "gauge",
             "1 when the device's PCIe link runs below its maximum width (or speed, for NICs and NVMe).",
             [({"device": b}, low) for b, low in link_degraded(topology)])
    if per_pair:
        verdict_value = {"ok": 0, "degraded": 1, "unknown": 2, "fail": 3}
        o.metric("gdrcheck_pair_verdict", "gauge",
                 "Verdict per pair: 0 ok, 1 degraded, 2 unknown, 3 fail.",
                 [({"a": p["a"], "b": p["b"], "kind": p["kind"], "path": p["path"] or "unknown"},
                   verdict_value[p["verdict"]]) for p in pairs["pairs"]])
    o.metric("gdrcheck_timed_out", "gauge", "1 when the run's --timeout ran out.",
             [({}, bool(pairs.get("timed_out")))])
    o.metric("gdrcheck_last_run_timestamp_seconds", "gauge", "When this file was written (Unix time).",
             [({}, round(now, 3))])
    o.metric("gdrcheck_run_duration_seconds", "gauge", "How long the run took.", [({}, round(duration, 4))])
    return "\n".join(o.lines) + "\n"
