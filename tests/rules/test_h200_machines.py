"""gdrcheck held to what nvidia-smi and NVML said on real H200 and H100 machines (fixtures/h200-*-vm, h100-*-vm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli_util import call
from support.topo_matrix import parse_matrix

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MACHINES = sorted(p.name for p in list(FIXTURES.glob("h200-*-vm")) + list(FIXTURES.glob("h100-*-vm")))
BAR1_BYTES = {"h200": 256 << 30, "h100": 128 << 30}  # what NVML reported on each kind
P2P = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}


def _sections(text: str):
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith("== nvidia-smi topo "):
            cur = line[len("== nvidia-smi topo "):].strip()
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.fixture(params=MACHINES)
def machine(request):
    d = FIXTURES / request.param
    doc = json.loads(call("pairs", "--json", "--from", d / "snapshot.tar.gz").stdout)
    bar1 = json.loads(call("bar1", "--json", "--from", d / "snapshot.tar.gz").stdout)
    topo = _sections((d / "nvidia-smi-topo.txt").read_text())
    nvml = json.loads((d / "nvml-pairs.json").read_text())
    nvml["bar1_expected"] = BAR1_BYTES[request.param.split("-")[0]]
    return doc, bar1, topo, nvml


def test_gpu_order_matches_nvidia_smi_and_nvml(machine):
    doc, _bar1, _topo, nvml = machine
    gpus = {d["gpu_index"]: d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"}
    assert gpus == {g["index"]: "0000:" + g["bus_id"][-7:].lower() for g in nvml["gpus"]}


def test_every_gpu_pair_class_matches_topo_m_and_mp(machine):
    doc, _bar1, topo, nvml = machine
    names = {f"GPU{d['gpu_index']}": d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"}
    by = {(p["a"], p["b"]): p for p in doc["pairs"] if p["kind"] == "gpu-gpu"}
    _, m, _ = parse_matrix(topo["-m"])
    _, mp, _ = parse_matrix(topo["-mp"])
    for (r, c), code in m.items():
        if r == c or not (r.startswith("GPU") and c.startswith("GPU")):
            continue
        a, b = sorted((names[r], names[c]))
        assert by[(a, b)]["path"] == code
        assert by[(a, b)]["pcie_path"] == mp[(r, c)]
    # NVML's common ancestor 30 is the host bridge: PHB
    level = {10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
    for e in nvml["pairs"]:
        a, b = sorted(("0000:" + e["a"][-7:].lower(), "0000:" + e["b"][-7:].lower()))
        assert by[(a, b)]["pcie_path"] == level[e["common_ancestor"]]


def test_p2p_status_matches_nvml_and_topo_p2p(machine):
    doc, _bar1, topo, nvml = machine
    by = {(p["a"], p["b"]): p for p in doc["pairs"] if p["kind"] == "gpu-gpu"}
    _, r, _ = parse_matrix(topo["-p2p r"])
    _, w, _ = parse_matrix(topo["-p2p w"])
    assert all(v in ("OK", "X") for v in list(r.values()) + list(w.values()))
    for e in nvml["pairs"]:
        a, b = sorted(("0000:" + e["a"][-7:].lower(), "0000:" + e["b"][-7:].lower()))
        assert P2P[e["read"]] == P2P[e["write"]] == "OK"
        assert by[(a, b)]["nccl"]["p2p"] == "enabled" and by[(a, b)]["verdict"] == "ok"


def test_bar1_figures_match_nvml(machine):
    _doc, bar1, _topo, nvml = machine
    got = {g["bdf"]: g for g in bar1["gpus"]}
    for g in nvml["gpus"]:
        mine = got["0000:" + g["bus_id"][-7:].lower()]
        assert mine["bar1_total_bytes"] == g["bar1_total"] == nvml["bar1_expected"]
        assert mine["fb_total_bytes"] == g["fb_total"]
        assert mine["sysfs_bar1_bytes"] == g["bar1_total"]  # resource2: BAR0 is 64-bit on Hopper
        assert mine["source"] == "nvml"
    assert not bar1["findings"] or all(f["severity"] == "info" for f in bar1["findings"])


def test_what_a_vm_cannot_know_is_said(machine):
    doc, _bar1, _topo, _nvml = machine
    codes = {f["code"] for f in doc["findings"]}
    assert "GDR121" in codes  # the guest's tree is not the physical one
    # the virtio NIC is no GPUDirect NIC: it makes no pair, and the document says what it is
    assert "GDR082" not in codes
    nics = [d for d in doc["devices"] if d["kind"] == "nic"]
    assert nics and all(d["rdma"] is False and "virtio" in d["rdma_basis"] for d in nics)
    assert not [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]


def test_replay_reads_the_settings_files_the_live_run_read():
    """On the two-GPU H100 VM the live run read /root/.nccl.conf ($HOME) and /etc/nccl.conf (NOTE.md);
    the snapshot records $HOME, so its replay reads both too."""
    doc = json.loads(call("pairs", "--json", "--from", FIXTURES / "h100-x2-vm" / "snapshot.tar.gz").stdout)
    assert doc["nccl"]["settings_files_read"] == ["/root/.nccl.conf", "/etc/nccl.conf"]
