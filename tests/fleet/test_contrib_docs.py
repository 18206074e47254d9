"""docs/fleet.md and contrib/ agree: every artifact is documented, the engines come in order."""

from __future__ import annotations

import re

from support.contrib_util import CONTRIB, ROOT

DOC = ROOT / "docs" / "fleet.md"


def test_every_contrib_file_is_in_the_docs():
    text = DOC.read_text()
    files = [p for p in CONTRIB.rglob("*") if p.is_file() and p.name != ".yamllint"]
    assert len(files) >= 15
    for p in files:
        assert p.name in text, f"{p.relative_to(ROOT)} is not mentioned in docs/fleet.md"


def test_engines_in_order_and_the_principle():
    text = DOC.read_text()
    heads = re.findall(r"^## (\d)\. (.+)$", text, re.M)
    names = [h[1].split()[0].lower() for h in heads]
    assert names == ["clush", "slurm:", "prometheus:", "kubernetes", "ansible"], heads
    assert "**Do not build**" in text and "fan-out belongs to the engines" in text


def test_exit_status_table():
    text = DOC.read_text()
    header = next(ln for ln in text.splitlines() if ln.startswith("| gdrcheck situation |"))
    for col in ("contract", "npd", "nagios", "NHC"):
        assert col in header, col

    def cells(ln):
        return len(re.findall(r"(?<!\\)\|", ln))

    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and cells(ln) == cells(header)]
    assert len(rows) >= 5  # the header and four situations
