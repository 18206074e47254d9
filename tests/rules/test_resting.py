"""Which pairs' decisions rest on the job and which on facts the input does not show: counted from the needs'
codes (``Decision.rests_on_job``), never from their words; the text says each count by its name."""

from __future__ import annotations

import pytest
from support.cli_util import ROOT

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.rules.decisions import resting
from gdrcheck.rules.engine import evaluate


@pytest.mark.parametrize(("rel", "want"), [
    # nvidia-smi topo -m of a DGX A100: PXN relays (a rank of the same communicator) and NVLink not in the input
    ("gengwg-dgx-a100-ash6/nvidia-smi-topo-m.txt", {"job": 48, "not_in_input": 44}),
    # NCCL's own XML of an ND H100 v5: NVLink and the peer-memory files not in it, nothing for the job to settle
    ("azure-ndv5/nccl-topo.xml", {"not_in_input": 92}),
])
def test_pairs_resting_on_the_job_are_told_from_those_resting_on_facts_not_shown(realworld, rel, want):
    assert resting(evaluate(load_facts((str(realworld / rel),)))) == want


def test_a_node_whose_decisions_rest_on_nothing_counts_none():
    assert resting(evaluate(load_facts((str(ROOT / "fixtures/h100-x2-vm/nvidia-smi-topo.txt"),)))) == {}


def test_the_text_names_each_count(realworld):
    from support.cli_util import run

    p = run("pairs", "--from", realworld / "azure-ndv5/nccl-topo.xml", env={"COLUMNS": "200"})
    assert "NCCL's decision rests on facts this input does not show for 92 pairs: pairs --json gives depends_on" \
        in p.stdout, p.stdout
    assert "on the job" not in p.stdout


def test_rccl_pairs_resting_on_the_hypervisor_are_facts_not_shown():
    """RCCL's records too: the Hyper-V BIOS string a PXB rewrite rests on is a fact of the node."""
    assert resting(evaluate(load_facts((str(ROOT / "fixtures/rccl-models/topo_8p_940vm.xml"),)))) == {"not_in_input": 8}
