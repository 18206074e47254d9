"""Where a document goes: stdout, or a file replaced atomically (``--output``).

A node_exporter textfile, an Ansible ``fetch`` or a Slurm sweep may read the
file at any moment: it is written to a temporary file in the named file's own
directory (created ``O_EXCL|O_NOFOLLOW``, so nothing already there is opened)
and renamed over the named file, so readers see the old content or the new,
never half. Nothing is created or renamed anywhere else.

gdrcheck runs as root, often with its output in a directory anyone may write
(``/tmp``, ``/var/tmp``, ``/dev/shm``), where another user can plant a link by
the name it is about to write. A link named as the output is written through
only when the caller owns it and it is not in a sticky or world-writable
directory, each link of a chain alike, and each link among the directories of the
path too (one root owns is also followed there: ``/var/run``); then the file it names is replaced and
the link stays a link; any other link is refused (one line, exit 2), as
``fs.protected_symlinks`` would refuse to follow it. Only a regular file is ever
replaced: a target that is not one (``/dev/null``, a FIFO) is written in place,
and only when it is the named path itself, never at the end of a link. The
standard streams by name (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``)
are written after what is already there, as a shell's ``>>`` would.

What a replaced file's mode passes on is in :func:`_take_over`: never a set-id bit, and as root never a
mode another user chose on a file that ends up root's (a user's 4777 file in ``/tmp`` becomes root's 0644).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

from gdrcheck.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import IO, Optional


_STREAM_DIRS = ("/dev/fd/", "/proc/self/fd/")
_STREAM_NAMES = ("/dev/stdin", "/dev/stdout", "/dev/stderr")
MAX_LINK_HOPS = 40  # as the kernel's own limit on nested links
_SHARED = stat.S_ISVTX | stat.S_IWOTH  # a directory others may write in (/tmp, /var/tmp, /dev/shm)


def is_stream(path: str) -> bool:
    """``path`` exists and is neither a file nor a directory: a pipe, a FIFO, a device, a socket (written or
    read where it is, once)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _stream_name(path: str) -> bool:
    """``-`` or a standard stream by name: the process's own descriptors, written where they are."""
    if path == "-":
        return True
    name = os.path.abspath(path)
    return name in _STREAM_NAMES or name.startswith(_STREAM_DIRS)


def in_place(path: str) -> bool:
    """``path`` is written where it is, not replaced: ``-`` (stdout), a standard stream by name, or a
    device, FIFO or socket that is the named path itself."""
    return _plan(path)[0] == "stream"


def _plan(path: str) -> tuple:
    """How ``path`` is written: ``("stream", path)`` in place, or ``("file", directory, name, stat or None)``
    for a regular file (existing or not) replaced by a rename in ``directory``. Links are followed one at a
    time, each checked by :func:`_may_follow`. Raises :class:`InputError` for what cannot be written."""
    if not path:
        raise InputError("--output: an empty file name (- is stdout)")
    if _stream_name(path):
        return ("stream", path)
    cur = os.path.abspath(path)
    hops = [0]
    while True:
        d, name = os.path.split(cur)
        d = _real_dir(path, d, hops)
        cur = os.path.join(d, name)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            if not name:
                raise InputError(f"{path}: is a directory (--output names the file to write)") from None
            if not os.path.isdir(d):
                raise InputError(f"{path}: directory {d} does not exist") from None
            return ("file", d, name, None)
        except OSError as e:
            raise InputError(f"{path}: cannot write there ({e.strerror or e})") from None
        if stat.S_ISLNK(st.st_mode):
            _may_follow(path, cur, st)
            _hop(path, hops)
            try:
                cur = os.path.join(d, os.readlink(cur))
            except OSError as e:
                raise InputError(f"{path}: cannot read the link ({e.strerror or e})") from None
            continue
        if stat.S_ISDIR(st.st_mode) or not name:
            raise InputError(f"{path}: is a directory (--output names the file to write)")
        if stat.S_ISREG(st.st_mode):
            return ("file", d, name, st)
        if hops[0]:
            raise InputError(f"{path}: a link to {cur}, which is not a regular file; gdrcheck replaces only "
                             "files, and writes into a device or FIFO only when it is named itself")
        return ("stream", cur)


def _hop(shown: str, hops: list) -> None:
    hops[0] += 1
    if hops[0] > MAX_LINK_HOPS:
        raise InputError(f"{shown}: too many levels of symbolic links")


def _real_dir(shown: str, d: str, hops: list) -> str:
    """The absolute directory ``d`` with no symbolic link left in it: each link among its components is
    judged as a final link is (:func:`_may_follow`; one root owns is followed for any caller: ``/var/run``)
    and replaced by what it names. Raises :class:`InputError` where a component is missing or not a
    directory."""
    todo = [c for c in d.split("/") if c not in ("", ".")][::-1]
    done: list = []
    while todo:
        comp = todo.pop()
        if comp == "..":
            if done:
                done.pop()
            continue
        here = "/" + "/".join(done + [comp])
        try:
            st = os.lstat(here)
        except OSError as e:
            raise InputError(f"{shown}: directory {here} does not exist" if isinstance(e, FileNotFoundError)
                             else f"{shown}: cannot write there ({e.strerror or e})") from None
        if stat.S_ISLNK(st.st_mode):
            _may_follow(shown, here, st, dir_link=True)
            _hop(shown, hops)
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            todo.extend(c for c in target.split("/")[::-1] if c not in ("", "."))
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise InputError(f"{shown}: {here} is not a directory")
        done.append(comp)
    return "/" + "/".join(done)


def _open_dir(shown: str, d: str) -> int:
    """The directory ``d`` (with no link in it, :func:`_real_dir`) opened one component at a time, none of
    them followed if it has become a link since it was looked at."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    walk = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    parts = [c for c in d.split("/") if c]
    fd = os.open("/", flags if not parts else walk)
    try:
        for i, comp in enumerate(parts):
            nxt = os.open(comp, (flags | os.O_NOFOLLOW) if i == len(parts) - 1 else walk, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InputError(f"{shown}: a directory of the path became a symbolic link while it was written; "
                             "nothing written") from None
        raise InputError(f"{shown}: cannot write there ({e.strerror or e})") from None
    return fd


def _may_follow(shown: str, link: str, st: os.stat_result, dir_link: bool = False) -> None:
    """Refuse a link the caller does not own, or one in a directory others may write in (sticky or
    world-writable): another user may have planted it there to make a root run write elsewhere."""
    me = os.geteuid()
    what = "is a symbolic link" if link == os.path.abspath(shown) else f"leads through {link}, a symbolic link"
    if st.st_uid != me and not (dir_link and st.st_uid == 0):
        raise InputError(f"{shown}: {what} owned by uid {st.st_uid}, not by this user "
                         f"(uid {me}); gdrcheck does not write through another user's link: name the file "
                         "itself")
    d = os.path.dirname(link) or "."
    try:
        dmode = os.stat(d).st_mode
    except OSError as e:
        raise InputError(f"{shown}: cannot write there ({e.strerror or e})") from None
    if dmode & _SHARED:
        raise InputError(f"{shown}: {what} in {d}, a directory others may write in; "
                         "gdrcheck does not write through a link there: name the file itself")


def check_target(path: str) -> None:
    """Fail early (before the slow part of a run) when ``path`` cannot be written."""
    plan = _plan(path)
    if plan[0] == "stream":
        target = plan[1]
        if not _stream_name(target) and not os.access(target, os.W_OK):
            raise InputError(f"{path}: is not writable")
        return
    d = plan[1]
    if not os.access(d, os.W_OK | os.X_OK):
        raise InputError(f"{path}: directory {d} is not writable")


@contextlib.contextmanager
def atomic_file(path: str, binary: bool = False, prefix: Optional[str] = None,
                mode: Optional[int] = 0o644) -> Iterator[IO]:
    """A file object whose content replaces ``path`` only once the block has finished without error:
    a temporary file in the same directory, fsynced, then renamed. ``mode`` None keeps the temporary
    file's 0600. A target written in place (a stream, see the module) is opened and written, nothing else."""
    plan = _plan(path)
    if plan[0] == "stream":
        with _written_in_place(plan[1], binary, path) as f:
            yield f
        return
    _, d, name, st = plan
    dfd = _open_dir(path, d)
    try:
        from gdrcheck.io.leftovers import sweep_outputs, tag

        sweep_outputs(dfd)  # what a run killed outright left here (a hidden temporary file)
        fd, tmp = _temporary(path, dfd, (prefix or "." + name[:120] + ".") + tag())
        try:
            with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
                _take_over(f.fileno(), st, mode, os.fstat(dfd).st_mode & _SHARED)
            _rename(path, dfd, tmp, name)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            if isinstance(e, OSError):
                raise InputError(f"{path}: cannot write ({e.strerror or e})") from None
            raise
    finally:
        os.close(dfd)


def _temporary(shown: str, dfd: int, prefix: str) -> tuple[int, str]:
    """A new file in the directory ``dfd``, opened without following a link and only if the name is free."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f"{prefix}{os.urandom(4).hex()}.tmp"
        try:
            return os.open(tmp, flags, 0o600, dir_fd=dfd), tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise InputError(f"{shown}: cannot write there ({e.strerror or e})") from None
    raise InputError(f"{shown}: cannot write there (no free temporary name)")


def _rename(shown: str, dfd: int, tmp: str, name: str) -> None:
    """``tmp`` renamed over ``name`` in ``dfd``, unless ``name`` has meanwhile become something a rename must
    not replace (a directory, a device, a FIFO). A link there now is replaced itself, never followed."""
    try:
        now = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        now = None
    if now is not None and not (stat.S_ISREG(now) or stat.S_ISLNK(now)):
        raise InputError(f"{shown}: became something other than a file while it was written; left as it is")
    os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)


def _take_over(fd: int, st: Optional[os.stat_result], mode: Optional[int], shared_dir: int) -> None:
    """The new file's owner and mode. Never a set-id or sticky bit. A file replacing the caller's own keeps
    its permission bits (a textfile collector's 0600 stays 0600); as root, a file replacing another user's in
    a directory of root's or that user's (not one others may write in) is given back to that user with that
    user's permission bits; any other file root makes is root's own, 0644 (0600 where the replaced file was
    not readable by others), never group- or world-writable. A new file gets ``mode`` less the umask, as
    ``open`` would give it. ``mode`` None keeps 0600 (a snapshot describes the machine)."""
    if mode is None:
        return
    if st is None:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, _roots_mode(mode & ~mask) if os.geteuid() == 0 else mode & ~mask)
        return
    kept = stat.S_IMODE(st.st_mode) & 0o777
    if os.geteuid() != 0:
        os.fchmod(fd, kept)
    elif st.st_uid == 0:
        if st.st_gid != 0 and not shared_dir:
            _given_back(fd, st)  # root's file of a group (root:prometheus 0640) stays that group's
        os.fchmod(fd, _roots_mode(kept))
    elif not shared_dir and _given_back(fd, st):
        os.fchmod(fd, kept)
    else:
        os.fchmod(fd, 0o644 if kept & 0o004 else 0o600)


def _roots_mode(mode: int) -> int:
    """A mode root gives a file of its own: no set-id bit, no write by group or others."""
    return mode & 0o755


def _given_back(fd: int, st: os.stat_result) -> bool:
    """The new file handed to the replaced file's owner and group (root's run), False where that failed."""
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        return False
    return (os.fstat(fd).st_uid, os.fstat(fd).st_gid) == (st.st_uid, st.st_gid)


@contextlib.contextmanager
def _written_in_place(path: str, binary: bool, shown: str) -> Iterator[IO]:
    """A standard stream by name is opened as named (``/dev/stdout`` is a link to the process's own
    descriptor) and appended to; a device or FIFO only as the path itself (``O_NOFOLLOW``), never created."""
    if path == "-":
        path = "/dev/stdout"
    append = _stream_name(path)
    try:
        if append:
            f = open(path, "a" + ("b" if binary else ""), **({} if binary else {"encoding": "utf-8"}))
        else:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC)
            if stat.S_ISREG(os.fstat(fd).st_mode):  # replaced by a file since it was looked at
                os.close(fd)
                raise OSError(errno.EEXIST, "became a regular file while it was written")
            f = os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"}))
        with f:
            yield f
            f.flush()
    except BrokenPipeError:
        pass  # its reader has gone, as on stdout
    except OSError as e:
        raise InputError(f"{shown}: cannot write ({e.strerror or e})") from None


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
