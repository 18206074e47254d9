"""The read-only guard (``guarded``): gdrcheck run in a process whose every write, exec and socket is
checked by a ``sitecustomize.py``; see tests/cli/test_readonly.py for what is allowed. Shared by the tests
that hold a command to writing nothing."""

from __future__ import annotations

import os

import pytest

from support.cli_util import ROOT, run

GUARD = r'''
import builtins, io, os, shutil, socket, subprocess

_LOG = os.environ["GDRCHECK_GUARD_LOG"]
_ALLOW = [os.path.realpath(p) for p in os.environ.get("GDRCHECK_GUARD_ALLOW", "").split(os.pathsep) if p]
_EXACT = {os.path.realpath(_LOG), "/dev/null"}
_open = builtins.open
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _log(kind, what):
    with _open(_LOG, "a") as f:
        f.write(f"{kind} {what}\n")


def _allowed(path):
    if isinstance(path, int):
        return True
    p = os.path.abspath(os.fsdecode(path))
    real = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
    if p in _EXACT or real in _EXACT:
        return True
    return any(real == a or real.startswith(a + os.sep) for a in _ALLOW)


def _check(op, *paths):
    for path in paths:
        if not _allowed(path):
            _log("VIOLATION", f"{op} {os.fsdecode(path)}")
            raise PermissionError(13, f"read-only guard: {op}", os.fsdecode(path))


def _wrap_open(orig):
    def guarded(file, mode="r", *a, **k):
        if any(c in mode for c in "wax+"):
            _check(f"open({mode})", file)
        return orig(file, mode, *a, **k)
    return guarded


builtins.open = _wrap_open(builtins.open)
io.open = _wrap_open(io.open)
_os_open = os.open


def _at(path, dir_fd):
    """The path an *at() call names: relative to the directory ``dir_fd`` is open on."""
    if dir_fd is None or isinstance(path, int) or os.path.isabs(os.fsdecode(path)):
        return path
    return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fsdecode(path))


def _guarded_os_open(path, flags, *a, dir_fd=None, **k):
    if flags & _WRITE_FLAGS:
        _check("os.open", _at(path, dir_fd))
    return _os_open(path, flags, *a, dir_fd=dir_fd, **k)


os.open = _guarded_os_open


def _wrap_paths(name, npaths):
    orig = getattr(os, name)

    def guarded(*a, **k):
        if npaths == 2:
            paths = [_at(p, k.get(fd)) for p, fd in zip(a[:2], ("src_dir_fd", "dst_dir_fd"))]
        else:
            paths = [_at(p, k.get("dir_fd")) for p in a[:npaths]]
        _check(f"os.{name}", *paths)
        return orig(*a, **k)
    setattr(os, name, guarded)


for _name, _n in (("replace", 2), ("rename", 2), ("unlink", 1), ("remove", 1), ("rmdir", 1), ("mkdir", 1),
                  ("chmod", 1), ("chown", 1), ("truncate", 1), ("utime", 1),
                  ("mkfifo", 1), ("mknod", 1), ("removedirs", 1), ("renames", 2)):
    if hasattr(os, _name):
        _wrap_paths(_name, _n)


def _wrap_dst(name):  # only the new link is written, not what it points to
    orig = getattr(os, name)

    def guarded(src, dst, *a, **k):
        if k.get("dir_fd") is None:
            _check(f"os.{name}", dst)
        return orig(src, dst, *a, **k)
    setattr(os, name, guarded)


for _name in ("symlink", "link"):
    if hasattr(os, _name):
        _wrap_dst(_name)
_rmtree = shutil.rmtree


def _guarded_rmtree(path, *a, **k):
    _check("shutil.rmtree", path)
    return _rmtree(path, *a, **k)


shutil.rmtree = _guarded_rmtree


def _refuse(what):
    def refused(*a, **k):
        _log("VIOLATION", f"{what} {a[:2]!r}")
        raise PermissionError(13, f"read-only guard: {what}")
    return refused


for _name in ("system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
              "execlpe", "posix_spawn", "posix_spawnp", "spawnv", "spawnve", "spawnvp", "spawnvpe", "fork",
              "forkpty"):
    if hasattr(os, _name):
        setattr(os, _name, _refuse(f"os.{_name}"))


class _Popen(subprocess.Popen):
    def __init__(self, args, *a, **k):
        argv = [args] if isinstance(args, (str, bytes)) else list(args)
        _log("EXEC", repr([os.fsdecode(x) for x in argv]))
        if k.get("shell") or (len(a) > 7 and a[7]):
            _log("VIOLATION", f"shell {argv!r}")
            raise PermissionError(13, "read-only guard: shell")
        if os.path.basename(os.fsdecode(argv[0])) == "setpci":
            _log("VIOLATION", f"setpci {argv!r}")
            raise PermissionError(13, "read-only guard: setpci")
        super().__init__(args, *a, **k)


subprocess.Popen = _Popen


class _NoSocket(socket.socket):
    def __init__(self, *a, **k):
        _log("VIOLATION", f"socket {a!r}")
        raise PermissionError(13, "read-only guard: socket")


socket.socket = _NoSocket
socket.create_connection = _refuse("socket.create_connection")
socket.socketpair = _refuse("socket.socketpair")
_log("GUARD", "armed")
'''


@pytest.fixture
def guarded(tmp_path):
    """Run gdrcheck under the guard; returns (proc, log lines) and checks TMPDIR is left empty."""
    gdir = tmp_path / "guard"
    gdir.mkdir()
    (gdir / "sitecustomize.py").write_text(GUARD)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    log = tmp_path / "guard.log"

    def go(*args, allow=(), check_tmp=True):
        log.write_text("")
        env = {"PYTHONPATH": f"{gdir}{os.pathsep}{ROOT}", "GDRCHECK_GUARD_LOG": str(log),
               "GDRCHECK_GUARD_ALLOW": os.pathsep.join(map(str, (tmpdir, *allow))), "TMPDIR": str(tmpdir),
               "PYTHONDONTWRITEBYTECODE": "1"}
        proc = run(*args, env=env)
        lines = log.read_text().splitlines()
        assert lines and lines[0] == "GUARD armed", lines  # the guard was really in place
        violations = [ln for ln in lines if ln.startswith("VIOLATION")]
        assert not violations, (args, violations, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        if check_tmp:
            assert list(tmpdir.iterdir()) == [], "temporary files left behind"
        return proc, lines

    go.tmpdir = tmpdir
    go.log = log
    return go
