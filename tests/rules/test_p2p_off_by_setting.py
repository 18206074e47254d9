"""NCCL_P2P_DISABLE=1 (the job's setting) turns P2P off on every GPU pair, NVLink or PCIe: one answer, GDR006
degraded with the setting as the cause (NCCL runs the pair over shared host memory; the hardware is fine)."""

from __future__ import annotations

from support.fact_cases import pairs_json

DELLA = "princeton-della-cryoem-4xa100sxm/nvidia-smi-topo-m.txt"  # four A100 SXM, NV4 between each two
PUGET = "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"  # two RTX 6000 Ada meeting at the root complex


def _gg(doc):
    return [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]


def test_della_nvlink_pairs_with_p2p_disable_are_degraded(realworld):
    doc = pairs_json(realworld / DELLA, "--env", "NCCL_P2P_DISABLE=1")
    gg = _gg(doc)
    assert gg and all(p["path"].startswith("NV") for p in gg)
    assert all("GDR006" in p["findings"] and p["expected"]["verdict"] == "degraded" for p in gg)
    msg = next(f["message"] for f in doc["findings"] if f["code"] == "GDR006")
    assert "NCCL_P2P_DISABLE=1 turns P2P off (set in gdrcheck --env)" in msg and "(NV4)" in msg


def test_della_without_the_setting_has_no_gdr006(realworld):
    doc = pairs_json(realworld / DELLA)
    assert not any("GDR006" in p["findings"] for p in _gg(doc))
    assert all(p["expected"]["verdict"] == "ok" for p in _gg(doc))


def test_puget_pcie_pair_with_p2p_disable_says_the_same(realworld):
    doc = pairs_json(realworld / PUGET, "--env", "NCCL_P2P_DISABLE=1")
    (p,) = _gg(doc)
    assert "GDR006" in p["findings"] and p["expected"]["verdict"] == "degraded"
    msg = next(f["message"] for f in doc["findings"] if f["code"] == "GDR006")
    assert "NCCL_P2P_DISABLE=1 turns P2P off" in msg and "(PHB)" in msg
