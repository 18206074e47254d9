"""RCCL's decisions as records (``gdrcheck.rules.rccl.decide``, ``.node``): the same :class:`Decision` as NCCL's,
with ``rccl.*`` cause and need codes, their words composed in ``gdrcheck.documents.rccl_words``; what a finding
names (``rccl_cause``) is read off the codes, so rewording a sentence changes no decision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.amd_trees import GPUS, NICS, mi300x_node

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents import decision_words
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate
from gdrcheck.rules.nccl.decision import Decision

MODELS = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "rccl-models").glob("*.xml"))


def _decisions(evaluation) -> list[Decision]:
    node = evaluation.nccl_node
    assert node.library == "rccl"
    return list(node.gdr_view.values()) + list(node.p2p_view.values())


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_rccl_models_decide_records_whose_codes_all_have_words(path):
    evaluation = evaluate(load_facts(str(path)), Options())
    decisions = _decisions(evaluation)
    assert decisions and all(isinstance(d, Decision) for d in decisions)
    for d in decisions:
        assert all(c.code.startswith("rccl.") and c.code in decision_words.CAUSES for c in d.causes), d.causes
        assert all(n.code.startswith("rccl.") and n.code in decision_words.NEEDS for n in d.needs), d.needs
    doc = pairs_doc(evaluation)
    json.dumps(doc)
    for p in doc["pairs"]:
        if p["kind"] in ("gpu-nic", "gpu-gpu"):
            assert type(p["nccl"]) is dict and isinstance(p["nccl"]["reason"], str) and p["nccl"]["reason"]


def _node(tmp_path, version=None, **tree):
    options = Options(nccl_version=version) if version else Options()
    return evaluate(load_facts(str(mi300x_node(tmp_path / "n", **tree))), options).nccl_node


def _reworded(monkeypatch):
    """Every rccl.* sentence said otherwise: a decision read off words would change."""
    for table in (decision_words.CAUSES, decision_words.NEEDS):
        for code, said in list(table.items()):
            if code.startswith("rccl."):
                new = (said[0], lambda c: "reworded") if isinstance(said, tuple) else (lambda c: "reworded")
                monkeypatch.setitem(table, code, new)


@pytest.mark.parametrize("tree, version, found", [
    ({"peer": True}, None, "gpu-flag-unknown"),  # fine-grained memory only the node shows
    ({"peer": False}, None, "peer-memory-unknown"),  # 2.21.5 then reads /proc/kallsyms
    ({"peer": False}, "2.18.6", "no-peer-memory"),
], ids=("gpu-flag", "peer-unknown", "no-peer"))
def test_what_a_finding_names_is_read_off_codes_not_words(tmp_path, monkeypatch, tree, version, found):
    before = _node(tmp_path / "a", version, **tree).gdr_view[(GPUS[0], NICS[0])]
    assert before["rccl_cause"] == found
    _reworded(monkeypatch)
    after = _node(tmp_path / "b", version, **tree).gdr_view[(GPUS[0], NICS[0])]
    assert after["reason"] == "reworded"
    assert (after.value, after["rccl_cause"]) == (before.value, found)
    assert [c.code for c in after.causes + after.needs] == [c.code for c in before.causes + before.needs]


def test_the_pair_level_is_a_code_its_words_the_documents(tmp_path):
    """The GDR level a pair is judged at rests on a code (the setting, RCCL's default, its Rome/Milan rule), and
    the record is never edited: a later step (the job's GPUs) returns a new one."""
    node = _node(tmp_path)
    d = node.gdr_view[(GPUS[0], NICS[0])]
    within = [c for c in d.causes if c.code in ("rccl.gdr.within", "rccl.gdr.open_flags")]
    assert within and within[0].get("why") in ("default", "rome_phb", "user")
    from gdrcheck.documents.rccl_words import LEVEL_WHY, level_why

    assert level_why(within[0]) in d["reason"]
    assert set(LEVEL_WHY) >= {"default", "rome_phb", "cpu_model_unseen", "bridge_unseen"}
