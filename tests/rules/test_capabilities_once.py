"""The capabilities' answers and expected answers read from one pass over the pairs' own answers: the same records
as each made on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.record import replace
from gdrcheck.rules import capabilities as caps
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate, restrict
from gdrcheck.rules.expected import expected

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
INPUTS = [
    ("realworld", "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt", None),
    ("realworld", "stelline-puget-wrx90-2xrtx6000ada/nvidia-smi-topo-m.txt", None),
    ("realworld", "oneflow-v100x8-gold5118-1mlx5/nvidia-smi-topo-m.txt", None),
    ("realworld", "gengwg-dgx-a100-ash6/nvidia-smi-topo-m.txt", None),
    ("realworld", "hwloc-hp-sl390s-g7-3xtesla-cx2/hwloc.xml", None),
    ("realworld", "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt", None),
    ("fixtures", "h200-x4-vm/snapshot.tar.gz", None),
    ("fixtures", "h200-x4-vm/snapshot.tar.gz", {"CUDA_VISIBLE_DEVICES": "0,1"}),
    ("fixtures", "nccl-runs-4gpu-vm/default/nccl.log", None),
    ("fixtures", "nccl-logs-public/nccl-707-a100-busid-ib.log", None),
    ("fixtures", "nvidia-smi-q/h100-sxm-550.txt", None),
]


@pytest.mark.parametrize(("where", "name", "env"), INPUTS)
def test_answers_and_expected_are_the_answers_made_apart(realworld, where, name, env):
    path = (realworld if where == "realworld" else FIXTURES) / name
    evaluation = evaluate(load_facts(str(path)), Options(env=env or {}))
    for ev in (evaluation, restrict(evaluation, ("gdr",), required=False)):
        pairs = expected(ev.whole or ev, "error", {}).pairs
        got = caps.answers_and_expected(ev, pairs)
        assert got == (caps.answers(ev), caps.expected_answers(ev, pairs))


@pytest.mark.parametrize("name", ["stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt",
                                  "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"])
def test_chosen_drives_kept_per_evaluation_are_the_drives_worked_out(realworld, name):
    """The drives kept for an evaluation's pairs are those worked out from them; an evaluation of other pairs on
    the same topology (a job's restricted one) gets its own."""
    evaluation = evaluate(load_facts(str(realworld / name)), Options())
    got = caps.chosen_drives(evaluation)
    assert got == caps._chosen_drives(evaluation) and caps.chosen_drives(evaluation) is got
    fewer = replace(evaluation, pairs=tuple(p for p in evaluation.pairs if p.kind == "gpu-nvme")[:1])
    assert caps.chosen_drives(fewer) == caps._chosen_drives(fewer)
    assert caps.chosen_drives(evaluation) == got
