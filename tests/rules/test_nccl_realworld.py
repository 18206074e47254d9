"""gdrcheck's NCCL prediction on NCCL's own topology dumps: flags NCCL wrote (<gpu gdr>, <net gdr>, <cpu vendor>)
are taken as NCCL's, and the decisions built on them."""

from __future__ import annotations

from pathlib import Path

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.engine import evaluate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _doc(path, version=None):
    from gdrcheck.rules.base import Options

    return pairs_doc(evaluate(load_facts(str(path)), Options(nccl_version=version)))


def test_h100_vm_dump_from_the_harness():
    """NCCL 2.28.9 on one H100 VM, sockets only (fixtures/nccl-dump-h100-x1-vm)."""
    d = FIXTURES / "nccl-dump-h100-x1-vm"
    doc = _doc(d / "nccl-topo.xml", "2.28.9")
    gpu = doc["nccl"]["gpus"]["0000:00:06.0"]
    assert gpu["gdr"] is True and gpu["sm"] == 90 and "NCCL's own" in gpu["gdr_source"]
    assert doc["nccl"]["cpu"]["kind"] == "intel" and "<cpu" in doc["nccl"]["cpu"]["source"]
    # eth0 has no PCI path: NCCL hangs it off the CPU with gdr=0; gdrcheck makes no GPU-NIC pair with it
    assert not [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    assert "GPU Direct RDMA Disabled for HCA 0 'eth0'" in (d / "nccl-debug-excerpt.log").read_text()


def test_ibm_cloud_h100_dump(realworld):
    doc = _doc(realworld / "ibm-cloud-gx3d-h100x8-vsi" / "nccl-topo.xml", "2.30.7")
    by = {(p["a"], p["b"]): p["nccl"] for p in doc["pairs"] if p["kind"] == "gpu-nic"}
    close = [v for v in by.values() if v["path_type"] == "PIX"]
    assert close and all(v["gdr"] == "enabled" and "<net gdr=\"1\">" in v["reason"] for v in close)
    far = [v for v in by.values() if v["path_type"] in ("PHB", "SYS")]
    # every far NIC is reached through the NVLinked GPU under it (PXN), if that GPU is in the communicator
    assert far and all(v["gdr"] == "enabled" and v["via"] and v["depends_on"] for v in far)
    assert doc["nccl"]["cpu"]["kind"] == "intel"
