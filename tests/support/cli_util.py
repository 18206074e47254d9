"""Run gdrcheck as a user would: a separate process, exit status and both streams."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
