"""Findings said of many pairs are one finding listing them, and every count still counts what was said.

Real inputs: oneflow's 8x V100 SXM2 `nvidia-smi topo -m` (12 GPU pairs across sockets without NVLink) folds (the
DGX-1's `-mp` no longer does: NVLink, not in that input, may join its SYS pairs);
Azure NDv2's NCCL dump folds its 28 GPU pairs' "NVLink not in this input" and keeps its 8 GPU-NIC pairs beyond
NCCL's GDR level one by one.
"""

from __future__ import annotations

from support.cli_util import call

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.engine import FOLD_OVER, evaluate

ONEFLOW = "oneflow-v100x8-gold6271c-2mlx5/nvidia-smi-topo-m.txt"


def _doc(path):
    return pairs_doc(evaluate(load_facts(str(path), want_driver=True, endpoint_config=False)))


def test_a_code_said_of_many_pairs_is_one_finding_naming_the_first(realworld):
    doc = _doc(realworld / ONEFLOW)
    sys3 = [f for f in doc["findings"] if f["code"] == "GDR003"]
    assert len(sys3) == 1 and sys3[0]["folded"] == 12 and len(sys3[0]["pairs"]) == 12
    # made-up addresses (a matrix without bus ids) are named as nvidia-smi names them
    assert sys3[0]["message"].startswith("GPU0 and GPU4 are on different NUMA nodes")
    assert sys3[0]["message"].endswith("(and 11 more pairs like it)")
    assert sys3[0]["subject"][:2] == ["ffff:00:00.0", "ffff:04:00.0"]  # the first pair's, then the others
    # every pair still names the code; the counts count what was said, folded or not
    assert sum("GDR003" in p["findings"] for p in doc["pairs"]) == 12
    # the node is unknown: the line names a missing fact, never a definite finding, and counts the other
    # missing facts (the document's ``missing``, as the why line and stderr list them)
    assert doc["status"] == "unknown"
    assert doc["summary_line"].startswith(doc["missing"][0]["code"])
    assert doc["summary_line"].endswith(f"(+{len(doc['missing']) - 1} more missing)")


def test_engines_count_the_pairs_of_a_folded_finding(realworld):
    path = realworld / ONEFLOW
    nagios = call("check", "--format", "nagios", "--from", path).stdout
    assert "warnings=16;" in nagios.splitlines()[0]
    prom = call("check", "--format", "prometheus", "--from", path).stdout
    assert 'gdrcheck_findings{code="GDR003",severity="warning"} 24' in prom
    text = call("check", "--from", path).stdout
    assert ("GPU0 and GPU4 are on different NUMA nodes (SYS, inter-NUMA; the "
            "topo-matrix input does not show whether they are different sockets) (+11 more like it)") in text


def test_a_code_said_of_few_pairs_stays_one_finding_per_pair(realworld):
    doc = _doc(realworld / "azure-ndv2" / "nccl-topo.xml")
    beyond = [f for f in doc["findings"] if f["code"] == "GDR001"]  # NICs beyond NCCL's GDR level, one per GPU
    assert len(beyond) == FOLD_OVER and not any("folded" in f for f in beyond)  # each keeps its own line
