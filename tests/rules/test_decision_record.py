"""NCCL's decisions as records (``gdrcheck.rules.nccl.decision``): made once in ``rules/``, each later step a new
record with one more cause or need, the words composed in ``gdrcheck.documents.decision_words``; the JSON
contract (``pairs[].nccl``) holds the same plain values as before."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.decision_words import CAUSES, HEADINGS, NEEDS
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.record import FrozenInstanceError
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate
from gdrcheck.rules.nccl.decision import Decision, cause, need

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUNS = FIXTURES / "nccl-runs-4gpu-vm"
DUMPS = sorted((FIXTURES / "nccl-xml-cases").glob("*.xml")) + [RUNS / "nccl-topo-dump.xml"]


def _decisions(evaluation) -> list[Decision]:
    node = evaluation.nccl_node
    return list(node.gdr_view.values()) + list(node.p2p_view.values())


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.name)
def test_nccl_dumps_decide_records_whose_codes_all_have_words(path):
    evaluation = evaluate(load_facts(str(path)), Options())
    decisions = _decisions(evaluation)
    assert decisions and all(isinstance(d, Decision) for d in decisions)
    for d in decisions:
        assert all(c.code in CAUSES or c.code in HEADINGS for c in d.causes), d.causes
        assert all(n.code in NEEDS for n in d.needs), d.needs
    doc = pairs_doc(evaluation)
    json.dumps(doc)  # the contract holds plain values only
    for p in doc["pairs"]:
        if p["kind"] in ("gpu-nic", "gpu-gpu"):
            assert type(p["nccl"]) is dict and isinstance(p["nccl"]["reason"], str) and p["nccl"]["reason"]
            assert all(isinstance(x, str) for x in p["nccl"].get("depends_on", ()))


@pytest.fixture(scope="module")
def four_gpu_snapshot(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("four-gpu-node")
    with tarfile.open(RUNS / "snapshot.tar.gz") as t:
        t.extractall(root, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return root


def test_the_jobs_gpus_add_one_cause_to_each_p2p_record(four_gpu_snapshot):
    """The 4-GPU VM run with CUDA_VISIBLE_DEVICES=0,1 (fixtures/nccl-runs-4gpu-vm/two-gpus-cuda-visible): the
    job's step returns a new record with the pair's place in the job as one more cause, the words after it."""
    env = dict(json.loads((four_gpu_snapshot / "gdrcheck/env.json").read_text()), CUDA_VISIBLE_DEVICES="0,1")
    evaluation = evaluate(load_facts(str(four_gpu_snapshot)), Options(env=env))
    p2p = evaluation.nccl_node.p2p_view
    first, other = p2p[("0000:00:06.0", "0000:00:07.0")], p2p[("0000:00:06.0", "0000:00:08.0")]
    assert [c.code for c in first.causes][-1] == "job.devices"
    assert [c.code for c in other.causes][-1] == "job.not_in"
    assert first["reason"].endswith("; the job's cuda:0 and cuda:1")
    assert other["reason"].endswith("; not a pair of this job: 0000:00:08.0 is not in CUDA_VISIBLE_DEVICES=0,1")


def test_a_later_step_returns_a_new_record_and_leaves_the_first_as_it_was():
    first = Decision("gdr", "disabled", (cause("gdr.beyond", distance="SYS", level="PHB", source="default"),),
                     distance="SYS")
    later = first.plus(cause("gdr.pxn_unseen", relay="0000:1b:00.0"),
                       need("gdr.pxn_nvlink", gpu="0000:3b:00.0", relay="0000:1b:00.0"), value="unknown")
    assert first["gdr"] == "disabled" and "depends_on" not in first and len(first.causes) == 1
    assert later["gdr"] == "unknown" and later["depends_on"] == [
        "whether NVLink joins 0000:3b:00.0 and 0000:1b:00.0 and NCCL keeps P2P on it (nvidia-smi topo -m, NVML)"]
    assert later["reason"] == first["reason"] + "; but if NCCL keeps an NVLink path between this GPU and " \
        "0000:1b:00.0, the NIC's local GPU (the input cannot show it), NCCL reaches the NIC through that GPU (PXN, " \
        "paths.cc:812-843)"
    with pytest.raises(FrozenInstanceError):
        first.value = "enabled"  # type: ignore[misc]
    assert dict(first) == {"gdr": "disabled", "distance": "SYS", "reason": first["reason"]}


def test_a_log_line_says_the_nic_flag_nccl_wrote_in_the_input():
    """No machine gave a job's log beside an NCCL dump with a <net gdr> flag: the log's HCA line is said in
    place of the flag read from the input, from the record's causes (no reason text is cut)."""
    flag = cause("nic_flag", text='NIC mlx5_0: <net gdr="1"> in the input', nic="mlx5_0", from_input=True)
    gpu = cause("gpu_flag", text="the model", from_input=False)
    within = cause("gdr.within", distance="PIX", level="PXB", source="default")
    d = Decision("gdr", "enabled", (flag, gpu, within), distance="PIX")
    assert d.from_input() and d["reason"].startswith('NIC mlx5_0: <net gdr="1"> in the input; the model; path PIX')
    said = d.plus(cause("log.line", line="GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"))
    assert said["reason"] == "NIC mlx5_0: NCCL's own line in the job's log (GPU Direct RDMA Enabled for HCA 0 " \
        "'mlx5_0')"
