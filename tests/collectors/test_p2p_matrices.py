"""``nvidia-smi topo -p2p`` matrices as nvidia-smi prints them (issue 40): without the command line above them.

Real data: the H200 VMs' capture (fixtures/h200-x4-vm, fixtures/h200-x2-vm) holds topo -m, -mp and -p2p r, w, n
under '== nvidia-smi topo ...' titles; the cases below take those titles out or put words in their place, as
admins paste them. The refusing statuses (GNS, CNS) no machine of ours gave are hand-written and named so.
"""

from __future__ import annotations

import json

from support.cli_util import ROOT, call

from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrices
from gdrcheck.status import exit_status

FIX = ROOT / "fixtures"


def _untitled(machine: str) -> str:
    """The capture with every '== nvidia-smi topo -p2p X' title taken out (topo -m and -mp keep theirs)."""
    text = (FIX / machine / "nvidia-smi-topo.txt").read_text()
    return "\n".join(ln for ln in text.split("\n") if not ln.startswith("== nvidia-smi topo -p2p"))


def _pairs(tmp_path, text: str, *more):
    f = tmp_path / "topo.txt"
    f.write_text(text)
    p = call("pairs", "--json", "--from", f, *more)
    doc = json.loads(p.stdout)
    assert p.returncode == exit_status(doc["status"]), (p.returncode, doc["status"], p.stderr)
    return doc


def test_untitled_p2p_matrices_in_a_topo_paste_are_kept(tmp_path):
    """h200-x4-vm without the -p2p titles: the three all-OK P2P matrices are read (not dropped), and the driver's
    P2P status is settled (no GDR008) though no line says r, w or n."""
    text = _untitled("h200-x4-vm")
    ms = parse_topo_matrices(text, "t.txt")
    assert [m.p2p for m in ms] == [None, None, "", "", ""]
    doc = _pairs(tmp_path, text)
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert gg and not any("GDR008" in p["findings"] for p in gg)
    assert any("OK read as the driver's P2P read and write status (the same in every mode)" in n
               for n in doc["notes"])
    assert not any("not read" in n for n in doc["notes"])


def test_untitled_p2p_matrix_alone_is_read(tmp_path):
    """h200-x2-vm's -p2p r matrix alone, as nvidia-smi prints it (no command line): read, not refused."""
    text = _untitled("h200-x2-vm")
    alone = text[text.index(" \t\x1b[4mGPU0"):]
    alone = alone[:alone.index("Legend:")]
    doc = _pairs(tmp_path, alone)
    (gg,) = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert "GDR008" not in gg["findings"]


MATRIX_M = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPHB\t0-31\t0\nGPU1\tPHB\t X \t0-31\t0\n\n"


def _p2p(status: str, title: str = "") -> str:
    return f"{title}\n \tGPU0\tGPU1\t\n GPU0\tX\t{status}\t\n GPU1\t{status}\tX\t\n\nLegend:\n\n  X    = Self\n" \
           "  OK   = Status Ok\n  GNS  = GPU not supported\n\n"


def test_gns_without_a_title_settles_p2p_with_one_severity(tmp_path):
    """Hand-written (consumer GPUs' GNS): topo -m then an untitled -p2p matrix of GNS. The second matrix is read,
    GNS settles P2P (GDR016, not GDR008), and the finding's severity is the one `gdrcheck rules` lists."""
    doc = _pairs(tmp_path, MATRIX_M + _p2p("GNS"))
    (gg,) = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert "GDR016" in gg["findings"] and "GDR008" not in gg["findings"]
    (f,) = [f for f in doc["findings"] if f["code"] == "GDR016"]
    rules = json.loads(call("rules", "--json").stdout)
    listed = {r["code"]: r["severity"] for r in (rules["rules"] if isinstance(rules, dict) else rules)}
    assert f["severity"] == listed["GDR016"] == "warning" and f["effect"] == "degraded"
    assert any("GNS read as the driver's P2P read and write status" in n for n in doc["notes"])


def test_titles_in_words_name_read_then_write(tmp_path):
    """Hand-written: two matrices under 'P2P read:' and 'P2P write:' titles are read and write."""
    text = MATRIX_M + _p2p("OK", "P2P read:") + _p2p("CNS", "P2P write:")
    ms = parse_topo_matrices(text, "t.txt")
    assert [m.p2p for m in ms] == [None, "read", "write"]
    doc = _pairs(tmp_path, text)
    (f,) = [f for f in doc["findings"] if f["code"] == "GDR016"]
    assert "write CNS" in f["message"] and "read" not in f["message"].split(":")[-1]


def test_a_refusal_in_read_alone_settles_p2p(tmp_path):
    """Hand-written: only 'nvidia-smi topo -p2p r', with GNS: NCCL needs read and write OK, so a read refusal
    settles P2P without the write matrix."""
    doc = _pairs(tmp_path, MATRIX_M + _p2p("GNS", "$ nvidia-smi topo -p2p r"))
    (gg,) = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert "GDR016" in gg["findings"] and "GDR008" not in gg["findings"]


def test_an_untitled_all_ns_matrix_leaves_p2p_unknown(tmp_path):
    """fixtures/nccl-runs-4gpu-vm/smi/topo-p2p-p.txt, as nvidia-smi printed it: all NS on a node whose -p2p r and
    w are all OK (topo-p2p-r.txt, topo-p2p-w.txt). NS is not the same in every mode: the pairs stay unknown
    (GDR008, or GDR009 where NVLink may join them: a -p2p matrix alone names no GPU model), no refusal is
    claimed, and the note names the commands that settle it."""
    folder = FIX / "nccl-runs-4gpu-vm" / "smi"
    p = call("pairs", "--json", "--from", folder / "topo-p2p-p.txt")
    doc = json.loads(p.stdout)
    gg = [x for x in doc["pairs"] if x["kind"] == "gpu-gpu"]
    assert len(gg) == 6 and all({"GDR008", "GDR009"} & set(x["findings"]) for x in gg)
    assert not any(f["code"] in ("GDR007", "GDR016") for f in doc["findings"])
    assert any("NS left unknown" in n and "nvidia-smi topo -p2p r" in n for n in doc["notes"])
    ok = json.loads(call("pairs", "--json", "--from", folder / "topo-p2p-r.txt").stdout)
    assert not any("GDR008" in x["findings"] for x in ok["pairs"] if x["kind"] == "gpu-gpu")


def test_topo_mp_leaves_nvlink_not_in_this_input(realworld):
    """gengwg-dgx1's 'nvidia-smi topo -mp' (a DGX-1: NVLink hybrid cube mesh under PCIe PIX/PHB/SYS): -mp prints
    PCIe classes only, so NVLink is 'not in this input' (GDR009), never 'no NVLink': no GDR002 telling the
    NVLinked pairs to move a card under a common switch."""
    p = call("pairs", "--json", "--from", realworld / "gengwg-dgx1" / "nvidia-smi-topo-mp.txt")
    doc = json.loads(p.stdout)
    assert "nvlink" in doc["not_in_input"]
    assert not any(f["code"] == "GDR002" for f in doc["findings"])
    gg = [x for x in doc["pairs"] if x["kind"] == "gpu-gpu"]
    assert len(gg) == 28 and all("GDR009" in x["findings"] for x in gg)
    both = FIX / "h200-x2-vm" / "nvidia-smi-topo.txt"  # -m beside -mp: NVLink shown
    d2 = json.loads(call("pairs", "--json", "--from", both).stdout)
    assert "nvlink" not in d2["not_in_input"]
