"""The expected answer beside every undecided pair (``expected``, ``expected_status``, ``assumes``): on every real
input, against NCCL's rules for the classes a matrix states, and never against what the input shows."""

from __future__ import annotations

import re

import pytest
from support.cli_util import call

from gdrcheck.collectors.inputs import parse_single_file
from gdrcheck.documents.pairs import pairs_doc, status_and_missing
from gdrcheck.model import Fact, frozen_map
from gdrcheck.record import replace
from gdrcheck.rules.engine import evaluate

INPUTS = ("*.xml", "*lspci-tv*.txt", "nvidia-smi-topo-m*.txt", "lspci-vvv-selected.txt")


def _doc(path, snap=None):
    snap = snap if snap is not None else parse_single_file(str(path))
    ev = evaluate(snap)
    return pairs_doc(ev), ev


def _real_inputs(realworld):
    out = []
    for pat in INPUTS:
        out += [p for p in realworld.glob(f"*/{pat}") if "graph" not in p.name]
    return sorted(out)


def test_every_real_pair_has_an_expected_answer(realworld):
    files = _real_inputs(realworld)
    assert len(files) >= 20
    for f in files:
        doc, ev = _doc(f)
        where = f"{f.parent.name}/{f.name}"
        assert doc["expected_status"] in ("pass", "fail"), where
        for p in doc["pairs"]:
            e = p["expected"]
            assert e["verdict"] in ("ok", "degraded", "fail"), (where, p)
            word = {"gpu-nic": "gdr", "gpu-gpu": "p2p"}.get(p["kind"])
            if word:
                assert e["nccl"][word] in ("enabled", "disabled"), (where, p)
            for a in e["assumes"]:
                assert a["fact"] and a["assumed"] and a["settle"], (where, a)
            if p["verdict"] != "unknown" and not e["assumes"]:
                assert e["verdict"] == p["verdict"], (where, p)
        # an assumption never moves the status or the exit status
        assert doc["status"] == ("pass" if status_and_missing(ev)[0] == "pass" else doc["status"])
        if doc["status"] == "unknown":
            assert status_and_missing(ev)[0] == "unknown"
            assert doc["assumes"], where
            for a in doc["assumes"]:
                assert a["pairs"] >= (1 if doc["pairs"] and not a["fact"].startswith("GDR12") else 0), (where, a)


def _classes(doc):
    """(label of a, label of b) -> the class the matrix states, and the labels of GPU pairs joined by NVLink."""
    names = {d["bdf"]: d.get("label") for d in doc["devices"]}
    cls, nv = {}, set()
    for p in doc["pairs"]:
        cls[(p["a"], p["b"])] = p["pcie_path"]
        if (p["path"] or "").startswith("NV"):
            nv.add(frozenset((p["a"], p["b"])))
    return names, cls, nv


MATRICES = ("gengwg-dgx1/nvidia-smi-topo-mp.txt", "gengwg-dgx-a100-ash6/nvidia-smi-topo-m.txt",
            "princeton-adroit-h11g2-4xa100/nvidia-smi-topo-m.txt",
            "princeton-della-cryoem-4xa100sxm/nvidia-smi-topo-m.txt",
            "oneflow-v100x8-gold5118-1mlx5/nvidia-smi-topo-m.txt",
            "stelline-asus-esc8000a-e12-4xrtx6000ada/nvidia-smi-topo-m.txt")


@pytest.mark.parametrize("rel", MATRICES)
def test_matrix_expected_decisions_follow_ncclS_levels(realworld, rel):
    """More than two GPUs: NCCL's default P2P level is PXB on any CPU, and its GDR level PXB (P2C); P2P goes over
    NVLink or through one NVLinked GPU (NVB), GDR through the NIC's local GPU over NVLink (PXN)."""
    doc, _ev = _doc(realworld / rel)
    _names, cls, nv = _classes(doc)
    gpus = [d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"]
    assert len(gpus) > 2
    close = ("PIX", "PXB")
    for p in doc["pairs"]:
        a, b = p["a"], p["b"]
        if p["kind"] == "gpu-gpu":
            nvb = any(frozenset((a, k)) in nv and frozenset((k, b)) in nv for k in gpus if k not in (a, b))
            want = frozenset((a, b)) in nv or nvb or p["pcie_path"] in close
            assert (p["expected"]["nccl"]["p2p"] == "enabled") == want, (rel, p)
        elif p["kind"] == "gpu-nic":
            # PXN relays only through the NIC's one local GPU (ncclTopoGetLocalGpu, v2.30.7 topo.cc:2110-2134):
            # the first, in bus order, of the GPUs closest to the NIC
            order = ("PIX", "PXB", "PHB", "NODE", "SYS")
            rank = {k: order.index(cls[(k, b)]) for k in gpus if cls.get((k, b)) in order}
            local = [k for k in gpus if rank and rank.get(k) == min(rank.values())]
            relay = local[0] if local and cls[(local[0], b)] in close else None
            pxn = relay not in (None, a) and frozenset((a, relay)) in nv
            want = p["pcie_path"] in close or pxn
            assert (p["expected"]["nccl"]["gdr"] == "enabled") == want, (rel, p)


def test_eight_gpus_all_sys_have_no_p2p_at_the_default_level(tmp_path):
    """An 8-GPU ``topo -m`` with every GPU pair SYS and no NV#: more than two GPUs of the job, so NCCL's default
    level is PXB whatever the CPU, and P2P is off on all 28 pairs."""
    gpus = [f"GPU{i}" for i in range(8)]
    rows = ["\t" + "\t".join(gpus) + "\tCPU Affinity\tNUMA Affinity"]
    for i, g in enumerate(gpus):
        rows.append(g + "\t" + "\t".join(" X " if j == i else "SYS" for j in range(8)) + f"\t0-7\t{i // 4}")
    text = "\n".join(rows) + "\n\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP " \
                             "interconnect between NUMA nodes (e.g., QPI/UPI)\n"
    f = tmp_path / "eight-sys.txt"
    f.write_text(text)
    doc, _ev = _doc(f)
    own = {p["nccl"]["p2p"] for p in doc["pairs"] if p["kind"] == "gpu-gpu"}
    assert own <= {"unknown", "disabled"}
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert len(gg) == 28
    assert all(p["expected"]["nccl"]["p2p"] == "disabled" for p in gg)
    assert all(p["expected"]["verdict"] == "degraded" for p in gg)


def test_ibm_cloud_pix_pairs_expected_gdr(realworld):
    doc, ev = _doc(realworld / "ibm-cloud-gx3d-h100x8-vsi" / "nccl-topo.xml")
    pix = [p for p in doc["pairs"] if p["kind"] == "gpu-nic" and p["path"] == "PIX"]
    assert len(pix) == 8
    for p in pix:
        assert p["expected"] == {**p["expected"], "verdict": "ok", "nccl": {"gdr": "enabled"}}
    assert doc["status"] == "unknown" and status_and_missing(ev)[0] == "unknown"
    assert doc["expected_status"] == "pass"


def test_nothing_is_assumed_against_evidence(realworld):
    """An input that shows no peer-memory path: the expected answer fails GPUDirect RDMA and assumes nothing
    about peer memory."""
    snap = parse_single_file(str(realworld / "nvidia-l2fwd-nv-gigabyte-e251-u70" / "lspci-tv-fragment.txt"))
    host = dict(snap.host)
    host["peermem"] = Fact({"nvidia_peermem_loaded": False, "nv_peer_mem_loaded": False,
                            "nccl_files": {"/sys/kernel/mm/memory_peers/nv_mem/version": False,
                                           "/sys/module/nvidia_peermem/version": False}}, source="test")
    host["dmabuf"] = Fact({"possible": False}, source="test")
    doc, _ev = _doc(None, replace(snap, host=frozen_map(host)))
    nic = [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    assert nic
    for p in nic:
        assert p["expected"]["verdict"] == "fail", p
        assert not any(a["fact"] == "peer memory" for a in p["expected"]["assumes"]), p
    assert doc["expected_status"] == "fail"


def test_a_node_read_whole_assumes_nothing():
    from pathlib import Path

    snap_path = Path(__file__).resolve().parents[2] / "fixtures" / "h200-x4-vm" / "snapshot.tar.gz"
    r = call("pairs", "--json", "--from", snap_path)
    import json

    doc = json.loads(r.stdout)
    assert doc["status"] == "pass" and doc["expected_status"] == "pass" and doc["assumes"] == []
    for p in doc["pairs"]:
        assert p["expected"]["assumes"] == [] and p["expected"]["verdict"] == p["verdict"]


def test_text_check_and_matrix_show_the_expected_answer(realworld):
    f = realworld / "nvidia-l2fwd-nv-gigabyte-e251-u70" / "lspci-tv-fragment.txt"
    r = call("check", "--from", f)
    assert r.returncode == 3
    lines = r.stdout.splitlines()
    # the question first (issue 36): will GPUDirect RDMA, P2P and GDS be used here; then the gate's expected answer
    assert lines[0] == ("gdrcheck UNKNOWN on this input: GPUDirect RDMA unknown (expected yes), GPU P2P "
                        "not-applicable, GPUDirect Storage not-applicable"), lines[0]
    gate = next(ln for ln in lines if ln.startswith("gate: "))
    assert gate.startswith("gate: expected PASS if: peer memory loaded, IOMMU off or passthrough, ACS redirect "
                           "off"), gate
    assert gate.endswith("(run gdrcheck on the node)")
    r = call("pairs", "--from", f, env={"COLUMNS": "100"})
    assert r.returncode == 3
    assert re.search(r"^GPU0\s+PIX\*\s", r.stdout, re.M), r.stdout
    assert "* undecided on this input; the class and mark shown are expected if: peer memory loaded" in r.stdout
