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


def _p2p(path, env=None):
    from gdrcheck.rules.base import Options

    doc = pairs_doc(evaluate(load_facts(str(path)), Options(nccl_version="2.28.9", env=env or {})))
    (pair,) = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    return pair


def test_two_nvlinked_h100s_as_nccl_connected_them():
    """NCCL 2.28.9 on two H100s joined through NVSwitch (fixtures/nccl-dump-h100-x2-vm). Live, with NVML's P2P
    status, gdrcheck's decision was the transport NCCL chose under every setting the harness ran (NOTE.md
    there). From the dump alone, NVML's status is not shown: NCCL asks it only once the level check passes
    (v2.28.9 paths.cc), so the settings that fail the level are decided, the others wait on the status."""
    d = FIXTURES / "nccl-dump-h100-x2-vm"
    log = (d / "nccl-debug-excerpt.log").read_text()
    assert "via P2P/CUMEM" in log and "GPU/0-70 (2/370.8/NVL)" in log
    pair = _p2p(d / "nccl-topo.xml")
    assert pair["path"] == "NV18" and pair["nccl"]["path_type"] == "NVL" and pair["nccl"]["within_p2p_level"]
    assert pair["nccl"]["p2p"] == "unknown" and any("NVML P2P" in x for x in pair["nccl"]["depends_on"])
    for env, word in (({"NCCL_P2P_DISABLE": "1"}, "disabled"), ({"NCCL_P2P_LEVEL": "LOC"}, "disabled"),
                      ({"NCCL_P2P_LEVEL": "NVL"}, "unknown"), ({"NCCL_P2P_LEVEL": "loc"}, "unknown")):
        got = _p2p(d / "nccl-topo.xml", env)["nccl"]
        assert got["p2p"] == word, (env, got)
    assert _p2p(d / "nccl-topo.xml", {"NCCL_P2P_LEVEL": "loc"})["nccl"]["p2p_level"] == "PXB"  # "loc" is ignored
