"""A GPU's chip name is not a CPU, and a GPU that lspci names only by its id is still that GPU."""

from __future__ import annotations

from support.cli_util import call
from support.fact_cases import (
    H200_SXM,
    drawn,
    gpu_and_nic_on_root_ports,
    hgx_guest,
    needs_lspci,
    pairs_json,
    pci_ids_without,
)

from gdrcheck.device_models import gpu_model, grace_part, nvlink_part
from gdrcheck.model import PciFunction


def test_chip_names_are_not_grace_products():
    for chip in ("NVIDIA Corporation GH100 [H100 SXM5 80GB]", "NVIDIA Corporation GH100[H100 SXM5 80GB]",
                 "NVIDIA Corporation GB202 [GeForce RTX 5090]", "NVIDIA Corporation GB100 [B200]",
                 "NVIDIA Corporation GB110 [B300 SXM6 AC]"):
        assert not grace_part(chip), chip
    for product in ("NVIDIA GH200 480GB", "NVIDIA Corporation GH100 [GH200 120GB / 480GB]",
                    "NVIDIA Corporation GB100 [HGX GB200]", "NVIDIA GB300"):
        assert grace_part(product), product


@needs_lspci
def test_x86_h100_node_named_gh100_is_judged_without_c2c(tmp_path):
    path = drawn(gpu_and_nic_on_root_ports(), tmp_path, "x86-h100-sxm5-and-cx7-on-root-ports")
    assert "GH100" in path.read_text()
    doc = pairs_json(path)
    (gpu,) = doc["nccl"]["gpus"].values()
    assert gpu["c2c"] is False
    (pair,) = [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    view = pair["nccl"]
    assert view["distance"] != "P2C" and "Grace" not in view["reason"]
    assert view["within_gdr_level"] is False  # PHB is past NCCL's default level on an x86 node
    assert "GDR001" in {f["code"] for f in doc["findings"]}


def test_device_ids_name_the_model_where_pci_ids_is_older():
    def fn(name, **kw):
        return PciFunction(bdf="0000:00:06.0", root="0000:00", parent=None, name=name, **kw)

    assert gpu_model(fn("NVIDIA Corporation Device 2335")) == "H200 SXM 141GB"
    assert nvlink_part(fn("NVIDIA Corporation Device 2335")) == "H200 SXM 141GB"
    assert gpu_model(fn("NVIDIA Corporation Device 10de:2330", vendor=0x10DE, device=0x2330)) == "H100 SXM5 80GB"
    assert nvlink_part(fn("NVIDIA Corporation Device 2331")) is None  # H100 PCIe
    assert gpu_model(fn("NVIDIA Corporation Device 2342")) == "GH200"


@needs_lspci
def test_hgx_h200_guest_named_device_2335_is_not_told_to_recable(tmp_path):
    old_database = pci_ids_without(tmp_path, *H200_SXM[:2])  # whatever this machine's database knows of 10de:2335
    path = drawn(hgx_guest(), tmp_path, "hgx-h200-guest-device-2335", ids=old_database)
    assert "NVIDIA Corporation Device 2335" in path.read_text()
    doc = pairs_json(path)
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert len(gg) == 28
    codes = {f["code"] for f in doc["findings"]}
    assert not codes & {"GDR002", "GDR006"}, codes
    nine = [f for f in doc["findings"] if f["code"] == "GDR009"]
    assert nine and "H200 SXM" in nine[0]["message"]
    assert "meet only at the root complex" not in call("check", "--from", path).stdout
