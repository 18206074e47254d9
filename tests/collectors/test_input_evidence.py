"""Evidence an input carries is used: NCCL's <net gdr>, nvidia-smi topo -p2p, the root complex's name, --env."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli_util import assert_clean_error, call

from gdrcheck.status import exit_status

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "fixtures" / "h200-x4-vm" / "nvidia-smi-topo.txt"


def _doc(*args):
    r = call("pairs", "--json", *args)
    doc = json.loads(r.stdout)
    assert r.returncode == exit_status(doc["status"]), r.stderr  # the status the document says, not any
    return doc


def test_nccl_net_gdr_settles_peer_memory(realworld):
    """IBM Cloud's dump inside the VM says <net gdr="1"> for every NIC: NCCL found peer memory working."""
    doc = _doc("--from", realworld / "ibm-cloud-gx3d-h100x8-vsi" / "nccl-topo.xml")
    nic = [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    assert len(nic) == 64
    assert not any("GDR021" in p["findings"] for p in nic)
    assert "GDR021" not in {f["code"] for f in doc["findings"]}
    pix = [p for p in nic if p["path"] == "PIX"]
    assert len(pix) == 8 and all(p["nccl"]["gdr"] == "enabled" for p in pix)
    for p in pix:  # peer memory is no longer an assumption, the IOMMU still is
        facts = {a["fact"] for a in p["expected"]["assumes"]}
        assert "peer memory" not in facts and "IOMMU" in facts


def test_a_p2p_matrix_gives_the_drivers_status(tmp_path):
    """Hand-written after the H200 VM's capture: topo -m and the -p2p r and w matrices in separate files, with
    one pair Not Supported."""
    text = TOPO.read_text()
    m = text.split("== nvidia-smi topo -mp")[0]
    r = text.split("== nvidia-smi topo -p2p r")[1].split("== nvidia-smi topo -p2p w")[0]
    w = text.split("== nvidia-smi topo -p2p w")[1].split("== nvidia-smi topo -p2p n")[0]
    (tmp_path / "m.txt").write_text(m)
    (tmp_path / "r.txt").write_text("$ nvidia-smi topo -p2p r\n" + r)
    bad = w.replace("GPU0\tX\tOK", "GPU0\tX\tNS", 1).replace("GPU1\tOK", "GPU1\tNS", 1)
    (tmp_path / "w.txt").write_text("nvidia-smi topo -p2p w\n" + bad)
    doc = _doc("--from", tmp_path / "m.txt", "--from", tmp_path / "r.txt", "--from", tmp_path / "w.txt")
    gg = {(p["a"], p["b"]): p for p in doc["pairs"] if p["kind"] == "gpu-gpu"}
    names = {d["bdf"]: d["label"] for d in doc["devices"]}
    by_label = {(names[a], names[b]): p for (a, b), p in gg.items()}
    broken = by_label[("GPU0", "GPU1")]
    assert broken["verdict"] == "fail" and broken["nccl"]["p2p"] == "disabled"
    assert not any(a["fact"] == "driver P2P status" for a in broken["expected"]["assumes"])
    others = [p for k, p in by_label.items() if k != ("GPU0", "GPU1")]
    assert all(p["verdict"] == "ok" and p["nccl"]["p2p"] == "enabled" for p in others)
    # the -p2p r alone, with its command: the read status is read, write stays unknown (GDR008; GDR009 where the
    # GPUs' model is not named, so NVLink, not in a -p2p matrix, may join them)
    doc = _doc("--from", tmp_path / "r.txt")
    assert all({"GDR008", "GDR009"} & set(p["findings"]) for p in doc["pairs"])
    assert not any(f["code"] in ("GDR007", "GDR016") for f in doc["findings"])
    assert any("P2P read status" in n for n in doc["notes"])


def test_cpu_vendor_from_the_root_complex_name(realworld):
    """The Puget WRX90's lspci -tv names its root complex 'Advanced Micro Devices ... Device 14a4': two GPUs on
    x86 AMD, so NCCL's default P2P level is SYS and their PHB pair uses P2P."""
    doc = _doc("--from", realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-tv.txt")
    assert doc["nccl"]["cpu"]["kind"] == "amd"
    assert doc["nccl"]["p2p_level"] == "SYS"
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert gg and gg[0]["path"] == "PHB"
    # a virtual machine's emulated Intel chipset says nothing of the host's CPU
    doc = _doc("--from", realworld / "kata-vra-a100x-bluefield2" / "guest-rootport-lspci-tv.txt")
    assert doc["nccl"]["cpu"]["kind"] is None


def test_env_sets_what_the_job_sets(realworld):
    f = realworld / "stelline-asus-esc8000a-e12-4xrtx6000ada" / "lspci-tv.txt"
    doc = _doc("--from", f)
    assert doc["nccl"]["p2p_level"] == "PXB|SYS"  # four GPUs on x86 AMD: the job decides
    doc = _doc("--from", f, "--env", "CUDA_VISIBLE_DEVICES=0,1")
    assert doc["nccl"]["p2p_level"] == "SYS"
    doc = _doc("--from", f, "--env", "CUDA_VISIBLE_DEVICES=0,1", "--env", "NCCL_P2P_LEVEL=PIX")
    assert doc["nccl"]["p2p_level"] == "PIX" and doc["nccl"]["overrides"] == {"NCCL_P2P_LEVEL": "PIX"}
    assert_clean_error(call("check", "--from", f, "--env", "NOEQUALS"))


ALL_OFF = "ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"


def test_acsctl_lines_beside_the_tree_settle_acs(realworld, tmp_path):
    """Hand-written lines as 'sudo lspci -vvv | grep ACSCtl' prints them, all '-': no bridge redirects, so with
    the GIGABYTE E251's tree (a GPU and a ConnectX-6 Dx under one switch) ACS is neither unknown nor assumed."""
    tree = realworld / "nvidia-l2fwd-nv-gigabyte-e251-u70" / "lspci-tv-fragment.txt"
    (tmp_path / "acs.txt").write_text(("\t\t" + ALL_OFF + "\n") * 3)
    before = _doc("--from", tree)
    assert "GDR041" in {f["code"] for f in before["findings"]}
    doc = _doc("--from", tree, "--from", tmp_path / "acs.txt")
    assert "GDR041" not in {f["code"] for f in doc["findings"]}
    assert not any(a["fact"] == "ACS redirect" for a in doc["assumes"])
    # the real node's lines alone show no device
    d = realworld / "stelline-asus-esc8000a-e12-4xrtx6000ada"
    assert_clean_error(call("pairs", "--from", d / "lspci-vvv-grep-ACSCtl.txt"))


def test_acsctl_lines_with_a_redirect_bit_leave_acs_unknown(realworld, tmp_path):
    """Hand-written: one ACSCtl line with ReqRedir+ and no address: which bridge it is, is not known."""
    tree = realworld / "nvidia-l2fwd-nv-gigabyte-e251-u70" / "lspci-tv-fragment.txt"
    (tmp_path / "acs.txt").write_text(ALL_OFF.replace("ReqRedir-", "ReqRedir+") + "\n" + ALL_OFF + "\n")
    doc = _doc("--from", tree, "--from", tmp_path / "acs.txt")
    assert "GDR041" in {f["code"] for f in doc["findings"]}


def test_a_nic_port_takes_the_numa_node_of_the_function_beside_it():
    from gdrcheck.model import PciFunction, Snapshot
    from gdrcheck.pcie.topology import Topology

    devs = (PciFunction(bdf="0000:21:00.0", root="0000:20", class_code=0x020000, vendor=0x15B3, numa_node=1),
            PciFunction(bdf="0000:21:00.1", root="0000:20", class_code=0x020000, vendor=0x15B3),
            PciFunction(bdf="0000:41:00.0", root="0000:40", class_code=0x020000, vendor=0x15B3))
    topo = Topology(Snapshot(input_kind="lspci-vvv", label="t", devices=devs))
    assert topo.numa("0000:21:00.1") == 1
    assert topo.numa("0000:41:00.0") is None


def test_nccl_version_from_the_recorded_environment(realworld):
    """NVIDIA's containers set NCCL_VERSION; a snapshot that recorded it is judged with that version's rules."""
    from gdrcheck.collectors.inputs import parse_single_file
    from gdrcheck.model import Fact, frozen_map
    from gdrcheck.record import replace
    from gdrcheck.rules.engine import evaluate

    snap = parse_single_file(str(realworld / "princeton-della-cryoem-4xa100sxm" / "nvidia-smi-topo-m.txt"))
    host = dict(snap.host)
    host["nccl_env"] = Fact({"NCCL_VERSION": {"value": "2.19.3", "source": "captured environment"}}, source="t")
    ev = evaluate(replace(snap, host=frozen_map(host)))
    assert ev.settings.version == (2, 19, 3) and "NCCL_VERSION" in ev.nccl_node.version_reason
    assert evaluate(snap).settings.version != (2, 19, 3)


PLAIN_LSPCI = """0000:00:00.0 Host bridge: Intel Corporation Sky Lake-E DMI3 Registers (rev 07)
0000:17:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)
0000:19:00.0 3D controller: NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB] (rev a1)
0000:1a:00.0 Ethernet controller: Mellanox Technologies MT28841 (rev 40)
"""


def test_plain_lspci_is_an_input_that_places_nothing(tmp_path):
    """Hand-written plain 'lspci': class and name per address, no tree. Its GPU and NIC are known, where they
    meet is not (the bridges do not say which bus they lead to), so no class is claimed."""
    f = tmp_path / "lspci.txt"
    f.write_text(PLAIN_LSPCI)
    doc = _doc("--from", f)
    kinds = {d["bdf"]: d["kind"] for d in doc["devices"]}
    assert kinds["0000:19:00.0"] == "gpu" and kinds["0000:1a:00.0"] == "nic"
    (p,) = [p for p in doc["pairs"] if p["kind"] == "gpu-nic"]
    assert p["pcie_path"] is None and set(p["path_candidates"]) == {"PIX", "PXB", "PHB", "NODE", "SYS"}
    assert p["expected"]["verdict"] in ("ok", "degraded", "fail")


def test_the_gpu_model_from_nvidia_smi_q_device_id():
    """nvidia-smi -q names an H100 SXM5 "NVIDIA H100 80GB HBM3" (no SXM in it) but gives its PCI Device Id,
    0x233010DE: the id says SXM5, so its GPUs are expected to be NVLinked (NV18*), and the fingerprint names them."""
    root = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi-q"
    for f in ("h100-sxm-550.txt",):
        doc = _doc("--from", str(root / f))
        gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
        assert gg and all(p["verdict"] == "unknown" and p["expected"]["path"] == "NV18" for p in gg)
        assert doc["fingerprint"]["lines"] and any("10de:2330" in ln for ln in doc["fingerprint"]["lines"])
    xml = _doc("--from", str(root / "a100-pcie-40gb-470.xml"))
    assert any("10de:20f1" in ln for ln in xml["fingerprint"]["lines"])  # an A100 PCIe: no NVLink expected
    assert all(p["expected"]["path"] != "NV12" for p in xml["pairs"] if p["kind"] == "gpu-gpu")
