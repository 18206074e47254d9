"""Which NCCL judges: the versions found on the node (file names and metadata only) and --nccl-version."""

from __future__ import annotations

import pytest
from support import nccl_nodes as N
from support.cli_util import ROOT, assert_clean_error, call

G0, G2 = "0000:03:00.0", "0000:83:00.0"
NIC0 = "0000:05:00.0"
SITE = "/usr/local/lib/python3.10/dist-packages"


def node_with(tmp_path, name, files):
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"),
                                             ("gpu", G2, 1, "root")], flavor="proprietary", files=files)


def test_newest_found_judges_and_others_are_compared(tmp_path):
    files = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": "",
             "/usr/lib/x86_64-linux-gnu/libnccl.so.2": "->libnccl.so.2.21.5",
             f"{SITE}/nvidia_nccl_cu12-2.26.2.dist-info/METADATA": "Name: nvidia-nccl-cu12\n",
             f"{SITE}/torch-2.5.1.dist-info/METADATA": "Name: torch\nRequires-Dist: nvidia-nccl-cu12==2.21.5; "
                                                        "platform_system == \"Linux\"\n"}
    top, pairs = N.decide(node_with(tmp_path, "three-nccls", files))
    assert top["version"] == "2.26.2" and "pip wheel" in top["version_reason"]
    kinds = sorted((e["version"], e["kind"]) for e in top["versions_found"])
    assert kinds == [("2.21.5", "PyTorch 2.5.1 requirement"), ("2.21.5", "library"), ("2.26.2", "pip wheel")]
    # nvidia_peermem without MLNX_OFED: 2.26 sees /sys/module/nvidia_peermem/version, 2.21 does not
    assert pairs[(G0, NIC0)]["gdr"] == "enabled"
    other = [o for o in top["other_versions"] if o["version"] == "2.21.5"]
    assert len(other) == 1
    assert {(d["a"], d["b"], d.get("gdr")) for d in other[0]["pairs_that_differ"]} >= {(G0, NIC0, "disabled")}


def test_nccl_version_option_wins(tmp_path):
    files = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.26.2": "",
             "/usr/lib/x86_64-linux-gnu/libnccl.so.2": "->libnccl.so.2.26.2"}
    top, pairs = N.decide(node_with(tmp_path, "option-wins", files), "2.21.5")
    assert top["version"] == "2.21.5" and top["version_reason"] == "--nccl-version"
    assert pairs[(G0, NIC0)]["gdr"] == "disabled"


def test_none_found_says_so(tmp_path):
    top, _ = N.decide(node_with(tmp_path, "none-found", {}))
    assert top["version"] == "2.30.7" and top["versions_found"] == [] and "no NCCL found" in top["version_reason"]


def test_one_grammar_reads_what_nccl_and_its_packages_print():
    """`NCCL version 2.21.5+cuda12.4` (an NCCL log), `2.21.5-1` (the deb/rpm revision), `v2.21` (a tag); the
    option's callback makes the same Version of it, written back as NCCL writes it."""
    from gdrcheck.cli.options import NCCL
    from gdrcheck.rules.nccl import NEWEST, Version, parse_version

    for text in ("2.21.5", "2.21.5-1", "2.21.5+cuda12.4", " v2.21.5 "):
        assert parse_version(text) == (2, 21, 5) == NCCL.callback(text), text
        assert str(NCCL.callback(text)) == "2.21.5" and isinstance(NCCL.callback(text), Version)
    assert parse_version("2.21") == (2, 21, 0) and str(parse_version("2.21")) == "2.21.0"
    assert parse_version(None) == NEWEST and NCCL.callback(None) is None
    for text in ("garbage", "", "9", "2.21.5-cuda", "2.21.5+rc1", "1234.1.1", "2.0.1", "2.21.5\n2.22.3"):
        for read in (parse_version, NCCL.callback):
            try:
                read(text)
            except ValueError as e:
                assert "\n" not in str(e), text
            else:
                raise AssertionError(f"{text!r} read as a version")


def test_a_version_compares_with_a_tuple_and_hashes_as_one():
    from gdrcheck.rules.nccl import Version

    v = Version(2, 21, 5)
    assert v == (2, 21, 5) and hash(v) == hash((2, 21, 5)) and (2, 20, 0) < v < (2, 22, 0)
    assert {v: 1}[(2, 21, 5)] == 1 and max(Version(2, 9, 0), Version(2, 10, 0)) == (2, 10, 0)
    assert repr(v) == "Version(2, 21, 5)" and f"NCCL {v}" == "NCCL 2.21.5"


def test_the_command_line_takes_a_package_version_and_refuses_garbage_in_one_line():
    topo = ROOT / "fixtures/h100-x1-vm/nvidia-smi-topo.txt"
    ok = call("pairs", "--nccl-version", "2.21.5-1", "--from", topo)
    assert ok.returncode == 0 and "NCCL 2.21.5 " in ok.stdout, ok.stderr
    bad = call("pairs", "--nccl-version", "garbage", "--from", topo)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1, bad.stderr
    assert "not an NCCL version: 'garbage'" in bad.stderr


@pytest.mark.parametrize("command", [("pairs",), ("check",), ("check", "--format", "nhc"), ("report", "-o", "-"),
                                     ("probe", "--dry-run")])
def test_every_command_refuses_a_bad_version_at_the_door(command):
    """`probe --dry-run --nccl-version garbage` was an internal error (exit 3): every command that takes the
    option reads it by the same callback, and a bad one is a one-line usage error, exit 2."""
    p = call(*command, "--nccl-version", "garbage", "--from", ROOT / "fixtures/h100-x1-vm/nvidia-smi-topo.txt")
    assert_clean_error(p)
    assert "not an NCCL version: 'garbage'" in p.stderr
