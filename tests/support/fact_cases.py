"""Machines built as ``lspci -x`` dumps and drawn by the real ``lspci -F DUMP -tv``, for the no-false-facts
tests: the names are what the installed pci.ids gives (an older one names a new GPU ``Device 2335``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli_util import run
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


def drawn(tree: Tree, tmp_path: Path, name: str) -> Path:
    """``lspci -F DUMP -tv`` of the tree, written to ``name``.txt."""
    dump = tmp_path / f"{name}.dump"
    dump.write_text(tree.dump())
    res = subprocess.run([LSPCI, "-F", str(dump), "-tv"], capture_output=True, text=True, timeout=30, check=True)
    out = tmp_path / f"{name}.txt"
    out.write_text(res.stdout)
    return out


def pairs_json(path: Path, *extra) -> dict:
    p = run("pairs", "--json", "--from", path, *extra)
    assert "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)


def with_links(tree: Tree, links: dict) -> str:
    """The tree's ``lspci -x``-style dump, 256 bytes a function, with a PCIe capability where ``links`` gives
    one: bdf -> (port type, max GT/s code, max width, current GT/s code, current width); speed codes as in
    LnkCap (1 = 2.5, 2 = 5, 3 = 8, 4 = 16, 5 = 32 GT/s), port type 0 endpoint, 4 root port."""
    out = []
    for f in sorted(tree.fns, key=lambda f: (f.dom, f.bus, f.dev, f.fn)):
        cfg = bytearray(256)
        vendor, device, cls = f.ids
        cfg[0:2] = vendor.to_bytes(2, "little")
        cfg[2:4] = device.to_bytes(2, "little")
        cfg[9:12] = cls.to_bytes(3, "little")
        if f.is_bridge:
            cfg[0x0E] = 1
            cfg[0x18], cfg[0x19], cfg[0x1A] = f.primary, f.sec, f.sub
        if f.bdf in links:
            ptype, max_s, max_w, cur_s, cur_w = links[f.bdf]
            cfg[0x06] = 0x10  # status: capabilities list
            cfg[0x34] = 0x40
            cfg[0x40], cfg[0x41] = 0x10, 0x00  # PCI Express, last capability
            cfg[0x42:0x44] = (2 | (ptype << 4)).to_bytes(2, "little")
            cfg[0x4C:0x50] = (max_s | (max_w << 4)).to_bytes(4, "little")  # LnkCap
            cfg[0x52:0x54] = (cur_s | (cur_w << 4)).to_bytes(2, "little")  # LnkSta
        out.append(f"{f.bdf} made-up")
        for i in range(0, 256, 16):
            out.append(f"{i:02x}: " + " ".join(f"{b:02x}" for b in cfg[i:i + 16]))
        out.append("")
    return "\n".join(out) + "\n"


def drawn_verbose(tree: Tree, links: dict, tmp_path: Path, name: str) -> Path:
    """``lspci -F DUMP -vvv`` of the tree with its links, written to ``name``.txt."""
    dump = tmp_path / f"{name}.dump"
    dump.write_text(with_links(tree, links))
    res = subprocess.run([LSPCI, "-F", str(dump), "-vvv"], capture_output=True, text=True, timeout=30, check=True)
    out = tmp_path / f"{name}.txt"
    out.write_text(res.stdout)
    return out
