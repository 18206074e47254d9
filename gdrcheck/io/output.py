"""Where a document goes: stdout, or a file replaced atomically (``--output``).

A node_exporter textfile, an Ansible ``fetch`` or a Slurm sweep may read the
file at any moment: it is written to a temporary file in the same directory and
renamed over the target, so readers see the old content or the new, never half.
A link to a file has the file it names replaced, and stays a link.

A target that is not a file (``/dev/null``, ``/dev/stdout``, a FIFO) is written
in place, never replaced: a rename would put a file where the device was. The
standard streams by name (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``)
are written after what is already there, as a shell's ``>>`` would.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys

from gdrcheck.errors import InputError

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import IO, Iterator, Optional


_STREAM_DIRS = ("/dev/fd/", "/proc/self/fd/")
_STREAM_NAMES = ("/dev/stdin", "/dev/stdout", "/dev/stderr")


def is_stream(path: str) -> bool:
    """``path`` exists and is neither a file nor a directory: a pipe, a FIFO, a device, a socket (written or
    read where it is, once)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def in_place(path: str) -> bool:
    """``path`` is written where it is, not replaced: ``-`` (stdout), a standard stream by name, or a stream
    (:func:`is_stream`)."""
    if path == "-" or os.path.abspath(path) in _STREAM_NAMES or os.path.abspath(path).startswith(_STREAM_DIRS):
        return True
    return is_stream(path)


def _replaced(path: str) -> str:
    """The file a rename replaces for ``path``: the one a link names (the link stays), else ``path``."""
    return os.path.realpath(path) if os.path.islink(path) else path


def check_target(path: str) -> None:
    """Fail early (before the slow part of a run) when ``path`` cannot be written."""
    if not path:
        raise InputError("--output: an empty file name (- is stdout)")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory (--output names the file to write)")
    if in_place(path):
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise InputError(f"{path}: is not writable")
        return
    d = os.path.dirname(os.path.abspath(_replaced(path))) or "."
    if not os.path.isdir(d):
        raise InputError(f"{path}: directory {d} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise InputError(f"{path}: directory {d} is not writable")


@contextlib.contextmanager
def atomic_file(path: str, binary: bool = False, prefix: Optional[str] = None,
                mode: Optional[int] = 0o644) -> Iterator[IO]:
    """A file object whose content replaces ``path`` only once the block has finished without error:
    a temporary file in the same directory, fsynced, then renamed. ``mode`` None keeps mkstemp's 0600.
    A target written in place (:func:`in_place`) is opened and written, nothing else."""
    if in_place(path):
        with _written_in_place(path, binary) as f:
            yield f
        return
    import tempfile
    shown, path = path, _replaced(path)
    d = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(d):
        raise InputError(f"{shown}: directory {d} does not exist")
    try:  # the temporary name stays within NAME_MAX however long the target's is
        fd, tmp = tempfile.mkstemp(prefix=prefix or "." + os.path.basename(path)[:120] + ".", suffix=".tmp", dir=d)
    except OSError as e:
        raise InputError(f"{shown}: cannot write there ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        _take_over(tmp, path, mode)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise InputError(f"{shown}: cannot write ({e.strerror or e})") from None
        raise


def _take_over(tmp: str, path: str, mode: Optional[int]) -> None:
    """The new file gets what the file it replaces had (its mode, and as root its owner), so a textfile
    collector's 0600 file owned by its user stays so; a new file gets ``mode`` less the umask, as ``open``
    would give it. ``mode`` None keeps mkstemp's 0600 (a snapshot describes the machine)."""
    if mode is None:
        return
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
            with contextlib.suppress(OSError):
                os.chown(tmp, st.st_uid, st.st_gid)
        return
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, mode & ~mask)


@contextlib.contextmanager
def _written_in_place(path: str, binary: bool) -> Iterator[IO]:
    if path == "-":
        path = "/dev/stdout"
    name = os.path.abspath(path)
    append = name in _STREAM_NAMES or name.startswith(_STREAM_DIRS)
    try:
        with open(path, ("a" if append else "w") + ("b" if binary else ""),
                  **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
    except BrokenPipeError:
        pass  # its reader has gone, as on stdout
    except OSError as e:
        raise InputError(f"{path}: cannot write ({e.strerror or e})") from None


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
