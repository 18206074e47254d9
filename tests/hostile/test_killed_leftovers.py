"""What a run killed outright (SIGKILL) leaves, removed by a later run.

A killed run cannot clean up: the directory it unpacked a snapshot into stays in ``$TMPDIR``, and its hidden
temporary output file beside ``--output``. Both are named with the run's pid; a later run removes those of its
user whose run is gone and that nothing has touched for a minute, and leaves a live run's alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.cli_util import ROOT, run

SNAPSHOT = ROOT / "fixtures" / "h100-x1-vm" / "snapshot.tar.gz"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _age(path: Path, seconds: float = 600) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


def test_a_killed_runs_unpacked_directory_is_removed_by_the_next_run(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir)}
    data = SNAPSHOT.read_bytes()
    p = subprocess.Popen([sys.executable, "-m", "gdrcheck", "pairs", "--timeout", "0", "--from", "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                         cwd=ROOT)
    p.stdin.write(data[: len(data) // 2])  # half an archive: the run waits for the rest, its directory made
    p.stdin.flush()
    deadline = time.monotonic() + 60
    while not list(tmpdir.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = list(tmpdir.iterdir())
    assert left, "the run made no directory"
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdin.close()
    assert all(d.exists() for d in left)  # nothing could remove them
    for d in left:
        _age(d)
    later = run("pairs", "--from", SNAPSHOT, env={"TMPDIR": str(tmpdir)})
    assert later.returncode == 0, later.stderr  # the H100 guest's snapshot passes
    assert list(tmpdir.iterdir()) == [], list(tmpdir.iterdir())


def test_a_killed_runs_temporary_output_file_is_removed_by_the_next_write(tmp_path):
    out = tmp_path / "gdr.prom"
    dead, live = _dead_pid(), os.getpid()
    stale = tmp_path / f".gdr.prom.gdrcheck-{dead}-0123abcd.tmp"
    snapshot_stale = tmp_path / f".gdrcheck-snapshot.gdrcheck-{dead}-89abcdef.tmp"
    recent = tmp_path / f".gdr.prom.gdrcheck-{dead}-00000000.tmp"  # touched just now: perhaps another namespace's
    running = tmp_path / f".gdr.prom.gdrcheck-{live}-11111111.tmp"
    kept_name = tmp_path / ".gdr.prom.tmp"  # not gdrcheck's
    for f in (stale, snapshot_stale, recent, running, kept_name):
        f.write_text("half a report")
    for f in (stale, snapshot_stale, running, kept_name):
        _age(f)
    p = run("check", "--format", "prometheus", "-o", out, "--from", SNAPSHOT)
    assert p.returncode == 0, p.stderr
    left = sorted(f.name for f in tmp_path.iterdir())
    assert left == sorted(f.name for f in (out, recent, running, kept_name)), left
