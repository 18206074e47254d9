"""The top-level ``nccl.log`` object of ``pairs``: what a job's NCCL (or RCCL) log says, which host is the node,
and how the log's connections compare with the prediction (:func:`gdrcheck.rules.nccl_log.reconcile` compares
them; this module only writes what it found)."""

from __future__ import annotations

from gdrcheck.rules.nccl.job_log import job_log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def log_doc(evaluation) -> Optional[dict[str, Any]]:
    """The top-level ``nccl.log`` object: what the job's log says, which host is the node, and how the
    log's connections compare with the prediction, in one sentence (``summary``)."""
    job = job_log(evaluation.snap)
    summary = evaluation.reconciled
    if job is None or summary is None:
        return None
    log = job["log"]
    host = job["host"]
    doc: dict[str, Any] = {
        "file": log.label, "version": log.version, "cuda": log.cuda, "cuda_driver": log.cuda_driver,
        "host": host, "host_reason": job.get("host_reason"), "hosts": list(log.hosts),
        "settings": [{"name": n, "value": v, "line": ln} for n, v, ln in log.settings],
        "net_plugin": log.plugin, "network": log.network,
        "nics": [{"host": h, "net": t, "dev": i, "device": d} for h, t, i, d, _l in log.nics
                 if h in (host, None)],
        "hca_gdr": [{"net": x.net, "dev": x.index, "name": x.name, "enabled": x.enabled, "line": x.line}
                    for x in log.hca_gdr if x.host in (host, None)],
        "ranks": [{"rank": r.rank, "host": r.host, "bdf": r.bdf, "cuda_dev": r.cuda_dev, "nvml_dev": r.nvml_dev}
                  for r in log.ranks],
        "warnings": len(log.warnings),
        "pairs_observed": summary["pairs"], "pairs_agree": summary["agree"], "pairs_differ": summary["differ"],
        "pairs_settled": summary["settled"], "connections": summary["connections"],
    }
    if log.rccl_version:  # RCCL ran: its version, and NCCL's version left unset (RCCL's rules are RCCL's)
        doc.update(rccl_version=log.rccl_version, rccl_hip=log.rccl_hip)
    if summary["notes"]:
        doc["notes"] = list(summary["notes"])
    doc["summary"] = summary_sentence(summary, "RCCL" if log.rccl_version else "NCCL")
    return doc


def summary_sentence(s: dict[str, Any], library: str = "NCCL") -> str:
    n, agree, differ, settled = s["pairs"], s["agree"], s["differ"], s["settled"]
    if not n:
        return "the log shows no connection between devices of this node"
    judged = agree + differ
    if not judged:
        return (f"the prediction leaves the {settled} pair{'s' if settled != 1 else ''} the log shows open: "
                f"{library}'s choice settles them")
    if not differ:
        head = (f"{library} did what the node predicts: {agree} of {judged} pair{'s' if judged != 1 else ''} "
                f"({s['agree_connections']} connection{'s' if s['agree_connections'] != 1 else ''})")
    else:
        head = (f"{library} differs from the prediction on {differ} of {judged} pair{'s' if judged != 1 else ''} "
                f"(GDR180/GDR181 give the likely cause); agrees on {agree}")
    if settled:
        head += f"; {settled} pair{'s' if settled != 1 else ''} the prediction left open, the log settles"
    return head
