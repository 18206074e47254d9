"""Inputs beyond any real node, and inputs that never end: refused in one line (exit 2), or ended by the
deadline (exit 3), quickly and within a bounded amount of memory.

- a 4 MB ``lspci -tv`` (some 18,000 GPUs, rendered by real ``lspci -F``) took 75 s in ``topology``; a 31 MB
  one all 23 GB of a machine's memory. Now refused once its 4,097th function is read, under 2 s;
- ``nvidia-smi topo -m``, ``nvidia-smi -q`` and ``lspci -vvv`` of more GPUs or functions than a node has;
- a snapshot whose GPUs, NICs and NVMe make more pairs than a node has;
- ``pairs``' NUMA column scanned every device per row (quadratic on a 16 MB NCCL XML);
- ``--from`` a FIFO no one writes hung forever, and a ``--output`` FIFO no one reads did too.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from support.cli_util import ROOT, assert_clean_error
from support.limits import GIB, run_limited
from support.lspci_dump import GPU, NIC, ROOT_PORT, Tree

from gdrcheck.errors import InputError

LSPCI = shutil.which("lspci")
SNAPSHOT = ROOT / "fixtures" / "h100-x1-vm" / "snapshot.tar.gz"


def _node_per_domain(domains: int, ports: int = 8) -> Tree:
    """Per PCI domain: 8 root ports, each with a switch holding a GPU and a ConnectX function."""
    t = Tree()
    for dom in range(domains):
        bus = 1
        for p in range(ports):
            rp = t.bridge(dom, 0, p + 1, bus, bus + 2, None, None, ids=ROOT_PORT)
            up = t.bridge(dom, bus, 0, bus + 1, bus + 2, rp.bdf, rp.root)
            dn = t.bridge(dom, bus + 1, 0, bus + 2, bus + 2, up.bdf, rp.root)
            t.leaf(dom, bus + 2, 0, 0, GPU, dn.bdf, rp.root)
            t.leaf(dom, bus + 2, 0, 1, NIC, dn.bdf, rp.root)
            bus += 3
    return t


def _big_lspci_tree(tmp_path, domains: int) -> str:
    """``lspci -tv`` of ``domains`` PCI domains of the node above: real lspci renders three (it is quadratic in
    the functions it draws); the middle one, its domain renumbered, stands for every other."""
    dump = tmp_path / "dump.txt"
    dump.write_text(_node_per_domain(3).dump())
    text = subprocess.run([LSPCI, "-O", "hwdb.disable=1", "-F", str(dump), "-tv"], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if "-[000" in ln[:12]]
    first, middle, last = (lines[a:b] for a, b in zip(starts, starts[1:] + [len(lines)]))
    middle = "".join(middle)
    last = "".join(last)
    body = [middle.replace("[0001:", f"[{d:04x}:") for d in range(1, domains - 1)]
    return "".join(first) + "".join(body) + last.replace("[0002:", f"[{domains - 1:04x}:")


@pytest.mark.skipif(LSPCI is None, reason="pciutils' lspci is not installed")
def test_a_four_megabyte_lspci_tree_is_refused_in_under_two_seconds(tmp_path):
    """18,400 GPUs in 4 MB of `lspci -tv`: refused in topology and in pairs, each in under 2 s (before: 75 s)."""
    tree = tmp_path / "big-lspci-tv.txt"
    tree.write_text(_big_lspci_tree(tmp_path, 2300))
    assert tree.stat().st_size > 4_000_000
    for cmd in ("topology", "pairs"):
        p = run_limited(cmd, "--from", tree, mem=GIB)
        assert_clean_error(p)
        assert "more than 4096 PCI functions" in p.stderr
        assert p.cpu_seconds < 2, (cmd, p.cpu_seconds)


@pytest.mark.skipif(LSPCI is None, reason="pciutils' lspci is not installed")
def test_the_tree_made_for_the_test_is_one_lspci_would_draw(tmp_path):
    """The renumbered domains read as real lspci draws them: 5 domains, each of 8 GPUs and 8 NICs."""
    from gdrcheck.collectors.pastes.lspci_tree import parse_lspci_tree

    dump = tmp_path / "dump5.txt"
    dump.write_text(_node_per_domain(5).dump())
    real = subprocess.run([LSPCI, "-O", "hwdb.disable=1", "-F", str(dump), "-tv"], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    assert _big_lspci_tree(tmp_path, 5) == real
    assert len(parse_lspci_tree(real, "t").devices) == 5 * 8 * 5


def test_counts_beyond_a_node_are_refused():
    """What no node has: more functions, GPUs or pairs; the largest a node may have is read."""
    from gdrcheck.collectors.bounds import MAX_GPUS, check_snapshot
    from gdrcheck.model import PciFunction, Snapshot

    def snap(gpus, nics=0, others=0):
        devs = [PciFunction(bdf=f"{i // 256:04x}:{i % 256:02x}:00.0", root=f"{i // 256:04x}:{i % 256:02x}",
                            vendor=0x10DE, class_code=0x030200) for i in range(gpus)]
        devs += [PciFunction(bdf=f"1{i // 256:03x}:{i % 256:02x}:00.0", root=f"1{i // 256:03x}:{i % 256:02x}",
                             vendor=0x15B3, class_code=0x020700) for i in range(nics)]
        devs += [PciFunction(bdf=f"2{i // 256:03x}:{i % 256:02x}:00.0", root=f"2{i // 256:03x}:{i % 256:02x}",
                             vendor=0x8086, class_code=0x088000) for i in range(others)]
        return Snapshot(input_kind="lspci", label="t", devices=tuple(devs))

    check_snapshot(snap(MAX_GPUS), "t")  # 130,816 GPU pairs: the most
    check_snapshot(snap(256, 256), "t")
    check_snapshot(snap(8, 8, 4000), "t")
    for big, what in ((snap(MAX_GPUS + 1), "513 GPUs"), (snap(8, 8, 4090), "4106 PCI functions"),
                      (snap(300, 300), "pairs, more than any real node has")):
        with pytest.raises(InputError, match=what):
            check_snapshot(big, "t")


def test_a_topo_matrix_of_ten_thousand_gpus_is_refused_from_its_header(tmp_path):
    n = 10_000
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    rows = "".join(f"GPU{i}\t" + "\t".join("X" if i == j else "SYS" for j in range(n)) + "\t0-7\t0\n"
                   for i in range(3))
    path = tmp_path / "topo-m.txt"
    path.write_text(head + rows)
    p = run_limited("pairs", "--from", path, mem=GIB)
    assert_clean_error(p)
    assert "10000 GPUs, more than any real node has" in p.stderr


def test_nvidia_smi_q_of_ten_thousand_gpus_is_refused(tmp_path):
    block = "GPU 00000000:{:02X}:{:02X}.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n"
    text = ("==============NVSMI LOG==============\n\nDriver Version : 550.54.15\n\n"
            + "".join(block.format(i // 256 % 256, i % 32) for i in range(10_000)))
    path = tmp_path / "smi-q.txt"
    path.write_text(text)
    p = run_limited("pairs", "--from", path, mem=GIB)
    assert_clean_error(p)
    assert "GPUs, more than any real node has" in p.stderr


def test_lspci_vvv_of_more_functions_than_a_node_is_refused(tmp_path):
    line = "{:04x}:{:02x}:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n" \
           "\tControl: I/O- Mem+ BusMaster+\n\n"
    path = tmp_path / "lspci-vvv.txt"
    path.write_text("".join(line.format(i // 256, i % 256) for i in range(20_000)))
    p = run_limited("pairs", "--from", path, mem=GIB)
    assert_clean_error(p)
    assert "more than 4096 PCI functions" in p.stderr
    assert p.cpu_seconds < 5


class _Counted(list):
    """A device list that counts how often it is walked."""

    walks = 0

    def __iter__(self):
        _Counted.walks += 1
        return super().__iter__()


def test_the_text_walks_the_devices_as_often_for_4_gpus_as_for_8(realworld):
    """pairs' text looked up each row's NUMA node, and each finding group its labels, by a walk of every device:
    on a 16 MB NCCL XML the text took over 600 s where JSON took 19 s. Now the number of walks is fixed (10;
    before, 20 for 4 GPUs and 45 for 8 GPUs and 8 NICs)."""
    import io

    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.documents.pairs import pairs_doc
    from gdrcheck.render.console import make_console
    from gdrcheck.render.pairs_text import render_pairs
    from gdrcheck.rules.engine import evaluate

    walks = []
    for node in ("azure-ncv4", "azure-ndv5"):
        doc = pairs_doc(evaluate(load_facts(str(realworld / node / "nccl-topo.xml"))))
        doc = dict(doc, devices=_Counted(doc["devices"]))
        console = make_console(to_file=True)
        console.file = io.StringIO()
        _Counted.walks = 0
        render_pairs(doc, console)
        walks.append(_Counted.walks)
    assert walks[0] == walks[1] <= 10, walks


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_from_a_fifo_no_one_writes_ends_at_the_deadline(fifo):
    """Before: `pairs --from FIFO` waited forever (killed by `timeout 40` after 40 s)."""
    p = run_limited("pairs", "--from", fifo, "--timeout", "1", timeout=30)
    assert p.returncode == 3, p.stderr
    assert "GDR122 run-timed-out: no result within 1 s" in p.stderr
    assert p.cpu_seconds < 10


def test_from_has_the_live_default_deadline():
    from gdrcheck.cli.run import Run
    from gdrcheck.io.deadline import DEFAULT_SECONDS

    run = Run("text", None, str(SNAPSHOT))
    try:
        assert run.deadline.seconds == DEFAULT_SECONDS
    finally:
        run.watchdog.disarm()


def test_the_deadline_covers_writing_the_output(fifo):
    """--output to a FIFO no one reads: the deadline ends the run while it waits to write (exit 3, one line)."""
    p = run_limited("pairs", "--from", SNAPSHOT, "--output", fifo, "--timeout", "1", timeout=30)
    assert p.returncode == 3, p.stderr
    assert p.stderr.strip() == "gdrcheck: the output was not written within 1 s"
    assert p.cpu_seconds < 10


@pytest.mark.parametrize("kind,head,tail", [
    ("nccl", '<system version="1">', "</system>"),
    ("hwloc", '<topology version="2.0">', "</topology>"),
    ("smi", "<?xml version=\"1.0\" ?>\n<nvidia_smi_log>", "</nvidia_smi_log>"),
])
def test_an_xml_of_millions_of_elements_is_refused_as_it_is_read(tmp_path, kind, head, tail):
    """32 MB of "<a/>": before, ElementTree held 8 million elements (2.5 GB, still going after 120 s)."""
    path = tmp_path / f"{kind}.xml"
    path.write_text(head + "<a/>" * 7_000_000 + tail)
    p = run_limited("pairs", "--from", path, mem=GIB)
    assert_clean_error(p)
    assert "more than 500000 XML elements" in p.stderr
    assert p.cpu_seconds < 5


def test_an_nccl_xml_of_more_functions_than_a_node_is_refused_as_it_is_read(tmp_path):
    """16 MB of NCCL XML, 75,000 GPUs and as many NICs: its text took over 600 s (the NUMA column); now refused."""
    pci = ('<pci busid="{:04x}:{:02x}:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">'
           '<pci busid="{:04x}:{:02x}:01.0" class="0x030200" link_width="16"/>'
           '<pci busid="{:04x}:{:02x}:02.0" class="0x020700" link_width="16"/></pci>\n')
    body = "".join(pci.format(*(k // 200, k % 200) * 3) for k in range(75_000))
    path = tmp_path / "nccl-topo.xml"
    path.write_text(f'<system version="1"><cpu numaid="0" affinity="ff">{body}</cpu></system>\n')
    assert path.stat().st_size > 16_000_000
    p = run_limited("pairs", "--from", path, mem=GIB)
    assert_clean_error(p)
    assert "more than 4096 PCI functions" in p.stderr
    assert p.cpu_seconds < 3
