"""A job's NCCL log beside the node's ``nvidia-smi topo -m`` (the pairing the README advertises): the matrix has no
bus ids, the log's ``ncclCommInitRank ... nvmlDev N busId B`` lines give them, so each of the log's ranks lands on
the matrix's GPU<N> and every connection line on its pair. GDR184 only where the log's GPUs are elsewhere.

Real files first: fixtures/nccl-runs-4gpu-vm (the run's log and the same machine's ``topo -m``). Hand-written
cases are named after the case: a log of the DGX A100 matrix in ../shared/realworld built from the lines of the
public excerpts (fixtures/nccl-logs-public), and the NVIDIA/nccl#707 excerpt (NCCL before 2.18: no nvmlDev)
beside a 4-GPU matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "fixtures" / "nccl-runs-4gpu-vm"
REAL = ROOT.parent / "shared" / "realworld"
DGX_A100 = REAL / "gengwg-dgx-a100-ash6" / "nvidia-smi-topo-m.txt"
ADROIT = REAL / "princeton-adroit-h11g2-4xa100" / "nvidia-smi-topo-m.txt"


def _doc(*paths, **opts):
    return pairs_doc(evaluate(load_facts(tuple(str(p) for p in paths)), Options(**opts)))


def _codes(doc):
    return {f["code"] for f in doc["findings"]}


def _gpus(doc):
    return {d["bdf"]: d.get("gpu_index") for d in doc["devices"] if d["kind"] == "gpu"}


def test_the_runs_log_beside_its_matrix_lands_on_every_pair():
    doc = _doc(RUNS / "smi" / "topo-m.txt", RUNS / "default" / "nccl.log")
    assert _gpus(doc) == {"0000:00:06.0": 0, "0000:00:07.0": 1, "0000:00:08.0": 2, "0000:00:09.0": 3}
    assert "GDR184" not in _codes(doc)
    log = doc["nccl"]["log"]
    assert log["pairs_observed"] == 6
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert all(p["nccl"]["observed"]["transport"] == "P2P/CUMEM" for p in gg)
    assert any("given the bus ids of the log's ncclCommInitRank lines" in n for n in doc["notes"])
    # NCCL 2.28.9 used P2P on every pair: the driver's P2P status is OK there, said to come from the log
    assert "GDR008" not in _codes(doc) and all(p["nccl"]["p2p"] == "enabled" for p in gg)
    assert all("OK from the job's NCCL log" in p["nccl"]["reason"] for p in gg)


def test_two_of_four_gpus_beside_the_matrix():
    """two-gpus-cuda-visible: CUDA_VISIBLE_DEVICES=0,1; nvmlDev places them, the other two stay the matrix's."""
    doc = _doc(RUNS / "smi" / "topo-m.txt", RUNS / "two-gpus-cuda-visible" / "nccl.log")
    gpus = _gpus(doc)
    assert gpus["0000:00:06.0"] == 0 and gpus["0000:00:07.0"] == 1 and len(gpus) == 4
    assert "GDR184" not in _codes(doc) and doc["nccl"]["log"]["pairs_observed"] == 1


def test_a_log_of_more_gpus_than_the_matrix_is_elsewhere(tmp_path):
    """nvmlDev-beyond-the-matrix: the default run's log with rank 3 on nvmlDev 7, beside a 4-GPU matrix."""
    log = tmp_path / "nccl.log"
    log.write_text((RUNS / "default" / "nccl.log").read_text().replace("nvmlDev 3 busId 90 ", "nvmlDev 7 busId 90 "))
    doc = _doc(RUNS / "smi" / "topo-m.txt", log)
    assert "GDR184" in _codes(doc)
    assert "0000:00:09.0" not in _gpus(doc)


def _dgx_log() -> str:
    """dgx-a100-job-log: one node's ranks of a two-node job on the DGX A100 of the realworld matrix, in the lines
    NCCL 2.21 prints (as in NVIDIA/nccl#1737): GPU0-GPU1 through P2P, GPU0 and GPU2 to the other node through
    mlx5_0 and mlx5_2 with GPUDirect RDMA."""
    bus = ["7000", "f000", "47000", "4e000", "87000", "90000", "b7000", "bd000"]
    h = "dgx-a:4197:4267"
    lines = [f"{h} [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
             f"{h} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB [2]mlx5_6:1/IB [3]mlx5_8:1/IB [RO]; "
             "OOB ib0:10.1.32.3<0>",
             f"{h} [0] NCCL INFO Using network IB"]
    for r, b in enumerate(bus):
        lines.append(f"dgx-a:{4197 + r}:{4267 + r} [{r}] NCCL INFO ncclCommInitRank comm 0x5594b5eb16a0 rank {r} "
                     f"nranks 16 cudaDev {r} nvmlDev {r} busId {b} commId 0xb458bb774b113b3a - Init START")
    lines += ["dgx-a:4197:4300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
              "dgx-a:4198:4301 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read",
              "dgx-a:4197:4302 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
              "dgx-a:4197:4302 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
              "dgx-a:4199:4303 [2] NCCL INFO Channel 01/0 : 10[2] -> 2[2] [receive] via NET/IB/1/GDRDMA"]
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(not DGX_A100.is_file(), reason="../shared/realworld is not here")
def test_dgx_a100_matrix_and_its_jobs_log(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(_dgx_log())
    doc = _doc(DGX_A100, log)
    assert "GDR184" not in _codes(doc)
    by_pair = {(p["a"], p["b"]): p for p in doc["pairs"]}
    gpus = {i: b for b, i in _gpus(doc).items()}
    assert gpus[0] == "0000:07:00.0" and gpus[2] == "0000:47:00.0"
    p01 = by_pair[(gpus[0], gpus[1])]
    assert p01["nccl"]["observed"]["transport"] == "P2P/CUMEM/read"
    nics = {d["rdma_devices"][0]: d["bdf"] for d in doc["devices"] if d["kind"] == "nic" and d.get("rdma_devices")}
    g0 = by_pair[(gpus[0], nics["mlx5_0"])]["nccl"]["observed"]
    g2 = by_pair[(gpus[2], nics["mlx5_2"])]["nccl"]["observed"]
    assert g0["gdr"] == "enabled" and g2["gdr"] == "enabled" and "GDRDMA" in g0["transport"]
    # /GDRDMA through mlx5_0 and mlx5_2: peer memory (or DMA-BUF) worked for them, said to come from the log
    reason = by_pair[(gpus[0], nics["mlx5_0"])]["nccl"]["reason"]
    assert "NCCL used GPUDirect RDMA through it in the job's log" in reason
    unknown = next(f for f in doc["findings"] if f["code"] == "GDR021")
    assert not {tuple(p)[1] for p in unknown["pairs"]} & {nics["mlx5_0"], nics["mlx5_2"]}
    assert nics["mlx5_1"] in {tuple(p)[1] for p in unknown["pairs"]}


@pytest.mark.skipif(not ADROIT.is_file(), reason="../shared/realworld is not here")
def test_a_log_before_nvmldev_is_placed_by_bus_order():
    """nccl-707-beside-a-4-gpu-matrix: the NVIDIA/nccl#707 excerpt (bus ids in the brackets, NCCL before 2.18.3)
    beside a matrix of four GPUs: the four bus ids in bus order are GPU0-GPU3."""
    doc = _doc(ADROIT, ROOT / "fixtures" / "nccl-logs-public" / "nccl-707-a100-busid-ib.log")
    assert _gpus(doc) == {"0000:87:00.0": 0, "0000:8d:00.0": 1, "0000:c7:00.0": 2, "0000:ca:00.0": 3}
    assert "GDR184" not in _codes(doc) and doc["nccl"]["log"]["pairs_observed"] == 5
    assert any("placed by PCI bus order" in n for n in doc["notes"])


def test_the_log_without_its_tag_beside_its_matrix(tmp_path):
    """default-run-tag-cut: the run's log pasted with 'NCCL INFO' cut off, beside the same machine's topo -m."""
    log = tmp_path / "cut.log"
    log.write_text((RUNS / "default" / "nccl.log").read_text().replace("NCCL INFO ", ""))
    doc = _doc(RUNS / "smi" / "topo-m.txt", log)
    assert doc["nccl"]["log"]["pairs_observed"] == 6 and "GDR184" not in _codes(doc)


def test_an_rccl_log_says_rccl(tmp_path):
    """rccl-log: RCCL's version is its own field; NCCL's stays null."""
    log = tmp_path / "rccl.log"
    log.write_text("RCCL version 2.20.5+hip6.2 f9a9e8a\n"
                   "mi300:12:12 [0] NCCL INFO comm 0x55d1 rank 0 nranks 8 cudaDev 0 busId 5000 commId 0x1 - Init "
                   "START\n")
    got = _doc(log)["nccl"]["log"]
    assert (got["rccl_version"], got["rccl_hip"], got["version"]) == ("2.20.5", "6.2", None)


@pytest.mark.skipif(not DGX_A100.is_file(), reason="../shared/realworld is not here")
def test_an_hca_printed_in_decimal_before_2_21(tmp_path):
    """dgx-a100-2.20-pair-line: NCCL 2.20 prints 'GPU Direct RDMA ... for GPU <busId> / HCA <n>' with n in decimal
    (v2.20.5 paths.cc:417), 2.21 the netId in hex (v2.21.5 paths.cc:419): HCA 10 is mlx5_10, not device 16."""
    h = "dgx-a:1:1 [0] NCCL INFO "
    log = tmp_path / "job.log"
    log.write_text(h + "NCCL version 2.20.5+cuda12.2\n"
                   + h + "NET/IB : Using " + " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(12)) + " ; OOB ib0:1<0>\n"
                   + h + "ncclCommInitRank comm 0x1 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 7000 commId 0x2 - "
                         "Init START\n"
                   + h + "GPU Direct RDMA Disabled for GPU 7000 / HCA 10 (distance 9 > 3)\n")
    doc = _doc(DGX_A100, log)
    nics = {d["rdma_devices"][0]: d["bdf"] for d in doc["devices"] if d["kind"] == "nic" and d.get("rdma_devices")}
    seen = {p["b"] for p in doc["pairs"] if p["kind"] == "gpu-nic" and "observed" in p["nccl"]}
    assert seen == {nics["mlx5_10"]}


def _as_2_17(tmp_path) -> Path:
    """two-gpus-cuda-visible-as-2.17: the real 2-GPU run's log as NCCL before 2.18 would print it (no nvmlDev)."""
    import re

    log = tmp_path / "old.log"
    text = (RUNS / "two-gpus-cuda-visible" / "nccl.log").read_text()
    text = text.replace("NCCL version 2.28.9", "NCCL version 2.17.1")
    log.write_text(re.sub(r" nvmlDev \d+", "", text))
    return log


def test_a_subset_before_nvmldev_is_not_placed_nor_elsewhere(tmp_path):
    doc = _doc(RUNS / "smi" / "topo-m.txt", _as_2_17(tmp_path))
    assert "GDR184" not in _codes(doc) and not any(b.startswith("0000:") for b in _gpus(doc))
    assert any("name 2 of the matrix's 4 GPUs" in n for n in doc["notes"])


def test_a_subset_before_nvmldev_is_placed_by_cuda_visible_devices(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    doc = _doc(RUNS / "smi" / "topo-m.txt", _as_2_17(tmp_path), env=env)
    gpus = _gpus(doc)
    assert gpus["0000:00:06.0"] == 0 and gpus["0000:00:07.0"] == 1 and len(gpus) == 4
    assert "GDR184" not in _codes(doc) and doc["nccl"]["log"]["pairs_observed"] == 1
    assert any("CUDA_VISIBLE_DEVICES=0,1 and each rank's cudaDev" in n for n in doc["notes"])
