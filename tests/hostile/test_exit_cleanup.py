"""Clean on every way out: the ``--timeout`` watchdog, deep trees, SIGTERM during cleanup, a full disk.

* The watchdog used to remove the unpacked snapshot from its own thread while the main thread went on
  unpacking into it (the directory leaked). Now it stops the main thread, which removes the directory
  once it has stopped writing there; a call blocked on a pipe is interrupted too.
* Removal walks a tree of any depth without recursion; a valid snapshot with a deep junk directory is
  read (what lies deeper than gdrcheck reads is not unpacked).
* SIGTERM while temporary directories are removed: the removal finishes, then the run ends with 143.
* On a timeout, ``check --format prometheus --output F`` writes the ``unknown`` metrics over the last
  good answer; a full disk while unpacking says so.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time

import pytest
from support.cli_util import ROOT
from support.limits import children_cpu_seconds

from builders.scenarios import scenario
from gdrcheck.io import tempdirs

SNAPSHOT = ROOT / "fixtures" / "h100-x1-vm" / "snapshot.tar.gz"


def gdrcheck(tmp_path, *args, prelude="", stdin=None, timeout=60):
    """gdrcheck's console entry in a child with its own TMPDIR; ``prelude`` runs first (a fault to inject)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    code = (f"import sys\n{prelude}\nfrom gdrcheck.cli.entry import main\n"
            f"sys.argv = ['gdrcheck', *{list(map(str, args))!r}]\nmain()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir), "GDRCHECK_TOOL_PATH": "/nonexistent"}
    env.pop("GDRCHECK_DEBUG", None)
    before = children_cpu_seconds()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=timeout, stdin=stdin if stdin is not None else subprocess.DEVNULL)
    p.cpu_seconds = children_cpu_seconds() - before  # the work the run did, whatever the machine's load
    return p, sorted(os.listdir(tmpdir))


def deep_tree(top, depth):
    """``top``/d/d/.../d (``depth`` levels, far past PATH_MAX) with a file at each level, made by descriptor."""
    os.mkdir(top)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


# -- removal ----------------------------------------------------------------------------------------------


@pytest.fixture
def fast_tmp(tmp_path):
    """A directory in memory where there is one (/dev/shm): on a disk each rmdir is a journal write, and
    5,000 of them measure the disk, not the walk."""
    import shutil
    import tempfile

    if not os.access("/dev/shm", os.W_OK):
        yield tmp_path
        return
    d = tempfile.mkdtemp(prefix="gdrcheck-test-", dir="/dev/shm")
    yield __import__("pathlib").Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_a_tree_5000_levels_deep_is_removed(fast_tmp):
    top = str(fast_tmp / "deep")
    deep_tree(top, 5000)
    tempdirs.remove_tree(top)
    assert not os.path.lexists(top)


def test_links_in_a_tree_are_removed_not_followed(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "file").write_text("x")
    top = tmp_path / "tree"
    (top / "a").mkdir(parents=True)
    (top / "a" / "to-dir").symlink_to(keep)
    (top / "to-file").symlink_to(keep / "file")
    tempdirs.remove_tree(str(top))
    assert not top.exists() and (keep / "file").read_text() == "x"


def test_sigterm_during_a_removal_is_raised_once_it_is_done(tmp_path, monkeypatch):
    from gdrcheck.cli.entry import Terminated, _terminate

    top = str(tmp_path / "deep")
    deep_tree(top, 300)
    real = tempdirs._clear_files
    sent = []

    def clear_and_signal(dfd):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
        return real(dfd)

    monkeypatch.setattr(tempdirs, "_clear_files", clear_and_signal)
    old = signal.signal(signal.SIGTERM, _terminate)
    try:
        with pytest.raises(Terminated):
            tempdirs.remove(top)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert sent and not os.path.lexists(top)


def test_ctrl_c_during_a_removal_is_raised_once_it_is_done(tmp_path, monkeypatch, ctrl_c):
    top = str(tmp_path / "deep")
    deep_tree(top, 300)
    real = tempdirs._clear_files
    sent = []

    def clear_and_interrupt(dfd):
        if not sent:
            sent.append(1)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # to this thread, not any of the process's
            while not tempdirs._held:  # its handler has run (and held it): the removal goes on
                time.sleep(0.001)
        return real(dfd)

    monkeypatch.setattr(tempdirs, "_clear_files", clear_and_interrupt)
    with pytest.raises(KeyboardInterrupt):
        tempdirs.remove(top)
    assert sent and not os.path.lexists(top)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_during_cleanup_ends_the_run_with_143_and_leaves_nothing(tmp_path):
    prelude = ("import os, signal\nfrom gdrcheck.io import tempdirs\nreal = tempdirs.remove_tree\n"
               "def remove_tree(top):\n    os.kill(os.getpid(), signal.SIGTERM)\n    real(top)\n"
               "tempdirs.remove_tree = remove_tree\n")
    p, left = gdrcheck(tmp_path, "pairs", "--json", "--from", SNAPSHOT, prelude=prelude)
    assert p.returncode == 143, p.stderr
    assert p.stderr.strip().splitlines()[-1] == "gdrcheck: terminated" and left == []


# -- the --timeout watchdog ---------------------------------------------------------------------------------


def test_a_timeout_while_unpacking_leaves_nothing(tmp_path):
    """Each member's copy is slowed so unpacking outlasts the deadline: the watchdog fires mid-unpack."""
    prelude = ("import shutil, time\nreal = shutil.copyfileobj\n"
               "def slow(*a, **k):\n    time.sleep(0.02)\n    return real(*a, **k)\nshutil.copyfileobj = slow\n")
    # the unpacking would take minutes: a watchdog that never fires meets the helper's bound (60 s) first
    p, left = gdrcheck(tmp_path, "pairs", "--json", "--from", SNAPSHOT, "--timeout", "0.2", prelude=prelude)
    assert p.returncode == 3 and "GDR122" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert json.loads(p.stdout)["timed_out"] is True and left == []


def _fifo_writer(fifo):
    """Opens the FIFO for writing and writes nothing for a while: a reader blocks in read()."""
    def hold():
        with open(fifo, "wb"):
            time.sleep(15)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    return t


def test_a_timeout_on_a_silent_pipe_writes_the_unknown_metrics_over_the_old_file(tmp_path):
    fifo = tmp_path / "lspci.fifo"
    os.mkfifo(fifo)
    prom = tmp_path / "gdrcheck.prom"
    prom.write_text('gdrcheck_status{status="pass"} 1\n# the last good answer\n')
    _fifo_writer(fifo)
    p, left = gdrcheck(tmp_path, "check", "--format", "prometheus", "--output", prom, "--from", fifo,
                       "--timeout", "0.2")
    assert p.returncode == 3 and "GDR122" in p.stderr and "Traceback" not in p.stderr, p.stderr
    text = prom.read_text()
    assert "the last good answer" not in text
    assert 'gdrcheck_status{status="unknown"} 1' in text and "gdrcheck_timed_out 1" in text
    assert 'gdrcheck_check_result{check="gdr",result="unknown"} 1' in text
    assert left == [] and sorted(os.listdir(tmp_path)) == ["gdrcheck.prom", "lspci.fifo", "tmpdir"]


# -- deep junk, full disk -----------------------------------------------------------------------------------


def test_a_valid_snapshot_with_a_deep_junk_directory_is_read(tmp_path):
    root = scenario(tmp_path / "node", "healthy-gdr-node")
    out = tmp_path / "node.tar.gz"
    with tarfile.open(out, "w:gz", compresslevel=1) as tar:
        tar.add(root, arcname=".")
        name = "junk"
        for _ in range(1500):
            name += "/d"
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(ti)
        ti = tarfile.TarInfo(name + "/f")
        ti.size = 1
        tar.addfile(ti, io.BytesIO(b"x"))
    p, left = gdrcheck(tmp_path, "pairs", "--json", "--from", out)
    assert p.returncode == 0 and '"pairs"' in p.stdout, p.stderr
    assert left == [] and p.cpu_seconds < 20, p.cpu_seconds


def test_no_space_left_while_unpacking_says_so(tmp_path, monkeypatch):
    import shutil

    from gdrcheck.collectors.inputs import open_source
    from gdrcheck.errors import InputError

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shutil, "copyfileobj", full)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(InputError) as e:
        with open_source(str(SNAPSHOT)):
            pass
    msg = str(e.value)
    assert "No space left on device" in msg and "damaged" not in msg and str(tmp_path) in msg
    assert os.listdir(tmp_path) == []


def test_a_run_ended_by_bad_input_leaves_no_watchdog_behind(tmp_path, capsys):
    """--from has a deadline, so its run arms a watchdog; a run ended by an error never reaches its own disarm.
    In a process that goes on (a test runner, anything that calls gdrcheck in-process) the watchdog would fire
    22 s later and end that process with status 3: the end of every run disarms it."""
    import threading

    from gdrcheck.cli.entry import run_command_line
    from gdrcheck.io import deadline

    bad = tmp_path / "notes.txt"
    bad.write_text("not an input gdrcheck reads\n")
    with pytest.raises(SystemExit) as e:
        run_command_line(["pairs", "--from", str(bad)])
    assert e.value.code == 2 and "gdrcheck: error:" in capsys.readouterr().err
    assert not deadline._armed
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for t in timers:
        t.join(1)
    assert not [t for t in timers if t.is_alive()]


def test_a_stop_swallowed_by_a_weakref_callback_is_said_nowhere_and_sent_again():
    """The watchdog's signal can land inside a weak reference's callback (the import system's module locks have
    them, and so a 3.9 run under load printed "Exception ignored in: <function _get_module_lock.<locals>.cb>"
    and a traceback): Python swallows what is raised there. gdrcheck says nothing of it and stops the main
    thread again a moment later, where it can stop."""
    code = (
        "import time, weakref\n"
        "from gdrcheck.io.deadline import Deadline, TimedOut, Watchdog, _spoken, stand_down\n"
        "w = Watchdog(Deadline(60), lambda: 3)\n"
        "_spoken.append(3)\n"
        "class A: pass\n"
        "a = A()\n"
        "def cb(ref): raise TimedOut(3)\n"
        "r = weakref.ref(a, cb)\n"
        "try:\n"
        "    del a\n"
        "    time.sleep(2)\n"
        "    print('not stopped')\n"
        "except TimedOut:\n"
        "    print('stopped')\n"
        "stand_down()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert p.stdout.strip() == "stopped" and p.stderr == "", (p.stdout, p.stderr)
