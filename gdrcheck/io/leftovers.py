"""What a run killed outright (SIGKILL, the OOM killer, a power cut) left behind, removed by a later run.

Such a run cannot clean up: its hidden temporary output file (``.NAME.gdrcheck-PID-XXXXXXXX.tmp`` beside
the ``--output`` file, ``.gdrcheck-snapshot.gdrcheck-PID-XXXXXXXX.tmp``) and the directory it unpacked a snapshot into
(``$TMPDIR/gdrcheck-PID-XXXXXXXX``) stay. Each is named with gdrcheck's prefix and the pid of the run that
made it; a later run that writes into the same directory, or unpacks into the same ``$TMPDIR``, removes those
of its own user whose run is gone (no such process) and that nothing has touched for a minute (a run in
another pid namespace sharing the directory is still writing its file, or has just made it).
"""

from __future__ import annotations

import os
import stat
import time

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

QUIET_SECONDS = 60.0
_OUTPUT = lazy_pattern(r"^\..*\.gdrcheck-(\d{1,10})-[0-9a-f]{8}\.tmp$")
_UNPACKED = lazy_pattern(r"^gdrcheck-(\d{1,10})-[0-9a-z_]{8}$")


def tag() -> str:
    """What a temporary name carries of this run: ``gdrcheck-PID-``."""
    return f"gdrcheck-{os.getpid()}-"


def _gone(pid: int) -> bool:
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    return False


def _stale(st: os.stat_result, pid: int, want_dir: bool) -> bool:
    kind_ok = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    return (kind_ok and st.st_uid == os.geteuid() and time.time() - st.st_mtime > QUIET_SECONDS
            and _gone(pid))


def sweep_outputs(dfd: int) -> None:
    """Remove the temporary output files a killed run left in the directory ``dfd``."""
    try:
        names = os.listdir(dfd)
    except OSError:
        return
    for name in names:
        m = _OUTPUT.match(name)
        if not m:
            continue
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if _stale(st, int(m.group(1)), want_dir=False):
                os.unlink(name, dir_fd=dfd)
        except OSError:
            continue


def sweep_unpacked(top: str, remove_tree: Callable[[str], None]) -> None:
    """Remove, with ``remove_tree`` (:func:`gdrcheck.io.tempdirs.remove_tree`, which calls this), the directories a
    killed run unpacked a snapshot into under ``top`` (``$TMPDIR``)."""
    try:
        names = os.listdir(top)
    except OSError:
        return
    for name in names:
        m = _UNPACKED.match(name)
        if not m:
            continue
        path = os.path.join(top, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if _stale(st, int(m.group(1)), want_dir=True):
            remove_tree(path)
