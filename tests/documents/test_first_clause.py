"""A decision's first clause (what ``capabilities`` quotes for a pair NCCL does not use), composed from the record's
first cause: the reason as far as its first "; ", where no parameter's own words hold one."""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.decision_words import first_clause, reason
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate
from gdrcheck.rules.nccl.decision import Decision, cause

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _p2p(*causes) -> Decision:
    return Decision("p2p", "disabled", tuple(causes))


def test_a_consequence_after_the_comparison_is_left_out():
    d = _p2p(cause("p2p.beyond", path="SYS", level="PXB", source="NCCL 2.30.7 default on intel"))
    assert first_clause(d) == "path SYS is beyond NCCL_P2P_LEVEL=PXB (NCCL 2.30.7 default on intel)"
    assert reason(d) == first_clause(d) + "; NCCL uses shared host memory"


def test_the_first_hop_of_several_and_the_heading():
    hops = (("GPU0-GPU1", "OK", "NS"), ("GPU1-GPU2", "NS", "NS"))
    d = _p2p(cause("p2p.transport", path="NVL", link="NVLink"), cause("p2p.nvml_fallback", hops=hops))
    assert first_clause(d) == "NVLink: NVML P2P status GPU0-GPU1: read OK, write NS"
    one = _p2p(cause("p2p.nvml_fallback", hops=hops[:1]))
    assert first_clause(one) == reason(one)


def test_a_parameter_holding_a_semicolon_is_said_whole():
    """The level's source names its own condition after "; ": the clause keeps it (the reason cut at its first
    "; " left a parenthesis open)."""
    d = _p2p(cause("p2p.beyond", path="SYS", level="PXB",
                   source="NCCL default: PXB; SYS on x86 AMD with at most 2 GPUs"))
    assert first_clause(d) == ("path SYS is beyond NCCL_P2P_LEVEL=PXB (NCCL default: PXB; SYS on x86 AMD with at "
                               "most 2 GPUs)")


def _plain(value) -> bool:
    if isinstance(value, str):
        return "; " not in value
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return True


@pytest.mark.parametrize("name", [
    "realworld:stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt",
    "realworld:oneflow-v100x8-gold5118-1mlx5/nvidia-smi-topo-m.txt",
    "realworld:hwloc-hp-sl390s-g7-3xtesla-cx2/hwloc.xml",
    "fixtures:h200-x4-vm/snapshot.tar.gz",
    "fixtures:nccl-dump-h100-x2-vm/nccl-topo.xml",
    "fixtures:nccl-logs-public/nccl-707-a100-busid-ib.log",
])
def test_the_first_clause_is_the_reason_up_to_its_first_joint(realworld, name):
    where, _, rel = name.partition(":")
    evaluation = evaluate(load_facts(str((realworld if where == "realworld" else FIXTURES) / rel)), Options())
    decisions = [v for v in evaluation.nccl_view.values() if isinstance(v, Decision)]
    assert decisions
    for d in decisions:
        if all(_plain(v) for c in d.causes for v in c.params.values()):
            assert first_clause(d) == reason(d).split("; ")[0]
