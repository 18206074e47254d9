"""The input-kind table: every kind that recognition, parsing, merging and the reach table name is one row."""

import importlib

from gdrcheck.collectors import input_kinds
from gdrcheck.collectors.input_kinds import ACCEPTED_KINDS, BY_NAME, INPUT_KINDS, MERGE_ORDER, RECOGNITION_ORDER
from gdrcheck.collectors.pastes.merge import _Merge
from gdrcheck.reach import SHOWS


def _resolves(spec):
    module, name = spec.split(":")
    return callable(getattr(importlib.import_module(module), name))


def test_every_kind_the_reach_table_knows_is_a_row():
    assert set(SHOWS) <= set(BY_NAME)
    for kind in INPUT_KINDS:
        assert kind.shows == SHOWS[kind.reads_as], kind.name


def test_every_recognised_kind_has_a_recogniser_and_a_parser_that_exist():
    assert sorted(RECOGNITION_ORDER) == sorted(k.name for k in INPUT_KINDS if k.parse)
    for name in RECOGNITION_ORDER:
        kind = BY_NAME[name]
        assert (kind.xml_root is None) != (kind.looks_like is None), name
        assert kind.looks_like is None or _resolves(kind.looks_like), name
        assert _resolves(kind.parse), name


def test_every_merge_step_is_one_the_merge_has():
    steps = {k.reads_as: k.merge_step for k in INPUT_KINDS}
    assert set(MERGE_ORDER) == {k for k, step in steps.items() if step not in ("tree", "add_logs")}
    for step in set(steps.values()) - {"tree"}:
        assert callable(getattr(_Merge, step)), step
    assert {k for k, step in steps.items() if step == "tree"} == set(input_kinds.TREE_KINDS)


def test_accepted_kinds_are_the_rows_forms_in_order():
    assert ACCEPTED_KINDS == tuple(f for k in INPUT_KINDS for f in k.forms)
    assert ACCEPTED_KINDS[0] == ("a directory laid out like /", "a copy of /sys and /proc, or an unpacked snapshot "
                                                                "archive")
    assert len(ACCEPTED_KINDS) == 23


def test_the_one_line_list_of_file_kinds_is_made_from_the_table():
    assert input_kinds.FILE_KINDS_TEXT == (
        "lspci -tv, lspci -vvv, nvidia-smi -q (text or -x XML), nvidia-smi topo -m/-mp/-p2p, rocm-smi --showtopo, "
        "amd-smi topology, NCCL topology XML (<system>), hwloc XML (<topology>), NCCL graph XML (<graphs>), "
        "nvidia-smi, nvidia-smi -q | grep -A3 -i bar, "
        "nccl-tests output, numactl --hardware, lscpu, /proc/cpuinfo, /etc/default/grub, gdscheck -p, gdsio output, "
        "ibv_devinfo, an NCCL_DEBUG=INFO log, or a directory or snapshot archive (gdrcheck snapshot)")
