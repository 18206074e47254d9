"""Where a document goes: stdout, or a file replaced atomically (``--output``).

A node_exporter textfile, an Ansible ``fetch`` or a Slurm sweep may read the
file at any moment: it is written to a temporary file in the same directory and
renamed over the target, so readers see the old content or the new, never half.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Optional

from gdrcheck.errors import InputError


def check_target(path: str) -> None:
    """Fail early (before the slow part of a run) when ``path`` cannot be written."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory (--output names the file to write)")
    if not os.path.isdir(d):
        raise InputError(f"{path}: directory {d} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise InputError(f"{path}: directory {d} is not writable")


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename."""
    check_target(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(f"{path}: cannot write: {e.strerror or e}") from None


def deliver(text: str, output: Optional[str]) -> None:
    """The document to ``output`` (atomically) or to stdout."""
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
