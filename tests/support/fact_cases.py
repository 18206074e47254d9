"""Machines built as ``lspci -x`` dumps and drawn by the real ``lspci -F DUMP -tv``, for the no-false-facts
tests: the names are what the installed pci.ids gives (an older one names a new GPU ``Device 2335``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from support.cli_util import call
from support.lspci_dump import ROOT_PORT, Tree

LSPCI = shutil.which("lspci")
needs_lspci = pytest.mark.skipif(LSPCI is None, reason="pciutils' lspci is not installed")
Q35_HOST = (0x8086, 0x29C0, 0x060000)
VIRTIO_NET = (0x1AF4, 0x1041, 0x020000)
CX7 = (0x15B3, 0x1021, 0x020000)
H100_SXM = (0x10DE, 0x2330, 0x030200)
H200_SXM = (0x10DE, 0x2335, 0x030200)
RTX_4090 = (0x10DE, 0x2684, 0x030000)
ICX_HOST = (0x8086, 0x09A2, 0x088000)


def hgx_guest(gpu=H200_SXM, count=8) -> Tree:
    """An HGX guest: GPUs passed through flat onto the Q35 root bus, one virtio NIC."""
    t = Tree()
    t.leaf(0, 0, 0, 0, Q35_HOST)
    t.leaf(0, 0, 5, 0, VIRTIO_NET)
    for i in range(count):
        t.leaf(0, 0, 6 + i, 0, gpu)
    return t


def gpu_and_nic_on_root_ports(gpu=H100_SXM) -> Tree:
    """An x86 node: a GPU and a ConnectX-7 on two root ports of one root complex (PHB)."""
    t = Tree()
    t.leaf(0, 0, 0, 0, ICX_HOST)
    t.bridge(0, 0, 1, 1, 1, ids=ROOT_PORT)
    t.leaf(0, 1, 0, 0, gpu, parent="0000:00:01.0")
    t.bridge(0, 0, 2, 2, 2, ids=ROOT_PORT)
    t.leaf(0, 2, 0, 0, CX7, parent="0000:00:02.0")
    return t


def drawn(tree: Tree, tmp_path: Path, name: str, ids: Optional[Path] = None) -> Path:
    """``lspci -F DUMP -tv`` of the tree, written to ``name``.txt; ``ids``: the PCI database lspci names from
    (its own when None)."""
    dump = tmp_path / f"{name}.dump"
    dump.write_text(tree.dump())
    database = ["-i", str(ids)] if ids is not None else []
    res = subprocess.run([LSPCI, *database, "-F", str(dump), "-tv"], capture_output=True, text=True, timeout=30,
                         check=True)
    out = tmp_path / f"{name}.txt"
    out.write_text(res.stdout)
    return out


PCI_IDS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids",
           "/usr/share/misc/pci.ids.gz", "/usr/share/hwdata/pci.ids.gz")


def pci_ids_without(tmp_path: Path, vendor: int, device: int) -> Path:
    """The installed PCI database with one device forgotten (its line and its subsystems' lines), so lspci
    names it ``Device XXXX`` whatever the machine's database knows: an older one, as a guest's often is."""
    import gzip

    found = next((Path(p) for p in PCI_IDS if Path(p).is_file()), None)
    if found is None:
        pytest.skip("no PCI database (pci.ids) where lspci keeps it")
    raw = gzip.decompress(found.read_bytes()) if found.suffix == ".gz" else found.read_bytes()
    kept, in_vendor, dropping = [], False, False
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if line and not line.startswith(("\t", "#")):
            in_vendor, dropping = line.lower().startswith(f"{vendor:04x} "), False
        elif in_vendor and line.startswith("\t") and not line.startswith("\t\t"):
            dropping = line[1:].lower().startswith(f"{device:04x} ")
        if not dropping:
            kept.append(line)
    out = tmp_path / "pci.ids"
    out.write_text("\n".join(kept) + "\n")
    return out


def pairs_json(path: Path, *extra) -> dict:
    p = call("pairs", "--json", "--from", path, *extra)
    assert "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)


def drawn_verbose(tree: Tree, links: dict, tmp_path: Path, name: str) -> Path:
    """``lspci -F DUMP -vvv`` of the tree with its links, written to ``name``.txt."""
    dump = tmp_path / f"{name}.dump"
    dump.write_text(tree.dump(links))
    res = subprocess.run([LSPCI, "-F", str(dump), "-vvv"], capture_output=True, text=True, timeout=30, check=True)
    out = tmp_path / f"{name}.txt"
    out.write_text(res.stdout)
    return out
