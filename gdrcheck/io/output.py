"""Where a document goes: stdout, or a file replaced atomically (``--output``).

A node_exporter textfile, an Ansible ``fetch`` or a Slurm sweep may read the
file at any moment: it is written to a temporary file in the same directory and
renamed over the target, so readers see the old content or the new, never half.
"""

from __future__ import annotations

import contextlib
import os
import sys

from gdrcheck.errors import InputError

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import IO, Iterator, Optional


def check_target(path: str) -> None:
    """Fail early (before the slow part of a run) when ``path`` cannot be written."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory (--output names the file to write)")
    if not os.path.isdir(d):
        raise InputError(f"{path}: directory {d} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise InputError(f"{path}: directory {d} is not writable")


@contextlib.contextmanager
def atomic_file(path: str, binary: bool = False, prefix: Optional[str] = None,
                mode: Optional[int] = 0o644) -> Iterator[IO]:
    """A file object whose content replaces ``path`` only once the block has finished without error:
    a temporary file in the same directory, fsynced, then renamed. ``mode`` None keeps mkstemp's 0600."""
    import tempfile
    d = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(d):
        raise InputError(f"{path}: directory {d} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix or "." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    except OSError as e:
        raise InputError(f"{path}: cannot write there ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise InputError(f"{path}: cannot write ({e.strerror or e})") from None
        raise


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename."""
    check_target(path)
    with atomic_file(path) as f:
        f.write(text)


def stdout_closed() -> None:
    """The reader of stdout has gone (``| head -1``): what is still to be written goes nowhere,
    quietly, and the run ends with its own exit status (no error at exit when Python flushes)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass


def deliver(text: str, output: Optional[str]) -> None:
    """The document to ``output`` (atomically) or to stdout."""
    if output:
        write_atomic(output, text)
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()
