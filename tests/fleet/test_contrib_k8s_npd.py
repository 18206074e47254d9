"""contrib/k8s and contrib/npd, offline.

The manifest is validated against the Kubernetes 1.30 schemas by kubernetes-validate and linted by
yamllint; the NPD monitor config is held to the checks node-problem-detector applies when it loads
one (pkg/custompluginmonitor/types/config.go: plugin "custom", a rule's timeout not above the global
one, every permanent rule's condition declared); the DaemonSet's own loop runs once against
scenario trees, and the NPD plugin reads what it wrote, under the plugin protocol (exit 0/1/2,
at most 80 bytes on stdout, the finding code first).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from support.contrib_util import CONTRIB, engine, gdrcheck_env, run

from builders.scenarios import scenario

DAEMONSET = CONTRIB / "k8s" / "gdrcheck-daemonset.yaml"
MONITOR = CONTRIB / "npd" / "gdrcheck-monitor.json"
PLUGIN = CONTRIB / "npd" / "gdrcheck-npd.sh"

def _docs():
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the manifest")
    return [d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d]


def _daemonset():
    return next(d for d in _docs() if d["kind"] == "DaemonSet")


def test_kubernetes_validate(tmp_path):
    kv = engine("kubernetes-validate")
    p = run([kv, "-k", "1.30.0", "--strict", DAEMONSET], gdrcheck_env(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "passed for resource daemonset/gdrcheck against version 1.30" in p.stdout + p.stderr


def test_yamllint_contrib(tmp_path):
    yl = engine("yamllint")
    files = sorted(str(p) for p in CONTRIB.rglob("*.y*ml"))
    assert len(files) >= 4
    p = run([yl, "--strict", "-c", CONTRIB / ".yamllint", *files], gdrcheck_env(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr


def test_daemonset_says_what_it_should():
    ds = _daemonset()
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert any(t["key"] == "nvidia.com/gpu" and t["operator"] == "Exists" for t in spec["tolerations"])
    (c,) = spec["containers"]
    assert c["securityContext"]["privileged"] is True
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/sys"]["readOnly"] is True
    assert mounts["/run/nvidia/driver"]["readOnly"] is True
    assert mounts["/run/nvidia/driver"]["mountPropagation"] == "HostToContainer"
    assert not mounts["/var/lib/prometheus/node-exporter"].get("readOnly")
    assert not mounts["/run/gdrcheck"].get("readOnly")
    vols = {v["name"]: v for v in spec["volumes"]}
    for m in c["volumeMounts"]:
        v = vols[m["name"]]
        if "hostPath" in v:
            assert v["hostPath"]["path"] == m["mountPath"], m  # the host's paths, not renamed ones
    script = c["args"][0]
    assert "--format prometheus --output" in script and "--format npd --require" in script


def _loop_script() -> str:
    return _daemonset()["spec"]["template"]["spec"]["containers"][0]["args"][0]


def test_daemonset_script_shellcheck(tmp_path):
    sc = engine("shellcheck")
    f = tmp_path / "loop.sh"
    f.write_text("#!/bin/bash\n" + _loop_script())
    p = run([sc, "-s", "bash", f], None)
    assert p.returncode == 0, p.stdout


def test_plugin_static(tmp_path):
    assert run(["bash", "-n", PLUGIN], None).returncode == 0
    assert os.access(PLUGIN, os.X_OK)
    sc = engine("shellcheck")
    p = run([sc, PLUGIN], None)
    assert p.returncode == 0, p.stdout


# --- NPD's own config checks -------------------------------------------------------------------

def _go_duration(s: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", s)
    assert parts and "".join(a + b for a, b in parts) == s, f"not a Go duration: {s!r}"
    return sum(float(a) * units[b] for a, b in parts)


def test_npd_monitor_config_passes_npd_validation():
    cfg = json.loads(MONITOR.read_text())
    # Validate(): the only plugin NPD knows
    assert cfg["plugin"] == "custom"
    g = cfg["pluginConfig"]
    glob_timeout = _go_duration(g["timeout"])
    assert _go_duration(g["invoke_interval"]) == 300
    assert glob_timeout == 30
    assert g["max_output_length"] == 80
    assert g["concurrency"] == 1
    assert cfg["source"]
    declared = {c["type"]: c for c in cfg["conditions"]}
    for c in cfg["conditions"]:
        assert set(c) == {"type", "reason", "message"} and all(c.values()), c
    seen = set()
    for r in cfg["rules"]:
        assert r["type"] in ("permanent", "temporary")
        # "plugin timeout is greater than global timeout"
        assert _go_duration(r.get("timeout", g["timeout"])) <= glob_timeout, r
        # "Permanent problem %s does not have preset default condition."
        if r["type"] == "permanent":
            assert r["condition"] in declared, r
        assert r["reason"] and r["reason"] != declared[r["condition"]]["reason"]
        assert Path(r["path"]).name == PLUGIN.name
        assert r["condition"] not in seen, "one condition per rule"
        seen.add(r["condition"])
    rules = {r["condition"]: (r["reason"], r["args"]) for r in cfg["rules"]}
    assert rules == {"GPUDirectRDMAProblem": ("GPUDirectRDMABroken", ["gdr"]),
                     "GPUPeerToPeerProblem": ("GPUPeerToPeerBroken", ["p2p"])}


# --- the DaemonSet loop and the plugin ---------------------------------------------------------

def _plugin(env, check):
    p = run([PLUGIN, check], env)
    raw = p.stdout.encode()
    # NPD trims and cuts stdout at max_output_length; the plugin keeps within it itself
    assert raw.count(b"\n") == 1 and len(raw.rstrip(b"\n")) <= 80, raw
    assert p.returncode in (0, 1, 2), p.returncode
    return p.returncode, p.stdout.strip()


CASES = [
    # scenario, (gdr status, code), (p2p status, code)
    ("healthy-gdr-node", (0, "OK"), (0, "OK")),
    ("acs-redirect-on-switch", (1, "GDR040"), (0, "OK")),
    ("no-peer-memory-module", (1, "GDR020"), (0, "OK")),
    ("p2p-chipset-not-supported", (0, "OK"), (1, "GDR007")),
    ("config-space-not-root", (2, "GDR041"), (0, "OK")),
]


@pytest.mark.parametrize("case,gdr,p2p", CASES, ids=[c[0] for c in CASES])
def test_daemonset_loop_then_npd_plugin(tmp_path, case, gdr, p2p):
    tree = scenario(tmp_path, case)
    textfile = tmp_path / "textfile" / "gdrcheck.prom"
    textfile.parent.mkdir()
    npd = tmp_path / "run" / "gdrcheck" / "npd"
    env = gdrcheck_env(tmp_path, {"GDRCHECK_ONCE": "1", "GDRCHECK_TEXTFILE": str(textfile),
                                  "GDRCHECK_NPD_DIR": str(npd), "GDRCHECK_EXTRA_ARGS": f"--from {tree}",
                                  "NODE_NAME": "gpu-node-07"})
    p = run(["bash", "-c", _loop_script()], env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "gdrcheck_check_result" in textfile.read_text()
    assert sorted(x.name for x in npd.iterdir()) == ["gdr.result", "gds.result", "p2p.result"]

    penv = dict(env, GDRCHECK_NPD_DIR=str(npd))
    for check, (status, code) in (("gdr", gdr), ("p2p", p2p)):
        rc, line = _plugin(penv, check)
        assert rc == status, (check, line)
        assert line.split()[0] == code, (check, line)


def test_plugin_runs_gdrcheck_when_nothing_is_precomputed(tmp_path):
    tree = scenario(tmp_path, "acs-redirect-on-switch")
    env = gdrcheck_env(tmp_path)
    wrapper = tmp_path / "gdrcheck-at-tree"
    wrapper.write_text(f"#!/bin/sh\nexec {tmp_path / 'bin' / 'gdrcheck'} \"$@\" --from {tree}\n")
    wrapper.chmod(0o755)
    env.update({"GDRCHECK_NPD_DIR": str(tmp_path / "none"), "GDRCHECK": str(wrapper)})
    assert _plugin(env, "gdr")[0] == 1
    assert _plugin(env, "p2p")[0] == 0
    env["GDRCHECK"] = str(tmp_path / "missing")
    rc, line = _plugin(env, "gdr")
    assert rc == 2 and line.startswith("NORESULT ")


def test_plugin_stale_long_and_bad_input(tmp_path):
    env = gdrcheck_env(tmp_path, {"GDRCHECK_NPD_DIR": str(tmp_path)})
    res = tmp_path / "gdr.result"
    res.write_text("1\nGDR040 " + "x" * 200 + "\n")
    rc, line = _plugin(env, "gdr")
    assert rc == 1 and len(line) == 80 and line.startswith("GDR040 ")
    old = time.time() - 3600
    os.utime(res, (old, old))
    rc, line = _plugin(env, "gdr")
    assert rc == 2 and line.startswith("STALE ")
    res.write_text("3\nGDR122 run-timed-out\n")
    assert _plugin(env, "gdr") == (2, "GDR122 run-timed-out")
    res.write_text("")
    rc, line = _plugin(env, "gdr")
    assert rc == 2 and line.startswith("NORESULT")
    rc, line = _plugin(env, "bogus")
    assert rc == 2 and line.startswith("USAGE ")
