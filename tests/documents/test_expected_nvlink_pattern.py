"""The expected answer assumes NVLink only where the parts are all joined (NVSwitch, all-to-all boards): a V100
SXM2 hybrid cube mesh, or an NCCL XML that names no GPU model, leaves each pair over PCIe (the worse answer),
with the command that settles it."""

from __future__ import annotations

from support.fact_cases import pairs_json


def test_azure_ndv2_cube_mesh_is_not_taken_as_all_to_all(realworld):
    """Azure's NDv2 topology file (8 V100 SXM2, a hybrid cube mesh) names no GPU model: no pair is NV1*."""
    doc = pairs_json(realworld / "azure-ndv2" / "nccl-topo.xml")
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert len(gg) == 28
    assert not any(str(p["expected"]["path"]).startswith("NV") for p in gg)
    assert {p["expected"]["path"] for p in gg} == {"NODE", "SYS"}
    for p in gg:
        facts = {a["fact"]: a for a in p["expected"]["assumes"]}
        assert "nvidia-smi nvlink -s" in facts["NVLink"]["settle"]
        assert "hybrid cube mesh" in facts["NVLink"]["assumed"]
        assert not any(a["fact"].startswith("GDR009") for a in p["expected"]["assumes"])


def test_dgx2h_nvswitch_v100_sxm3_is_all_to_all(realworld):
    doc = pairs_json(realworld / "hwloc-nvidia-dgx2h" / "hwloc.xml")
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert gg and all(p["expected"]["path"] == "NV6" for p in gg)
