"""The clush and pdsh recipes of docs/fleet.md, run for real with their exec workers.

ClusterShell's and pdsh's ``-R exec`` run the command on this machine once per node name,
replacing ``%h`` with it; each of the 16 fake nodes reads its own input (``--from nodes/%h``).
Nothing leaves tmp_path and no network is used.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from support.contrib_util import CONTRIB, HEALTHY, NODES, engine, fake_fleet, gdrcheck_env, run

ALL = "node[01-16]"


@pytest.fixture
def fleet(tmp_path):
    return fake_fleet(tmp_path), gdrcheck_env(tmp_path)


def _groups(text: str):
    """clush -b / dshbak -c output -> {header: body}."""
    out, header, body = {}, None, []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if re.fullmatch(r"-{5,}", lines[i]) and i + 2 < len(lines) and re.fullmatch(r"-{5,}", lines[i + 2]):
            if header is not None:
                out[header] = "\n".join(body).strip()
            header, body = lines[i + 1].strip(), []
            i += 3
            continue
        body.append(lines[i])
        i += 1
    if header is not None:
        out[header] = "\n".join(body).strip()
    return out


def check_fleet_doc(doc, missing):
    """The fleet document for the 16 fake nodes: one reference group of twelve, two failing, one unknown."""
    assert doc["status"] == "fail" and doc["exit_status"] == 1
    assert doc["nodes"]["reported"] == 16
    assert doc["missing"]["nodes"] == missing
    ref = [g for g in doc["groups"] if g["reference"]]
    assert len(ref) == 1 and ref[0]["nodes"] == "node[01-12]", doc["groups"]
    assert doc["failing"]["nodes"] == "node[13-14]"
    assert [u["nodes"] for u in doc["unknown"]] == ["node15"]
    codes = {f["code"]: f["nodes"] for f in doc["findings"]}
    assert codes.get("GDR040") == "node13" and codes.get("GDR020") == "node14", codes


# --- clush -------------------------------------------------------------------------------------

def test_clush_b_groups_identical_fingerprints(fleet):
    nodes, env = fleet
    clush = engine("clush")
    p = run([clush, "-R", "exec", "-w", ALL, "-b", f"gdrcheck fingerprint --from {nodes}/%h"], env)
    assert p.returncode == 0, p.stderr
    groups = _groups(p.stdout)
    assert "node[01-12] (12)" in groups, p.stdout
    assert set(groups) == {"node[01-12] (12)", "node13", "node14", "node15", "node16"}, list(groups)
    for body in groups.values():
        assert re.match(r"shape=sha256:[0-9a-f]{16} topology=sha256:[0-9a-f]{16} gpus=", body), body
    assert "acs=redirect" in groups["node13"]
    assert "gpus=4x10de:2335" in groups["node16"]


def test_clush_diff_names_what_differs(fleet):
    nodes, env = fleet
    clush = engine("clush")
    p = run([clush, "-R", "exec", "-w", ALL, "--diff", f"gdrcheck fingerprint --explain --from {nodes}/%h"], env)
    # clush --diff exits with the commands' own status (each fingerprint exits 0), not diff's, though node13-16's
    # outputs differ; the majority is the reference
    assert p.returncode == 0, p.stderr
    assert "node[01-12]" in p.stdout, p.stdout
    assert re.search(r"^\+\+\+ node13", p.stdout, re.M), p.stdout
    assert re.search(r"^\+bridge\[bridge\d+\]\.acs=.*R", p.stdout, re.M), p.stdout
    # the twelve identical nodes produce no diff of their own
    assert not re.search(r"^\+\+\+ node0[1-9]\b", p.stdout, re.M)


def test_clush_S_returns_the_highest_node_status(fleet):
    nodes, env = fleet
    clush = engine("clush")
    p = run([clush, "-R", "exec", "-S", "-w", ALL, "-b", f"gdrcheck check --format nhc --from {nodes}/%h"], env)
    # node13/node14 fail (1), node15 could not decide (3): -S gives the largest
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    groups = _groups(p.stdout)
    assert groups["node13"].startswith("GDR040 "), groups
    assert groups["node14"].startswith("GDR020 "), groups
    assert re.match(r"GDR\d{3} ", groups["node15"]), groups
    assert not any(h.startswith("node[01-12]") for h in groups), "nhc format is silent on success"


def test_clush_outdir_then_fleet_summarize(fleet, tmp_path):
    nodes, env = fleet
    clush = engine("clush")
    reports, errs = tmp_path / "reports", tmp_path / "reports.err"
    p = run([clush, "-R", "exec", "-w", ALL, "-f", "4", "-u", "120", f"--outdir={reports}", f"--errdir={errs}",
             f"gdrcheck pairs --json --timeout 100 --from {nodes}/%h"], env)
    assert p.returncode == 0, p.stderr  # without -S clush's status says nothing about the nodes
    assert sorted(x.name for x in reports.iterdir()) == NODES
    for n in NODES:
        doc = json.loads((reports / n).read_text())
        assert doc["format_version"] and doc["fingerprint"]["shape"].startswith("sha256:")

    s = run(["gdrcheck", "fleet", "summarize", "--expect", "node[01-17]", reports], env)
    assert s.returncode == 1, (s.stdout, s.stderr)  # outliers and failures outrank missing/unknown
    assert "node[01-12]" in s.stdout and "node17" in s.stdout, s.stdout
    j = run(["gdrcheck", "fleet", "summarize", "--format", "json", "--expect", "node[01-17]", reports], env)
    assert j.returncode == 1, j.stderr
    check_fleet_doc(json.loads(j.stdout), missing="node17")

    # the twelve healthy nodes alone: alike and passing
    ok = tmp_path / "ok"
    ok.mkdir()
    for n in HEALTHY:
        (ok / n).write_text((reports / n).read_text())
    s = run(["gdrcheck", "fleet", "summarize", "--expect", "node[01-12]", ok], env)
    assert s.returncode == 0, (s.stdout, s.stderr)


def test_contrib_clush_script(fleet, tmp_path):
    nodes, env = fleet
    engine("clush")
    env = dict(env, CLUSH_OPTS="-R exec", GDRCHECK_FANOUT="4")
    out = tmp_path / "sweep"
    p = run(["bash", CONTRIB / "clush" / "gdrcheck-clush.sh", "node[01-12,16]", out, "--from", f"{nodes}/%h"], env)
    assert sorted(x.name for x in out.iterdir()) == HEALTHY + ["node16"]
    # node16 is built differently from node[01-12]: an outlier, exit 1
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "node[01-12]" in p.stdout and "node16" in p.stdout
    p = run(["bash", CONTRIB / "clush" / "gdrcheck-clush.sh", "node[01-12]", tmp_path / "sweep2",
             "--from", f"{nodes}/%h"], env)
    assert p.returncode == 0, (p.stdout, p.stderr)


# --- pdsh --------------------------------------------------------------------------------------

def _pdsh():
    pdsh = engine("pdsh")
    engine("dshbak")
    mods = run([pdsh, "-L"], env=None)
    if "rcmd/exec" not in mods.stdout + mods.stderr:
        pytest.skip("pdsh is installed without its exec module (rcmd/exec)")
    return pdsh


def test_pdsh_exec_fingerprints_coalesced_by_dshbak(fleet):
    nodes, env = fleet
    pdsh = _pdsh()
    p = run(["bash", "-o", "pipefail", "-c",
             f"{pdsh} -R exec -f 4 -w '{ALL}' gdrcheck fingerprint --from {nodes}/%h | dshbak -c"], env)
    assert p.returncode == 0, p.stderr
    groups = _groups(p.stdout)
    assert set(groups) == {"node[01-12]", "node13", "node14", "node15", "node16"}, p.stdout
    assert "acs=redirect" in groups["node13"]


def test_pdsh_jsonl_into_fleet_summarize_prefixed(fleet):
    nodes, env = fleet
    pdsh = _pdsh()
    p = run(["bash", "-c", f"{pdsh} -S -R exec -f 4 -w '{ALL}' gdrcheck pairs --jsonl --timeout 100 --from {nodes}/%h"
             " | gdrcheck fleet summarize --input-format prefixed --format json --expect 'node[01-16]' -; "
             "echo \"rc=${PIPESTATUS[*]}\" >&2"], env)
    rcs = re.search(r"rc=(\d+) (\d+)", p.stderr)
    assert rcs, p.stderr
    assert rcs.group(1) == "3"  # pdsh -S: the largest node status (node15 could not decide)
    assert rcs.group(2) == "1", p.stdout  # summary: outliers and failures
    check_fleet_doc(json.loads(p.stdout), missing="")


def test_contrib_pdsh_script(fleet):
    nodes, env = fleet
    _pdsh()
    env = dict(env, PDSH_OPTS="-R exec", GDRCHECK_FANOUT="4")
    p = run(["bash", CONTRIB / "pdsh" / "gdrcheck-pdsh.sh", "node[01-12]", "--from", f"{nodes}/%h"], env)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "node[01-12]" in p.stdout
    p = run(["bash", CONTRIB / "pdsh" / "gdrcheck-pdsh.sh", "node[01-14]", "--from", f"{nodes}/%h"], env)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "GDR040" in p.stdout and "GDR020" in p.stdout


def test_dshbak_d_writes_per_host_files_summarize_reads(fleet, tmp_path):
    nodes, env = fleet
    pdsh = _pdsh()
    out = tmp_path / "dshbak"
    out.mkdir()
    p = run(["bash", "-c", f"{pdsh} -R exec -f 4 -w 'node[01-04]' gdrcheck pairs --jsonl --from {nodes}/%h"
             f" | dshbak -d {out}"], env)
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["node01", "node02", "node03", "node04"]
    s = run(["gdrcheck", "fleet", "summarize", "--expect", "node[01-04]", out], env)
    assert s.returncode == 0, (s.stdout, s.stderr)


# --- the scripts themselves --------------------------------------------------------------------

SCRIPTS = [CONTRIB / "clush" / "gdrcheck-clush.sh", CONTRIB / "pdsh" / "gdrcheck-pdsh.sh"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_static(script):
    assert os.access(script, os.X_OK)
    assert run(["bash", "-n", script], None).returncode == 0
    sc = engine("shellcheck")
    p = run([sc, script], None)
    assert p.returncode == 0, p.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_usage(script):
    p = run(["bash", script], None)
    assert p.returncode == 2 and p.stderr.startswith("usage: ")
