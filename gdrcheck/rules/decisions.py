"""What is read off an evaluation for each pair and for the node: NCCL's decision and the node's status word.
Used by the expected answer (:mod:`gdrcheck.rules.expected`) and by the document (:mod:`gdrcheck.documents.pairs`):
so they sit in rules, below both."""

from __future__ import annotations

from gdrcheck.host_facts import host_fact
from gdrcheck.rules.engine import Evaluation
from gdrcheck.rules.nccl.decision import Decision
from gdrcheck.status import node_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def nccl_decision(evaluation: Evaluation, pair) -> dict[str, Any]:
    """NCCL's predicted decision for the pair (``gdr`` or ``p2p``), with the reason and what the job decides,
    as the JSON contract holds it: the evaluation's decision record in words, or its path facts where NCCL
    decides nothing (shared, not copied: read it, do not change it)."""
    view = evaluation.nccl_view.get((pair.a, pair.b))
    if isinstance(view, Decision):  # the record, its words composed once (decision_words)
        return view.as_contract()
    if view is not None and ("gdr" in view if pair.kind == "gpu-nic" else
                             "p2p" in view if pair.kind == "gpu-gpu" else True):
        return view
    view = dict(view or {})
    if pair.kind == "gpu-nic" and "gdr" not in view:
        # a NIC NCCL would never enumerate (not an RDMA device) or an evaluation built without NCCL's view
        ok, why = evaluation.nic_side
        view["gdr"] = "disabled" if ok is False else "unknown"
        view["reason"] = why or "not an RDMA device NCCL's IB transport would use"
    elif pair.kind == "gpu-gpu" and "p2p" not in view:
        view["p2p"], view["reason"] = "unknown", "NCCL's view was not computed"
    return view


def resting(evaluation: Evaluation) -> dict[str, int]:
    """How many pairs' decisions rest on the job (a need of :data:`JOB_NEEDS`) and how many only on facts the
    input does not show (every other need); only the counts above zero."""
    counts = {"job": 0, "not_in_input": 0}
    for view in evaluation.nccl_view.values():
        if isinstance(view, Decision) and view.needs:
            counts["job" if view.rests_on_job() else "not_in_input"] += 1
    return {k: n for k, n in counts.items() if n}


def timed_out(evaluation: Evaluation) -> bool:
    f = host_fact(evaluation.snap, "run_deadline")
    return f is not None and bool(f.value)


def node_status_word(evaluation: Evaluation, fail_on: str = "error") -> str:
    """pass, fail or unknown: the one answer for this node (see :mod:`gdrcheck.status`)."""
    missing = timed_out(evaluation) or any(f.effect == "unknown" and not f.pairs for f in evaluation.findings)
    return node_status(evaluation.verdicts.values(), (f.severity for f in evaluation.findings), fail_on,
                       facts_missing=missing)


def library_word(evaluation: Evaluation) -> str:
    """The collective library whose rules judged the node, as every output names it: ``RCCL`` on AMD GPUs
    (gdrcheck.rules.rccl chose it), else ``NCCL``."""
    return "RCCL" if getattr(evaluation.nccl_node, "library", "nccl") == "rccl" else "NCCL"
