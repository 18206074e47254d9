"""A GeForce GPU has no GPUDirect RDMA at any distance: its own finding (GDR170) with a fix that can work, and no
"beyond NCCL's level" finding whose fix (NCCL_NET_GDR_LEVEL=PHB) cannot."""

from __future__ import annotations

from support.cli_util import call
from support.fact_cases import RTX_4090, drawn, gpu_and_nic_on_root_ports, needs_lspci, pairs_json


@needs_lspci
def test_geforce_beside_a_connectx7_on_root_ports(tmp_path):
    path = drawn(gpu_and_nic_on_root_ports(RTX_4090), tmp_path, "geforce-rtx-4090-and-cx7-on-root-ports")
    assert "GeForce RTX 4090" in path.read_text()
    doc = pairs_json(path)
    codes = {f["code"] for f in doc["findings"]}
    assert "GDR170" in codes and not codes & {"GDR001", "GDR002", "GDR005"}, codes
    (pair,) = [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    assert pair["verdict"] == "fail"
    text = call("pairs", "--from", path).stdout
    assert "NCCL_NET_GDR_LEVEL=PHB" not in text
    assert "data-centre GPU" in text and "professional" in text
    out = call("check", "--from", path)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("gdrcheck FAIL on this input: GPUDirect RDMA no"), lines[0]
    assert out.returncode == 1 and "GDR170" in next(ln for ln in lines if ln.startswith("gate: "))


def test_professional_rtx_6000_ada_is_not_geforce(realworld):
    doc = pairs_json(realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-tv.txt")
    assert [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    assert "GDR170" not in {f["code"] for f in doc["findings"]}
