"""What an input can show (``gdrcheck.reach``): a fact outside an input's reach is "not in this input" in every
output, never a count of 0, ``off`` or ``pass``; made-up addresses are marked and named as nvidia-smi names them."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli_util import call

from gdrcheck.reach import FACTS, SHOWS

ROOT = Path(__file__).resolve().parents[2]
SMI_Q = ROOT / "fixtures" / "nvidia-smi-q" / "h100-sxm-550.txt"
SMI_Q_ONE = ROOT / "fixtures" / "nvidia-smi-q" / "a100-pcie-40gb-470.xml"


def test_one_table_names_known_facts_only():
    assert set(SHOWS) >= {"live", "snapshot", "sysfs", "lspci", "lspci-vvv", "nccl-xml", "hwloc-xml", "topo-matrix",
                          "nvidia-smi-q"}
    for kind, facts in SHOWS.items():
        assert facts <= set(FACTS), kind
    assert "nics" not in SHOWS["nvidia-smi-q"] and "bar1" in SHOWS["nvidia-smi-q"]
    assert "numa" not in SHOWS["lspci"] and "nvlink" not in SHOWS["lspci"]


def test_nvidia_smi_q_alone_never_passes():
    r = call("check", "--from", SMI_Q_ONE)
    assert r.returncode == 3, r.stdout
    assert "GDR160" in r.stdout and "NICs: not in this input" in r.stdout
    assert not r.stdout.startswith("gdrcheck PASS")
    r = call("check", "--require", "gdr", "--from", SMI_Q_ONE)
    assert r.returncode == 3, r.stdout
    assert "GDR011" not in r.stdout and "no NIC at all" not in r.stdout
    r = call("pairs", "--json", "--from", SMI_Q_ONE)
    doc = json.loads(r.stdout)
    assert "nics" in doc["not_in_input"] and "acs" in doc["not_in_input"]
    assert doc["status"] == "unknown"


def test_fingerprint_and_prometheus_say_not_in_input():
    r = call("fingerprint", "--from", SMI_Q)
    line = r.stdout.strip()
    for key in ("nics", "nvme", "acs", "iommu", "peermem", "gpu-nic"):
        assert f" {key}=not-in-input" in f" {line}", line
    r = call("check", "--format", "prometheus", "--from", SMI_Q)
    text = r.stdout
    assert 'gdrcheck_devices{kind="nic"}' not in text
    assert 'gdrcheck_check_result{check="gdr",result="pass"} 0' in text
    assert 'gdrcheck_check_result{check="gdr",result="unknown"} 1' in text
    assert 'gdrcheck_check_result{check="gds",result="pass"} 0' in text


def test_gds_required_on_a_matrix_is_unknown(realworld):
    f = realworld / "princeton-della-cryoem-4xa100sxm" / "nvidia-smi-topo-m.txt"
    r = call("check", "--require", "gds", "--from", f)
    assert r.returncode == 3, r.stdout
    assert "GDR160" in r.stdout and "GDR013" not in r.stdout


def test_an_lspci_tree_shows_nics():
    """GDR160 does not fire where the input can show NICs (a hand-written tree, named after the case)."""
    text = ("-[0000:00]-+-00.0  Intel Corporation Device 09a2\n"
            "           +-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
            "           \\-02.0-[02]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n")
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(text)
    try:
        r = call("pairs", "--json", "--from", fh.name)
        doc = json.loads(r.stdout)
        assert "GDR160" not in {f["code"] for f in doc["findings"]}
        assert "nics" not in doc["not_in_input"]
    finally:
        Path(fh.name).unlink()


def test_made_up_addresses_are_marked_and_named(realworld):
    f = realworld / "princeton-della-cryoem-4xa100sxm" / "nvidia-smi-topo-m.txt"
    doc = json.loads(call("pairs", "--json", "--from", f).stdout)
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    assert gpus and all(d.get("synthetic") is True for d in gpus)
    for args in (("pairs",), ("check",)):
        r = call(*args, "--from", f, env={"COLUMNS": "120"})
        assert "ffff:" not in r.stdout, r.stdout
        assert "GPU0" in r.stdout
    # a real address is not marked
    tree = realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-tv.txt"
    doc = json.loads(call("pairs", "--json", "--from", tree).stdout)
    assert not any(d.get("synthetic") for d in doc["devices"])


def test_an_nccl_log_alone_never_passes_and_counts_no_nvme():
    """A job's log names its ranks' GPUs and NCCL's settings; it places no NIC or NVMe drive as a device, so
    it cannot say "0 RDMA NIC, 0 NVMe" (the SHARP-plugin log of NCCL issue 1737 used to PASS so)."""
    from gdrcheck.collectors.input_kinds import INPUT_KINDS

    assert {k.reads_as for k in INPUT_KINDS} <= set(SHOWS)  # every kind an input is read as has its row
    log = ROOT / "fixtures" / "nccl-logs-public" / "nccl-1737-two-nodes-sharp-plugin.log"
    r = call("check", "--from", log)
    assert r.returncode == 3 and "GDR160" in r.stdout, r.stdout
    fp = call("fingerprint", "--explain", "--from", log).stdout
    assert "devices.nvme=not-in-input" in fp and "devices.nic=not-in-input" in fp
