"""A probe worker runs as root: it must not import code planted in the caller's working directory, and it must
not outlive a probe that is killed (SIGKILL leaves no chance to clean up)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gdrcheck.probe.runner import run_step

TESTS = Path(__file__).resolve().parents[1]
GPU0 = "0000:03:00.0"


def _env(fault=""):
    return {"GDRCHECK_PROBE_LIBS": "support.probe_fakes", "GDRCHECK_FAKE": fault, "GDRCHECK_FAKE_GPUS": GPU0,
            "PYTHONPATH": os.pathsep.join(["", ".", "gdrcheck", str(TESTS)])}


def test_a_worker_planted_in_the_working_directory_is_not_run(tmp_path, monkeypatch):
    marker = tmp_path / "ran-as-root"
    evil = tmp_path / "gdrcheck" / "probe"
    evil.mkdir(parents=True)
    (tmp_path / "gdrcheck" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('pkg')\n")
    (evil / "__init__.py").write_text("")
    (evil / "worker.py").write_text(f"open({str(marker)!r}, 'w').write('worker')\n")
    (tmp_path / "support").mkdir()  # a planted copy of the test's own fake libraries, too
    (tmp_path / "support" / "__init__.py").write_text("")
    (tmp_path / "support" / "probe_fakes.py").write_text(f"open({str(marker)!r}, 'w').write('fakes')\n")
    monkeypatch.chdir(tmp_path)  # relative and empty PYTHONPATH entries would mean this directory
    r = run_step({"check": "cuda", "params": {"gpu": GPU0}}, 60, _env())
    assert r["status"] == "ok", r
    assert not marker.exists(), marker.read_text()


def test_the_worker_is_started_isolated_by_its_path_in_the_root_directory():
    from gdrcheck.probe import runner

    argv = runner.worker_argv({"PYTHONPATH": f"rel:{TESTS}:"})
    assert argv[1] == "-I" and argv[2] == runner.WORKER_PATH and os.path.isabs(argv[2])
    paths = [argv[i + 1] for i, a in enumerate(argv) if a == "--path"]
    assert paths == [runner.PACKAGE_ROOT, str(TESTS)]
    w = runner.Worker(_env())
    try:
        assert os.readlink(f"/proc/{w.p.pid}/cwd") == "/"
    finally:
        w.close()


PARENT = """
import sys, time
sys.path[:0] = [{root!r}, {tests!r}]
from gdrcheck.probe.runner import Worker
w = Worker({env!r})
w.p.stdin.write(b'{{"check": "host-bandwidth", "params": {{"gpu": "{gpu}", "bytes": 1048576}}}}\\n')
w.p.stdin.flush()
print(w.p.pid, flush=True)
time.sleep(600)
"""


def test_the_worker_dies_with_a_sigkilled_parent():
    from gdrcheck.probe.runner import PACKAGE_ROOT

    code = PARENT.format(root=PACKAGE_ROOT, tests=str(TESTS), env=_env("hang"), gpu=GPU0)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        time.sleep(0.5)  # the worker is inside its (hanging) step
        assert _alive(pid)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the worker outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_one_worker_serves_several_steps_and_opens_contexts_once():
    from gdrcheck.probe.runner import Worker

    w = Worker({**_env(), "GDRCHECK_FAKE_GPUS": f"{GPU0},0000:04:00.0"})
    try:
        first = w.ask({"check": "cuda", "params": {"gpu": GPU0}, "open": [GPU0, "0000:04:00.0"]}, 60)
        second = w.ask({"check": "cuda", "params": {"gpu": "0000:04:00.0"}}, 60)
        pid = w.p.pid
    finally:
        w.close()
    assert first["status"] == second["status"] == "ok"
    assert set(first["evidence"]["worker_opened"]["contexts_s"]) == {GPU0, "0000:04:00.0"}
    assert "worker_opened" not in second.get("evidence", {})
    assert not _alive(pid)


def test_from_inside_an_archive_the_worker_starts_by_its_module(tmp_path, monkeypatch):
    """gdrcheck.pyz run without a cache directory imports from the archive: there is no worker.py file to run."""
    from gdrcheck.probe import runner

    monkeypatch.setattr(runner, "WORKER_PATH", str(tmp_path / "gdrcheck.pyz" / "gdrcheck" / "probe" / "worker.py"))
    argv = runner.worker_argv({})
    assert argv[1:3] == ["-I", "-c"] and argv[argv.index("--path") + 1] == runner.PACKAGE_ROOT
    monkeypatch.chdir(tmp_path)
    r = run_step({"check": "cuda", "params": {"gpu": GPU0}}, 60, _env())
    assert r["status"] == "ok", r
