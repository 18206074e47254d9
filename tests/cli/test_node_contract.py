"""The per-node contract for fleets: --timeout, --output, NODE_NAME, determinism, fingerprint, check formats."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.cli_util import ROOT, assert_clean_error, call, run

from builders.scenarios import scenario

SLEEP = "/bin/sleep" if os.path.exists("/bin/sleep") else "/usr/bin/sleep"


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    base = tmp_path_factory.mktemp("trees")
    return {c: scenario(base / c, c) for c in ("healthy-gdr-node", "acs-redirect-on-switch",
                                                  "no-peer-memory-module", "config-space-not-root")}


def _hanging_tool(tmp_path: Path) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    exe = d / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\nexec {SLEEP} 600\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return d


# -- --timeout -------------------------------------------------------------------------------------------


def test_timeout_gives_a_partial_result_with_unknown_verdicts_and_exit_3(tmp_path):
    tools = _hanging_tool(tmp_path)
    # the hanging tool is given up on, not waited for (600 s): a run that waits meets run's own bound first
    p = run("pairs", "--json", "--timeout", "1", env={"GDRCHECK_TOOL_PATH": str(tools)}, timeout=300)
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["timed_out"] is True and doc["status"] == "unknown"
    assert doc["summary_line"].startswith("GDR122 ")
    assert any(f["code"] == "GDR122" and "nvidia-smi" in f["subject"] for f in doc["findings"])
    assert all(p["verdict"] in ("unknown", "fail") for p in doc["pairs"])
    smi = [c for c in doc["collectors"] if c["name"] == "nvidia-smi"]
    assert smi and smi[0]["status"] == "unavailable"
    assert "GDR122" in p.stderr and "Traceback" not in p.stderr


def test_timeout_zero_means_no_deadline_and_a_normal_run_is_not_timed_out(trees):
    p = call("pairs", "--json", "--timeout", "0", "--from", trees["healthy-gdr-node"])
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["timed_out"] is False and doc["status"] == "pass"


@pytest.fixture
def stuck(tmp_path):
    """An input that never comes: a FIFO no one writes. (A 1000-device chassis, slow to judge, served here
    once; it is now refused as beyond any real node, its 160,000 pairs over a GiB of memory.)"""
    fifo = tmp_path / "stuck"
    os.mkfifo(fifo)
    return fifo


def test_watchdog_ends_a_run_stuck_past_the_deadline(stuck):
    """An input that never comes, past a 0.3 s deadline: the watchdog answers for it."""
    tree = stuck
    p = run("pairs", "--json", "--timeout", "0.3", "--from", tree, timeout=300)  # a bound for a broken watchdog only
    assert p.returncode == 3, (p.stdout[-300:], p.stderr)
    doc = json.loads(p.stdout)
    assert doc["timed_out"] is True and doc["pairs"] == [] and doc["host"] is None
    assert doc["findings"][0]["code"] == "GDR122"
    assert p.stderr.strip().startswith("gdrcheck: GDR122")


def test_watchdog_under_npd_answers_unknown_within_80_bytes(stuck):
    p = run("check", "--format", "npd", "--timeout", "0.2", "--from", stuck)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout.startswith("GDR122") and len(p.stdout.strip().encode()) <= 80


def test_bad_timeout_is_a_usage_error():
    assert_clean_error(call("pairs", "--timeout", "-1"))
    assert_clean_error(call("pairs", "--timeout", "soon"))
    assert_clean_error(call("pairs", "--timeout", "nan"))


@pytest.mark.parametrize("limit", ["inf", "1e400", "1e30"])
def test_an_endless_timeout_means_no_limit(trees, limit):
    p = call("pairs", "--json", "--timeout", limit, "--from", trees["healthy-gdr-node"])
    assert p.returncode == 0 and p.stderr == "" and json.loads(p.stdout)["timed_out"] is False


# -- --output ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("pairs", "--json"), ("pairs",), ("topology", "--json"), ("bar1", "--json"),
                                  ("check", "--format", "prometheus"), ("check", "--format", "nagios"),
                                  ("fingerprint",)])
def test_output_is_written_atomically_and_nothing_on_stdout(trees, tmp_path, args):
    out = tmp_path / "out" / "report.txt"
    out.parent.mkdir()
    out.write_text("old content\n")
    p = call(*args, "--from", trees["healthy-gdr-node"], "--output", out)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert out.read_text() != "old content\n" and out.read_text().endswith("\n")
    assert sorted(os.listdir(out.parent)) == ["report.txt"]  # no temporary file left behind
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    if args[-1] == "--json":
        json.loads(out.read_text())


def test_output_into_a_missing_or_unwritable_place_is_a_one_line_error(trees, tmp_path):
    assert_clean_error(call("pairs", "--from", trees["healthy-gdr-node"], "-o", tmp_path / "nope" / "x.json"))
    assert_clean_error(call("pairs", "--from", trees["healthy-gdr-node"], "-o", tmp_path))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a read-only directory is still writable")
        assert_clean_error(call("pairs", "--from", trees["healthy-gdr-node"], "-o", ro / "x.json"))
    finally:
        ro.chmod(0o755)


def test_output_keeps_the_mode_of_the_file_it_replaces_and_new_files_follow_the_umask(trees, tmp_path):
    kept = tmp_path / "collector.prom"
    kept.write_text("old\n")
    kept.chmod(0o600)
    p = call("check", "--format", "prometheus", "--from", trees["healthy-gdr-node"], "-o", kept)
    assert p.returncode == 0 and oct(kept.stat().st_mode & 0o777) == "0o600", p.stderr
    new = tmp_path / "new.prom"
    subprocess.run(["sh", "-c", 'umask 077 && exec "$0" -m gdrcheck check --format prometheus --from "$1" -o "$2"',
                    sys.executable, str(trees["healthy-gdr-node"]), str(new)], cwd=ROOT, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert oct(new.stat().st_mode & 0o777) == "0o600"


def test_output_names_long_or_empty(trees, tmp_path):
    """A 250-character name is a name like any other (its temporary file's name went past NAME_MAX); an empty
    one is a usage error (it wrote to stdout)."""
    long = tmp_path / ("x" * 250)
    p = call("pairs", "--json", "--from", trees["healthy-gdr-node"], "-o", long)
    assert p.returncode == 0 and json.loads(long.read_text())["pairs"], p.stderr
    assert_clean_error(call("pairs", "--json", "--from", trees["healthy-gdr-node"], "-o", ""))


def test_output_to_a_fifo_is_written_in_place(trees, tmp_path):
    """A target that is not a file (here a FIFO; /dev/null and /dev/stdout alike) is written where it is:
    renaming a file over it would put a regular file where the device was (as root, /dev/null itself)."""
    fifo = tmp_path / "reader"
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("text", fifo.read_text()), daemon=True)
    reader.start()
    p = call("pairs", "--json", "--from", trees["healthy-gdr-node"], "-o", fifo)
    reader.join(30)
    if reader.is_alive():  # nothing was written into the FIFO: let the reader go
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "w"):
            pass
    assert p.returncode == 0 and p.stdout == "", p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["reader"]
    assert json.loads(got["text"])["pairs"]


def test_output_to_a_standard_stream_by_name(trees):
    """/dev/fd/1 (as /dev/stdout, /proc/self/fd/1) is the run's own stdout: the document arrives there."""
    p = run("pairs", "--json", "--from", trees["healthy-gdr-node"], "-o", "/dev/fd/1")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pairs"]


@pytest.mark.parametrize("args", [("pairs", "--json", "-o", "-"), ("check", "-o-"), ("fingerprint", "--output", "-")])
def test_output_dash_is_stdout(trees, tmp_path, args):
    """-o - is stdout, as --from - is stdin and report -o - always was: no file named '-' appears."""
    p = call(*args, "--from", trees["healthy-gdr-node"], cwd=tmp_path)
    assert p.returncode == 0 and p.stdout, p.stderr
    assert os.listdir(tmp_path) == []


def test_output_through_a_link_replaces_the_file_and_keeps_the_link(trees, tmp_path):
    target = tmp_path / "data" / "gdrcheck.prom"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "textfile" / "gdrcheck.prom"
    link.parent.mkdir()
    link.symlink_to(target)
    p = call("check", "--format", "prometheus", "--from", trees["healthy-gdr-node"], "-o", link)
    assert p.returncode == 0 and p.stdout == "", p.stderr
    assert link.is_symlink() and target.read_text().startswith("#")
    assert os.listdir(target.parent) == ["gdrcheck.prom"] and os.listdir(link.parent) == ["gdrcheck.prom"]


# -- host name and determinism ---------------------------------------------------------------------------------


def test_node_name_wins_over_the_system_host_name_live():
    p = call("pairs", "--json", env={"NODE_NAME": "gpu-k8s-017", "GDRCHECK_TOOL_PATH": "/nonexistent"})
    assert json.loads(p.stdout)["host"] == "gpu-k8s-017"


def test_node_name_does_not_rename_a_replayed_input(trees):
    p = call("pairs", "--json", "--from", trees["healthy-gdr-node"], env={"NODE_NAME": "someone-else"})
    assert json.loads(p.stdout)["host"] == "gpu-node-01"


@pytest.mark.parametrize("args", [("pairs", "--json"), ("check", "--format", "json"), ("fingerprint", "--json"),
                                  ("topology", "--json"), ("check", "--format", "nhc")])
def test_identical_input_gives_identical_bytes(trees, tmp_path, args):
    import shutil

    other = tmp_path / "copy"
    shutil.copytree(trees["acs-redirect-on-switch"], other, symlinks=True)
    a = call(*args, "--from", trees["acs-redirect-on-switch"])
    b = call(*args, "--from", other)
    # the input's own path is named where the input is described; nothing else may differ
    assert a.stdout.replace(str(trees["acs-redirect-on-switch"]), "IN") == b.stdout.replace(str(other), "IN")
    assert a.returncode == b.returncode


# -- fingerprint --------------------------------------------------------------------------------------------------


def test_fingerprint_line_and_explain(trees):
    p = call("fingerprint", "--from", trees["healthy-gdr-node"])
    assert p.returncode == 0
    line = p.stdout.strip()
    assert "\n" not in line
    fields = dict(f.split("=", 1) for f in line.split())
    assert fields["shape"].startswith("sha256:") and len(fields["shape"]) == 23
    assert fields["gpus"] == "4x10de:2335" and fields["nics"] == "2x15b3:1021" and fields["nvme"] == "2x144d:a80a"
    assert fields["gpu-gpu"] == "NV18:6" and fields["gpu-nic"] == "PIX:4,SYS:4"
    assert fields["acs"] == "off" and fields["iommu"] == "passthrough" and fields["peermem"] == "loaded"
    assert fields["driver"] == "580.95.05"
    explain = call("fingerprint", "--explain", "--from", trees["healthy-gdr-node"]).stdout.splitlines()
    assert "pair[gpu0,nic0]=PIX" in explain and "host.module.nvidia_peermem=loaded" in explain
    assert all("=" in ln for ln in explain)
    addressed = call("fingerprint", "--explain", "--addresses", "--from", trees["healthy-gdr-node"]).stdout
    assert "pair[0000:03:00.0,0000:05:00.0]=PIX" in addressed


def test_fingerprint_changes_with_what_matters_only(trees):
    def fp(case):
        return json.loads(call("fingerprint", "--json", "--from", trees[case]).stdout)

    healthy, acs, peer = fp("healthy-gdr-node"), fp("acs-redirect-on-switch"), fp("no-peer-memory-module")
    assert healthy["shape"] != acs["shape"] and healthy["shape"] != peer["shape"]
    diff = set(acs["lines"]) ^ set(healthy["lines"])
    assert diff and all(".acs=" in ln for ln in diff)
    diff = {ln.split("=")[0] for ln in set(peer["lines"]) ^ set(healthy["lines"])}
    assert "host.module.nvidia_peermem" in diff and all(k.startswith("host.") for k in diff)


def test_fingerprint_ignores_what_changes_by_the_moment(trees, tmp_path):
    """BAR1 in use, processes, the GPU's idle link speed and the host name do not move it."""
    import shutil

    other = tmp_path / "busy"
    shutil.copytree(trees["healthy-gdr-node"], other, symlinks=True)
    (other / "proc/sys/kernel/hostname").write_text("gpu-node-99\n")
    nvml = json.loads((other / "gdrcheck/nvml.json").read_text())
    text = json.dumps(nvml).replace('"bar1_used_bytes": 1703936', '"bar1_used_bytes": 99999999')
    (other / "gdrcheck/nvml.json").write_text(text)
    gpu0 = other / "sys/bus/pci/devices/0000:03:00.0"
    (gpu0 / "current_link_speed").write_text("2.5 GT/s PCIe\n")
    a = json.loads(call("fingerprint", "--json", "--from", trees["healthy-gdr-node"]).stdout)
    b = json.loads(call("fingerprint", "--json", "--from", other).stdout)
    assert a["shape"] == b["shape"] and a["topology"] == b["topology"]


def test_fingerprint_in_the_pairs_report(trees):
    doc = json.loads(call("pairs", "--json", "--from", trees["healthy-gdr-node"]).stdout)
    fp = doc["fingerprint"]
    assert fp["shape"].startswith("sha256:") and len(fp["shape"]) == 71
    assert fp["positions"]["gpu0"] == "0000:03:00.0" and fp["positions"]["bridge0"] == "0000:00:01.0"
    lines = fp["lines"]
    assert len(set(lines)) == len(lines)
    # host facts first, then each thing in position order, its lines together
    assert lines.index("device[gpu0].id=10de:2335") < lines.index("device[gpu0].numa=0") < \
        lines.index("device[gpu1].id=10de:2335")
    assert lines.index("bridge[bridge2].acs=off") < lines.index("bridge[bridge10].acs=off")


# -- check and its formats -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case,status", [("healthy-gdr-node", 0), ("acs-redirect-on-switch", 1),
                                         ("no-peer-memory-module", 1), ("config-space-not-root", 3)])
def test_check_nhc_is_silent_on_success_and_one_code_first_line_otherwise(trees, case, status):
    p = call("check", "--format", "nhc", "--from", trees[case])
    assert p.returncode == status
    if status == 0:
        assert p.stdout == ""
    else:
        lines = p.stdout.splitlines()
        assert len(lines) == 1 and lines[0][:3] == "GDR" and lines[0][3:6].isdigit()
        assert len(lines[0].encode()) <= 80


@pytest.mark.parametrize("case,status", [("healthy-gdr-node", 0), ("acs-redirect-on-switch", 1),
                                         ("config-space-not-root", 2)])
def test_check_npd_speaks_the_plugin_protocol(trees, case, status):
    p = call("check", "--format", "npd", "--from", trees[case])
    assert p.returncode == status
    out = p.stdout.strip()
    assert "\n" not in out and 0 < len(out.encode()) <= 80
    assert out.startswith("OK ") if status == 0 else out.startswith("GDR")


@pytest.mark.parametrize("case,state,status", [("healthy-gdr-node", "OK", 0),
                                               ("acs-redirect-on-switch", "CRITICAL", 2),
                                               ("config-space-not-root", "UNKNOWN", 3)])
def test_check_nagios_states(trees, case, state, status):
    p = call("check", "--format", "nagios", "--from", trees[case])
    assert p.returncode == status
    first = p.stdout.splitlines()[0]
    assert first.startswith(f"GDRCHECK {state} - ") and " | pairs=" in first


def test_check_nagios_usage_error_is_unknown_not_critical():
    p = call("check", "--format", "nagios", "--require", "everything")
    assert p.returncode == 3 and "Traceback" not in p.stderr


def test_check_require_limits_the_gate_to_those_pairs(trees):
    gdr = json.loads(call("check", "--format", "json", "--require", "gdr",
                         "--from", trees["no-peer-memory-module"]).stdout)
    p2p = call("check", "--format", "json", "--require", "p2p", "--from", trees["no-peer-memory-module"])
    assert {p["kind"] for p in gdr["pairs"]} == {"gpu-nic"} and gdr["status"] == "fail"
    assert p2p.returncode == 0 and {p["kind"] for p in json.loads(p2p.stdout)["pairs"]} == {"gpu-gpu"}
    # the fingerprint is the whole node's whatever the gate looks at
    assert json.loads(p2p.stdout)["fingerprint"] == gdr["fingerprint"]


def test_check_jsonl_and_pairs_jsonl_are_one_line(trees):
    for args in (("check", "--jsonl"), ("pairs", "--jsonl"), ("check", "--format", "jsonl")):
        p = call(*args, "--from", trees["healthy-gdr-node"])
        assert p.stdout.count("\n") == 1 and json.loads(p.stdout)["format_version"] == "1.4"


def test_check_prometheus_textfile(trees):
    p = call("check", "--format", "prometheus", "--from", trees["acs-redirect-on-switch"])
    assert p.returncode == 1
    samples = [ln for ln in p.stdout.splitlines() if ln and not ln.startswith("#")]
    assert all(ln.startswith("gdrcheck_") for ln in samples)
    # no sample timestamps: every line is 'name{labels} value'
    import re

    assert all(re.fullmatch(r'gdrcheck_[a-z0-9_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+]+', ln)
               for ln in samples), samples
    text = p.stdout
    assert 'gdrcheck_check_result{check="gdr",result="fail"} 1' in text
    assert 'gdrcheck_findings{code="GDR040",severity="error"} 8' in text
    assert 'gdrcheck_devices{kind="gpu"} 4' in text
    assert 'gdrcheck_bar1_total_bytes{gpu="0000:03:00.0"} 274877906944' in text
    assert "gdrcheck_pair_verdict" not in text
    per_pair = call("check", "--format", "prometheus", "--per-pair-metrics", "--from", trees["healthy-gdr-node"])
    assert per_pair.stdout.count("gdrcheck_pair_verdict{") == 22


@pytest.mark.parametrize("fmt,status,prefix", [("npd", 2, "gdrcheck error: "),
                                               ("nagios", 3, "GDRCHECK UNKNOWN - gdrcheck error: ")])
def test_engines_get_a_line_on_stdout_when_gdrcheck_cannot_run(fmt, status, prefix):
    for args in (("--from", "/nonexistent"), ("--bogus",)):
        p = call("check", "--format", fmt, *args)
        assert p.returncode == status
        assert p.stdout.startswith(prefix) and p.stdout.count("\n") == 1
        assert len(p.stdout.strip().encode()) <= 80 or fmt == "nagios"
        assert_clean_error(p, status)


def test_nagios_warning_leads_with_the_warning_code(tmp_path):
    p = call("check", "--format", "nagios", "--from", scenario(tmp_path, "nvidia-fs-missing-no-p2pdma"))
    assert p.returncode == 1
    assert p.stdout.startswith("GDRCHECK WARNING - GDR060 ")
