"""Every input kind is asked only through ``gdrcheck.reach``: each kind a snapshot can carry has its row (what it
shows, what reading it is), a kind without one is an error, never "shows every fact", and no stage past the
collectors compares a kind's name."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from support.cli_util import ROOT

from gdrcheck import reach
from gdrcheck.collectors.input_kinds import INPUT_KINDS


def test_every_kind_a_snapshot_carries_has_both_rows():
    carried = {k.reads_as for k in INPUT_KINDS}
    assert carried <= set(reach.SHOWS), carried - set(reach.SHOWS)
    # pastes: several merged without a tree (what they show is each one's row, Snapshot.input_kinds)
    assert set(reach.IS) == set(reach.SHOWS) | {"pastes"}


def test_a_kind_without_a_row_is_an_error_not_every_fact():
    snap = SimpleNamespace(input_kind="a-kind-no-row-names", input_kinds=())
    with pytest.raises(KeyError):
        reach.shown(snap)
    with pytest.raises(KeyError):
        reach.kernel_view(snap)


def test_what_reading_an_input_is():
    def kind(name):
        return SimpleNamespace(input_kind=name, input_kinds=())

    assert reach.kernel_view(kind("sysfs")) and not reach.on_node(kind("sysfs"))
    assert reach.on_node(kind("snapshot")) and reach.on_node(kind("live"))
    assert reach.nccl_own_tree(kind("nccl-xml")) and not reach.nccl_own_tree(kind("hwloc-xml"))
    assert reach.no_config_space(kind("lspci")) and not reach.no_config_space(kind("lspci-vvv"))


def test_no_stage_compares_a_kind_name():
    asks = re.compile(r"input_kinds?\s*(==|!=|\bin\b|\bnot in\b)|kinds_of\([^)]*\)\s*(==|\bin\b)")
    askers = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "gdrcheck").rglob("*.py"))
              if "collectors" not in p.relative_to(ROOT).parts and p.name != "reach.py"
              for n, line in enumerate(p.read_text().splitlines(), 1) if asks.search(line)]
    assert askers == [], askers


def test_no_module_outside_the_tables_compares_a_kind_name():
    """Past the two tables (``gdrcheck.reach``, ``gdrcheck.collectors.input_kinds``), the collectors too ask a kind's
    row (its merge step, whether it can be read alone, what may be pasted above it), never its name."""
    names = "|".join(re.escape(k.name) for k in INPUT_KINDS)
    asks = re.compile(r"\b\w*kind\w*(\.name)?\s*(==|!=|(not\s+)?in\b)\s*[(\[{]?\s*[\"'](" + names + r")[\"']")
    tables = {"gdrcheck/reach.py", "gdrcheck/collectors/input_kinds.py"}
    askers = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "gdrcheck").rglob("*.py"))
              if str(p.relative_to(ROOT)) not in tables
              for n, line in enumerate(p.read_text().splitlines(), 1) if asks.search(line)]
    assert askers == [], askers
    assert asks.search('if kind == "nccl-log":') and asks.search('p.input_kind != "acsctl-grep"')
