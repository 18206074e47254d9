"""``pairs`` against the nvidia-smi matrices of the same real machines (../shared/realworld)."""

from __future__ import annotations

import json

import pytest
from support.cli_util import call
from support.topo_matrix import parse_matrix

# The matrices name NICs (NIC0.. / mlx5_N) but not their addresses; on these two machines the
# mapping follows from NUMA placement and port order (INDEX.md).
STELLINE = {
    "stelline-puget-wrx90-2xrtx6000ada": {"NIC0": "0000:21:00.0", "NIC1": "0000:21:00.1"},
    "stelline-asus-esc8000a-e12-4xrtx6000ada": {"NIC0": "0000:21:00.0", "NIC1": "0000:21:00.1",
                                                "NIC2": "0000:81:00.0", "NIC3": "0000:81:00.1"},
}


def _pairs(path):
    p = call("pairs", "--json", "--from", path)
    assert p.returncode == 3, p.stderr
    assert "Traceback" not in p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("machine", sorted(STELLINE))
def test_stelline_pairs_match_nvidia_smi(realworld, machine):
    folder = realworld / machine
    header, cells, _legend = parse_matrix((folder / "nvidia-smi-topo-m.txt").read_text())
    doc = _pairs(folder / "lspci-tv.txt")
    gpus = {d["gpu_index"]: d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"}
    names = {f"GPU{i}": b for i, b in gpus.items()}
    names.update(STELLINE[machine])
    by_key = {(p["a"], p["b"]): p for p in doc["pairs"]}
    checked = 0
    for (row, col), code in cells.items():
        if not row.startswith("GPU") or row == col or code == "X":
            continue
        a, b = names[row], names[col]
        p = by_key.get((a, b)) or by_key.get((b, a))
        assert p is not None, (row, col)
        if p["pcie_path"] is None:
            # an lspci tree has no NUMA: different root buses stay NODE-or-SYS
            assert code in p["path_candidates"], (row, col, code, p)
        else:
            assert p["pcie_path"] == code, (row, col, code, p["pcie_path"])
            assert p["path"] == code  # an lspci tree shows no NVLink
        checked += 1
    assert checked >= len(gpus) * (len(gpus) - 1) // 2 + len(gpus) * len(STELLINE[machine])
    # without NUMA, the kernel, NVML or peer-memory state, no pair can be called ok
    assert all(p["verdict"] != "ok" for p in doc["pairs"])


@pytest.mark.parametrize("machine,file", [
    ("gengwg-dgx-a100-ash6", "nvidia-smi-topo-m.txt"),
    ("gengwg-dgx1", "nvidia-smi-topo-mp.txt"),
    ("oneflow-v100x8-gold5118-1mlx5", "nvidia-smi-topo-m.txt"),
    ("oneflow-v100x8-gold6271c-2mlx5", "nvidia-smi-topo-m.txt"),
    ("princeton-adroit-h11g2-4xa100", "nvidia-smi-topo-m.txt"),
    ("princeton-della-cryoem-4xa100sxm", "nvidia-smi-topo-m.txt"),
    ("princeton-traverse-ac922-4xv100", "nvidia-smi-topo-m.txt"),
    ("stelline-asus-esc8000a-e12-4xrtx6000ada", "nvidia-smi-topo-m.txt"),
])
def test_matrix_parser_reads_every_real_layout(realworld, machine, file):
    header, cells, legend = parse_matrix((realworld / machine / file).read_text())
    gpus = [h for h in header if h.startswith("GPU")]
    assert len(gpus) >= 4
    for g in gpus:
        assert cells[(g, g)] == "X"
        for h in gpus:
            assert cells[(g, h)] == cells[(h, g)]  # the matrix is symmetric
