"""Run gdrcheck as a user would: a separate process, exit status and both streams."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the deadline of a command line run in the test's process without --timeout: a bound for a run that hangs only
HANG_GUARD_SECONDS = 600.0


def run(*args, env=None, cwd=None, timeout=120, stdin=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("GDRCHECK_DEBUG", None)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "gdrcheck", *map(str, args)], capture_output=True, text=True,
                          env=e, cwd=cwd or ROOT, timeout=timeout, input=stdin,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def assert_clean_error(proc, code=2):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gdrcheck: error:"), lines[0]


def drain_pty(main: int) -> bytes:
    """All a pseudo-terminal's other side wrote, once it has closed (EIO or end of file); ``main`` is closed."""
    out = b""
    while True:
        try:
            got = os.read(main, 65536)
        except OSError:
            break
        if not got:
            break
        out += got
    os.close(main)
    return out


class Ran:
    """What a command line run in this process left: its exit status and both streams, as
    :func:`subprocess.run` gives them (``returncode``, ``stdout``, ``stderr``, text with universal newlines)."""

    def __init__(self, args, returncode: int, stdout: str, stderr: str) -> None:
        self.args, self.returncode, self.stdout, self.stderr = args, returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"Ran({self.args!r}, returncode={self.returncode})"


def _text_stream(data: bytes = b""):
    """A text stream over bytes, UTF-8 and strict as a pipe under a UTF-8 locale; not a terminal."""
    import io

    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="strict", newline="\n")


def _universal(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def call(*args, env=None, cwd=None, stdin=None) -> Ran:
    """gdrcheck's command line run in this process (its console script's function, with its one-line errors and
    its exit status), for the tests where the process boundary is not the point: the environment, working
    directory, standard streams, signal handlers and hooks the run changes are put back after it. What the
    boundary is the point of (signals, closed streams, a terminal, the interpreter's start, and a ``--timeout`` whose
    watchdog fires: it ends its process) runs through :func:`run`.

    A command line without ``--timeout`` runs under :data:`HANG_GUARD_SECONDS` instead of the 20 s default: that
    default is wall time, which a loaded machine can overrun on a large input, and a test of it says ``--timeout``
    or reads the default itself."""
    import signal

    from gdrcheck.cli.entry import main
    from gdrcheck.io import deadline

    argv = [str(a) for a in args]
    own_deadline = any(a in ("--help", "-h") or a.split("=")[0] == "--timeout" for a in argv)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_") and k != "GDRCHECK_DEBUG"}
    environ.update(env or {})
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGALRM)}
    saved_hook = sys.unraisablehook
    saved_default = deadline.DEFAULT_SECONDS
    out, err = _text_stream(), _text_stream()
    code = 0
    try:
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd or ROOT)
        sys.stdin = _text_stream((stdin or "").encode())
        sys.stdout, sys.stderr = out, err
        if not own_deadline:
            deadline.DEFAULT_SECONDS = HANG_GUARD_SECONDS
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out.flush()
        err.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for s, handler in saved_handlers.items():
            signal.signal(s, handler)
        sys.unraisablehook = saved_hook
        deadline.DEFAULT_SECONDS = saved_default
    return Ran(argv, code, _universal(out.buffer.getvalue()), _universal(err.buffer.getvalue()))
