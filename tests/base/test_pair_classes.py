"""The PCIe path classes' order and the capability -> pair kind table are written once (gdrcheck.pair_classes):
no module keeps its own copy."""

from __future__ import annotations

import re

from support.cli_util import ROOT

from gdrcheck.pair_classes import PAIR_KIND, PCIE_CLASSES, PCIE_RANK


def test_the_tables_agree():
    assert [c for c, _ in sorted(PCIE_RANK.items(), key=lambda kv: kv[1])] == list(PCIE_CLASSES)
    assert sorted(PAIR_KIND.values()) == ["gpu-gpu", "gpu-nic", "gpu-nvme"]


def test_no_other_copy():
    copies = re.compile(r'"PIX":\s*0|"PIX",\s*"PXB",\s*"PHB",\s*"NODE"|"gdr":\s*"gpu-nic"|"gpu-nic":\s*"gdr"|'
                        r'\("gdr",\s*"gpu-nic"\)')
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "gdrcheck").rglob("*.py"))
             if p.name != "pair_classes.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if copies.search(line)]
    assert found == [], found
