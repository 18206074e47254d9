"""contrib/ansible with a real ansible-playbook against local fake hosts.

Every host of the inventory is this machine (ansible_connection=local), with variables that select
its input (--from) and put its report under tmp_path; Ansible's own temporary directories and HOME
are under tmp_path too, so nothing is written outside it.
"""

from __future__ import annotations

import json

import pytest
from support.contrib_util import CONTRIB, engine, fake_fleet, gdrcheck_env, run

PLAYBOOK = CONTRIB / "ansible" / "gdrcheck-fleet.yml"
FACT = CONTRIB / "ansible" / "gdr.fact"


def _json_callback() -> None:
    """The playbooks are read through Ansible's json stdout callback (ansible.posix.json, shipped with the
    full Ansible package, not with every ansible-core): skip where this Ansible has none."""
    import shutil
    import subprocess

    doc = shutil.which("ansible-doc")
    if doc is None:
        pytest.skip("ansible-doc is not installed (.ci/run installs ansible-core)")
    listed = subprocess.run([doc, "-t", "callback", "-l"], capture_output=True, text=True, timeout=120).stdout
    if not any(line.split()[:1] in (["json"], ["ansible.posix.json"]) for line in listed.splitlines()):
        pytest.skip("this Ansible has no json stdout callback (ansible.posix); install the full ansible package")


def _ansible_env(tmp_path):
    _json_callback()
    env = gdrcheck_env(tmp_path)
    for d in ("ansible-local", "ansible-remote"):
        (tmp_path / d).mkdir(exist_ok=True)
    env.update({"ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
                "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
                "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),  # none: no site or user config is read
                "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
                "ANSIBLE_PYTHON_INTERPRETER": "auto_silent", "ANSIBLE_LOCALHOST_WARNING": "0",
                "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0", "ANSIBLE_DEPRECATION_WARNINGS": "0",
                "ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_FORKS": "4"})
    return env


def _inventory(tmp_path, hosts):
    """hosts: {name: input path}; each host writes its report under tmp_path/remote/<name>/."""
    nodes = fake_fleet(tmp_path)
    lines = ["[gpu]"]
    for h, src in hosts.items():
        remote = tmp_path / "remote" / h
        remote.mkdir(parents=True, exist_ok=True)
        src = src if src is not None else nodes / h
        lines.append(f"{h} ansible_connection=local gdrcheck_remote_report={remote}/gdrcheck.json "
                     f"gdrcheck_extra_args='[\"--from\", \"{src}\"]'")
    lines += ["", "[gpu:vars]", f"gdrcheck_bin={tmp_path / 'bin' / 'gdrcheck'}",
              f"gdrcheck_local_bin={tmp_path / 'bin' / 'gdrcheck'}", f"gdrcheck_reports_dir={tmp_path / 'reports'}"]
    inv = tmp_path / "inventory.ini"
    inv.write_text("\n".join(lines) + "\n")
    return inv


def _playbook(tmp_path, inv, *extra):
    ap = engine("ansible-playbook")
    env = _ansible_env(tmp_path)
    p = run([ap, "-i", inv, PLAYBOOK, *extra], env, cwd=tmp_path, timeout=600)
    try:
        doc = json.loads(p.stdout[p.stdout.index("{"):])
    except ValueError:
        pytest.fail(f"no JSON from ansible-playbook (rc {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}")
    tasks = {t["task"]["name"]: t["hosts"] for play in doc["plays"] for t in play["tasks"]}
    return p, tasks


def test_playbook_collects_and_summarizes(tmp_path):
    hosts = {f"node{i:02d}": None for i in range(1, 7)}
    hosts["node13"] = None                          # fails (GDR040)
    hosts["node15"] = None                          # could not decide
    hosts["node20"] = tmp_path / "no-such-input"    # gdrcheck exits 2: a task failure, no report
    inv = _inventory(tmp_path, hosts)
    p, tasks = _playbook(tmp_path, inv)
    assert p.returncode == 2, p.stderr  # ansible-playbook: a host failed
    run_ = tasks["Run gdrcheck pairs on the node"]
    assert {h: r["rc"] for h, r in run_.items()} == {**{f"node{i:02d}": 0 for i in range(1, 7)},
                                                     "node13": 1, "node15": 3, "node20": 2}
    assert not any(r.get("failed") for h, r in run_.items() if h != "node20")
    assert run_["node20"]["failed"] and not any(r.get("changed") for r in run_.values())

    reports = tmp_path / "reports"
    assert sorted(x.name for x in reports.iterdir()) == [f"{h}.json" for h in sorted(hosts) if h != "node20"]
    for f in reports.iterdir():
        doc = json.loads(f.read_text())
        assert doc["status"] in ("pass", "fail", "unknown") and doc["fingerprint"]["shape"]
    assert json.loads((reports / "node13.json").read_text())["status"] == "fail"
    assert json.loads((reports / "node15.json").read_text())["status"] == "unknown"

    (summary,) = tasks["Summarize the fleet"].values()
    assert summary["rc"] == 1 and not summary.get("failed"), summary
    assert "--expect" in summary["cmd"] and "node20" in summary["cmd"][summary["cmd"].index("--expect") + 1]
    out = summary["stdout"]
    assert "node[01-06]" in out and "node13" in out and "node15" in out
    assert "missing" in out and "node20" in out
    # nothing was written beside the playbook
    assert not (PLAYBOOK.parent / "reports").exists()


def test_playbook_clean_fleet_strict(tmp_path):
    inv = _inventory(tmp_path, {f"node{i:02d}": None for i in range(1, 5)})
    p, tasks = _playbook(tmp_path, inv, "-e", "gdrcheck_strict=true")
    assert p.returncode == 0, p.stdout[-3000:]
    (summary,) = tasks["Summarize the fleet"].values()
    assert summary["rc"] == 0
    assert len(list((tmp_path / "reports").iterdir())) == 4


def test_playbook_strict_fails_on_an_outlier(tmp_path):
    inv = _inventory(tmp_path, {"node01": None, "node02": None, "node03": None, "node14": None})
    p, tasks = _playbook(tmp_path, inv, "-e", "gdrcheck_strict=true")
    assert p.returncode == 2
    (summary,) = tasks["Summarize the fleet"].values()
    assert summary["rc"] == 1 and summary["failed"]


def test_gdr_fact_directly(tmp_path):
    nodes = fake_fleet(tmp_path)
    env = gdrcheck_env(tmp_path)
    for node, status, code in (("node01", "pass", None), ("node13", "fail", "GDR040"), ("node15", "unknown", None)):
        p = run([FACT, "--from", nodes / node], env)
        assert p.returncode == 0, p.stderr
        fact = json.loads(p.stdout)
        assert fact["status"] == status, fact
        assert fact["exit_status"] == {"pass": 0, "fail": 1, "unknown": 3}[status]
        assert fact["fingerprint_shape"].startswith("sha256:")
        if code:
            assert code in fact["findings"] and fact["summary"].startswith(code)
    p = run([FACT, "--from", tmp_path / "nothing"], env)
    assert p.returncode == 0
    fact = json.loads(p.stdout)
    assert fact["exit_status"] == 2 and "error" in fact
    p = run([FACT], dict(env, GDRCHECK=str(tmp_path / "missing")))
    assert p.returncode == 0 and "could not run gdrcheck" in json.loads(p.stdout)["error"]


def test_gdr_fact_through_ansible_setup(tmp_path):
    ans = engine("ansible")
    nodes = fake_fleet(tmp_path)
    facts = tmp_path / "facts.d"
    facts.mkdir()
    wrapper = facts / "gdr.fact"
    wrapper.write_text(f"#!/bin/sh\nGDRCHECK={tmp_path / 'bin' / 'gdrcheck'} exec {FACT} --from {nodes / 'node13'}\n")
    wrapper.chmod(0o755)
    env = _ansible_env(tmp_path)
    env["ANSIBLE_LOAD_CALLBACK_PLUGINS"] = "1"
    inv = tmp_path / "hosts.ini"
    inv.write_text("node13 ansible_connection=local\n")
    p = run([ans, "-i", inv, "node13", "-m", "ansible.builtin.setup", "-a",
             f"fact_path={facts} filter=ansible_local"], env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads(p.stdout[p.stdout.index("{"):])
    res = doc["plays"][0]["tasks"][0]["hosts"]["node13"]
    gdr = res["ansible_facts"]["ansible_local"]["gdr"]
    assert gdr["status"] == "fail" and "GDR040" in gdr["findings"], gdr
