"""pairs with a job's NCCL log: the log's version and settings judge, each pair the log shows gets NCCL's choice
beside the prediction, and each disagreement its likely cause (GDR180-GDR186).

Real runs: fixtures/nccl-runs-4gpu-vm (four NVSwitch H200s, NCCL 2.28.9 under 18 settings, with the node's
snapshot). Hand-written cases are named after the case and built from those logs or from the scenario node
``healthy-gdr-node`` (tests/builders/scenarios.py)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from builders import scenarios
from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUNS = FIXTURES / "nccl-runs-4gpu-vm"
RUN_NAMES = sorted(p.name for p in RUNS.iterdir() if (p / "nccl.log").is_file())


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """The 4-GPU node's snapshot, unpacked once."""
    d = tmp_path_factory.mktemp("snap")
    with tarfile.open(RUNS / "snapshot.tar.gz") as t:
        t.extractall(d, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    kids = [p for p in d.iterdir()]
    return kids[0] if len(kids) == 1 and kids[0].is_dir() and not (d / "sys").exists() else d


def _doc(*paths, **opts):
    return pairs_doc(evaluate(load_facts(tuple(str(p) for p in paths)), Options(**opts)))


def _codes(doc):
    return {f["code"] for f in doc["findings"]}


def test_eighteen_runs_are_reconciled_with_no_disagreement(node):
    assert len(RUN_NAMES) == 18
    for name in RUN_NAMES:
        doc = _doc(node, RUNS / name / "nccl.log")
        log = doc["nccl"]["log"]
        want = 1 if name == "two-gpus-cuda-visible" else 6
        assert (log["pairs_observed"], log["pairs_agree"], log["pairs_differ"]) == (want, want, 0), (name, log)
        assert log["summary"].startswith(f"NCCL did what the node predicts: {want} of {want} pair"), name
        assert not _codes(doc) & {"GDR180", "GDR181", "GDR182", "GDR184"}, name
        assert doc["nccl"]["version"] == "2.28.9" and "job's NCCL log" in doc["nccl"]["version_reason"]


@pytest.mark.parametrize("run, p2p, transport", [
    ("default", "enabled", "P2P/CUMEM"),
    ("p2p-disable", "disabled", "SHM/direct/direct"),
    ("p2p-level-0x0-hex", "disabled", "SHM/direct/direct"),
    ("conf-file-p2p-loc", "disabled", "SHM/direct/direct"),
    ("p2p-level-loc-lower", "enabled", "P2P/CUMEM"),
    ("p2p-use-cuda-memcpy", "enabled", "P2P/CUMEM/CE"),
    ("p2p-disable-shm-disable", "disabled", "NET/Socket/0/Shared"),
])
def test_the_jobs_settings_decide_and_observed_sits_beside(node, run, p2p, transport):
    doc = _doc(node, RUNS / run / "nccl.log")
    pair = next(p for p in doc["pairs"] if (p["a"], p["b"]) == ("0000:00:06.0", "0000:00:08.0"))
    obs = pair["nccl"]["observed"]
    assert pair["nccl"]["p2p"] == p2p and obs["p2p"] == p2p and obs["agrees"] is True
    assert transport in obs["transport"] and "NCCL INFO Channel" in obs["line"]


def test_without_the_log_the_node_predicts_p2p(node):
    """The node itself has no NCCL setting: the job's NCCL_P2P_DISABLE=1 is what turns P2P off."""
    doc = _doc(node)
    assert {p["nccl"]["p2p"] for p in doc["pairs"]} == {"enabled"} and "log" not in doc["nccl"]


def test_log_version_replaces_nccl_version_option(node):
    doc = _doc(node, RUNS / "default" / "nccl.log", nccl_version="2.21.5")
    assert doc["nccl"]["version"] == "2.28.9" and "instead of --nccl-version 2.21.5" in doc["nccl"]["version_reason"]


def test_two_gpus_only_their_pair(node):
    doc = _doc(node, RUNS / "two-gpus-cuda-visible" / "nccl.log")
    seen = [(p["a"], p["b"]) for p in doc["pairs"] if "observed" in p["nccl"]]
    assert seen == [("0000:00:06.0", "0000:00:07.0")]


def test_log_line_cut_of_its_setting_is_a_disagreement(node, tmp_path):
    """p2p-disable-without-its-setting-line: the p2p-disable log with NCCL's 'set by environment' lines taken out
    (a paste that left them out): NCCL used SHM, the node predicts P2P, and nothing gdrcheck knows explains it."""
    text = (RUNS / "p2p-disable" / "nccl.log").read_text()
    log = tmp_path / "nccl.log"
    log.write_text("\n".join(x for x in text.splitlines() if "set by environment" not in x) + "\n")
    doc = _doc(node, log)
    assert doc["nccl"]["log"]["pairs_differ"] == 6
    f = [x for x in doc["findings"] if x["code"] == "GDR180"]
    assert f and f[0]["severity"] == "warning" and f[0]["effect"] == "degraded"
    assert "gdrcheck's model is wrong here" in f[0]["message"] and "SHM/direct/direct" in f[0]["message"]
    assert {p["verdict"] for p in doc["pairs"]} == {"degraded"}


def test_topology_file_of_the_job_explains(node, tmp_path):
    """topo-file-shm: the topo-file-split-cpu-no-nvlink log with its connections made SHM: the job names an
    NCCL_TOPO_FILE the input does not carry, which is the cause, and the finding only informs."""
    text = (RUNS / "topo-file-split-cpu-no-nvlink" / "nccl.log").read_text()
    log = tmp_path / "nccl.log"
    log.write_text(text.replace("via P2P/CUMEM", "via SHM/direct/direct"))
    doc = _doc(node, log)
    f = [x for x in doc["findings"] if x["code"] == "GDR180"]
    assert f and f[0]["severity"] == "info" and "effect" not in f[0]
    assert "NCCL_TOPO_FILE=/tmp/cap/nccl-runs/topo-file-split-cpu-no-nvlink/topo.xml" in f[0]["message"]
    assert {p["verdict"] for p in doc["pairs"]} == {"ok"}


def test_other_program_output_between_the_lines(node, tmp_path):
    """default-with-python-output: PyTorch's and the program's own lines interleaved with NCCL's."""
    lines = (RUNS / "default" / "nccl.log").read_text().splitlines()
    out = []
    for i, x in enumerate(lines):
        out.append(x)
        if i % 7 == 0:
            out.append(f"[rank{i % 4}]:[W1128 08:40:0{i % 10}] step {i} loss 0.{i}")
    log = tmp_path / "job.out"
    log.write_text("\n".join(out) + "\n")
    doc = _doc(node, log)
    assert doc["nccl"]["log"]["pairs_agree"] == 6


def test_the_log_and_the_matrix_in_one_paste(tmp_path):
    """The 2-GPU excerpt pasted under the node's nvidia-smi topo -m (fixtures/h100-x2-vm), as in a ticket."""
    paste = tmp_path / "ticket.txt"
    paste.write_text((FIXTURES / "h100-x2-vm" / "nvidia-smi-topo.txt").read_text() + "\n"
                     + (FIXTURES / "nccl-dump-h100-x2-vm" / "nccl-debug-excerpt.log").read_text())
    doc = _doc(paste)
    pair = next(p for p in doc["pairs"] if p["kind"] == "gpu-gpu")
    assert pair["path"] == "NV18" and pair["nccl"]["observed"]["transport"] == "P2P/CUMEM"
    # the paste's topo -p2p r/w matrices give the driver's P2P status, so the prediction is definite and NCCL agrees
    assert pair["nccl"]["p2p"] == "enabled" and pair["nccl"]["observed"]["agrees"] is True
    assert doc["nccl"]["log"]["summary"] == "NCCL did what the node predicts: 1 of 1 pair (2 connections)"


def test_a_matrix_alone_and_the_log_settles_the_p2p_status(tmp_path):
    """topo -m without its -p2p matrices: the driver's P2P status is not in the input; NCCL 2.28.9 used P2P
    between the two GPUs, which it does only where NVML says OK, so the log settles the status (and says so)."""
    matrix = (FIXTURES / "h100-x2-vm" / "nvidia-smi-topo.txt").read_text().split("== nvidia-smi topo -p2p")[0]
    paste = tmp_path / "ticket.txt"
    paste.write_text(matrix + "\n" + (FIXTURES / "nccl-dump-h100-x2-vm" / "nccl-debug-excerpt.log").read_text())
    doc = _doc(paste)
    pair = next(p for p in doc["pairs"] if p["kind"] == "gpu-gpu")
    assert pair["nccl"]["p2p"] == "enabled" and "OK from the job's NCCL log" in pair["nccl"]["reason"]
    assert "GDR008" not in _codes(doc) and any("from the job's NCCL log" in n for n in doc["notes"])


def test_p2p_status_is_not_settled_by_an_old_nccl_or_by_ignore_2(tmp_path):
    """the-excerpt-as-2.18.6 / with NCCL_IGNORE_DISABLED_P2P=2: NCCL did not turn P2P off for a bad status
    (before 2.19 on PCIe; =2 skips NVML), so P2P used says nothing of the status."""
    matrix = (FIXTURES / "h100-x2-vm" / "nvidia-smi-topo.txt").read_text().split("== nvidia-smi topo -p2p")[0]
    excerpt = (FIXTURES / "nccl-dump-h100-x2-vm" / "nccl-debug-excerpt.log").read_text()
    for name, text in (("old", excerpt.replace("NCCL version 2.28.9", "NCCL version 2.18.6")),
                       ("ignore", "NCCL INFO NCCL_IGNORE_DISABLED_P2P set by environment to 2.\n" + excerpt)):
        paste = tmp_path / f"{name}.txt"
        paste.write_text(matrix + "\n" + text)
        doc = _doc(paste)
        assert "GDR008" in _codes(doc), name


def test_json_text_and_report_carry_it(node, tmp_path):
    from support.cli_util import call

    log = RUNS / "p2p-disable" / "nccl.log"
    text = " ".join(call("pairs", "--from", str(node), "--from", str(log)).stdout.split())
    assert "NCCL did what the node predicts: 6 of 6 pairs" in text and "NCCL used SHM/direct/direct" in text
    j = json.loads(call("pairs", "--json", "--from", str(node), "--from", str(log)).stdout)
    assert j["pairs"][0]["nccl"]["observed"]["agrees"] is True
    page = tmp_path / "r.html"
    assert call("report", "--from", str(node), "--from", str(log), "-o", str(page)).returncode == 0
    html = page.read_text()
    assert '<section id="nccl-log"><h2>What NCCL did</h2>' in html and "NCCL did what the node predicts" in html
    from jsonschema import validate

    validate(j, json.loads((Path(__file__).resolve().parents[2] / "gdrcheck/schemas/pairs.schema.json").read_text()))


# ---------------------------------------------------------------------------
# GPU-NIC: the scenario node healthy-gdr-node (GPU0-3 at 03, 04, 83, 84; mlx5_0 by GPU0/1, mlx5_1 by GPU2/3)

HEAD = """gpu-node-01:100:100 [0] NCCL INFO cudaDriverVersion 12040
gpu-node-01:100:100 [0] NCCL INFO NCCL version {version}
{plugin}gpu-node-01:100:120 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>
gpu-node-01:100:120 [0] NCCL INFO NET/IB : GPU Direct RDMA {hca} for HCA 0 'mlx5_0'
gpu-node-01:100:120 [0] NCCL INFO NET/IB : GPU Direct RDMA {hca} for HCA 1 'mlx5_1'
gpu-node-01:100:120 [0] NCCL INFO Using network IB
"""
RANKS = "".join(
    f"{h}:{100 + i}:{120 + i} [{i % 4}] NCCL INFO ncclCommInitRank comm 0x{i} rank {i} nranks 8 cudaDev {i % 4} "
    f"nvmlDev {i % 4} busId {bus} commId 0x42 - Init START\n"
    for i, (h, bus) in enumerate([("gpu-node-01", b) for b in ("3000", "4000", "83000", "84000")]
                                 + [("gpu-node-02", b) for b in ("3000", "4000", "83000", "84000")]))
CONNS = """gpu-node-01:100:120 [0] NCCL INFO Channel 00/0 : 4[0] -> 0[0] [receive] via NET/IB/0{gdr}
gpu-node-01:100:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] [send] via NET/IB/0{gdr}
gpu-node-02:104:124 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] [receive] via NET/IB/0{gdr}
gpu-node-01:100:120 [0] NCCL INFO Channel 01/0 : 0[0] -> 6[2] [send] via NET/IB/1(2){gdr}
gpu-node-01:100:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
gpu-node-01:101:121 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM
gpu-node-01:100:120 [0] transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion from peer with error 12
"""


def _gdr_case(tmp_path, *, gdr="/GDRDMA", hca="Enabled", plugin="", version="2.21.5+cuda12.4"):
    node = scenarios.scenario(tmp_path, "healthy-gdr-node")
    log = tmp_path / "job.log"
    log.write_text(HEAD.format(plugin=plugin, hca=hca, version=version) + RANKS + CONNS.format(gdr=gdr))
    return _doc(node, log)


def _pair(doc, a, b):
    return next(p for p in doc["pairs"] if (p["a"], p["b"]) == (a, b))


def test_two_nodes_gdr_pxn_and_the_other_host_kept_apart(tmp_path):
    """two-nodes-gdrdma: NCCL used GPUDirect RDMA as predicted; GPU0 reaches mlx5_1 through GPU2 (PXN)."""
    doc = _gdr_case(tmp_path)
    log = doc["nccl"]["log"]
    assert log["host"] == "gpu-node-01" and log["host_reason"] == "the node's host name"
    obs = _pair(doc, "0000:03:00.0", "0000:05:00.0")["nccl"]["observed"]
    assert obs["gdr"] == "enabled" and obs["agrees"] is True and obs["connections"] == 2  # gpu-node-02's line: not
    pxn = _pair(doc, "0000:03:00.0", "0000:85:00.0")["nccl"]
    assert pxn["observed"]["via"] == "0000:83:00.0" and pxn["observed"]["transport"] == "NET/IB/1(2)/GDRDMA"
    codes = _codes(doc)
    assert {"GDR182", "GDR183"} <= codes and not codes & {"GDR180", "GDR181", "GDR184", "GDR186"}
    assert log["pairs_differ"] == 0


def test_container_without_peer_memory(tmp_path):
    """two-nodes-container-without-peermem (NCCL 2.28.9, whose peer-memory file the node has): the job's NCCL
    found no peer memory for mlx5_0 and sent without /GDRDMA. NCCL's per-HCA line is NCCL's own NIC flag, so the
    job's prediction follows it (and agrees); GDR186 says the node has what the job did not see."""
    doc = _gdr_case(tmp_path, gdr="", hca="Disabled", version="2.28.9+cuda13.0")
    pair = _pair(doc, "0000:03:00.0", "0000:05:00.0")["nccl"]
    assert pair["gdr"] == "disabled" and "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'" in pair["reason"]
    assert pair["observed"]["agrees"] is True
    f = next(x for x in doc["findings"] if x["code"] == "GDR186")
    assert f["subject"] == ["0000:05:00.0"] and "container" in f["message"]
    # two-nodes-hca-enabled-no-gdrdma: NCCL said the HCA can, and still sent without /GDRDMA: nothing gdrcheck
    # knows explains that
    doc = _gdr_case(tmp_path / "b", gdr="", hca="Enabled", version="2.28.9+cuda13.0")
    f = next(x for x in doc["findings"] if x["code"] == "GDR181" and x["subject"][1] == "0000:05:00.0")
    assert f["effect"] == "degraded" and "gdrcheck's model is wrong here" in f["message"]


def test_external_net_plugin(tmp_path):
    """two-nodes-external-plugin: an external plugin decided no GPUDirect RDMA."""
    doc = _gdr_case(tmp_path, gdr="", plugin="gpu-node-01:100:120 [0] NCCL INFO NET/Plugin: Loaded net plugin "
                                              "NCCL RDMA Plugin v8 (v8)\n")
    f = next(x for x in doc["findings"] if x["code"] == "GDR181")
    assert "external net plugin (NCCL RDMA Plugin v8)" in f["message"]


def test_log_of_another_node(tmp_path, node):
    """The 4-GPU log held to the scenario node: its bus ids are not there."""
    doc = _doc(scenarios.scenario(tmp_path, "healthy-gdr-node"), RUNS / "default" / "nccl.log")
    assert "GDR184" in _codes(doc) and doc["nccl"]["log"]["pairs_observed"] == 0


def test_version_not_on_the_node(node, tmp_path):
    """default-as-2.27.3: the default run's log with its version line saying 2.27.3, which the node does not carry
    (it has 2.28.9); the real log stays quiet."""
    assert "GDR185" not in _codes(_doc(node, RUNS / "default" / "nccl.log"))
    log = tmp_path / "nccl.log"
    log.write_text((RUNS / "default" / "nccl.log").read_text().replace("NCCL version 2.28.9", "NCCL version 2.27.3"))
    doc = _doc(node, log)
    assert "GDR185" in _codes(doc) and doc["nccl"]["version"] == "2.27.3"


def test_nccl_own_dump_and_its_log():
    """fixtures/nccl-dump-h100-x2-vm: NCCL's topology dump and its log excerpt (no host prefix, no Init lines:
    the bracket is the nvmlDev, matched by PCI bus order)."""
    d = FIXTURES / "nccl-dump-h100-x2-vm"
    doc = _doc(d / "nccl-topo.xml", d / "nccl-debug-excerpt.log")
    obs = doc["pairs"][0]["nccl"]["observed"]
    assert obs["p2p"] == "enabled" and obs["connections"] == 2 and doc["nccl"]["version"] == "2.28.9"


def test_public_log_alone_shows_its_gpus_and_settles():
    """NVIDIA/nccl#707 (fixtures/nccl-logs-public): bus ids in the brackets, GPU pairs through NET/IB with
    GPUDirect RDMA; alone, the log gives the GPUs and NCCL's choice for each pair the prediction leaves open."""
    doc = _doc(FIXTURES / "nccl-logs-public" / "nccl-707-a100-busid-ib.log")
    assert [d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"] == ["0000:87:00.0", "0000:8d:00.0",
                                                                          "0000:c7:00.0", "0000:ca:00.0"]
    log = doc["nccl"]["log"]
    assert (log["pairs_observed"], log["pairs_settled"], log["pairs_differ"]) == (5, 5, 0)
    assert all(p["nccl"]["observed"]["p2p"] == "disabled" for p in doc["pairs"] if "observed" in p["nccl"])


def test_env_the_logged_job_did_not_have_is_named_as_the_cause(node):
    """--env NCCL_P2P_DISABLE=1 beside the default run's log: the prediction is for another job than the one
    logged, and that is the cause given, not "gdrcheck's model is wrong here"."""
    doc = _doc(node, RUNS / "default" / "nccl.log", env={"NCCL_P2P_DISABLE": "1"})
    obs = [p["nccl"]["observed"] for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert len(obs) == 6 and all(o["agrees"] is False for o in obs)
    assert all(o["cause"].startswith("--env NCCL_P2P_DISABLE=1 is not what the logged job ran with") for o in obs)


def test_log_version_newer_than_modelled_is_said(node, tmp_path):
    """A job's log naming NCCL 2.32.3 (released after 2.30.7, the newest gdrcheck models): the version judged is
    the log's, and nccl.version_reason says it is newer than the newest modelled (docs/nccl.md, "Releases after
    2.30.7")."""
    text = (RUNS / "default" / "nccl.log").read_text().replace("NCCL version 2.28.9+", "NCCL version 2.32.3+")
    log = tmp_path / "nccl.log"
    log.write_text(text)
    doc = _doc(node, log)
    assert doc["nccl"]["version"] == "2.32.3", doc["nccl"]["version_reason"]
    assert "newer than the newest release gdrcheck models (2.30.7)" in doc["nccl"]["version_reason"]
    assert doc["nccl"]["newest_modelled"] == "2.30.7"


def test_a_setting_the_log_reports_is_said_to_be_set_in_the_jobs_log(node):
    """p2p-disable: NCCL_P2P_DISABLE=1 reached the judgement through the job's log, not through --env."""
    doc = _doc(node, RUNS / "p2p-disable" / "nccl.log")
    said = [f["message"] for f in doc["findings"] if f["code"] == "GDR015" or "turns P2P off" in f["message"]]
    assert said and all("(set in the job's NCCL log)" in m for m in said)
    assert not any("gdrcheck --env" in f["message"] for f in doc["findings"])


def test_a_setting_the_model_honours_is_never_the_unmodelled_cause(node, tmp_path):
    """p2p-use-cuda-memcpy-shm: the p2p-use-cuda-memcpy log with its connections made SHM. The prediction already
    ran with the job's NCCL_P2P_USE_CUDA_MEMCPY=1 (rules.nccl.p2p honours it), so the setting is no cause: the
    disagreement is the model's, not "a setting ... which gdrcheck's rules do not model"."""
    text = (RUNS / "p2p-use-cuda-memcpy" / "nccl.log").read_text()
    assert "NCCL_P2P_USE_CUDA_MEMCPY set by environment" in text
    log = tmp_path / "nccl.log"
    log.write_text(text.replace("via P2P/CUMEM/CE", "via SHM/direct/direct"))
    doc = _doc(node, log)
    f = [x for x in doc["findings"] if x["code"] == "GDR180"]
    assert f and "gdrcheck's model is wrong here" in f[0]["message"], f
    assert "do not model" not in f[0]["message"]


def test_one_list_of_honoured_settings():
    """A setting is either honoured by NCCL's model or, where a job's log reports it, unmodelled: never both."""
    from gdrcheck.rules.nccl.core import HONOURED_ENV
    from gdrcheck.rules.nccl_log import TRANSPORT_SETTINGS, UNMODELLED

    assert not set(HONOURED_ENV) & set(UNMODELLED)
    assert set(UNMODELLED) == set(TRANSPORT_SETTINGS) - set(HONOURED_ENV)
    assert set(HONOURED_ENV) <= set(TRANSPORT_SETTINGS)
