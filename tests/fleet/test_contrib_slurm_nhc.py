"""contrib/slurm and contrib/nhc: static checks, the NHC check function, the sweep and the prolog.

NHC and Slurm are not run here (NHC is not packaged in Debian; a Slurm cluster needs daemons): the
NHC function is sourced in bash with NHC's helpers stubbed the way NHC defines them (``die RC
MSG...`` records the drain reason, ``log``), and the sweep runs with an ``srun`` on PATH that
emulates ``--output=%N.json`` for a few node names, running gdrcheck with each node's input.
"""

from __future__ import annotations

import json
import os
import re
import shlex

import pytest
from support.contrib_util import CONTRIB, engine, fake_fleet, gdrcheck_env, run

from builders.scenarios import scenario

SHELL_SCRIPTS = [CONTRIB / "slurm" / "gdrcheck-sweep.sbatch", CONTRIB / "slurm" / "prolog.d" / "50-gdrcheck.sh",
                 CONTRIB / "nhc" / "gdrcheck.nhc"]


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_bash_n(script):
    p = run(["bash", "-n", script], env=None)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shellcheck(script):
    sc = engine("shellcheck")
    p = run([sc, "-s", "bash", script], env=None)
    assert p.returncode == 0, p.stdout + p.stderr


def test_scripts_are_executable():
    for script in SHELL_SCRIPTS[:2]:
        assert os.access(script, os.X_OK), script


# --- NHC ---------------------------------------------------------------------------------------

NHC_STUBS = r"""
# NHC's helpers as NHC defines them, minus the side effects: die RC MSG... records the message
# (which NHC passes to node-mark-offline as the drain reason), log prints.
die() { local rc="$1"; shift; printf 'DIE %s %s\n' "$rc" "$*"; CHECK_DIED=1; return 0; }
log() { printf 'LOG %s\n' "$*"; }
"""


def _nhc(env, args, *, tmp_path, extra_env=None, gdrcheck=None):
    """Source gdrcheck.nhc under an NHC-like environment (reset PATH) and run check_gdr ARGS."""
    e = {"PATH": "/sbin:/usr/sbin:/bin:/usr/bin", "HOME": env["HOME"], "LC_ALL": "C.UTF-8",
         "GDRCHECK": gdrcheck or str(tmp_path / "bin" / "gdrcheck")}
    e.update(extra_env or {})
    script = NHC_STUBS + f"source {shlex.quote(str(CONTRIB / 'nhc' / 'gdrcheck.nhc'))}\n" \
        f"check_gdr {' '.join(shlex.quote(str(a)) for a in args)}\necho \"RC $?\"\n"
    p = run(["bash", "-c", script], e)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    rc = int(lines[-1].split()[1])
    dies = [ln[4:] for ln in lines if ln.startswith("DIE ")]
    logs = [ln[4:] for ln in lines if ln.startswith("LOG ")]
    return rc, dies, logs, p.stderr


@pytest.fixture
def env(tmp_path):
    return gdrcheck_env(tmp_path)


def test_nhc_status0_returns_0_silently(env, tmp_path):
    rc, dies, logs, _ = _nhc(env, ["--require", "gdr,p2p", "--from", scenario(tmp_path, "healthy-gdr-node")],
                             tmp_path=tmp_path)
    assert (rc, dies, logs) == (0, [], [])


@pytest.mark.parametrize("case,code", [("acs-redirect-on-switch", "GDR040"), ("no-peer-memory-module", "GDR020")])
def test_nhc_status1_dies_with_the_code_first(env, tmp_path, case, code):
    rc, dies, _, _ = _nhc(env, ["--require", "gdr,p2p", "--from", scenario(tmp_path, case)], tmp_path=tmp_path)
    assert rc == 1
    assert len(dies) == 1, dies
    assert dies[0].startswith(f"1 check_gdr: {code} "), dies
    # what NHC hands to node-mark-offline and sinfo shows as REASON: one line, the code in front
    assert "\n" not in dies[0] and len(dies[0]) < 120


def test_nhc_status3_dies_by_default(env, tmp_path):
    tree = scenario(tmp_path, "config-space-not-root")
    rc, dies, _, _ = _nhc(env, ["--require", "gdr", "--from", tree], tmp_path=tmp_path)
    assert rc == 1
    assert re.match(r"1 check_gdr: GDR\d{3} .*\(unknown\)$", dies[0]), dies


def test_nhc_status3_passes_when_the_policy_says_so(env, tmp_path):
    tree = scenario(tmp_path, "config-space-not-root")
    rc, dies, logs, _ = _nhc(env, ["--require", "gdr", "--from", tree], tmp_path=tmp_path,
                             extra_env={"GDRCHECK_NHC_UNKNOWN": "pass"})
    assert (rc, dies) == (0, [])
    assert logs and logs[0].startswith("check_gdr: could not decide"), logs


def test_nhc_timeout_is_unknown(env, tmp_path):
    tree = scenario(tmp_path, "healthy-gdr-node")
    rc, dies, _, _ = _nhc(env, ["--from", tree], tmp_path=tmp_path, extra_env={"GDRCHECK_NHC_TIMEOUT": "0.001"})
    assert rc == 1
    assert dies[0].startswith("1 check_gdr: GDR122 "), dies


@pytest.mark.parametrize("args", [["--require", "nonsense"], ["--from", "/nonexistent/tree"]])
def test_nhc_status2_dies(env, tmp_path, args):
    rc, dies, _, stderr = _nhc(env, args, tmp_path=tmp_path)
    assert rc == 1
    assert dies == ["1 check_gdr: gdrcheck exit 2: bad usage or unreadable input (see the NHC log)"]
    assert "gdrcheck: error:" in stderr


def test_nhc_missing_binary_dies(env, tmp_path):
    if os.access("/usr/local/bin/gdrcheck", os.X_OK):
        pytest.skip("/usr/local/bin/gdrcheck exists here: the fallback would find it")
    rc, dies, _, _ = _nhc(env, [], tmp_path=tmp_path, gdrcheck="/nonexistent/gdrcheck")
    assert rc == 1 and dies[0].startswith("1 check_gdr: gdrcheck not found"), dies


def test_nhc_fake_gdrcheck_statuses(env, tmp_path):
    """Each contract status from a stand-in binary, including 3 with nothing on stdout."""
    fake = tmp_path / "fake-gdrcheck"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/fake.args\"\n"
                    "case \"$FAKE_RC\" in 1) echo 'GDR099 made-up-finding 0000:01:00.0';; esac\nexit \"$FAKE_RC\"\n")
    fake.chmod(0o755)
    expect = {"0": (0, []), "1": (1, ["1 check_gdr: GDR099 made-up-finding 0000:01:00.0"]),
              "3": (1, ["1 check_gdr: gdrcheck could not decide (unknown)"]),
              "2": (1, ["1 check_gdr: gdrcheck exit 2: bad usage or unreadable input (see the NHC log)"]),
              "137": (1, ["1 check_gdr: gdrcheck exit 137: bad usage or unreadable input (see the NHC log)"])}
    for status, (rc, dies) in expect.items():
        got = _nhc(env, ["--require", "gdr"], tmp_path=tmp_path, gdrcheck=str(fake), extra_env={"FAKE_RC": status})
        assert got[:2] == (rc, dies), (status, got)
    args = (tmp_path / "fake.args").read_text().split()
    assert args[:5] == ["check", "--format", "nhc", "--timeout", "20"] and args[5:] == ["--require", "gdr"]


def test_nhc_conf_example_lines():
    lines = [ln for ln in (CONTRIB / "nhc" / "nhc.conf.example").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    # NHC's syntax: "<target> || <check or command>"
    for ln in lines:
        assert re.match(r"^\S+ \|\| \S", ln), ln
    assert any(re.match(r"^gpu\* \|\| check_gdr --require gdr,p2p$", ln) for ln in lines)
    assert any("export GDRCHECK=" in ln for ln in lines)


# --- Slurm sweep -------------------------------------------------------------------------------

STUB_SRUN = r"""#!/usr/bin/env python3
# srun stand-in: one task per node of STUB_NODES, --output/--error with %N, the highest task status.
import os, subprocess, sys
args = sys.argv[1:]
opts, i = {}, 0
while i < len(args) and args[i].startswith("-"):
    k, _, v = args[i].partition("=")
    opts[k] = v
    i += 1
cmd = args[i:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
worst = 0
for node in os.environ["STUB_NODES"].split(","):
    out = opts["--output"].replace("%N", node)
    err = opts["--error"].replace("%N", node)
    with open(out, "w") as o, open(err, "w") as e:
        rc = subprocess.call(cmd + ["--from", os.path.join(os.environ["STUB_FROM"], node)], stdout=o, stderr=e)
    worst = max(worst, rc)
sys.exit(worst)
"""


def _sweep(tmp_path, nodes, nodelist, extra_env=None):
    env = gdrcheck_env(tmp_path)
    fleet = fake_fleet(tmp_path)
    stub = tmp_path / "bin" / "srun"
    stub.write_text(STUB_SRUN)
    stub.chmod(0o755)
    out = tmp_path / "sweep"
    env.update({"STUB_NODES": ",".join(nodes), "STUB_FROM": str(fleet), "STUB_LOG": str(tmp_path / "srun.log"),
                "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": nodelist, "GDRCHECK_OUT": str(out)})
    env.update(extra_env or {})
    p = run(["bash", CONTRIB / "slurm" / "gdrcheck-sweep.sbatch"], env, cwd=tmp_path)
    return p, out, (tmp_path / "srun.log").read_text()


def test_sweep_all_alike(tmp_path):
    p, out, log = _sweep(tmp_path, ["node01", "node02", "node03"], "node[01-03]")
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert sorted(x.name for x in out.glob("*.json")) == ["node01.json", "node02.json", "node03.json"]
    for f in out.glob("*.json"):
        assert json.loads(f.read_text())["status"] == "pass"
    assert (tmp_path / "sweep-summary.txt").read_text() == p.stdout
    assert "node[01-03]" in p.stdout
    assert "--ntasks-per-node=1 --gpus-per-node=8 --kill-on-bad-exit=0" in log
    assert f"--output={out}/%N.json --error={out}/%N.err gdrcheck pairs --json --timeout 100" in log


def test_sweep_outlier_failing_and_missing(tmp_path):
    # node04 was allocated but wrote nothing (its task never started)
    p, out, log = _sweep(tmp_path, ["node01", "node02", "node13"], "node[01-02,04,13]",
                         extra_env={"GDRCHECK_GPUS_PER_NODE": "0", "GDRCHECK_TIMEOUT": "30"})
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "node04" in p.stdout and "node13" in p.stdout and "GDR040" in p.stdout
    assert "--gpus-per-node" not in log and "--timeout 30" in log
    assert "srun exit status: 1" in p.stderr


def test_sweep_unknown_node_only(tmp_path):
    p, _, _ = _sweep(tmp_path, ["node01", "node02", "node15"], "node[01-02,15]")
    # node15 could not decide: the config-space difference also makes it an outlier (1 outranks 3)
    assert p.returncode == 1, p.stdout
    assert "node15" in p.stdout


def test_sweep_outside_slurm_says_so(tmp_path):
    env = gdrcheck_env(tmp_path, {"GDRCHECK_OUT": str(tmp_path / "o")})
    stub = tmp_path / "bin" / "srun"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    p = run(["bash", CONTRIB / "slurm" / "gdrcheck-sweep.sbatch"], env, cwd=tmp_path)
    assert p.returncode != 0 and "not inside a Slurm job" in p.stderr


# --- Slurm prolog ------------------------------------------------------------------------------

@pytest.mark.parametrize("case,status", [("healthy-gdr-node", 0), ("no-peer-memory-module", 1),
                                         ("config-space-not-root", 3)])
def test_prolog_exit_status_is_the_contract(tmp_path, case, status):
    env = gdrcheck_env(tmp_path)
    tree = scenario(tmp_path, case)
    # the prolog takes no arguments from Slurm: point it at the input through a wrapper binary
    wrapper = tmp_path / "gdrcheck-at-tree"
    wrapper.write_text(f"#!/bin/sh\nexec {tmp_path / 'bin' / 'gdrcheck'} \"$@\" --from {tree}\n")
    wrapper.chmod(0o755)
    logger = tmp_path / "bin" / "logger"
    logger.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'syslog'}\n")
    logger.chmod(0o755)
    env.update({"GDRCHECK": str(wrapper), "SLURM_JOB_ID": "77"})
    p = run([CONTRIB / "slurm" / "prolog.d" / "50-gdrcheck.sh"], env)
    assert p.returncode == status, (p.stdout, p.stderr)
    assert p.stdout == "" and p.stderr == ""
    syslog = tmp_path / "syslog"
    if status == 0:
        assert not syslog.exists()
    else:
        text = syslog.read_text()
        assert text.startswith(f"-t gdrcheck-prolog -- job 77: exit {status}: GDR"), text
