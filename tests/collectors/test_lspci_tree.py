"""The ``lspci -t`` reader: real pastes, round trips through the real lspci, damage, limits, CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gdrcheck.collectors.pastes.lspci_tree import looks_like_lspci_tree, parse_lspci_tree
from gdrcheck.errors import InputError
from gdrcheck.pcie.kinds import kind_from_name
from gdrcheck.pcie.topology import Topology

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.lspci_dump import GPU, NIC, NVME, OTHER, ROOT_PORT, Tree, random_tree  # noqa: E402

PROJECT = Path(__file__).resolve().parents[2]
REALWORLD = PROJECT.parent / "shared" / "realworld"
LSPCI = shutil.which("lspci")
needs_lspci = pytest.mark.skipif(LSPCI is None, reason="pciutils' lspci is not installed")

L2FWD = "nvidia-l2fwd-nv-gigabyte-e251-u70/lspci-tv-fragment.txt"
KATA_HOST = "kata-vra-a100x-bluefield2/host-lspci-tv-fragment.txt"
KATA_ROOTPORT = "kata-vra-a100x-bluefield2/guest-rootport-lspci-tv.txt"
KATA_SWITCHPORT = "kata-vra-a100x-bluefield2/guest-switchport-lspci-tv.txt"
KATA_PCIBRIDGE = "kata-vra-a100x-bluefield2/guest-pcibridge-lspci-tv.txt"
ASUS = "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt"
PUGET = "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"


def realworld(rel: str) -> str:
    path = REALWORLD / rel
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    return path.read_text()


def load(rel: str):
    snap = parse_lspci_tree(realworld(rel), Path(rel).name)
    return snap, Topology(snap)


def b(short: str) -> str:
    return short if short.count(":") == 2 else "0000:" + short


# ---------------------------------------------------------------------------
# Expectations read off the real trees by hand: bdf -> (parent, root, kind).
# Kinds are the contract's (a switch is an upstream port with its downstream ports).

EXPECT = {
    L2FWD: {
        "b2:00.0": (None, "0000:b2", "root_port"),
        "b3:00.0": ("b2:00.0", "0000:b2", "switch_upstream"),
        "b4:08.0": ("b3:00.0", "0000:b2", "switch_downstream"),
        "b4:10.0": ("b3:00.0", "0000:b2", "switch_downstream"),
        "b5:00.0": ("b4:08.0", "0000:b2", "nic"),
        "b5:00.1": ("b4:08.0", "0000:b2", "nic"),
        "b6:00.0": ("b4:10.0", "0000:b2", "gpu"),
    },
    KATA_HOST: {
        # two cut-out fragments; synthetic roots one bus below the first secondary bus
        "d7:00.0": (None, "0000:d7", "root_port"),
        "d8:00.0": ("d7:00.0", "0000:d7", "switch_upstream"),
        "d9:00.0": ("d8:00.0", "0000:d7", "switch_downstream"),
        "da:00.0": ("d9:00.0", "0000:d7", "nic"),
        "da:00.1": ("d9:00.0", "0000:d7", "nic"),
        "da:00.2": ("d9:00.0", "0000:d7", "other"),  # BlueField-2 SoC management interface
        "d9:01.0": ("d8:00.0", "0000:d7", "switch_downstream"),
        "dc:00.0": ("d9:01.0", "0000:d7", "switch_upstream"),
        "dd:08.0": ("dc:00.0", "0000:d7", "switch_downstream"),
        "de:00.0": ("dd:08.0", "0000:d7", "gpu"),
        "3a:00.0": (None, "0000:3a", "root_port"),
        "3b:00.0": ("3a:00.0", "0000:3a", "switch_upstream"),
        "3c:00.0": ("3b:00.0", "0000:3a", "switch_downstream"),
        "3d:00.0": ("3c:00.0", "0000:3a", "nic"),
        "3d:00.1": ("3c:00.0", "0000:3a", "nic"),
        "3d:00.2": ("3c:00.0", "0000:3a", "other"),
        "3c:01.0": ("3b:00.0", "0000:3a", "switch_downstream"),
        "3f:00.0": ("3c:01.0", "0000:3a", "switch_upstream"),
        "40:08.0": ("3f:00.0", "0000:3a", "switch_downstream"),
        "41:00.0": ("40:08.0", "0000:3a", "gpu"),
    },
    KATA_ROOTPORT: {
        "00:00.0": (None, "0000:00", "other"),
        "00:04.0": (None, "0000:00", "root_port"),
        "01:00.0": ("00:04.0", "0000:00", "nic"),
        "00:05.0": (None, "0000:00", "root_port"),
        "02:00.0": ("00:05.0", "0000:00", "nic"),
        "00:06.0": (None, "0000:00", "root_port"),
        "03:00.0": ("00:06.0", "0000:00", "gpu"),
        "00:07.0": (None, "0000:00", "root_port"),
        "04:00.0": ("00:07.0", "0000:00", "gpu"),
        "00:0b.0": (None, "0000:00", "root_port"),
        "00:0c.0": (None, "0000:00", "other"),
        "00:1f.0": (None, "0000:00", "other"),
        "00:1f.2": (None, "0000:00", "other"),
        "00:1f.3": (None, "0000:00", "other"),
    },
    KATA_SWITCHPORT: {
        "00:04.0": (None, "0000:00", "root_port"),
        "01:00.0": ("00:04.0", "0000:00", "switch_upstream"),
        "02:00.0": ("01:00.0", "0000:00", "switch_downstream"),
        "03:00.0": ("02:00.0", "0000:00", "gpu"),
        "02:01.0": ("01:00.0", "0000:00", "switch_downstream"),
        "04:00.0": ("02:01.0", "0000:00", "nic"),
        "00:05.0": (None, "0000:00", "root_port"),
        "05:00.0": ("00:05.0", "0000:00", "switch_upstream"),
        "06:00.0": ("05:00.0", "0000:00", "switch_downstream"),
        "07:00.0": ("06:00.0", "0000:00", "nic"),
        "06:01.0": ("05:00.0", "0000:00", "switch_downstream"),
        "08:00.0": ("06:01.0", "0000:00", "gpu"),
        "00:1f.3": (None, "0000:00", "other"),
    },
    KATA_PCIBRIDGE: {
        "00:04.0": (None, "0000:00", "root_port"),
        "01:00.0": ("00:04.0", "0000:00", "gpu"),
        "00:05.0": (None, "0000:00", "root_port"),
        "02:00.0": ("00:05.0", "0000:00", "gpu"),
        "00:06.0": (None, "0000:00", "root_port"),
        "00:0c.0": (None, "0000:00", "root_port"),
        "09:00.0": ("00:0c.0", "0000:00", "bridge"),  # PCIe-to-PCI bridge, no switch
        "0a:00.0": ("09:00.0", "0000:00", "nic"),
        "0a:01.0": ("09:00.0", "0000:00", "nic"),
        "00:0d.0": (None, "0000:00", "other"),
        "00:1f.3": (None, "0000:00", "other"),
    },
    ASUS: {
        "00:00.0": (None, "0000:00", "other"),
        "00:01.1": (None, "0000:00", "root_port"),
        "01:00.0": ("00:01.1", "0000:00", "gpu"),
        "01:00.1": ("00:01.1", "0000:00", "other"),  # the GPU's HD-audio function
        "00:05.1": (None, "0000:00", "root_port"),
        "02:00.0": ("00:05.1", "0000:00", "nvme"),
        "00:14.3": (None, "0000:00", "other"),  # FCH LPC bridge is no PCI bridge
        "20:03.1": (None, "0000:20", "root_port"),
        "21:00.0": ("20:03.1", "0000:20", "nic"),
        "21:00.1": ("20:03.1", "0000:20", "nic"),
        "41:00.0": ("40:01.1", "0000:40", "gpu"),
        "60:01.1": (None, "0000:60", "root_port"),
        "61:00.0": ("60:01.1", "0000:60", "switch_upstream"),
        "62:00.0": ("61:00.0", "0000:60", "switch_downstream"),
        "63:00.0": ("62:00.0", "0000:60", "switch_upstream"),
        "64:10.0": ("63:00.0", "0000:60", "switch_downstream"),
        "65:00.0": ("64:10.0", "0000:60", "nvme"),
        "66:00.0": ("64:14.0", "0000:60", "nvme"),
        "62:04.0": ("61:00.0", "0000:60", "switch_downstream"),
        "6b:00.0": ("6a:00.0", "0000:60", "nvme"),
        "62:0c.0": ("61:00.0", "0000:60", "switch_downstream"),
        "70:14.0": ("6f:00.0", "0000:60", "switch_downstream"),
        "71:00.0": ("70:14.0", "0000:60", "other"),  # HighPoint SSD7540 is a RAID controller
        "70:15.0": ("6f:00.0", "0000:60", "switch_downstream"),
        "62:1c.0": ("61:00.0", "0000:60", "switch_downstream"),
        "60:05.2": (None, "0000:60", "root_port"),
        "74:00.0": ("60:05.2", "0000:60", "bridge"),
        "75:00.0": ("74:00.0", "0000:60", "other"),  # ASPEED BMC graphics
        "81:00.0": ("80:01.1", "0000:80", "nic"),
        "81:00.1": ("80:01.1", "0000:80", "nic"),
        "82:00.0": ("80:05.1", "0000:80", "nic"),
        "ae:00.0": ("aa:0c.0", "0000:a0", "nvme"),
        "b1:00.0": ("b0:14.0", "0000:a0", "other"),
        "c1:00.0": ("c0:01.1", "0000:c0", "gpu"),
        "c1:00.1": ("c0:01.1", "0000:c0", "other"),
        "c0:03.2": (None, "0000:c0", "root_port"),
        "e1:00.0": ("e0:01.1", "0000:e0", "gpu"),
        "e2:00.0": ("e0:05.2", "0000:e0", "other"),
        "e3:00.4": ("e0:07.1", "0000:e0", "other"),
    },
    PUGET: {
        "00:03.1": (None, "0000:00", "root_port"),
        "01:00.0": ("00:03.1", "0000:00", "switch_upstream"),
        "02:00.0": ("01:00.0", "0000:00", "switch_downstream"),
        "03:00.0": ("02:00.0", "0000:00", "switch_upstream"),
        "04:10.0": ("03:00.0", "0000:00", "switch_downstream"),
        "05:00.0": ("04:10.0", "0000:00", "nvme"),
        "0e:00.0": ("0a:0c.0", "0000:00", "nvme"),
        "11:00.0": ("10:14.0", "0000:00", "other"),
        "02:1c.0": ("01:00.0", "0000:00", "switch_downstream"),
        "14:00.0": ("00:05.1", "0000:00", "nic"),
        "14:00.1": ("00:05.1", "0000:00", "nic"),
        "21:00.0": ("20:01.1", "0000:20", "nic"),
        "21:00.1": ("20:01.1", "0000:20", "nic"),
        "22:00.0": ("20:03.1", "0000:20", "switch_upstream"),
        "23:00.0": ("22:00.0", "0000:20", "switch_downstream"),
        "23:03.0": ("22:00.0", "0000:20", "switch_downstream"),
        "88:00.0": ("23:02.0", "0000:20", "other"),
        "8a:00.0": ("20:03.2", "0000:20", "nvme"),
        "8b:00.0": ("20:03.4", "0000:20", "switch_upstream"),
        "8c:0d.0": ("8b:00.0", "0000:20", "switch_downstream"),
        "8e:00.0": ("8c:0d.0", "0000:20", "other"),
        "c0:01.1": (None, "0000:c0", "root_port"),
        "c1:00.0": ("c0:01.1", "0000:c0", "gpu"),
        "c1:00.1": ("c0:01.1", "0000:c0", "other"),
        "c2:00.0": ("c0:03.1", "0000:c0", "gpu"),
        "e1:00.0": ("e0:05.2", "0000:e0", "bridge"),
        "e2:00.0": ("e1:00.0", "0000:e0", "other"),
    },
}

# Downstream ports whose child is the upstream port of a further switch: topology.py
# currently calls them switch_upstream (it looks only at "has a bridge below").
# Parent and root are still checked for them; the kind is checked in an xfail test.
NESTED_DSP = {
    KATA_HOST: {"d9:01.0", "3c:01.0"},
    ASUS: {"62:00.0", "62:04.0", "62:0c.0"},
    PUGET: {"02:00.0"},
}

ROOTS = {
    L2FWD: ("0000:b2",),
    KATA_HOST: ("0000:d7", "0000:3a"),
    KATA_ROOTPORT: ("0000:00",),
    KATA_SWITCHPORT: ("0000:00",),
    KATA_PCIBRIDGE: ("0000:00",),
    ASUS: ("0000:00", "0000:20", "0000:40", "0000:60", "0000:80", "0000:a0", "0000:c0", "0000:e0"),
    PUGET: ("0000:00", "0000:20", "0000:c0", "0000:e0"),
}

COUNTS = {  # functions per file, counted by hand (one per device line, plus bridges drawn inline)
    L2FWD: 7,
    KATA_HOST: 20,
    KATA_ROOTPORT: 21,
    KATA_SWITCHPORT: 21,
    KATA_PCIBRIDGE: 23,
}

# (a, b, pcie class, candidates) read off the trees by hand
PAIRS = {
    L2FWD: [("b6:00.0", "b5:00.0", "PIX", ()), ("b6:00.0", "b5:00.1", "PIX", ()),
            ("b5:00.0", "b5:00.1", "PIX", ())],
    KATA_HOST: [("de:00.0", "da:00.0", "PXB", ()), ("41:00.0", "3d:00.1", "PXB", ()),
                ("de:00.0", "3d:00.0", None, ("NODE", "SYS"))],
    KATA_ROOTPORT: [("03:00.0", "01:00.0", "PHB", ()), ("03:00.0", "04:00.0", "PHB", ())],
    KATA_SWITCHPORT: [("03:00.0", "04:00.0", "PIX", ()), ("08:00.0", "07:00.0", "PIX", ()),
                      ("03:00.0", "07:00.0", "PHB", ()), ("03:00.0", "08:00.0", "PHB", ())],
    KATA_PCIBRIDGE: [("01:00.0", "0a:00.0", "PHB", ()), ("0a:00.0", "0a:01.0", "PIX", ())],
    ASUS: [("01:00.0", "02:00.0", "PHB", ()), ("01:00.0", "41:00.0", None, ("NODE", "SYS")),
           ("01:00.0", "21:00.0", None, ("NODE", "SYS")), ("21:00.0", "21:00.1", "PIX", ()),
           ("65:00.0", "66:00.0", "PIX", ()), ("65:00.0", "6b:00.0", "PXB", ()),
           ("65:00.0", "71:00.0", "PXB", ())],
    PUGET: [("c1:00.0", "c2:00.0", "PHB", ()), ("c1:00.0", "21:00.0", None, ("NODE", "SYS")),
            ("21:00.0", "21:00.1", "PIX", ()), ("05:00.0", "06:00.0", "PIX", ()),
            ("88:00.0", "89:00.0", "PIX", ())],
}

KIND_COUNTS = {  # (gpus, nics, nvme)
    ASUS: (4, 6, 17),
    PUGET: (2, 4, 9),
    KATA_HOST: (2, 4, 0),
    L2FWD: (1, 2, 0),
}


@pytest.mark.parametrize("rel", list(EXPECT))
def test_realworld_parent_root_kind(rel):
    snap, topo = load(rel)
    assert snap.input_kind == "lspci"
    assert snap.numa_known is False and snap.shows_nvlink is False
    assert snap.roots == ROOTS[rel]
    skip_kind = set()
    for short, (parent, root, kind) in EXPECT[rel].items():
        d = snap.device(b(short))
        assert d is not None, short
        assert d.parent == (b(parent) if parent else None), short
        assert d.root == root, short
        assert d.numa_node is None
        if short not in skip_kind:
            assert topo.device_kind[d.bdf] == kind, short
    if rel in COUNTS:
        assert len(snap.devices) == COUNTS[rel]
    assert len({d.bdf for d in snap.devices}) == len(snap.devices)


@pytest.mark.parametrize("rel", list(NESTED_DSP))
def test_realworld_downstream_port_above_nested_switch(rel):
    snap, topo = load(rel)
    for short in NESTED_DSP[rel]:
        assert topo.device_kind[b(short)] == "switch_downstream", short


@pytest.mark.parametrize("rel", list(PAIRS))
def test_realworld_pcie_class(rel):
    snap, topo = load(rel)
    for a, c, cls, cands in PAIRS[rel]:
        assert topo.pcie_class(b(a), b(c)) == (cls, cands), (a, c)


@pytest.mark.parametrize("rel", list(KIND_COUNTS))
def test_realworld_kind_counts(rel):
    _snap, topo = load(rel)
    assert (len(topo.of_kind("gpu")), len(topo.of_kind("nic")), len(topo.of_kind("nvme"))) == KIND_COUNTS[rel]


def test_realworld_names_and_bus_ranges():
    snap, _ = load(L2FWD)
    assert snap.device(b("b6:00.0")).name == "NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB]"
    usp = snap.device(b("b3:00.0"))
    assert (usp.secondary_bus, usp.subordinate_bus, usp.kind_hint, usp.name) == (0xB4, 0xB6, "bridge", None)
    dsp = snap.device(b("b4:08.0"))
    assert (dsp.secondary_bus, dsp.subordinate_bus) == (0xB5, 0xB5)
    assert snap.device(b("b5:00.0")).kind_hint is None
    assert snap.device(b("b5:00.0")).vendor is None and snap.device(b("b5:00.0")).class_code is None
    snap, _ = load(PUGET)
    empty = snap.device(b("23:00.0"))
    assert (empty.secondary_bus, empty.subordinate_bus) == (0x28, 0x57)


def test_realworld_damage_is_noted():
    snap, _ = load(KATA_HOST)
    text = " ".join(snap.notes)
    assert "line 1:" in text and "line 6:" in text and "synthetic root 0000:d7" in text
    assert "synthetic root 0000:3a" in text
    assert "one column off" in text and "first at line 4" in text
    snap, _ = load(KATA_ROOTPORT)
    assert any("16 continuation line(s)" in n for n in snap.notes)
    snap, _ = load(KATA_PCIBRIDGE)
    assert any("first at line 14" in n for n in snap.notes)
    snap, _ = load(KATA_SWITCHPORT)
    assert any("line 14 repeats line 13" in n for n in snap.notes)
    snap, _ = load(ASUS)
    assert snap.notes == ()


def test_every_realworld_tree_is_recognised_and_nothing_else():
    if not REALWORLD.is_dir():
        pytest.skip("realworld folder not available")
    trees = sorted(REALWORLD.glob("*/*lspci-tv*.txt"))
    assert len(trees) >= 7
    for path in trees:
        text = path.read_text()
        assert looks_like_lspci_tree(text), path
        assert parse_lspci_tree(text, path.name).devices
    others = [p for pat in ("*/nccl-*.xml", "*/hwloc.xml", "*/nvidia-smi-topo-m*.txt", "*/lspci-vvv-*.txt",
                            "*/gdscheck-p.txt", "*/ibv_devinfo.txt", "*/nvidia-smi.txt")
              for p in REALWORLD.glob(pat)]
    assert len(others) >= 10
    for path in others:
        assert not looks_like_lspci_tree(path.read_text()), path


# ---------------------------------------------------------------------------
# Round trips through the real lspci: made-up config space -> `lspci -F` -> parser


def run_lspci(tree: Tree, tmp_path: Path, opt: str) -> str:
    dump = tmp_path / "dump.txt"
    dump.write_text(tree.dump())
    res = subprocess.run([LSPCI, "-F", str(dump), opt], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


def check_against_truth(tree: Tree, text: str, opt: str) -> None:
    snap = parse_lspci_tree(text, "dump")
    got = {d.bdf: (d.parent, d.root) for d in snap.devices}
    assert got == tree.truth(), text
    for f in tree.fns:
        d = snap.device(f.bdf)
        if f.is_bridge:
            assert d.kind_hint == "bridge"
            if f.sec:
                assert (d.secondary_bus, d.subordinate_bus) == (f.sec, f.sub)
        else:
            assert d.kind_hint in (None, "other")
            assert (d.name is not None) == ("v" in opt)
            if opt == "-tvnn":
                assert (d.vendor, d.device) == f.ids[:2]
    assert set(tree.truth()[k][1] for k in tree.truth()) <= set(snap.roots)


def nested_switches() -> Tree:
    """Root port -> switch -> (nested switch -> GPU), dual-port NIC, NVMe, an empty port."""
    t = Tree()
    t.leaf(0, 0, 0, 0, (0x8086, 0x09A2, 0x060000))
    rp = t.bridge(0, 0, 1, 0x01, 0x08, ids=ROOT_PORT)
    usp = t.bridge(0, 0x01, 0, 0x02, 0x08, rp.bdf, "0000:00")
    d0 = t.bridge(0, 0x02, 0, 0x03, 0x05, usp.bdf, "0000:00")
    nusp = t.bridge(0, 0x03, 0, 0x04, 0x05, d0.bdf, "0000:00")
    ndsp = t.bridge(0, 0x04, 0, 0x05, 0x05, nusp.bdf, "0000:00")
    t.leaf(0, 0x05, 0, 0, GPU, ndsp.bdf, "0000:00")
    d1 = t.bridge(0, 0x02, 1, 0x06, 0x06, usp.bdf, "0000:00")
    t.leaf(0, 0x06, 0, 0, NIC, d1.bdf, "0000:00")
    t.leaf(0, 0x06, 0, 1, NIC, d1.bdf, "0000:00")
    d2 = t.bridge(0, 0x02, 2, 0x07, 0x07, usp.bdf, "0000:00")
    t.leaf(0, 0x07, 0, 0, NVME, d2.bdf, "0000:00")
    t.bridge(0, 0x02, 3, 0x08, 0x08, usp.bdf, "0000:00")
    return t


def many_roots() -> Tree:
    """Two root buses in domain 0, a root bus in domain 1, VMD-style domains 10000 and 12345."""
    t = Tree()
    rp = t.bridge(0, 0x00, 1, 0x01, 0x01, ids=ROOT_PORT)
    t.leaf(0, 0x01, 0, 0, GPU, rp.bdf, "0000:00")
    rp = t.bridge(0, 0x80, 1, 0x81, 0x81, ids=ROOT_PORT)
    t.leaf(0, 0x81, 0, 0, NIC, rp.bdf, "0000:80")
    t.leaf(0, 0x81, 0, 1, NIC, rp.bdf, "0000:80")
    t.leaf(1, 0x00, 0, 0, NVME)
    rp = t.bridge(0x10000, 0x00, 2, 0x01, 0x01, ids=ROOT_PORT)
    t.leaf(0x10000, 0x01, 0, 0, NVME, rp.bdf, "10000:00")
    t.leaf(0x12345, 0x00, 0, 0, OTHER)
    return t


def odd_bridges() -> Tree:
    """A bridge whose range holds two buses without a bridge for the second; an unconfigured bridge."""
    t = Tree()
    rp = t.bridge(0, 0, 1, 0x04, 0x06, ids=ROOT_PORT)
    t.leaf(0, 0x04, 0, 0, GPU, rp.bdf, "0000:00")
    t.leaf(0, 0x05, 0, 0, NIC, rp.bdf, "0000:00")
    t.bridge(0, 0, 3, 0, 0, ids=ROOT_PORT)
    return t


@needs_lspci
@pytest.mark.parametrize("make", [nested_switches, many_roots, odd_bridges])
@pytest.mark.parametrize("opt", ["-t", "-tv", "-tvnn"])
def test_round_trip_fixed_trees(tmp_path, make, opt):
    tree = make()
    check_against_truth(tree, run_lspci(tree, tmp_path, opt), opt)


@needs_lspci
def test_round_trip_classes(tmp_path):
    tree = nested_switches()
    snap = parse_lspci_tree(run_lspci(tree, tmp_path, "-tv"), "dump")
    topo = Topology(snap)
    kinds = {x: topo.device_kind[b(x)] for x in ("00:01.0", "01:00.0", "02:01.0", "02:02.0", "02:03.0", "03:00.0",
                                         "04:00.0")}
    assert kinds == {"00:01.0": "root_port", "01:00.0": "switch_upstream", "02:01.0": "switch_downstream",
                     "02:02.0": "switch_downstream", "02:03.0": "switch_downstream",
                     "03:00.0": "switch_upstream", "04:00.0": "switch_downstream"}
    assert topo.pcie_class(b("05:00.0"), b("06:00.0")) == ("PXB", ())
    assert topo.pcie_class(b("06:00.0"), b("07:00.0")) == ("PIX", ())
    assert topo.pcie_class(b("06:00.0"), b("06:00.1")) == ("PIX", ())
    snap = parse_lspci_tree(run_lspci(many_roots(), tmp_path, "-t"), "dump")
    assert {"0000:00", "0000:80", "0001:00", "10000:00", "12345:00"} <= set(snap.roots)
    assert snap.device("10000:01:00.0").parent == "10000:00:02.0"
    assert Topology(snap).pcie_class("0000:01:00.0", "0000:81:00.0") == (None, ("NODE", "SYS"))


@needs_lspci
@pytest.mark.parametrize("opt", ["-tv", "-tvnn"])
def test_a_paste_made_without_pci_ids_keeps_its_gpus_and_nics(tmp_path, opt):
    """lspci-without-pci-ids: a node without the ids file (a minimal image, no hwdata) names every function
    "Device 10de:2330" ("Device [10de:2330]" with -nn): the vendor id says what the vendor's name would have
    said, so the GPU and the ConnectX stay a GPU and a NIC (the GPU was lost, and the node failed GDR010)."""
    tree = nested_switches()
    dump = tmp_path / "dump.txt"
    dump.write_text(tree.dump())
    # udev's hwdb names devices too (most Debian machines have it): off, so only the missing ids file counts
    argv = [LSPCI, "-O", "hwdb.disable=1", "-F", str(dump), "-i", str(tmp_path / "no-pci.ids"), opt]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if res.returncode != 0 and "hwdb.disable" in res.stderr:  # a pciutils built without hwdb has no such option
        res = subprocess.run(argv[:1] + argv[3:], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and "Device 10de:2330" in res.stdout.replace("[", "").replace("]", ""), res.stdout
    topo = Topology(parse_lspci_tree(res.stdout, "dump"))
    assert topo.device_kind[b("05:00.0")] == "gpu"
    assert topo.device_kind[b("06:00.0")] == topo.device_kind[b("06:00.1")] == "nic"
    assert topo.device_kind[b("00:00.0")] != "gpu"


@needs_lspci
@pytest.mark.parametrize("seed", range(40))
def test_round_trip_random_trees(tmp_path, seed):
    tree = random_tree(seed)
    for opt in ("-t", "-tv", "-tvnn"):
        check_against_truth(tree, run_lspci(tree, tmp_path, opt), opt)


# ---------------------------------------------------------------------------
# Forms of other pciutils versions, written out by hand from pciutils' ls-tree.c

def parents(text: str) -> dict:
    return {d.bdf: (d.parent, d.root) for d in parse_lspci_tree(text, "t").devices}


def test_one_tree_per_domain_and_plain_forms():
    text = ("-+-[0000:00]-+-00.0\n"
            " |           \\-01.0-[01-06]----00.0-[02-06]--+-00.0-[03]----00.0\n"
            " |                                           +-01.0-[04]--+-00.0\n"
            " |                                           |            \\-00.1\n"
            " |                                           +-02.0-[05]----00.0\n"
            " |                                           \\-03.0-[06]--\n"
            " \\-[0000:80]-+-00.0\n"
            "             \\-01.0-[81]----00.0\n"
            "-[10000:00]---02.0-[01]----00.0\n")
    got = parents(text)
    assert got["0000:03:00.0"] == ("0000:02:00.0", "0000:00")
    assert got["0000:04:00.1"] == ("0000:02:01.0", "0000:00")
    assert got["0000:02:03.0"] == ("0000:01:00.0", "0000:00")
    assert got["0000:81:00.0"] == ("0000:80:01.0", "0000:80")
    assert got["10000:01:00.0"] == ("10000:00:02.0", "10000:00")
    assert len(got) == 16
    # descending root buses (pciutils <= 3.7), single-root and label-less forms
    assert parents("-+-[0000:80]-+-00.0\n |           \\-01.0-[81]----00.0\n"
                   " \\-[0000:00]---01.0-[01]----00.0\n")["0000:01:00.0"] == ("0000:00:01.0", "0000:00")
    assert parents("-[0000:00]-+-00.0\n           \\-05.0\n") == {
        "0000:00:00.0": (None, "0000:00"), "0000:00:05.0": (None, "0000:00")}
    assert parents("-+-00.0\n \\-01.0-[01]----00.0\n")["0000:01:00.0"] == ("0000:00:01.0", "0000:00")
    assert parents("-[deadbeef:00]---02.0\n") == {"deadbeef:00:02.0": (None, "deadbeef:00")}
    assert parents("-\n-[0000:00]---02.0\n-\n") == {"0000:00:02.0": (None, "0000:00")}


def test_crlf_indent_and_cut_lines():
    assert parents("-[0000:00]-+-00.0\r\n           \\-01.0-[01]----00.0\r\n")["0000:01:00.0"] == (
        "0000:00:01.0", "0000:00")
    indented = "    -+-[0000:00]-+-00.0\n     |           \\-01.0\n     \\-[0000:80]---01.0\n"
    assert parents(indented)["0000:80:01.0"] == (None, "0000:80")
    snap = parse_lspci_tree("-[0000:00]-+-00.0\n           +-01.0-[01]...\n           \\-02.0\n", "cut")
    assert [d.bdf for d in snap.devices] == ["0000:00:00.0", "0000:00:01.0", "0000:00:02.0"]
    assert any("line 2: cut by lspci" in n for n in snap.notes)


def test_tvv_resource_lines_and_ids():
    text = ("-[0000:00]-+-01.0-[01]--+-00.0  NVIDIA Corporation Device [10de:2330]\n"
            "           |            |         Memory at 80000000 (32-bit, non-prefetchable) [size=16M]\n"
            "           |            |         Memory at 2000000000 (64-bit, prefetchable) [size=128G]\n"
            "           |            \\-00.1  15b3:1021\n"
            "           |                      Region 0: [virtual] Memory at 3000000000 (64-bit, prefetchable)\n"
            "           \\-02.0  Broadcom / LSI PEX890xx PCIe Gen 5 Switch\n"
            "                     I/O ports at 1000 [size=256]\n")
    snap = parse_lspci_tree(text, "tvv")
    assert [d.bdf for d in snap.devices] == ["0000:00:01.0", "0000:01:00.0", "0000:01:00.1", "0000:00:02.0"]
    gpu, nic, mgmt = snap.device("0000:01:00.0"), snap.device("0000:01:00.1"), snap.device("0000:00:02.0")
    assert (gpu.vendor, gpu.device, nic.vendor, nic.device) == (0x10DE, 0x2330, 0x15B3, 0x1021)
    assert gpu.name == "NVIDIA Corporation Device [10de:2330]"
    topo = Topology(snap)
    assert topo.device_kind["0000:00:02.0"] == "other"  # a switch's management endpoint, not a bridge
    assert mgmt.kind_hint == "other" and topo.device_kind["0000:00:01.0"] == "root_port"


def test_noise_around_the_tree_and_leading_spaces():
    text = ("sonata@coyote2:~$ lspci -tv\n[sudo] password for sonata:\n```\n"
            "  -[0000:00]-+-00.0  Host\n"
            "             \\-01.0-[01]----00.0  NVIDIA Corporation GA100 [A100 SXM4 80GB]\n"
            "```\nsonata@coyote2:~$ \n")
    snap = parse_lspci_tree(text, "paste")
    assert [d.bdf for d in snap.devices] == ["0000:00:00.0", "0000:00:01.0", "0000:01:00.0"]
    assert "5 line(s) around the tree are not part of it (first at line 1); ignored" in snap.notes
    assert looks_like_lspci_tree(text)


def test_fragment_rules():
    # a fragment of leaves only: bus 00 when free
    snap = parse_lspci_tree("+-00.0  A\n\\-01.0  B\n", "f")
    assert [d.bdf for d in snap.devices] == ["0000:00:00.0", "0000:00:01.0"] and snap.roots == ("0000:00",)
    # the bus below the first secondary bus is taken by a real root bus: the nearest free one below
    text = "-[0000:3a]---00.0\n\n+-00.0-[3b-3c]----00.0\n"
    snap = parse_lspci_tree(text, "f")
    assert snap.device("0000:39:00.0").parent is None
    assert snap.device("0000:3b:00.0").parent == "0000:39:00.0"
    assert snap.roots == ("0000:3a", "0000:39")
    # a paste cut out of the middle of a multi-root tree: the later root labels still say where they are
    text = (" |           +-00.3  AMD\n |           \\-01.1-[01]--+-00.0  GPU\n |                        \\-00.1\n"
            " +-[0000:20]---00.0\n \\-[0000:40]---00.0\n")
    got = parents(text)
    assert got["0000:01:00.1"] == ("0000:00:01.1", "0000:00")
    assert got["0000:40:00.0"] == (None, "0000:40")
    # a fragment with a root label keeps it
    snap = parse_lspci_tree("+-[0000:40]-+-00.0\n |           \\-01.0\n", "f")
    assert snap.roots == ("0000:40",) and not any("fragment" in n for n in snap.notes)


# ---------------------------------------------------------------------------
# Bad input: one-line errors, with the line where one applies

@pytest.mark.parametrize("text, where", [
    ("", None),
    ("   \n\n", None),
    ("\x00\x01\x02\xff\xfe garbage \x07", None),
    ("hello world\nthis is not a tree\n", None),
    ('{"devices": []}\n', None),
    ("<?xml version='1.0'?>\n<system version=\"1\"/>\n", None),
    ("-+-[0000:00]-+-00.0\n |           +-01.1-[0", "line 2"),
    ("-+-[0000:0", "line 1"),
    ("-[0000:00]-+-00.0\n           +-01.0\nrandom words\n           \\-02.0\n", "line 3"),
    ("-[0000:00]-+-00.0\n             +-01.0\n", "line 2"),  # two columns off
    ("-[0000:00]-+-00.0\n           +-00.0\n", "line 2"),  # listed twice
    ("-[0000:00]-+-00.0\n           \\-01.0\n           \\-02.0\n", "line 3"),  # list already closed
    ("-[0000:00]-+-01.0-[01]----00.0\n           \\-02.0-[01]----01.0\n", "line 2"),  # bus 01 twice
    ("-[0000:00]-+-01.0-[01]----00.0 \n           \\-02.0-[0x]--\n", "line 2"),
    ("-[0000:00]---20.0\n", "line 1"),  # device number above 1f
    ("-[0000:00]---00.0+\n", "line 1"),
    ("-[0000:00]-\n", "line 1"),  # no functions at all
])
def test_bad_input(text, where):
    with pytest.raises(InputError) as exc:
        parse_lspci_tree(text, "bad.txt")
    msg = str(exc.value)
    assert msg.startswith("bad.txt: ") and "\n" not in msg
    if where:
        assert f"bad.txt: {where}:" in msg


@pytest.mark.parametrize("text", [
    "", "hello\n", '{"a": 1}', "<topology version=\"3.0\">\n</topology>\n",
    "<?xml version=\"1.0\"?>\n<system version=\"1\">\n  <cpu numaid=\"0\"/>\n</system>\n",
    "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-63\nGPU1\tNV12\t X \t0-63\n\nLegend:\n\n  X    = Self\n",
    "- item one\n- item two\n---\n+ plus\n\\ backslash\n",
    "00:00.0 Host bridge: Intel Corporation Device 09a2 (rev 04)\n",
])
def test_not_a_tree(text):
    assert not looks_like_lspci_tree(text)


def test_kind_names():
    assert kind_from_name("NVIDIA Corporation AD102 High Definition Audio Controller") == "other"
    assert kind_from_name("NVIDIA Corporation GA100 [A100 NVSwitch]") == "nvswitch"
    assert kind_from_name("NVIDIA Corporation Device 22a3") == "nvswitch"
    assert kind_from_name("Mellanox Technologies MT2910 Family [ConnectX-7 PCIe Bridge]") == "bridge"
    assert kind_from_name("Mellanox Technologies MT2910 Family [ConnectX-7]") == "nic"
    assert kind_from_name("Mellanox Tech MT42822 BlueField-2 SoC Management Interface") == "other"
    assert kind_from_name("Advanced Micro Devices, Inc. [AMD] FCH LPC Bridge") == "other"
    assert kind_from_name("HighPoint Technologies, Inc. SSD7540 PCIe Gen4 x16 8-Port M.2 NVMe RAID "
                          "Controller") == "other"
    assert kind_from_name("NVIDIA Corporation GH100 [H100 SXM5 80GB]") == "gpu"


# ---------------------------------------------------------------------------
# Limits: linear time, no recursion

def timed(fn, *args):
    """The CPU time ``fn(*args)`` takes: the work an input makes the parser do, whatever the machine's load."""
    t0 = time.process_time()
    try:
        fn(*args)
    except InputError:
        pass
    return time.process_time() - t0


@pytest.mark.parametrize("text", [
    "-[0000:00]-+-00.0  " + "x" * 1_000_000 + "\n",
    "-[0000:00]-+-00.0\n" + " " * 11 + "+-" * 500_000 + "\n",
    "|" * 1_000_000 + "\n",
    "-" * 1_000_000 + "\n",
    "-[0000:00]-" + "-" * 1_000_000 + "00.0\n",
    "-[0000:00]---00.0" + "-[01]----00.0" * 80_000 + "\n",
    "-[0000:00]-" + "+-" * 500_000 + "\n",
    "[" * 1_000_000 + "\n",
    "-[0000:00]-+-00.0\n" + (" " * 11 + "|\n") * 200_000,
], ids=["long-name", "many-markers", "bars", "dashes", "dashes-in-tree", "self-nesting", "open-lists",
        "brackets", "bar-lines"])
def test_huge_lines_are_fast(text):
    assert timed(parse_lspci_tree, text, "big") < 5
    assert timed(looks_like_lspci_tree, text) < 1


def test_deep_chain_without_recursion():
    line = "-[0000:00]---00.0" + "".join(f"-[{k:02x}-fe]----00.0" for k in range(1, 255)) + "\n"
    snap = parse_lspci_tree(line, "deep")
    assert len(snap.devices) == 255
    assert snap.device("0000:fe:00.0").parent == "0000:fd:00.0"
    assert len(Topology(snap).ancestors("0000:fe:00.0")) == 254


def test_many_lines():
    """4,000 functions, as many as a node may have, parse quickly; one more bus of them is refused as read."""
    def tree(count):
        lines = []
        buses = range(0, 2 * count, 2)
        for bus in buses:
            last = bus == buses[-1]
            lead, bar = ("-+-" if bus == 0 else " \\-" if last else " +-"), ("  " if last else " |")
            lines.append(f"{lead}[0000:{bus:02x}]-+-00.0")
            lines += [f"{bar}           +-{dev:02x}.{fn}" for dev in range(1, 32) for fn in range(8)]
            lines.append(f"{bar}           \\-00.1")
        return "\n".join(lines) + "\n"

    t0 = time.process_time()  # this process's CPU time: what the parse costs, however loaded the machine is
    snap = parse_lspci_tree(tree(16), "many")
    assert time.process_time() - t0 < 2
    assert len(snap.devices) == 16 * 250
    assert snap.device("0000:1e:1f.7").root == "0000:1e"
    with pytest.raises(InputError, match="more than 4096 PCI functions"):
        parse_lspci_tree(tree(128), "many")


# ---------------------------------------------------------------------------
# Through the command line

def cli(*args):
    from support.cli_util import call

    return call(*args, cwd=PROJECT)


def test_cli_topology_json():
    path = REALWORLD / L2FWD
    if not path.is_file():
        pytest.skip("realworld folder not available")
    res = cli("topology", "--json", "--from", str(path))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    devs = {d["bdf"]: d for d in doc["devices"]}
    assert set(devs) == {b(x) for x in EXPECT[L2FWD]}
    for short, (parent, root, kind) in EXPECT[L2FWD].items():
        d = devs[b(short)]
        assert (d["parent"], d["root"], d["kind"], d["numa_node"]) == (b(parent) if parent else None, root, kind,
                                                                        None)


def test_cli_damaged_file(tmp_path):
    bad = tmp_path / "tree.txt"
    bad.write_text("-[0000:00]-+-00.0\n           +-01.0\nrandom words\n           \\-02.0\n")
    res = cli("topology", "--json", "--from", str(bad))
    assert res.returncode == 2
    assert res.stdout == ""
    err = res.stderr.strip()
    assert "\n" not in err and "tree.txt: line 3:" in err and "Traceback" not in err
