"""contrib/systemd and contrib/prometheus with the real engines.

node_exporter (Debian prometheus-node-exporter) is started on 127.0.0.1 on a free port with only the
textfile collector, reading a directory under tmp_path into which gdrcheck writes its textfile;
/metrics is fetched with urllib. promtool (Debian prometheus) lints the textfile and checks and
unit-tests the rules. systemd-analyze verifies the units.
"""

from __future__ import annotations

import configparser
import re
import shlex
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from support.contrib_util import CONTRIB, H200_X4, engine, gdrcheck_env, run

from builders.scenarios import scenario

SERVICE = CONTRIB / "systemd" / "gdrcheck-textfile.service"
TIMER = CONTRIB / "systemd" / "gdrcheck-textfile.timer"
RULES = CONTRIB / "prometheus" / "gdrcheck.rules.yml"
RULES_TEST = CONTRIB / "prometheus" / "gdrcheck.rules.test.yml"

SERIES = ["gdrcheck_build_info", "gdrcheck_topology_info", "gdrcheck_devices", "gdrcheck_pairs",
          "gdrcheck_check_result", "gdrcheck_findings", "gdrcheck_bar1_total_bytes", "gdrcheck_bar1_used_bytes",
          "gdrcheck_pcie_link_degraded", "gdrcheck_last_run_timestamp_seconds", "gdrcheck_run_duration_seconds"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NodeExporter:
    def __init__(self, exe: str, textdir: Path, log: Path):
        self.textdir = textdir
        self.proc = None
        for _ in range(3):
            self.port = _free_port()
            self.log = open(log, "ab")
            self.proc = subprocess.Popen(
                [exe, f"--web.listen-address=127.0.0.1:{self.port}", "--collector.disable-defaults",
                 "--collector.textfile", f"--collector.textfile.directory={textdir}", "--web.disable-exporter-metrics"],
                stdout=self.log, stderr=self.log)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    self.metrics()
                    return
                except OSError:
                    time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"node_exporter did not start; see {log}")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return r.read().decode()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


@pytest.fixture
def node_exporter(tmp_path, request):
    exe = engine("prometheus-node-exporter")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    ne = NodeExporter(exe, textdir, tmp_path / "node_exporter.log")
    request.addfinalizer(ne.stop)
    return ne


def _value(metrics: str, series: str) -> float:
    m = re.search(r"^" + re.escape(series) + r" (\S+)$", metrics, re.M)
    assert m, f"{series} not in /metrics"
    return float(m.group(1))


def _write_textfile(tmp_path, textdir, tree, *extra):
    env = gdrcheck_env(tmp_path)
    return run(["gdrcheck", "check", "--format", "prometheus", "--output", textdir / "gdrcheck.prom",
                "--timeout", "60", "--from", tree, *extra], env)


def test_node_exporter_serves_the_textfile(node_exporter, tmp_path):
    textdir = node_exporter.textdir
    p = _write_textfile(tmp_path, textdir, scenario(tmp_path, "healthy-gdr-node"))
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert [x.name for x in textdir.iterdir()] == ["gdrcheck.prom"]  # no temporary file left behind
    m = node_exporter.metrics()
    assert _value(m, "node_textfile_scrape_error") == 0
    for s in SERIES:
        assert re.search(rf"^{s}[{{ ]", m, re.M), s
    assert _value(m, 'gdrcheck_check_result{check="gdr",result="pass"}') == 1
    assert _value(m, 'gdrcheck_devices{kind="gpu"}') == 4
    assert re.search(r'^gdrcheck_topology_info\{fingerprint="sha256:[0-9a-f]{16}",topology="sha256:[0-9a-f]{16}"\} 1$',
                     m, re.M)
    assert f'node_textfile_mtime_seconds{{file="{textdir / "gdrcheck.prom"}"}}' in m \
        or 'node_textfile_mtime_seconds{file="gdrcheck.prom"}' in m

    # the next run replaces the file in place: a failing node, then a node that could not decide
    p = _write_textfile(tmp_path, textdir, scenario(tmp_path, "acs-redirect-on-switch"))
    assert p.returncode == 1, p.stderr
    m = node_exporter.metrics()
    assert _value(m, "node_textfile_scrape_error") == 0
    assert _value(m, 'gdrcheck_check_result{check="gdr",result="fail"}') == 1
    assert _value(m, 'gdrcheck_findings{code="GDR040",severity="error"}') > 0

    p = _write_textfile(tmp_path, textdir, scenario(tmp_path, "config-space-not-root"))
    assert p.returncode == 3, p.stderr
    m = node_exporter.metrics()
    assert _value(m, "node_textfile_scrape_error") == 0
    assert _value(m, 'gdrcheck_check_result{check="gdr",result="unknown"}') == 1


def test_node_exporter_per_pair_metrics_and_real_snapshot(node_exporter, tmp_path):
    p = _write_textfile(tmp_path, node_exporter.textdir, H200_X4, "--per-pair-metrics")
    assert p.returncode == 0, p.stderr
    m = node_exporter.metrics()
    assert _value(m, "node_textfile_scrape_error") == 0
    assert _value(m, 'gdrcheck_devices{kind="gpu"}') == 4
    assert "gdrcheck_build_info" in m


def test_node_exporter_rejects_timestamps_negative_control(node_exporter, tmp_path):
    textdir = node_exporter.textdir
    assert _write_textfile(tmp_path, textdir, scenario(tmp_path, "healthy-gdr-node")).returncode == 0
    bad = textdir / "stamped.prom"
    bad.write_text("# TYPE stamped_metric gauge\nstamped_metric 1 1700000000000\n")
    m = node_exporter.metrics()
    assert _value(m, "node_textfile_scrape_error") == 1
    assert "stamped_metric" not in m
    assert "gdrcheck_build_info" in m  # the good file is still served
    bad.unlink()
    assert _value(node_exporter.metrics(), "node_textfile_scrape_error") == 0


# ACS redirect fails GPUDirect RDMA (1); config space read as non-root leaves ACS unknown (3); a small BAR1 and an
# x8 link only warn (0)
@pytest.mark.parametrize("case,status", [("healthy-gdr-node", 0), ("acs-redirect-on-switch", 1),
                                         ("config-space-not-root", 3), ("bar1-256mib", 0), ("gpu-link-x8", 0)])
def test_promtool_check_metrics(tmp_path, case, status):
    promtool = engine("promtool")
    out = tmp_path / "gdrcheck.prom"
    env = gdrcheck_env(tmp_path)
    p = run(["gdrcheck", "check", "--format", "prometheus", "--per-pair-metrics", "--output", out,
             "--from", scenario(tmp_path, case)], env)
    assert p.returncode == status, p.stderr
    text = out.read_text()
    lint = run([promtool, "check", "metrics"], env, input=text)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # what node_exporter requires of a textfile: no sample timestamps, no host label
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[a-z_:][a-z0-9_:]*(\{[^}]*\})? \S+", line), line
            assert "instance=" not in line and "hostname=" not in line


def test_promtool_check_rules():
    promtool = engine("promtool")
    p = run([promtool, "check", "rules", RULES], env=None)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 5 rules found" in p.stdout


def test_promtool_test_rules():
    promtool = engine("promtool")
    p = run([promtool, "test", "rules", RULES_TEST.name], env=None, cwd=RULES_TEST.parent)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def test_rules_use_only_metrics_gdrcheck_writes(tmp_path):
    """Every gdrcheck_* name in the rules is one the textfile really has."""
    env = gdrcheck_env(tmp_path)
    text = run(["gdrcheck", "check", "--format", "prometheus", "--from", scenario(tmp_path, "healthy-gdr-node")],
               env).stdout
    written = set(re.findall(r"^(gdrcheck_[a-z0-9_]+)", text, re.M))
    used = set(re.findall(r"\b(gdrcheck_[a-z0-9_]+)\b", RULES.read_text()))
    assert used and used <= written, used - written


# --- systemd -----------------------------------------------------------------------------------

def _unit(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    cp.optionxform = str
    cp.read_string(path.read_text())
    return cp


def test_units_parse_and_say_what_they_should():
    svc = _unit(SERVICE)["Service"]
    argv = shlex.split(svc["ExecStart"])
    assert argv[1:] == ["check", "--format", "prometheus", "--output",
                        "/var/lib/prometheus/node-exporter/gdrcheck.prom", "--timeout", "60"]
    assert svc["Type"] == "oneshot"
    assert svc["SuccessExitStatus"].split() == ["1", "3"]
    assert svc["ProtectSystem"] == "strict"
    assert svc["ReadWritePaths"] == "/var/lib/prometheus/node-exporter"
    assert svc["NoNewPrivileges"] == "yes"
    # options that would hide what gdrcheck reads
    for key in ("PrivateNetwork", "PrivateDevices", "ProtectKernelModules", "ProtectClock", "DeviceAllow"):
        assert key not in svc, key
    timer = _unit(TIMER)
    assert timer["Timer"]["OnBootSec"] == "2min" and timer["Timer"]["OnUnitActiveSec"] == "15min"
    assert timer["Install"]["WantedBy"] == "timers.target"


def test_systemd_analyze_verify(tmp_path):
    sa = engine("systemd-analyze")
    env = gdrcheck_env(tmp_path)
    # verify wants ExecStart's binary to exist: point it at this checkout's gdrcheck
    (tmp_path / "units").mkdir()
    svc = tmp_path / "units" / SERVICE.name
    svc.write_text(SERVICE.read_text().replace("/usr/local/bin/gdrcheck", str(tmp_path / "bin" / "gdrcheck")))
    (tmp_path / "units" / TIMER.name).write_text(TIMER.read_text())
    p = run([sa, "verify", svc, tmp_path / "units" / TIMER.name], env, cwd=tmp_path / "units")
    if p.returncode != 0 and re.search(r"Failed to (initialize|connect|set up)", p.stderr):
        pytest.skip(f"systemd-analyze cannot verify here: {p.stderr.strip().splitlines()[0]}")
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == "", p.stderr  # unknown keys and bad values are warnings on stderr
    # and the ExecStart line itself runs (output redirected into tmp_path)
    argv = shlex.split(_unit(svc)["Service"]["ExecStart"])
    argv[argv.index("--output") + 1] = str(tmp_path / "gdrcheck.prom")
    r = run(argv + ["--from", scenario(tmp_path, "healthy-gdr-node")], env)
    assert r.returncode == 0, r.stderr
    assert "gdrcheck_build_info" in (tmp_path / "gdrcheck.prom").read_text()

