"""``capabilities``: GPUDirect RDMA, P2P and GPUDirect Storage answered once per node, from the pairs NCCL (or
cuFile) would use, on real inputs (../shared/realworld, fixtures/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cli_util import call

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate, restrict

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PUGET = "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"
ONEFLOW = "oneflow-v100x8-gold5118-1mlx5/nvidia-smi-topo-m.txt"
DGX_A100 = "gengwg-dgx-a100-ash6/nvidia-smi-topo-m.txt"


def _doc(path, env=None):
    return pairs_doc(evaluate(load_facts(str(path)), Options(env=env or {})))


def _labels(doc):
    return {d["bdf"]: d.get("label") for d in doc["devices"]}


def test_every_gpu_nic_path_beyond_the_gdr_level_reads_no(realworld):
    """2x RTX 6000 Ada, the ConnectX NIC under another root complex: NCCL uses GPUDirect RDMA with no GPU's NIC,
    whatever the facts the lspci tree lacks (the 8x RTX 4090 class)."""
    doc = _doc(realworld / PUGET)
    gdr = doc["capabilities"]["gdr"]
    assert (gdr["answer"], gdr["expected"], gdr["gpus"], gdr["without"]) == ("no", "no", 2, 2)
    assert gdr["why"] == "NCCL uses it with no GPU's NIC: every path is beyond NCCL_NET_GDR_LEVEL=P2C"


def test_required_gdr_fails_where_the_answer_is_no(realworld):
    """check --require gdr fails (GDR014, exit 1) where the answer is no; --require p2p stays unknown (GDR015)."""
    whole = evaluate(load_facts(str(realworld / PUGET)), Options())
    gate = pairs_doc(restrict(whole, ["gdr"]))
    assert gate["status"] == "fail" and gate["summary_line"].startswith("GDR014")
    gate = pairs_doc(restrict(whole, ["p2p"]))
    assert gate["status"] == "unknown" and gate["expected_status"] == "pass"
    assert any(f["code"] == "GDR015" and f["effect"] == "unknown" for f in gate["findings"])


def test_one_nic_beside_two_gpus_is_partly_used(realworld):
    """8x V100, one mlx5 NIC under GPU2/GPU3's switch: NCCL reaches it directly from those two, through PXN from
    their NVLink peers, and not at all from GPU4, GPU5, GPU7 (SYS, beyond the level)."""
    doc = _doc(realworld / ONEFLOW)
    gdr = doc["capabilities"]["gdr"]
    assert (gdr["answer"], gdr["expected"]) == ("unknown", "partly")
    assert (gdr["with"], gdr["without"], gdr["undecided"]) == (0, 3, 5)
    assert "not in this input: peer memory, IOMMU" in gdr["why"]
    assert "not for 3 (GPU4, GPU5, GPU7)" in gdr["expected_why"]
    assert all(p["chosen"] is True for p in doc["pairs"] if p["kind"] == "gpu-nic")  # the node's only NIC


def test_chosen_is_the_nic_nccl_picks(realworld):
    """DGX A100: each GPU's two PXB NICs are chosen, its SYS NICs are not."""
    doc = _doc(realworld / DGX_A100)
    labels = _labels(doc)
    gpu0 = {labels[p["b"]]: p["chosen"] for p in doc["pairs"] if p["kind"] == "gpu-nic" and labels[p["a"]] == "GPU0"}
    assert {n for n, c in gpu0.items() if c} == {"NIC0", "NIC1"}
    assert all(c is False for n, c in gpu0.items() if n not in ("NIC0", "NIC1"))
    assert all("chosen" not in p for p in doc["pairs"] if p["kind"] == "gpu-gpu")


def test_undecided_numa_leaves_the_choice_open(realworld):
    """An lspci tree without NUMA nodes: which NIC NCCL picks is undecided (null), never guessed."""
    doc = _doc(realworld / "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt")
    assert {p["chosen"] for p in doc["pairs"] if p["kind"] == "gpu-nic"} == {None}


def test_the_jobs_gpus_are_the_pairs_counted():
    """4x H200 VM: P2P on all 6 pairs; a job of CUDA_VISIBLE_DEVICES=0,1 counts its one pair."""
    path = FIXTURES / "h200-x4-vm" / "snapshot.tar.gz"
    caps = _doc(path)["capabilities"]
    assert (caps["p2p"]["answer"], caps["p2p"]["pairs"], caps["p2p"]["with"]) == ("yes", 6, 6)
    assert caps["gdr"]["answer"] == caps["gds"]["answer"] == "not-applicable"
    caps = _doc(path, {"CUDA_VISIBLE_DEVICES": "0,1"})["capabilities"]
    assert (caps["p2p"]["answer"], caps["p2p"]["pairs"]) == ("yes", 1)


def test_a_capability_the_input_cannot_show_has_no_counts():
    caps = _doc(FIXTURES / "nvidia-smi-q" / "h100-sxm-550.txt")["capabilities"]
    assert caps["gdr"]["answer"] == caps["gdr"]["expected"] == "not-in-input"
    assert caps["gdr"]["gpus"] is None and caps["gdr"]["with"] is None


@pytest.mark.parametrize("command", ["pairs", "check"])
def test_text_views_lead_with_the_three_answers(realworld, command):
    from support.cli_util import call

    out = call(command, "--from", realworld / PUGET, env={"COLUMNS": "200"}).stdout.splitlines()
    lead = [line for line in out[:5] if line.startswith(("GPUDirect RDMA:", "GPU P2P:", "GPUDirect Storage:"))]
    assert lead[0] == "GPUDirect RDMA: no - NCCL uses it with no GPU's NIC: every path is beyond " \
                      "NCCL_NET_GDR_LEVEL=P2C"
    assert [line.split(":")[0] for line in lead] == ["GPUDirect RDMA", "GPU P2P", "GPUDirect Storage"]


def test_prometheus_carries_the_answers(realworld):
    from support.cli_util import call

    out = call("check", "--format", "prometheus", "--from", realworld / PUGET).stdout
    assert 'gdrcheck_capability{capability="gdr",answer="no"} 1' in out
    assert 'gdrcheck_capability_expected{capability="p2p",answer="yes"} 1' in out
    assert 'gdrcheck_capability_units{capability="gdr",state="without"} 2' in out


# A 4x H100 SXM5 board as `lspci -tv` draws it (one GPU per root complex of an AMD Genoa host, as on a Lenovo
# ThinkSystem SD665-N V3): no real paste of such a board is stored, so the tree is written out here
H100_SXM5_FOUR_ROOTS = "".join(
    f" {'+' if i < 3 else chr(92)}-[0000:{bus:02x}]-+-00.0  Advanced Micro Devices, Inc. [AMD] Genoa/Bergamo Root "
    f"Complex\n {'|' if i < 3 else ' '}           \\-01.1-[{bus + 1:02x}]----00.0  NVIDIA Corporation GH100 "
    "[H100 SXM5 80GB]\n" for i, bus in enumerate((0x00, 0x40, 0x80, 0xC0))).replace(" +-[0000:00]", "-+-[0000:00]", 1)


def test_h100_sxm5_gpus_are_taken_on_their_nvlink_board(tmp_path):
    """The part decides it: every H100 SXM5 sits on an NVLink board (all-to-all or NVSwitch), so P2P is expected
    over NVLink on all 6 pairs, and each pair's assumption names the table that says so."""
    path = tmp_path / "lenovo-sd665n-v3-4x-h100-sxm5-lspci-tv.txt"
    path.write_text(H100_SXM5_FOUR_ROOTS)
    doc = _doc(path)
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert len(gg) == 6
    for p in gg:
        assert p["expected"]["nccl"] == {"p2p": "enabled"}, p["expected"]
        nvlink = [a for a in p["expected"]["assumes"] if a["fact"] == "NVLink"]
        assert nvlink and "H100" in nvlink[0]["assumed"] and "device_models.py" in nvlink[0]["assumed"]
    assert doc["capabilities"]["p2p"]["expected"] == "yes"


def test_an_unshown_cpu_vendor_is_a_fork_not_a_guess(realworld):
    """2 RTX 6000 Ada as `nvidia-smi topo -m` shows them (no CPU vendor): NCCL's default P2P level is SYS on an
    AMD host with at most 2 GPUs, PXB elsewhere. The expected answer is the worse (off) with the other answer and
    its condition beside it, said once for the node."""
    doc = _doc(realworld / "stelline-puget-wrx90-2xrtx6000ada/nvidia-smi-topo-m.txt")
    (gg,) = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert gg["nccl"]["p2p"] == "unknown"
    assert gg["expected"]["nccl"] == {"p2p": "disabled"}
    assert gg["expected"]["otherwise"] == {"nccl": {"p2p": "enabled"},
                                           "if": "x86 AMD CPU and at most 2 GPUs of the communicator on this node"}
    assert not [a for a in gg["expected"]["assumes"] if a.get("brief") == "NCCL's open choices taken as off"]
    assert doc["otherwise"] == [dict(gg["expected"]["otherwise"], pairs=1)]
    from support.cli_util import call

    out = call("check", "--from", realworld / "stelline-puget-wrx90-2xrtx6000ada/nvidia-smi-topo-m.txt").stdout
    assert out.count("expected otherwise: P2P enabled on 1 pair if x86 AMD CPU") == 1


def test_a_jobs_log_of_p2p_settles_the_fork():
    """Where the job's NCCL log shows P2P on a pair whose decision forks on the CPU vendor, the log settles it:
    expected enabled, no ``otherwise``, and the assumption says the log settled it."""
    from gdrcheck.rules.expected import _fork

    view = {"p2p": "unknown", "alternatives": [{"p2p": "enabled", "if": "x86 AMD CPU and at most 2 GPUs"},
                                               {"p2p": "disabled", "if": "any other CPU"}]}
    decided, otherwise, settled = _fork(view, {"p2p": "enabled", "transport": "P2P/IPC"}, "p2p")
    assert (decided, otherwise) == ("enabled", {})
    assert "x86 AMD CPU and at most 2 GPUs" in settled["assumed"] and "NCCL log" in settled["assumed"]
    decided, otherwise, settled = _fork(view, None, "p2p")
    assert (decided, otherwise, settled) == ("disabled", {"nccl": {"p2p": "enabled"},
                                                          "if": "x86 AMD CPU and at most 2 GPUs"}, None)


def test_why_unknown_names_the_missing_facts_and_counts_agree(realworld):
    """8x V100 `topo -m`: the node is unknown for the driver's P2P status, peer memory and the IOMMU, not for
    GDR001 (a definite finding). The why line names each with its command; the summary line (NHC, NPD, Nagios,
    fleet) leads with one of them and counts the others; stderr lists the same."""
    from support.cli_util import call

    path = realworld / ONEFLOW
    doc = _doc(path)
    assert [m["code"] for m in doc["missing"]] == ["GDR008", "GDR021", "GDR043"]
    assert doc["summary_line"] == "GDR008 p2p-status-unknown GPU0 (+2 more missing)"
    p = call("check", "--from", path, env={"COLUMNS": "300"})
    why = next(line for line in p.stdout.splitlines() if line.startswith("why UNKNOWN:"))
    assert why.startswith("why UNKNOWN: not in this input: driver P2P status (GDR008: nvidia-smi topo -p2p r")
    assert "GDR001" not in why and "peer memory (GDR021: lsmod | grep nvidia_peermem" in why
    assert re.findall(r"GDR\d{3}", p.stderr) == [m["code"] for m in doc["missing"]]
    assert call("check", "--format", "nhc", "--from", path).stdout.strip() == doc["summary_line"]


def test_what_the_jobs_log_shows_decides_an_open_pair():
    """A job's NCCL log alone (4x H100 VM, default settings): the log shows P2P on every pair, so P2P is expected
    on all 6 even though the log does not place the GPUs; a log of SHM between two GPUs says so as the cause."""
    caps = _doc(FIXTURES / "nccl-runs-4gpu-vm" / "default" / "nccl.log")["capabilities"]
    assert (caps["p2p"]["answer"], caps["p2p"]["expected"], caps["p2p"]["pairs"]) == ("unknown", "yes", 6)
    p2p = _doc(FIXTURES / "nccl-logs-public" / "nccl-707-a100-busid-ib.log")["capabilities"]["p2p"]
    assert p2p["without"] == 5 and "the job's NCCL log shows NCCL did not use it" in p2p["why"]


def test_prometheus_check_result_reads_the_answer_as_require_does(realworld):
    """HP SL390s (hwloc): GPUDirect RDMA and P2P are 'no' (every path beyond NCCL's levels): check --require
    fails both, and gdrcheck_check_result said 'unknown' for gdr (its pairs were open on peer memory)."""
    f = realworld / "hwloc-hp-sl390s-g7-3xtesla-cx2" / "hwloc.xml"
    prom = call("check", "--format", "prometheus", "--from", f).stdout
    for cap in ("gdr", "p2p"):
        assert f'gdrcheck_check_result{{check="{cap}",result="fail"}} 1' in prom, prom
        assert call("check", "--require", cap, "--from", f).returncode == 1


def test_a_nearer_known_drive_is_chosen_over_drives_of_undecided_numa(realworld):
    """ASUS ESC8000A lspci: GPU0 reaches NVMe0 through its root complex (PHB) and the other drives across host
    bridges whose NUMA nodes the tree does not show (NODE or SYS): NVMe0 is the drive cuFile reads through, the
    others are not used (they read 'ok' beside the chosen PHB pair's 'degraded' before)."""
    doc = _doc(realworld / "stelline-asus-esc8000a-e12-4xrtx6000ada" / "lspci-tv.txt")
    gpu0 = min((p for p in doc["pairs"] if p["kind"] == "gpu-nvme"), key=lambda p: p["a"])["a"]
    mine = [p for p in doc["pairs"] if p["kind"] == "gpu-nvme" and p["a"] == gpu0]
    assert [p["chosen"] for p in mine if p["pcie_path"] == "PHB"] == [True]
    assert all(p["chosen"] is False for p in mine if p["pcie_path"] is None)
