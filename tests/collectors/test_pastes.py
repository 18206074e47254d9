"""Pastes (issue 17): lspci -vvv, nvidia-smi -q, nvidia-smi topo -m, several files of one node merged.

Real data: ../shared/realworld (the stelline machines carry lspci -tv, lspci -vvv excerpts and topo -m of
one node; seven folders carry a matrix alone) and fixtures/ (nvidia-smi -q of several driver eras, the H200
VMs' snapshots with their own topo -m). Hand-written cases are named after what no machine gave us.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli_util import ROOT, assert_clean_error, call

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.documents.topology import topology_doc
from gdrcheck.errors import InputError
from gdrcheck.pcie.topology import Topology
from gdrcheck.rules.engine import evaluate

FIX = ROOT / "fixtures"
STELLINE = ("stelline-asus-esc8000a-e12-4xrtx6000ada", "stelline-puget-wrx90-2xrtx6000ada")
MATRICES = (
    ("gengwg-dgx-a100-ash6", "nvidia-smi-topo-m.txt"),
    ("gengwg-dgx1", "nvidia-smi-topo-mp.txt"),
    ("oneflow-v100x8-gold5118-1mlx5", "nvidia-smi-topo-m.txt"),
    ("oneflow-v100x8-gold6271c-2mlx5", "nvidia-smi-topo-m.txt"),
    ("princeton-adroit-h11g2-4xa100", "nvidia-smi-topo-m.txt"),
    ("princeton-della-cryoem-4xa100sxm", "nvidia-smi-topo-m.txt"),
    ("princeton-traverse-ac922-4xv100", "nvidia-smi-topo-m.txt"),
    ("stelline-asus-esc8000a-e12-4xrtx6000ada", "nvidia-smi-topo-m.txt"),
    ("stelline-puget-wrx90-2xrtx6000ada", "nvidia-smi-topo-m.txt"),
)


def _docs(*paths):
    snap = load_facts(tuple(str(p) for p in paths) if len(paths) > 1 else str(paths[0]))
    report = evaluate(snap)
    return snap, pairs_doc(report), topology_doc(Topology(snap))


def _matrix(path):
    from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrix

    return parse_topo_matrix(Path(path).read_text(), Path(path).name)


# -- the stelline machines: the files together settle what the tree alone leaves unknown -------------------


@pytest.mark.parametrize("machine", STELLINE)
def test_stelline_files_together_settle_unknowns(realworld, machine):
    folder = realworld / machine
    tree_snap, tree_pairs, tree_topo = _docs(folder / "lspci-tv.txt")
    snap, pairs, topo = _docs(folder / "lspci-tv.txt", folder / "lspci-vvv-selected.txt",
                              folder / "nvidia-smi-topo-m.txt")
    m = _matrix(folder / "nvidia-smi-topo-m.txt")
    dev0 = {d["bdf"]: d for d in tree_topo["devices"]}
    dev = {d["bdf"]: d for d in topo["devices"]}
    gpus = sorted(b for b, d in dev.items() if d["kind"] == "gpu")
    assert len(gpus) == len(m.gpus)
    # NUMA: none from the tree; the GPUs' from lspci -vvv (ASUS prints 'NUMA node') or the matrix's affinity
    assert all(dev0[g]["numa_node"] is None for g in gpus)
    assert [dev[g]["numa_node"] for g in gpus] == [m.numa_affinity[f"GPU{i}"] for i in range(len(gpus))]
    # link status: unknown from the tree, LnkSta/LnkCap from lspci -vvv (2.5 of 16 GT/s, idle)
    assert all(dev0[g]["link"]["current_speed_gts"] is None for g in gpus)
    assert all(dev[g]["link"]["current_speed_gts"] == 2.5 and dev[g]["link"]["max_speed_gts"] == 16.0 for g in gpus)
    assert "GDR081" not in {f["code"] for f in tree_pairs["findings"]}
    assert "GDR081" in {f["code"] for f in pairs["findings"]}
    # BAR1 on the bus: 64 GiB (Region 1 and the Resizable BAR capability at its largest size)
    from gdrcheck.documents.bar1 import bar1_doc

    for s, want in ((tree_snap, None), (snap, 64 << 30)):
        rep = evaluate(s)
        doc = bar1_doc(s, rep.topo, [f for f in rep.findings if f.code.startswith("GDR10")])
        assert [g["bar1_total_bytes"] for g in doc["gpus"]] == [want] * len(gpus)
        assert all(g["rebar_current_bytes"] == (max(g["rebar_supported_bytes"]) if want else None)
                   for g in doc["gpus"])
        assert "GDR105" not in {f["code"] for f in doc.get("findings", [])}
    for g in gpus:
        d = snap.device(g)
        bar1 = next(b for b in d.bars if b.index == 1)
        assert bar1.size == 64 << 30
        from gdrcheck.pcie.rebar import parse_rebar

        assert parse_rebar(d.config)[1].current_bytes == 64 << 30
    # ACS: the CX-7 shows its ACS capability, all bits off; the tree carries no config space. (The excerpts
    # hold no bridge; the machines' GPU-NIC paths cross the root complex, so no ACS verdict is asked.)
    from gdrcheck.pcie.acs import parse_acs

    cx7 = "0000:21:00.0"
    assert not parse_acs(tree_snap.device(cx7).config).known
    acs = parse_acs(snap.device(cx7).config)
    assert acs.known and acs.present and acs.ctrl == 0
    # RDMA NIC names: the legend names the CX-7 ports in nvidia-smi's order
    nics = {b: d.get("rdma_devices") for b, d in dev.items() if d["kind"] == "nic"}
    assert nics["0000:21:00.0"] == ["mlx5_0"] and nics["0000:21:00.1"] == ["mlx5_1"]
    assert Topology(tree_snap).rdma(cx7)[1].endswith("decided from the model")
    assert Topology(snap).rdma(cx7) == (True, "RDMA device mlx5_0")
    # every GPU-GPU and GPU-NIC pair of the matrix now has its class, and it is the matrix's
    names = {f"GPU{i}": g for i, g in enumerate(gpus)}
    names.update({c: next(b for b, n in nics.items() if n == [m.rdma_name(c)]) for c in m.nics})
    by_key = {(p["a"], p["b"]): p for p in pairs["pairs"]}
    before = {(p["a"], p["b"]): p for p in tree_pairs["pairs"]}
    settled = 0
    for i, g in enumerate(m.gpus):
        for h in m.gpus[i + 1:] + m.nics:
            a, b = names[g], names[h]
            p = by_key.get((a, b)) or by_key[(b, a)]
            assert p["pcie_path"] == m.code(g, h) and p["path"] == m.code(g, h)
            assert p["path_source"]["input"] == "nvidia-smi-topo-m.txt" and p["path_source"]["tree"] is None
            q = before.get((a, b)) or before[(b, a)]
            settled += q["pcie_path"] is None
            assert q["pcie_path"] in (None, p["pcie_path"])
    if machine.startswith("stelline-asus"):
        assert settled == 6 + 4 * 4  # every GPU on its own root bus: NODE or SYS from the tree alone
    # the matches are stated
    notes = " ".join(pairs["notes"])
    assert "GPUs matched by nvidia-smi's index order" in notes and "mlx5_0=0000:21:00.0" in notes


@pytest.mark.parametrize("machine", STELLINE)
def test_stelline_file_order_does_not_matter(realworld, machine):
    folder = realworld / machine
    files = [folder / "nvidia-smi-topo-m.txt", folder / "lspci-vvv-selected.txt", folder / "lspci-tv.txt"]
    _s, a, _t = _docs(*files)
    _s, b, _t = _docs(*reversed(files))
    strip = lambda d: [{k: v for k, v in p.items() if k != "path_source"} for p in d["pairs"]]  # noqa: E731
    assert strip(a) == strip(b)


def test_matrix_and_tree_disagreeing_show_both_and_trust_the_matrix(realworld, tmp_path):
    """Hand-written: no real paste disagrees; the Puget matrix edited to say PIX where the tree shows PHB."""
    folder = realworld / "stelline-puget-wrx90-2xrtx6000ada"
    text = (folder / "nvidia-smi-topo-m.txt").read_text()
    edited = text.replace("GPU0     X      PHB", "GPU0     X      PIX")
    edited = edited.replace("GPU1    PHB      X", "GPU1    PIX      X")
    assert edited != text
    f = tmp_path / "topo-pix.txt"
    f.write_text(edited)
    _s, doc, _t = _docs(folder / "lspci-tv.txt", f)
    p = next(p for p in doc["pairs"] if p["kind"] == "gpu-gpu")
    assert p["pcie_path"] == "PIX"
    assert p["path_source"]["tree"] == "PHB" and p["path_source"]["trusted"] == "topo-pix.txt"
    assert "nvidia-smi classified the pair on the node itself" in p["path_source"]["why"]
    note = next(n for n in doc["notes"] if "disagree" in n)
    assert "PIX in the matrix, PHB from the tree" in note


L2FWD_ACS_GREP = """\
b2:00.0 PCI bridge: Intel Corporation Sky Lake-E PCI Express Root Port A (rev 04)
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
b3:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)
b4:08.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir{rr} CmpltRedir{rr} UpstreamFwd+ EgressCtrl- DirectTrans-
b4:10.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir{rr} CmpltRedir{rr} UpstreamFwd+ EgressCtrl- DirectTrans-
b5:00.0 Ethernet controller: Mellanox Technologies MT28841
b5:00.1 Ethernet controller: Mellanox Technologies MT28841
b6:00.0 3D controller: NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB] (rev a1)
"""


@pytest.mark.parametrize("rr,code", [("+", "GDR040"), ("-", None)])
def test_acs_grep_paste_settles_the_switch_ports(realworld, tmp_path, rr, code):
    """Hand-written: the command GDR041 suggests (lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'), for the l2fwd
    board's PEX 8747 whose tree alone leaves ACS unknown."""
    tree = realworld / "nvidia-l2fwd-nv-gigabyte-e251-u70" / "lspci-tv-fragment.txt"
    f = tmp_path / "acs.txt"
    f.write_text(L2FWD_ACS_GREP.format(rr=rr))
    _s, alone, _t = _docs(tree)
    assert "GDR041" in {x["code"] for x in alone["findings"]}
    _s, doc, _t = _docs(tree, f)
    codes = {x["code"] for x in doc["findings"]}
    assert "GDR041" not in codes
    assert (code in codes) if code else not ({"GDR040"} & codes)
    if code:
        assert any("0000:b4:08.0" in x["subject"] or "0000:b4:10.0" in x["subject"]
                   for x in doc["findings"] if x["code"] == "GDR040")


# -- each real matrix alone --------------------------------------------------------------------------------


@pytest.mark.parametrize("machine,file", MATRICES)
def test_each_real_matrix_alone_reproduces_its_classes(realworld, machine, file):
    m = _matrix(realworld / machine / file)
    snap, doc, _t = _docs(realworld / machine / file)
    assert snap.input_kind == ("topo-matrix-mp" if file.endswith("-mp.txt") else "topo-matrix")
    devs = {d["bdf"]: d for d in doc["devices"]}
    gpu = {f"GPU{d['gpu_index']}": b for b, d in devs.items() if d["kind"] == "gpu"}
    nic = {n: b for b, d in devs.items() if d["kind"] == "nic" for n in d.get("rdma_devices", [])}
    names = {**gpu, **{c: nic.get(m.rdma_name(c), gpu.get(c)) for c in m.nics}}
    assert len(gpu) == len(m.gpus) and all(names.values())
    by_key = {(p["a"], p["b"]): p for p in doc["pairs"]}
    checked = 0
    for i, g in enumerate(m.gpus):
        for h in m.gpus[i + 1:] + m.nics:
            a, b = names[g], names[h]
            p = by_key.get((a, b)) or by_key[(b, a)]
            code = m.code(g, h)
            assert p["path"] == code, (g, h, code, p)
            if code.startswith("NV"):
                assert p["nvlinks"] == int(code[2:]) and p["pcie_path"] is None
                assert p["nccl"]["p2p"] in ("enabled", "unknown") and p["nccl"]["path_type"] == "NVL"
            else:
                assert p["pcie_path"] == code
            checked += 1
    assert checked == len(m.gpus) * (len(m.gpus) - 1) // 2 + len(m.gpus) * len(m.nics)
    # NCCL's decision follows the class: GPU-NIC GDR beyond PXB is disabled (NCCL default level), unless an
    # NVLinked GPU close to the NIC relays for it (PXN, NCCL v2.30.7 src/graph/paths.cc:812-843)
    for p in doc["pairs"]:
        if p["kind"] == "gpu-nic" and p["pcie_path"] in ("PHB", "NODE", "SYS"):
            # -mp shows no NVLink: an NVLinked GPU may relay (PXN), so NCCL's answer waits on it
            relay_open = file.endswith("-mp.txt") and p["nccl"]["gdr"] == "unknown"
            assert p["nccl"]["gdr"] == "disabled" or p["nccl"].get("via") or relay_open, p
    # everything else stays unknown: nothing is ok from a matrix alone
    assert all(p["verdict"] != "ok" for p in doc["pairs"])
    assert any("synthetic addresses in domain ffff" in n for n in doc["notes"])


def test_matrix_alone_on_the_command_line(realworld):
    p = call("pairs", "--json", "--from", realworld / "gengwg-dgx-a100-ash6" / "nvidia-smi-topo-m.txt")
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert {q["path"] for q in doc["pairs"] if q["kind"] == "gpu-gpu"} == {"NV12"}


# -- the driver's GPU list ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in (FIX / "nvidia-smi-q").iterdir()))
def test_nvidia_smi_q_alone_gives_bar1(name):
    snap = load_facts(str(FIX / "nvidia-smi-q" / name))
    assert snap.input_kind == "nvidia-smi-q" and snap.gpus
    assert all(g.bar1_total_bytes for g in snap.gpus)
    assert set(snap.unplaced) == {g.bdf for g in snap.gpus}  # no tree: their places are not shown
    report = evaluate(snap)
    assert all(p.pcie_path is None for p in report.pairs)


def test_matrix_matched_by_bus_id_through_the_driver_view():
    """The H200 VM snapshot's NVML view gives each index its bus id; its own topo -m is read against it."""
    folder = FIX / "h200-x2-vm"
    _s, doc, _t = _docs(folder / "snapshot.tar.gz", folder / "nvidia-smi-topo.txt")
    _s, alone, _t = _docs(folder / "snapshot.tar.gz")
    assert any("GPUs matched by bus id" in n for n in doc["notes"])
    assert [p["path"] for p in doc["pairs"] if p["kind"] == "gpu-gpu"] == \
        [p["path"] for p in alone["pairs"] if p["kind"] == "gpu-gpu"] == ["NV18"]


# -- mangled pastes and errors --------------------------------------------------------------------------------


def test_matrix_with_prompt_wrapped_row_and_lost_alignment(realworld):
    """Hand-written: the ASUS matrix behind a prompt, its GPU0 row wrapped, tabs collapsed to one space."""
    from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrix

    text = (realworld / "stelline-asus-esc8000a-e12-4xrtx6000ada" / "nvidia-smi-topo-m.txt").read_text()
    lines = [" ".join(ln.split()) if ln.startswith(("GPU", "NIC")) else ln for ln in text.splitlines()]
    toks = lines[1].split()
    lines[1:2] = [" ".join(toks[:5]), "  " + " ".join(toks[5:])]
    mangled = "sh-5.1# nvidia-smi topo -m\n" + "\n".join(lines)
    m = parse_topo_matrix(mangled, "x")
    ref = parse_topo_matrix(text, "x")
    assert m.cells == ref.cells and m.numa_affinity == ref.numa_affinity and m.legend == ref.legend


def test_matrix_whose_meaning_is_lost_names_the_line(realworld, tmp_path):
    text = (realworld / "princeton-adroit-h11g2-4xa100" / "nvidia-smi-topo-m.txt").read_text()
    f = tmp_path / "bad.txt"
    f.write_text(text.replace("GPU2\tSYS\tSYS\t X \tNODE", "GPU2\tSYS\tSYS\t X \tNOPE"))
    p = call("pairs", "--from", f)
    assert_clean_error(p)
    assert "line 4" in p.stderr


def test_lspci_vvv_excerpt_alone_leaves_classes_open(realworld):
    snap, doc, _t = _docs(realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-vvv-selected.txt")
    assert snap.input_kind == "lspci-vvv"
    assert all(p["pcie_path"] is None and len(p["path_candidates"]) == 5 for p in doc["pairs"])
    assert any("without the bridges above them" in n for n in doc["notes"])


def test_file_of_no_accepted_kind_names_the_kinds(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello\nworld\n")
    p = call("pairs", "--from", f)
    assert_clean_error(p)
    for kind in ("lspci -tv", "lspci -vvv", "nvidia-smi -q", "nvidia-smi topo -m", "NCCL", "hwloc"):
        assert kind in p.stderr


def test_acsctl_grep_without_devices_says_what_to_run(realworld):
    p = call("pairs", "--from", realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-vvv-grep-ACSCtl.txt")
    assert_clean_error(p)
    assert "grep -E" in p.stderr


def test_two_trees_of_one_node_are_refused(realworld):
    f = realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-tv.txt"
    with pytest.raises(InputError, match="second PCIe tree"):
        load_facts((str(f), str(realworld / "azure-ndv5" / "nccl-topo.xml")))


def test_help_lists_every_accepted_kind():
    p = call("pairs", "--help")
    text = " ".join(p.stdout.split())
    for cmd in ("lspci -tv", "lspci -vvv", "nvidia-smi -q", "nvidia-smi topo -m", "gdrcheck snapshot",
                "NCCL_TOPO_DUMP_FILE", "lstopo"):
        assert cmd in text, cmd
    readme = (ROOT / "README.md").read_text()
    from gdrcheck.collectors.inputs import ACCEPTED_KINDS

    for _what, cmd in ACCEPTED_KINDS:
        assert cmd in readme, cmd


def test_lspci_xxx_dump_is_read_as_config_space(tmp_path):
    """The H200 VM's config files (from its snapshot) rendered the way 'lspci -xxx' prints them."""
    import tarfile

    from gdrcheck.collectors.pastes.lspci_verbose import parse_lspci_verbose
    from gdrcheck.model import PciFunction
    from gdrcheck.pcie.kinds import port_type

    with tarfile.open(FIX / "h200-x2-vm" / "snapshot.tar.gz") as tar:
        configs = {m.name.split("/")[-2]: tar.extractfile(m).read() for m in tar.getmembers()
                   if m.name.endswith("/config")}
    text = "$ sudo lspci -xxx\n"
    for bdf, cfg in sorted(configs.items()):
        text += f"{bdf[5:]} Bridge: Some device\n" + "".join(
            f"{off:02x}: " + " ".join(f"{b:02x}" for b in cfg[off:off + 16]) + "\n" for off in range(0, len(cfg), 16))
        text += "\n"
    from gdrcheck.collectors.inputs import sniff

    assert sniff(text) == "lspci-vvv"
    got = {fn.bdf: fn for fn in parse_lspci_verbose(text, "xxx.txt")}
    assert set(got) == set(configs)
    for bdf, cfg in configs.items():
        assert got[bdf].config == cfg
        assert got[bdf].config_note == "lspci -xxx dump"
        assert port_type(PciFunction(bdf=bdf, root=bdf[:7], config=got[bdf].config)) == \
            port_type(PciFunction(bdf=bdf, root=bdf[:7], config=cfg))


def test_one_paste_of_topo_m_mp_and_p2p():
    """The H200 VMs' capture: topo -m (NV18), then -mp (the PCIe class under the NVLinks), then -p2p r, w and n:
    the driver's P2P status per pair, under the capability each command names."""
    from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrices

    text = (FIX / "h200-x4-vm" / "nvidia-smi-topo.txt").read_text()
    ms = parse_topo_matrices(text, "t.txt")
    assert [m.pcie_only for m in ms if m.p2p is None] == [False, True]
    assert [m.p2p for m in ms if m.p2p is not None][:3] == ["read", "write", "nvlink"]
    snap, doc, _t = _docs(FIX / "h200-x4-vm" / "snapshot.tar.gz", FIX / "h200-x4-vm" / "nvidia-smi-topo.txt")
    gg = [p for p in doc["pairs"] if p["kind"] == "gpu-gpu"]
    assert len(gg) == 6 and all(p["path"] == "NV18" and p["pcie_path"] == ms[1].code("GPU0", "GPU1") for p in gg)
    assert not any("-p2p matrices" in n for n in doc["notes"])  # read, not skipped
    assert not any("GDR008" in p["findings"] for p in gg)
    assert sum("GPUs matched by bus id" in n for n in doc["notes"]) == 1


def _dump_with_caps(tree, seed: int) -> str:
    """The tree as an 'lspci -xxxx' dump: 4096 bytes per function, a PCIe capability with the port type its
    place gives, and on every bridge an ACS capability whose Control bits are drawn at random."""
    import random
    import struct

    rng = random.Random(seed)
    kids = {}
    for f in tree.fns:
        kids.setdefault(f.parent, []).append(f)
    out = []
    for f in sorted(tree.fns, key=lambda f: (f.dom, f.bus, f.dev, f.fn)):
        cfg = bytearray(4096)
        vendor, device, cls = f.ids
        struct.pack_into("<HH", cfg, 0, vendor, device)
        cfg[9:12] = cls.to_bytes(3, "little")
        cfg[6], cfg[0x34], cfg[0x40] = 0x10, 0x40, 0x10
        port = 0
        if f.is_bridge:
            cfg[0x0E] = 1
            cfg[0x18], cfg[0x19], cfg[0x1A] = f.primary, f.sec, f.sub
            port = 4 if f.parent is None else (5 if any(k.is_bridge for k in kids.get(f.bdf, ())) else 6)
            struct.pack_into("<IHH", cfg, 0x100, 0x000D | 1 << 16, 0x5F, rng.choice((0, 0x1D, 0x0C, 0x01, 0x20)))
        cfg[0x42] = port << 4 | 2
        out.append(f"{f.bdf} made-up")
        out += [f"{i:03x}: " + " ".join(f"{b:02x}" for b in cfg[i:i + 16]) for i in range(0, 4096, 16)]
        out.append("")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("seed,opt", [(0, "-vvv"), (1, "-vvv"), (2, "-nnvvv"), (3, "-Dvvv"), (4, "-vv"),
                                      (5, "-nnDvvv")])
def test_lspci_vvv_rendered_by_real_lspci(tmp_path, seed, opt):
    """Made-up trees written as config dumps and rendered by the real 'lspci -F DUMP -vvv' / '-tv': the
    listing alone rebuilds the tree from its bus numbers, and gives each bridge's ACS and port type."""
    import shutil
    import subprocess

    from support.lspci_dump import random_tree

    from gdrcheck.collectors.pastes.lspci_verbose import parse_lspci_verbose
    from gdrcheck.pcie.acs import parse_acs
    from gdrcheck.pcie.kinds import port_type

    if not shutil.which("lspci"):
        pytest.skip("lspci (pciutils) not installed")
    tree = random_tree(seed)
    # a whole listing shows a host bridge (lspci -vvv of a machine, not an excerpt): then every bus no
    # bridge leads to is a root bus, as lspci -t draws it
    first = min(tree.fns, key=lambda f: (f.dom, f.bus, f.dev))
    used = {f.dev for f in tree.fns if (f.dom, f.bus) == (first.dom, first.bus)}
    tree.leaf(first.dom, first.bus, min(set(range(32)) - used), 0, (0x8086, 0x09A2, 0x060000), None, first.root)
    dump = tmp_path / "dump.txt"
    dump.write_text(_dump_with_caps(tree, seed))
    vvv, tv = tmp_path / "vvv.txt", tmp_path / "tv.txt"
    for out, o in ((vvv, opt), (tv, "-tv")):
        out.write_text(subprocess.run(["lspci", "-F", str(dump), o], capture_output=True, text=True,
                                      check=True).stdout)
    truth = tree.truth()
    want = {f.bdf: f for f in tree.fns}
    from gdrcheck.collectors.inputs import sniff

    assert sniff(vvv.read_text()) == "lspci-vvv"
    got = {fn.bdf: fn for fn in parse_lspci_verbose(vvv.read_text(), "vvv.txt")}
    assert set(got) == set(truth)
    snap = load_facts(str(vvv))
    assert not snap.unplaced
    assert {d.bdf: (d.parent, d.root) for d in snap.devices} == truth
    merged = load_facts((str(tv), str(vvv)))
    assert {d.bdf: (d.parent, d.root) for d in merged.devices} == truth
    from gdrcheck.model import PciFunction

    for bdf, f in want.items():
        lines = [ln for ln in dump.read_text().split(f"{bdf} made-up\n", 1)[1].split("\n\n", 1)[0].splitlines()]
        cfg = bytes.fromhex("".join(ln.split(": ", 1)[1].replace(" ", "") for ln in lines))
        a, b = parse_acs(cfg), parse_acs(got[bdf].config)
        assert (a.known, a.present, a.ctrl, a.cap) == (b.known, b.present, b.ctrl, b.cap), bdf
        assert port_type(PciFunction(bdf=bdf, root="", config=got[bdf].config)) == \
            port_type(PciFunction(bdf=bdf, root="", config=cfg))
        assert got[bdf].class_code >> 8 == f.ids[2] >> 8
        if "nn" in opt:
            assert (got[bdf].vendor, got[bdf].device) == f.ids[:2]


def test_lspci_vvv_paste_that_lost_its_indentation(realworld):
    """Hand-written damage to the ASUS paste: every line's indentation stripped (as some ticket forms do)."""
    from gdrcheck.collectors.pastes.lspci_verbose import parse_lspci_verbose

    text = (realworld / "stelline-asus-esc8000a-e12-4xrtx6000ada" / "lspci-vvv-selected.txt").read_text()
    good = parse_lspci_verbose(text, "a.txt")
    flat = parse_lspci_verbose("\n".join(ln.lstrip() for ln in text.splitlines()), "a.txt")
    assert [f.bdf for f in flat] == [f.bdf for f in good]
    for f, g in zip(flat, good):
        assert (f.bars, f.config, f.link, f.numa_node, f.driver, f.class_code) == \
            (g.bars, g.config, g.link, g.numa_node, g.driver, g.class_code), f.bdf
    assert any("without indentation" in n for n in flat.notes)
