"""The temporary directories of a run (an unpacked snapshot, a copied stream): made, and removed once.

A directory is removed by the thread that made it, once what it was made for has stopped (the block that
unpacked and read it ends, however it ends). The ``--timeout`` watchdog never removes one while that thread
may still write into it: it stops that thread (:mod:`gdrcheck.io.deadline`), and only a thread that does
not stop (blocked outside Python) leaves the removal to the watchdog as the process ends.

The removal walks the tree without recursion, holding one directory open at a time and climbing back by
``..``, so a tree of any depth goes (a recursive walk stops near 1,000 levels, and holding every level
open would run out of descriptors). A signal that ends the run (SIGTERM, the watchdog's) while a removal
runs (and Ctrl-C) is held until it is done, then raised: the run still ends as that signal says, and
leaves nothing.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_DIRS: set = set()
_held: Optional[list[BaseException]] = None  # while a removal runs: what signals raised, raised after
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def make(prefix: str = "gdrcheck-") -> str:
    """A new private directory (mode 0700) under ``$TMPDIR``, removed by :func:`remove`; named with this run's
    pid, so a later run removes it if this one is killed outright (:mod:`gdrcheck.io.leftovers`), and removing
    what such runs left there first."""
    import tempfile

    from gdrcheck.io.leftovers import sweep_unpacked, tag

    top = tempfile.gettempdir()
    if prefix == "gdrcheck-":
        sweep_unpacked(top, remove_tree)
        prefix = tag()
    d = tempfile.mkdtemp(prefix=prefix, dir=top)
    _DIRS.add(d)
    return d


def raise_or_hold(exc: BaseException) -> None:
    """For a signal handler: raise ``exc`` now, or, while a removal runs, once it is done."""
    if _held is not None:
        _held.append(exc)
        return
    raise exc


def remove(d: str) -> None:
    """Remove ``d`` and all it holds (what cannot be removed is left, quietly)."""
    global _held
    outer = _held is None
    if outer:
        _held = []
    ctrl_c = _hold_ctrl_c() if outer else None
    try:
        remove_tree(d)
        _DIRS.discard(d)
    finally:
        if outer:
            if ctrl_c is not None:
                _restore_ctrl_c(ctrl_c)
            held, _held = _held, None
            if held:
                raise held[0]


def _hold_ctrl_c():
    """Ctrl-C's default handler raises at once; during a removal it is held like SIGTERM. The handler it
    replaced, or None (not the main thread, or a handler of the caller's own)."""
    import signal

    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return None
        signal.signal(signal.SIGINT, lambda signum, frame: raise_or_hold(KeyboardInterrupt()))
    except (ValueError, OSError):
        return None
    return signal.default_int_handler


def _restore_ctrl_c(handler) -> None:
    import signal

    try:
        signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):
        pass


def remove_all() -> None:
    """Every directory not yet removed (the process is about to end)."""
    for d in list(_DIRS):
        remove(d)


def pending() -> list[str]:
    return sorted(_DIRS)


def remove_tree(top: str) -> None:
    """``top`` and everything below it, without recursion and with one directory open at a time."""
    try:
        cur = os.open(top, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError:
        _quietly(os.unlink, top)
        return
    stack = []  # (name of the directory open now in its parent, the parent's subdirectories still to do)
    try:
        todo = _clear_files(cur)
        while True:
            if todo:
                name = todo.pop()
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=cur)
                except FileNotFoundError:
                    continue
                except OSError:  # no longer a directory: a link or a file took its name
                    _quietly(os.unlink, name, dir_fd=cur)
                    continue
                stack.append((name, todo))
                os.close(cur)
                cur = child
                todo = _clear_files(cur)
                continue
            if not stack:
                break
            name, todo = stack.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=cur)
            os.close(cur)
            cur = parent
            _quietly(os.rmdir, name, dir_fd=cur)
    except OSError:
        pass
    finally:
        os.close(cur)
    _quietly(os.rmdir, top)


def _clear_files(dfd: int) -> list[str]:
    """Unlink everything in the directory ``dfd`` but its subdirectories; their names."""
    subdirs = []
    try:
        with os.scandir(dfd) as it:
            for entry in it:
                try:
                    is_dir = stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode)
                except OSError:
                    continue
                if is_dir:
                    subdirs.append(entry.name)
                else:
                    _quietly(os.unlink, entry.name, dir_fd=dfd)
    except OSError:
        pass
    return subdirs


def _quietly(fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except OSError:
        pass
