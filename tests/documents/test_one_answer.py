"""One answer per node: on every real input and named scenario, the document's status follows its pairs
and findings, and check (every format), the HTML report and fleet summarize say the same thing.

Also the gate: an input that holds no machine is bad input (exit 2, one line naming what was looked for),
and a machine root that lacks the PCI tree is unknown, never a pass.
"""

from __future__ import annotations

import json
import re
import tarfile

import pytest
from conftest import REALWORLD
from support.cli_util import ROOT, assert_clean_error, call
from support.facts_once import facts_read_once

from builders import scenarios

FIXTURES = ROOT / "fixtures"
REAL_INPUTS = sorted(
    [p for p in REALWORLD.glob("*/*") if p.name in ("nccl-topo.xml", "hwloc.xml") or "lspci-tv" in p.name]
    if REALWORLD.is_dir() else [])
SNAPSHOTS = sorted(FIXTURES.glob("*/snapshot.tar.gz"))
SCENARIOS = ("healthy-gdr-node", "acs-redirect-on-switch", "iommu-translating", "no-peer-memory-module",
             "config-space-not-root", "bare-sysfs-tree", "kvm-guest", "nic-without-rdma-driver",
             "nic-without-rdma-driver-virtio", "pcie-only-gpus", "sxm-gpus-without-links", "gpu-link-x8",
             "snapshot-without-pci-tree", "one-gpu-node", "p2p-chipset-not-supported")
EXIT = {"pass": 0, "fail": 1, "unknown": 3}


def _cases():
    out = [pytest.param(("real", p), id=f"{p.parent.name}/{p.name}") for p in REAL_INPUTS]
    out += [pytest.param(("real", p), id=f"fixture-{p.parent.name}") for p in SNAPSHOTS]
    out += [pytest.param(("scenario", s), id=s) for s in SCENARIOS]
    return out


def _path(case, tmp_path):
    kind, what = case
    return what if kind == "real" else scenarios.scenario(tmp_path, what)


@pytest.fixture(autouse=True)
def _facts_read_once():
    """Each test's node read once for the nine commands it runs: their agreement is the point, not the reading."""
    with facts_read_once():
        yield


def expected_status(doc) -> str:
    verdicts = {p["verdict"] for p in doc["pairs"]}
    if "fail" in verdicts or any(f["severity"] == "error" for f in doc["findings"]):
        return "fail"
    if "unknown" in verdicts or any(f.get("effect") == "unknown" and not f.get("pairs") for f in doc["findings"]):
        return "unknown"
    return "pass"


@pytest.mark.parametrize("case", _cases())
def test_every_output_says_the_same_about_the_node(case, tmp_path):
    path = _path(case, tmp_path)
    p = call("pairs", "--json", "--from", path)
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    status = doc["status"]
    assert status == expected_status(doc), (status, doc["summary_line"])
    if status == "pass":
        assert not {p["verdict"] for p in doc["pairs"]} & {"fail", "unknown"}
    assert p.returncode == EXIT[status]
    # a finding's severity follows its effect on the pairs it moves
    for f in doc["findings"]:
        if f.get("pairs") and f.get("effect") in ("fail", "degraded"):
            assert f["severity"] == {"fail": "error", "degraded": "warning"}[f["effect"]], f
    # every engine's words: the gate's own status (a node without a GPU fails the gate: GDR010)
    gate = json.loads(call("check", "--from", path, "--format", "json").stdout)
    if not any(f["code"] == "GDR010" for f in gate["findings"]):
        assert gate["status"] == status
    status = gate["status"]
    for fmt, want in (("nhc", EXIT[status]), ("npd", {0: 0, 1: 1, 3: 2}[EXIT[status]]),
                      ("text", EXIT[status])):
        c = call("check", "--from", path, "--format", fmt)
        assert c.returncode == want, (fmt, c.stdout)
        if fmt == "text":
            assert c.stdout.startswith(f"gdrcheck {status.upper()} ")
    nag = call("check", "--from", path, "--format", "nagios")
    state = nag.stdout.split(" - ")[0]
    assert state == {"pass": "GDRCHECK OK", "unknown": "GDRCHECK UNKNOWN", "fail": "GDRCHECK CRITICAL"}.get(
        status) or (status == "pass" and state == "GDRCHECK WARNING"), (status, nag.stdout)
    prom = call("check", "--from", path, "--format", "prometheus").stdout
    assert f'gdrcheck_status{{status="{status}"}} 1' in prom
    status = doc["status"]  # the report and the fleet read the pairs document
    page = tmp_path / "node.html"
    assert call("report", "-o", page, "--from", path).returncode == EXIT[status]
    html = page.read_text()
    assert f'<span class="word">{status.upper()}</span>' in html
    if status == "pass":
        assert not re.search(r"\d+ pairs? (fails?|are unknown|is unknown)", html.split("</header>")[0])
    report = tmp_path / "node.json"
    report.write_text(p.stdout)
    fleet = json.loads(call("fleet", "summarize", "--format", "json", report).stdout)
    assert fleet["nodes"][status] == 1, fleet["nodes"]


def test_no_pass_beside_a_failing_pair_on_a_node_with_a_failing_nic(tmp_path):
    """The node of the live H100 report: a pair fails, so the node does, in every word."""
    path = scenarios.scenario(tmp_path, "nic-without-rdma-driver")
    doc = json.loads(call("pairs", "--json", "--from", path).stdout)
    assert any(p["verdict"] == "fail" for p in doc["pairs"]) and doc["status"] == "fail"
    assert call("check", "--from", path, "--format", "npd").stdout.startswith("GDR082")


# -- the gate: no machine, no pass --------------------------------------------------------------------------


def _empty_dir(tmp):
    (tmp / "in").mkdir()
    return tmp / "in"


def _notes_dir(tmp):
    d = tmp / "in"
    d.mkdir()
    (d / "notes.txt").write_text("GPU3 slow again, see ticket\n")
    (d / "app.log").write_text("2026-11-01 job started\n")
    return d


def _matrix_dir(tmp):
    if not REALWORLD.is_dir():
        pytest.skip("../shared/realworld is not present")
    d = tmp / "in"
    d.mkdir()
    (d / "topo.txt").write_text((REALWORLD / "gengwg-dgx1" / "nvidia-smi-topo-mp.txt").read_text())
    return d


def _notes_archive(tmp):
    d = _notes_dir(tmp)
    out = tmp / "notes.tar.gz"
    with tarfile.open(out, "w:gz") as t:
        t.add(d, arcname="node")
    return out


def _sys_missing(tmp):
    d = tmp / "in"
    (d / "proc").mkdir(parents=True)
    (d / "proc" / "cmdline").write_text("ro quiet\n")
    return d


def _sys_dangling(tmp):
    d = tmp / "in"
    d.mkdir()
    (d / "sys").symlink_to("/nonexistent-gdrcheck-test")
    return d


def _sys_loops(tmp):
    d = tmp / "in"
    d.mkdir()
    (d / "sys").symlink_to("sys")
    return d


def _sys_outside(tmp):
    d = tmp / "in"
    d.mkdir()
    (d / "sys").symlink_to("/sys")
    return d


NO_MACHINE = {"empty-dir": _empty_dir, "notes-dir": _notes_dir, "topo-matrix-dir": _matrix_dir,
              "notes-archive": _notes_archive, "sys-missing": _sys_missing, "sys-dangling": _sys_dangling,
              "sys-loops": _sys_loops, "sys-points-outside": _sys_outside}


@pytest.mark.parametrize("name", sorted(NO_MACHINE))
@pytest.mark.parametrize("command", [("check",), ("pairs",), ("topology",), ("fingerprint",), ("bar1",),
                                     ("check", "--format", "npd")])
def test_an_input_without_a_machine_is_bad_input(name, command, tmp_path):
    path = NO_MACHINE[name](tmp_path)
    p = call(*command, "--from", path)
    if "npd" in command:
        assert p.returncode == 2 and p.stdout.startswith("gdrcheck error:") and "no machine found" in p.stdout
        return
    assert_clean_error(p, 2)
    assert str(path) in p.stderr and "no machine found" in p.stderr and "sys/bus/pci/devices" in p.stderr


def test_a_machine_root_without_its_pci_tree_is_unknown(tmp_path):
    path = scenarios.scenario(tmp_path, "snapshot-without-pci-tree")
    p = call("check", "--from", path)
    assert p.returncode == 3 and p.stdout.startswith("gdrcheck UNKNOWN") and "GDR123" in p.stdout
