"""The engines' lines (NHC, NPD, Nagios) are made in one place, gdrcheck/render/adapters.py: from a node's
pairs document, from the timeout document when the run was cut short, and for bad usage."""

from __future__ import annotations

import re

from support.cli_util import ROOT

from gdrcheck.documents.pairs import timeout_doc
from gdrcheck.render import adapters

ADAPTERS = ROOT / "gdrcheck" / "render" / "adapters.py"


def test_no_engine_line_is_made_outside_the_adapters():
    """Nagios' state prefix and an engine's table of formats appear nowhere else (the watchdog made its own
    Nagios line, and the check view its own table of the three)."""
    made = re.compile(r"""["']GDRCHECK |["']nagios["']:\s*adapters\.|adapters\.n(?:hc|pd)\b""")
    elsewhere = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "gdrcheck").rglob("*.py")) if p != ADAPTERS
                 for n, line in enumerate(p.read_text().splitlines(), 1) if made.search(line)]
    assert elsewhere == [], elsewhere


def test_a_run_cut_short_reads_as_unknown_to_every_engine():
    doc = timeout_doc(0.3, "node7")
    assert adapters.cut_short_line("nagios", doc) == f"GDRCHECK UNKNOWN - {doc['summary_line']}\n"
    for fmt in ("nhc", "npd"):
        assert adapters.cut_short_line(fmt, doc) == doc["summary_line"] + "\n"
    assert adapters.usage_line("nagios", "bad").startswith("GDRCHECK UNKNOWN - gdrcheck error: bad")


def test_each_engine_has_its_line():
    from gdrcheck.cli.options import LINE_FORMATS

    assert set(adapters.ENGINES) == set(LINE_FORMATS)
