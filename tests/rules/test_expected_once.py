"""The expected answer is evaluated once, and only where something was assumed (issue 37, items 1 and 2)."""

from __future__ import annotations

from pathlib import Path

import gdrcheck.rules.engine as engine
from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate, restrict

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PUGET = "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"


def _counting(monkeypatch) -> list[int]:
    """Counts the evaluations the documents ask for from now on."""
    calls: list[int] = []
    real = engine.evaluate

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "evaluate", counted)
    return calls


def test_a_gate_and_its_node_share_one_second_evaluation(realworld, monkeypatch):
    """check --require p2p on an lspci tree (facts missing): the gate's expected answers and the node's
    capabilities rest on one evaluation of the filled facts, not two."""
    whole = evaluate(load_facts(str(realworld / PUGET)), Options())
    calls = _counting(monkeypatch)
    gate = pairs_doc(restrict(whole, ["p2p"]))
    assert gate["status"] == "unknown" and gate["expected_status"] == "pass"
    assert len(calls) == 1


def test_a_snapshot_that_shows_every_fact_is_not_evaluated_again(monkeypatch):
    """A live node's snapshot (4 GPUs in a VM, every fact shown): nothing is assumed, so the expected answer
    is the node's own and no second evaluation is made."""
    whole = evaluate(load_facts(str(FIXTURES / "nccl-runs-4gpu-vm" / "snapshot.tar.gz")), Options())
    calls = _counting(monkeypatch)
    doc = pairs_doc(whole)
    assert doc["status"] == "pass" and doc["assumes"] == []
    assert calls == []


def _briefs(path) -> dict[tuple[str, str], list[str]]:
    from gdrcheck.rules.expected import expected

    ex = expected(evaluate(load_facts(str(path)), Options()), "error", {})
    return {k: sorted(a["brief"] for a in e["assumes"]) for k, e in ex.pairs.items()}


def test_an_assumption_is_matched_by_the_needs_a_decision_names_not_by_its_words(realworld, monkeypatch):
    """Each pair's assumptions do not move when NCCL's reasons are worded otherwise: AWS p4d's NCCL dump (a
    GPU-GPU decision that rests on NVLink, then on the driver's P2P status across it; PXN through a relay
    NVLink may join) and a DGX A100's topo -m (peer memory; PXN through a relay that must be a rank of the
    job)."""
    import gdrcheck.documents.decision_words as words

    inputs = [realworld / "aws-p4d-24xlarge" / "nccl-topo.xml",
              realworld / "gengwg-dgx-a100-ash6" / "nvidia-smi-topo-m.txt"]
    before = [_briefs(p) for p in inputs]
    said = {brief for b in before for briefs in b.values() for brief in briefs}
    assert {"peer memory loaded", "driver P2P status OK", "the job uses every GPU",
            "NVLink between the SXM/OAM GPUs"} <= said
    monkeypatch.setattr(words, "CAUSES", {c: (j, lambda c: "reworded") for c, (j, _f) in words.CAUSES.items()})
    monkeypatch.setattr(words, "NEEDS", {c: (lambda c: "reworded") for c in words.NEEDS})
    assert [_briefs(p) for p in inputs] == before
