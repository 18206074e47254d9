"""AMD nodes judged with RCCL's rules (gdrcheck.rules.rccl, docs/rccl.md): RCCL's own topology dumps (the two AMD
machines of ../shared/realworld and RCCL's topo_expl models in fixtures/rccl-models), generated AMD sysfs trees
read as a live node is, and an RCCL log. Each expectation names the RCCL source line it follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.amd_trees import GPUS, NICS, mi300x_node, root_port_pair
from support.cli_util import call

from gdrcheck.status import exit_status

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "rccl-models"


def _real(name: str) -> Path:
    from conftest import REALWORLD

    path = REALWORLD / name / "nccl-topo.xml"
    if not path.is_file():
        pytest.skip("../shared/realworld is not present")
    return path


def _doc(*args) -> dict:
    p = call("pairs", "--json", *args)
    assert "Traceback" not in p.stderr, p.stderr
    doc = json.loads(p.stdout)
    assert p.returncode == exit_status(doc["status"]), (p.returncode, doc["status"], p.stderr)
    return doc


def _of(doc, kind, word):
    return [p for p in doc["pairs"] if p["kind"] == kind and p["nccl"].get(word)]


def test_mi300x_dump_no_pxn_gdr_only_through_the_nic_under_the_same_switch():
    """PXN is off by default in RCCL (paths.cc:525@rocm-6.2.2): of 64 GPU-NIC pairs only the 8 PXB ones (GPU and
    NIC under one ConnectX-7 switch) have GDR; NCCL's rules relayed the other 56 through an xGMI peer."""
    doc = _doc("--from", _real("rccl-mi300x-8p-8nic"))
    n = doc["nccl"]
    assert n["library"] == "rccl" and n["rules"] == "RCCL 2.21.5 (NCCL 2.21.5 base)" and n["nccl_base"] == "2.21.5"
    assert "0x1002" in n["library_reason"]
    gn = _of(doc, "gpu-nic", "gdr")
    on = [p for p in gn if p["nccl"]["gdr"] == "enabled"]
    assert len(gn) == 64 and len(on) == 8 and {p["pcie_path"] for p in on} == {"PXB"}
    assert not any(p["nccl"].get("via") for p in gn)
    off = [p for p in gn if p["nccl"]["gdr"] == "disabled"]
    assert len(off) == 56 and all("beyond NCCL_NET_GDR_LEVEL=PXB" in p["nccl"]["reason"] for p in off)
    # the dump's <gpu gdr="1"> and <net gdr="1"> are RCCL's own flags (topo.cc:746, 765@rocm-6.2.2)
    assert all("<gpu gdr=\"1\">" in p["nccl"]["reason"] and p["nccl"]["gdr_read"] == "enabled" for p in on)
    gg = _of(doc, "gpu-gpu", "p2p")
    assert len(gg) == 28 and all(p["nccl"]["p2p"] == "enabled" and "XGMI" in p["nccl"]["reason"] for p in gg)
    assert n["p2p_level"] == "PXB"  # Intel Sapphire Rapids: PXB (paths.cc:296-298@rocm-6.2.2); XGMI is within it
    text = json.dumps(doc)
    for nvidia_only in ("R515", "CUDA driver", "peer-memory file", "nvidia-peermem", "NVML answer"):
        assert nvidia_only not in text, nvidia_only
    codes = {f["code"] for f in doc["findings"]}
    assert not codes & {"GDR008", "GDR020", "GDR021"}


def test_mi300x_text_names_rccl_and_why():
    p = call("pairs", "--from", _real("rccl-mi300x-8p-8nic"), env={"COLUMNS": "200"})
    assert "RCCL 2.21.5 (NCCL 2.21.5 base) rules:" in p.stdout and "RCCL would decide: GDR disabled for 56 pairs, " \
        "GDR enabled for 8 pairs, P2P enabled for 28 pairs" in p.stdout
    assert "NCCL 2.30.7" not in p.stdout


def test_mi300x_pxn_when_the_job_turns_it_on():
    doc = _doc("--from", _real("rccl-mi300x-8p-8nic"), "--env", "NCCL_PXN_DISABLE=0")
    gn = _of(doc, "gpu-nic", "gdr")
    assert sum(p["nccl"]["gdr"] == "enabled" for p in gn) == 64
    assert sum(bool(p["nccl"].get("via")) for p in gn) == 56
    assert all("NCCL_PXN_DISABLE=0" in p["nccl"]["reason"] for p in gn if p["nccl"].get("via"))


def test_mi50_dump_on_skylake_p2p_within_a_switch_tree_only():
    """Intel CPU: RCCL's P2P default PXB (paths.cc:296-298@rocm-6.2.2); 4 GPUs and a NIC under each switch tree."""
    doc = _doc("--from", _real("rccl-mi50-8p-pcie-2nic"))
    gg = _of(doc, "gpu-gpu", "p2p")
    on = [p for p in gg if p["nccl"]["p2p"] == "enabled"]
    assert len(gg) == 28 and len(on) == 12 and {p["pcie_path"] for p in on} <= {"PIX", "PXB"}
    assert all("beyond NCCL_P2P_LEVEL=PXB" in p["nccl"]["reason"] for p in gg if p not in on)
    gn = _of(doc, "gpu-nic", "gdr")
    assert sum(p["nccl"]["gdr"] == "enabled" for p in gn) == 8
    assert "GDR106" not in {f["code"] for f in doc["findings"]}  # no NVIDIA driver's BAR1 asked of an AMD GPU


def test_rome_model_p2p_sys_for_eight_gpus():
    """RCCL keeps SYS on AMD CPUs for any number of GPUs (paths.cc:282-301@rocm-6.2.2); NCCL 2.23+ would use PXB
    with more than two. topo_8p_rome_pcie: 8 MI50-class GPUs, no xGMI (RCCL's dump writes every xGMI peer,
    xml.cc:692-719@rocm-6.2.2)."""
    doc = _doc("--from", MODELS / "topo_8p_rome_pcie.xml")
    assert doc["nccl"]["p2p_level"] == "SYS"
    gg = _of(doc, "gpu-gpu", "p2p")
    assert len(gg) == 28 and all(p["nccl"]["p2p"] == "enabled" and "PCIe" in p["nccl"]["reason"] for p in gg)


def test_flags_zero_in_the_dump_disable_gdr_nic_first():
    """topo_8p_90a: <gpu gdr="0"> and an Ethernet <net gdr="0">; ncclTopoCheckGdr asks the NIC's flag before the
    GPU's (paths.cc:383-384@rocm-6.2.2), so the NIC's is the reason given."""
    doc = _doc("--from", MODELS / "topo_8p_90a.xml")
    gn = _of(doc, "gpu-nic", "gdr")
    assert len(gn) == 8 and all(p["nccl"]["gdr"] == "disabled" and '<net gdr="0">' in p["nccl"]["reason"] for p in gn)
    assert all("RCCL's topology dump (topo.cc:765@rocm-6.2.2)" in p["nccl"]["reason"] for p in gn)


def test_rome_rule_needs_one_bridge_each():
    """topo_4p_940: AMD family 175 (Rome/Milan in RCCL, topo.cc:507@rocm-6.2.2) but each GPU hangs directly below
    its CPU (one hop, not two): the PHB rule (paths.cc:413-428@rocm-6.2.2) does not apply; PXB decides."""
    doc = _doc("--from", MODELS / "topo_4p_940.xml")
    gn = _of(doc, "gpu-nic", "gdr")
    assert len(gn) == 16 and all(p["nccl"]["gdr"] == "disabled" for p in gn)
    assert all("NCCL_NET_GDR_LEVEL=PXB (RCCL default" in p["nccl"]["reason"] for p in gn)


def test_rome_rule_gives_phb_to_a_gpu_and_nic_on_root_ports(tmp_path):
    amd = _doc("--from", root_port_pair(tmp_path / "amd"))
    intel = _doc("--from", root_port_pair(tmp_path / "intel", cpu="GenuineIntel", family=6, model=143))
    a, i = _of(amd, "gpu-nic", "gdr")[0], _of(intel, "gpu-nic", "gdr")[0]
    assert a["nccl"]["distance"] == "PHB" and "Rome/Milan" in a["nccl"]["reason"] and a["nccl"]["gdr"] != "disabled"
    assert a["nccl"]["gdr_level"] == "PHB" and a["nccl"]["within_gdr_level"] is True and "GDR001" not in a["findings"]
    assert i["nccl"]["gdr"] == "disabled" and "beyond NCCL_NET_GDR_LEVEL=PXB" in i["nccl"]["reason"]


def test_hyperv_rule_pending_on_a_dump_without_the_bios_string():
    """topo_8p_940vm (Intel, gfx942, 8 GPUs, 8 NICs one PCI domain apart): on Hyper-V RCCL makes each GPU's own
    NIC PXB (paths.cc:653-671@rocm-6.2.2); the dump does not say the BIOS, so those 8 pairs are unknown."""
    doc = _doc("--from", MODELS / "topo_8p_940vm.xml")
    gn = _of(doc, "gpu-nic", "gdr")
    pending = [p for p in gn if p["nccl"]["gdr"] == "unknown"]
    assert len(pending) == 8 and all("bios_version" in p["nccl"]["depends_on"][0] for p in pending)
    assert sum(p["nccl"]["gdr"] == "disabled" for p in gn) == 56


def test_level_names_are_rccls():
    path = _real("rccl-mi50-8p-pcie-2nic")
    nvl = _doc("--from", path, "--env", "NCCL_P2P_LEVEL=NVL")
    assert nvl["nccl"]["p2p_level"] == "PXB" and "NCCL_P2P_LEVEL='NVL'" in nvl["nccl"]["ignored_settings"][0]
    xgmi = _doc("--from", path, "--env", "NCCL_P2P_LEVEL=XGMI")
    assert xgmi["nccl"]["p2p_level"] == "XGMI"
    assert all(p["nccl"]["p2p"] == "disabled" for p in _of(xgmi, "gpu-gpu", "p2p"))


def test_generated_amd_node_read_live_style(tmp_path):
    """A sysfs tree: KFD io_links give the xGMI links, /sys/kernel/mm/memory_peers/amdkfd the peer memory."""
    doc = _doc("--from", mi300x_node(tmp_path / "n"))
    n = doc["nccl"]
    assert n["library"] == "rccl" and n["p2p_level"] == "SYS" and n["peer_memory"]["loaded"] is True
    assert n["gfx"] == "gfx942"  # KFD gfx_target_version 90402
    by = {(p["a"], p["b"]): p for p in doc["pairs"]}
    assert by[(GPUS[0], GPUS[2])]["path"] == "XGMI1" and by[(GPUS[0], GPUS[2])]["nccl"]["p2p"] == "enabled"
    near = by[(GPUS[0], NICS[0])]
    assert near["nccl"]["gdr"] == "unknown" and near["nccl"]["rccl_cause"] == "gpu-flag-unknown"
    assert "GDR211" in near["findings"] and "GDR020" not in near["findings"]


def test_generated_amd_node_without_xgmi_keeps_p2p_across_sockets(tmp_path):
    doc = _doc("--from", mi300x_node(tmp_path / "n", xgmi=False))
    far = {(p["a"], p["b"]): p for p in doc["pairs"]}[(GPUS[0], GPUS[2])]
    assert far["pcie_path"] == "SYS" and far["nccl"]["p2p"] == "enabled"


def test_peer_memory_per_release(tmp_path):
    path = mi300x_node(tmp_path / "n", peer=False)
    old = _doc("--from", path, "--nccl-version", "2.18.6")
    assert old["nccl"]["peer_memory"]["loaded"] is False and "GDR210" in {f["code"] for f in old["findings"]}
    new = _doc("--from", path)  # 2.21.5 then reads /proc/kallsyms, which gdrcheck does not
    assert new["nccl"]["peer_memory"]["loaded"] is None and "kallsyms" in new["nccl"]["peer_memory"]["settle"]
    assert "GDR212" in {f["code"] for f in new["findings"]}
    forced = _doc("--from", path, "--env", "RCCL_FORCE_ENABLE_GDRDMA=1")  # net_ib.cc:562-576 on develop
    assert forced["nccl"]["peer_memory"]["loaded"] is True and "RCCL_FORCE_ENABLE_GDRDMA" in forced["nccl"]["overrides"]


def test_kfd_gfx_target_names():
    from gdrcheck.collectors.host_amd import gfx_name

    assert (gfx_name(90402), gfx_name(90010), gfx_name(90006), gfx_name(0)) == ("gfx942", "gfx90a", "gfx906", None)


def test_rccl_log_names_the_release(tmp_path):
    log = tmp_path / "rccl.log"
    log.write_text("node1:1:1 [0] NCCL INFO RCCL version 2.20.5+hip6.2 HEAD:3bd1b57\n"
                   "node1:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId c000 commId 0x1 - Init START\n")
    doc = _doc("--from", _real("rccl-mi300x-8p-8nic"), "--from", log)
    assert doc["nccl"]["version"] == "2.20.5" and doc["nccl"]["release"]["source"] == "ROCm/rccl rocm-6.2.2"
    text = call("pairs", "--from", _real("rccl-mi300x-8p-8nic"), "--from", log).stdout
    assert "RCCL 2.20.5 (NCCL 2.20.5 base) rules:" in text and "RCCL log rccl.log: RCCL 2.20.5" in text


def test_generated_amd_node_snapshot_replays_the_same_answer(tmp_path):
    """A snapshot of the AMD tree keeps what RCCL's rules read: the KFD topology and the amdkfd peer memory."""
    from gdrcheck.collectors.capture import capture, write_archive

    tree = mi300x_node(tmp_path / "n")
    src, manifest = capture(root=str(tree))
    archive = tmp_path / "amd.tar.gz"
    write_archive(src, manifest, str(archive))
    live, replayed = _doc("--from", tree), _doc("--from", archive)
    assert replayed["nccl"]["peer_memory"] == live["nccl"]["peer_memory"] and live["nccl"]["peer_memory"]["loaded"]
    assert [(p["path"], p["nccl"]) for p in replayed["pairs"]] == [(p["path"], p["nccl"]) for p in live["pairs"]]


def test_generated_amd_node_report_and_fingerprint_speak_rccl(tmp_path):
    tree = mi300x_node(tmp_path / "n")
    html = tmp_path / "r.html"
    assert call("report", "-o", html, "--from", tree).returncode == 3
    assert "RCCL 2.21.5 (NCCL 2.21.5 base): GDR level PXB, P2P level SYS" in html.read_text()
    fp = call("fingerprint", "--from", tree).stdout
    assert "peermem=loaded" in fp and "gpu-gpu=XGMI1:6" in fp
    absent = call("fingerprint", "--from", mi300x_node(tmp_path / "m", peer=False)).stdout
    assert "peermem=absent" in absent


ROCM_SMI = Path(__file__).resolve().parents[2] / "fixtures" / "rocm-smi"
# hand-written: three GPUs of one xGMI hive (one hop) and a fourth on PCIe (no captured paste shows a hive)
XGMI_THREE_OF_FOUR = """\
=========================== Hops between two GPUs ============================
       GPU0   GPU1   GPU2   GPU3
GPU0   0      1      1      3
GPU1   1      0      1      3
GPU2   1      1      0      3
GPU3   3      3      3      0
========================== Link Type between two GPUs ==========================
       GPU0   GPU1   GPU2   GPU3
GPU0   0      XGMI   XGMI   PCIE
GPU1   XGMI   0      XGMI   PCIE
GPU2   XGMI   XGMI   0      PCIE
GPU3   PCIE   PCIE   PCIE   0
"""


def test_rocm_smi_showtopo_of_pcie_gpus():
    """rocm_smi_lib#108: four GPUs on PCIe, one per NUMA node: no xGMI, each GPU's NUMA node; P2P rests on where
    the GPUs sit and on the CPU, which the paste does not show."""
    doc = _doc("--from", ROCM_SMI / "showtopo-4gpu-pcie.txt")
    assert doc["nccl"]["library"] == "rccl"
    assert [d.get("numa_node") for d in doc["devices"]] == [0, 1, 3, 2]
    gg = _of(doc, "gpu-gpu", "p2p")
    assert len(gg) == 6 and all(p["nvlinks"] in (0, None) and p["nccl"]["p2p"] == "unknown" for p in gg)


def test_rocm_smi_showtopo_xgmi_hive(tmp_path):
    paste = tmp_path / "xgmi-three-of-four.txt"
    paste.write_text(XGMI_THREE_OF_FOUR)
    doc = _doc("--from", paste)
    by = {(p["a"], p["b"]): p for p in doc["pairs"]}
    hive = [p for p in by.values() if p["path"] == "XGMI1"]
    assert len(hive) == 3 and all(p["nccl"]["p2p"] == "enabled" for p in hive)
    assert not any(p["path"] == "XGMI1" for p in by.values() if "ffff:03:00.0" in (p["a"], p["b"]))


def _amd_smi_table(title: str, bdfs, cell) -> str:
    """One table as amd-smi topology prints it (amdsmi_commands.py:2843-2852, amdsmi_logger.py:129-130@rocm-6.2.2):
    a header of 12 spaces and the bus ids right-aligned in 13, then each GPU's row, cells left-aligned in 13."""
    head = "".rjust(12) + "".join(b.rjust(13) for b in bdfs)
    rows = [f"{a} " + "".join(str(cell(a, b)).ljust(13) for b in bdfs) for a in bdfs]
    return f"{title}:\n{head}\n" + "\n".join(rows) + "\n\n"


def test_amd_smi_topology_by_bus_id(tmp_path):
    """Hand-written in amd-smi's own layout (no captured paste): eight MI300X of one xGMI hive, bus ids kept."""
    bdfs = ["0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0",
            "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"]
    text = (_amd_smi_table("ACCESS TABLE", bdfs, lambda a, b: "ENABLED")
            + _amd_smi_table("WEIGHT TABLE", bdfs, lambda a, b: 0 if a == b else 15)
            + _amd_smi_table("HOPS TABLE", bdfs, lambda a, b: 0 if a == b else 1)
            + _amd_smi_table("LINK TYPE TABLE", bdfs, lambda a, b: "SELF" if a == b else "XGMI"))
    paste = tmp_path / "mi300x-hive-of-eight.txt"
    paste.write_text(text)
    doc = _doc("--from", paste)
    assert doc["nccl"]["library"] == "rccl" and {d["bdf"] for d in doc["devices"]} == set(bdfs)
    gg = _of(doc, "gpu-gpu", "p2p")
    assert len(gg) == 28 and all(p["path"] == "XGMI1" and p["nccl"]["p2p"] == "enabled" for p in gg)


def test_hyperv_numa_balancing_turns_peer_memory_off(tmp_path):
    """net_ib.cc:358-364@rocm-6.2.2: on Hyper-V, numa_balancing 1 with NCCL_IB_PCI_RELAXED_ORDERING=0 means no peer
    memory, whatever the amdkfd client says."""
    path = mi300x_node(tmp_path / "n", bios="Hyper-V UEFI Release v4.1", numa_balancing="1")
    assert _doc("--from", path)["nccl"]["peer_memory"]["loaded"] is True  # relaxed ordering by default (2)
    off = _doc("--from", path, "--env", "NCCL_IB_PCI_RELAXED_ORDERING=0")
    assert off["nccl"]["peer_memory"]["loaded"] is False and "Hyper-V" in off["nccl"]["peer_memory"]["why"]


def test_dmabuf_gives_the_gpu_its_flag_only_from_2_20(tmp_path):
    """init.cc:726-727@rocm-6.2.2 sets the GPU's flag from DMA-BUF; 2.18.6 asks only for peer memory
    (init.cc:703-708@rocm-6.1.0)."""
    path = mi300x_node(tmp_path / "n", peer=False)
    old = _doc("--from", path, "--nccl-version", "2.18.6", "--env", "NCCL_DMABUF_ENABLE=1")
    near = {(p["a"], p["b"]): p for p in old["pairs"]}[(GPUS[0], NICS[0])]["nccl"]
    assert near["gdr"] == "disabled" and "RCCL 2.18" in near["reason"]
    new = _doc("--from", path, "--nccl-version", "2.20.5", "--env", "NCCL_DMABUF_ENABLE=1")
    assert {(p["a"], p["b"]): p for p in new["pairs"]}[(GPUS[0], NICS[0])]["nccl"]["gdr"] == "unknown"
