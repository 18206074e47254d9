"""What counts as a GPUDirect pair: only NICs that are (or may be) RDMA devices make GPU-NIC pairs, numbered
as nvidia-smi numbers them; links an input cannot show are not absent links; a virtual machine is recognised
from any input, and its fixes speak of the guest."""

from __future__ import annotations

import json

import pytest
from conftest import REALWORLD
from support.cli_util import call

from builders import scenarios

GPU = "-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
PASTES = {
    # a cloud VM's paste: the only NIC is virtio
    "virtio-nic-only": GPU + "           \\-03.0  Red Hat, Inc. Virtio network device\n",
    "i210-and-x710": GPU
    + "           +-02.0-[02]----00.0  Intel Corporation I210 Gigabit Network Connection\n"
    + "           \\-03.0-[03]--+-00.0  Intel Corporation Ethernet Controller X710 for 10GbE SFP+\n"
    + "                        \\-00.1  Intel Corporation Ethernet Controller X710 for 10GbE SFP+\n",
    "connectx-7-paste": GPU + "           \\-02.0-[02]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n",
    # two SXM GPUs under one switch in a KVM guest: NVLink not in the paste, the fixes are the host's
    "kvm-guest-lspci": "-[0000:00]-+-00.0  Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller\n"
                       "           +-01.0  Red Hat, Inc. Virtio console\n"
                       "           +-02.0-[01-03]----00.0-[02-03]--+-00.0-[03]----00.0  "
                       "NVIDIA Corporation GH100 [H100 SXM5 80GB]\n"
                       "           |                               \\-01.0-[04]----00.0  "
                       "Mellanox Technologies MT2910 Family [ConnectX-7]\n"
                       "           \\-03.0-[05]----00.0  NVIDIA Corporation GH100 [H100 SXM5 80GB]\n",
}


def _doc(tmp_path, name, *extra):
    path = tmp_path / f"{name}.txt"
    path.write_text(PASTES[name])
    p = call("pairs", "--json", "--from", path, *extra)
    assert "Traceback" not in p.stderr
    return json.loads(p.stdout)


def _nics(doc):
    return {d["bdf"]: d for d in doc["devices"] if d["kind"] == "nic"}


@pytest.mark.parametrize("name", ["virtio-nic-only", "i210-and-x710"])
def test_a_nic_that_is_no_rdma_device_makes_no_pair(name, tmp_path):
    doc = _doc(tmp_path, name)
    nics = _nics(doc)
    assert nics and all(d["rdma"] is False and "decided from the model" in d["rdma_basis"] for d in nics.values())
    assert not [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    assert not {f["code"] for f in doc["findings"]} & {"GDR001", "GDR005", "GDR082", "GDR083"}
    text = call("pairs", "--from", tmp_path / f"{name}.txt").stdout
    assert "not GPUDirect NICs (no pairs)" in text and "NIC0" not in text


def test_an_rdma_capable_model_in_a_paste_makes_a_pair_decided_from_the_model(tmp_path):
    doc = _doc(tmp_path, "connectx-7-paste")
    (nic,) = _nics(doc).values()
    assert nic["rdma"] is True and "ConnectX" in nic["rdma_basis"] and "decided from the model" in nic["rdma_basis"]
    assert [p["b"] for p in doc["pairs"] if p["kind"] == "gpu-nic"] == [nic["bdf"]]


def test_nic_numbers_follow_the_rdma_names_as_nvidia_smi_does(tmp_path):
    doc = json.loads(call("pairs", "--json", "--from",
                         scenarios.scenario(tmp_path, "rdma-names-against-bus-order")).stdout)
    labels = {d["rdma_devices"][0]: d["label"] for d in _nics(doc).values()}
    assert labels == {"mlx5_0": "NIC0", "mlx5_1": "NIC1"}
    nics = sorted(_nics(doc).values(), key=lambda d: d["bdf"])
    assert [d["label"] for d in nics] == ["NIC1", "NIC0"]  # mlx5_1 sits on the lower bus


def test_sxm_gpus_in_a_paste_are_unknown_not_host_memory_and_the_guest_gets_guest_fixes(tmp_path):
    doc = _doc(tmp_path, "kvm-guest-lspci")
    (gg,) = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert gg["verdict"] == "unknown" and gg["nccl"]["p2p"] == "unknown" and gg["path"] == gg["pcie_path"]
    assert "GDR009" in gg["findings"] and not {"GDR002", "GDR006", "GDR003"} & set(gg["findings"])
    codes = {f["code"] for f in doc["findings"]}
    assert "GDR121" in codes
    for code in ("GDR001", "GDR002", "GDR003", "GDR006", "GDR040"):
        if code in doc["rules"]:
            assert doc["rules"][code]["fix"].startswith("In a virtual machine"), code


@pytest.mark.skipif(not REALWORLD.is_dir(), reason="../shared/realworld is not present")
@pytest.mark.parametrize("name", ["aws-p4d-24xlarge", "azure-ndv2", "azure-ndv5"])
def test_nccl_files_without_nvlink_leave_gpu_pairs_unknown(name):
    doc = json.loads(call("pairs", "--json", "--from", REALWORLD / name / "nccl-topo.xml").stdout)
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert gg and all(p["verdict"] == "unknown" and p["nccl"]["p2p"] == "unknown" for p in gg)
    assert not [f for f in doc["findings"] if f["code"] in ("GDR006", "GDR002")]
    assert not [f for f in doc["findings"] if "host memory" in f["message"]]


@pytest.mark.skipif(not REALWORLD.is_dir(), reason="../shared/realworld is not present")
def test_rccl_xgmi_links_are_read_not_dropped():
    doc = json.loads(call("pairs", "--json", "--from", REALWORLD / "rccl-mi300x-8p-8nic" / "nccl-topo.xml").stdout)
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert gg and all(p["path"].startswith("XGMI") for p in gg)


@pytest.mark.skipif(not REALWORLD.is_dir(), reason="../shared/realworld is not present")
@pytest.mark.parametrize("name", ["guest-rootport-lspci-tv.txt", "guest-switchport-lspci-tv.txt",
                                  "guest-pcibridge-lspci-tv.txt"])
def test_kata_guest_pastes_are_recognised_as_a_virtual_machine(name):
    doc = json.loads(call("pairs", "--json", "--from", REALWORLD / "kata-vra-a100x-bluefield2" / name).stdout)
    vm = [f for f in doc["findings"] if f["code"] == "GDR121"]
    assert vm and "QEMU/KVM" in vm[0]["message"]


def test_one_distance_finding_per_pair(tmp_path):
    """A GPU pair beyond NCCL's P2P level gets GDR006 alone, not GDR002 and GDR003 beside it."""
    doc = json.loads(call("pairs", "--json", "--from", scenarios.scenario(tmp_path, "pcie-only-gpus")).stdout)
    for p in doc["pairs"]:
        assert len({"GDR001", "GDR002", "GDR003", "GDR006"} & set(p["findings"])) <= 1, p


@pytest.mark.skipif(not REALWORLD.is_dir(), reason="../shared/realworld is not present")
def test_a_far_nic_of_an_sxm_gpu_is_not_disabled_when_nvlink_is_not_in_the_input():
    """aws-p4d: A100 SXM4 GPUs, NCCL file without <nvlink>. NCCL would reach a far NIC through an NVLinked GPU
    closer to it (PXN): the decision depends on NVLink, never 'disabled'."""
    doc = json.loads(call("pairs", "--json", "--from", REALWORLD / "aws-p4d-24xlarge" / "nccl-topo.xml").stdout)
    far = [p for p in doc["pairs"] if p["kind"] == "gpu-nic" and p["pcie_path"] in ("NODE", "SYS")]
    assert far and all(p["nccl"]["gdr"] == "unknown" and p["verdict"] == "unknown" for p in far)
    assert all(any("NVLink" in d for d in p["nccl"]["depends_on"]) and "GDR009" in p["findings"] for p in far)
    assert not [f for f in doc["findings"] if f["code"] == "GDR001"]
