"""The one way gdrcheck touches a machine.

A :class:`Source` is rooted at ``/`` (the live machine) or at a directory laid
out like one (a ``--from`` directory or an unpacked snapshot). Every file read,
link resolution and command run goes through it; nothing else in gdrcheck opens
files of the machine or starts processes.

Paths are always given as absolute machine paths (``/sys/bus/pci/devices``).
Symbolic links are resolved by the source itself, inside the root, the way a
chroot would: an absolute target restarts at the root, ``..`` stops at the root,
so a ``--from`` tree can never lead a read outside itself.

With ``record=True`` the source remembers everything it read, so that
``gdrcheck snapshot`` can write exactly that into an archive that replays it.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import stat
import time

from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional

MAX_READ = 1 << 20  # no sysfs or procfs file gdrcheck reads is near 1 MiB
MAX_LINK_HOPS = 40  # as the kernel's own limit on nested links
COMMANDS_FILE = "/gdrcheck/commands.json"
TOOL_PATH = "/usr/bin:/usr/sbin:/bin:/sbin:/usr/local/bin:/usr/local/sbin:/usr/local/nvidia/bin"


@record(frozen=True)
class CommandResult:
    """What a command did. ``error`` is set when it did not run to an exit status."""

    argv: tuple[str, ...]
    rc: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    error: Optional[str] = None  # "not found", "timed out after 10 s", "not captured", ...
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.rc == 0


class Source:
    """Read-only access to one machine, live or captured."""

    def __init__(self, root: str = "/", *, live: Optional[bool] = None, record: bool = False,
                 label: Optional[str] = None) -> None:
        self.root = os.path.abspath(root)
        self.live = (self.root == "/") if live is None else live
        self.label = label or ("live" if self.live else self.root)
        self.recording = record
        # path -> ("f", bytes) | ("l", target) | ("d", None)
        self.recorded: dict[str, tuple[str, Optional[object]]] = {}
        self.recorded_commands: dict[str, dict] = {}
        self._commands: Optional[dict[str, dict]] = None
        self._errors: dict[str, str] = {}
        self._placeholders: set = set()
        self._rcache: dict[tuple[str, bool], str] = {}
        self._dcache: dict[str, str] = {}  # directory as asked -> resolved inside the root
        self.deadline = None  # a gdrcheck.io.deadline.Deadline when --timeout applies

    # -- paths ---------------------------------------------------------------

    def _host(self, path: str) -> str:
        """Host path of an already-resolved machine path."""
        if self.root == "/":
            return path
        return self.root + path

    def _note(self, path: str, kind: str, value: Optional[object] = None) -> None:
        if self.recording and (path not in self.recorded or path in self._placeholders):
            self.recorded[path] = (kind, value)
            self._placeholders.discard(path)

    def _note_listing(self, real: str, names: list[str]) -> None:
        """Remember what a directory held, so a replay lists the same names."""
        for n in names:
            p = posixpath.join(real, n)
            if p in self.recorded:
                continue
            try:
                st = os.lstat(self._host(p))
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    self.recorded[p] = ("l", os.readlink(self._host(p)))
                except OSError:
                    continue
            elif stat.S_ISDIR(st.st_mode):
                self.recorded[p] = ("d", None)
            else:
                self.recorded[p] = ("f", b"")
            self._placeholders.add(p)

    def resolve(self, path: str, *, follow_last: bool = True) -> Optional[str]:
        """Resolve links inside the root; ``None`` on a loop or an unreadable link."""
        hit = self._rcache.get((path, follow_last))  # a path as resolved before: its text is already normal
        if hit is not None and path.count("/") <= 64:
            return hit
        path = posixpath.normpath("/" + path.lstrip("/"))
        if path.count("/") > 64:
            self._errors[path] = "path too deep"
            return None
        hops = [0]
        got = self._resolve(path, follow_last, hops)
        if got is None and hops[0] > MAX_LINK_HOPS:
            self._errors[path] = "too many levels of symbolic links"
        return got

    def _resolve(self, path: str, follow_last: bool, hops: list[int]) -> Optional[str]:
        if path == "/":
            return "/"
        key = (path, follow_last)
        hit = self._rcache.get(key)
        if hit is not None:
            return hit
        parent, name = posixpath.split(path)
        rparent = self._resolve(parent, True, hops)
        if rparent is None:
            return None
        if name in ("", "."):
            return rparent
        if name == "..":
            return posixpath.dirname(rparent) if rparent != "/" else "/"
        cand = posixpath.join(rparent, name)
        result: Optional[str] = cand
        if follow_last:
            # one readlink says both whether the name is a link and where it leads: EINVAL for a file or a
            # directory, ENOENT when missing (the read that follows says so)
            try:
                target = os.readlink(self._host(cand))
            except OSError:
                target = None
            if target is not None:
                hops[0] += 1
                if hops[0] > MAX_LINK_HOPS:
                    return None
                self._note(cand, "l", target)
                nxt = posixpath.normpath(target if target.startswith("/") else posixpath.join(rparent, target))
                result = self._resolve(nxt, True, hops)
                if result is None:
                    return None
        self._rcache[key] = result
        return result

    def _fast_parent(self, path: str) -> Optional[str]:
        """The resolved directory of ``path`` joined with its last name, or None to take the slow path.
        Resolved directories are kept by the text the caller gave, so a run of reads in one sysfs directory
        resolves it once and then costs a dictionary lookup each."""
        d, _, name = path.rpartition("/")
        if name in ("", ".", ".."):
            return None
        rparent = self._dcache.get(d)
        if rparent is None:
            norm = posixpath.normpath("/" + path.lstrip("/"))
            parent, name = posixpath.split(norm)
            if name in ("", ".", "..") or norm.count("/") > 64:
                return None
            rparent = self.resolve(parent)
            if rparent is None:
                return None
            if "/" not in name:
                self._dcache[d] = rparent
        return rparent + "/" + name if rparent != "/" else "/" + name

    def realpath(self, path: str) -> Optional[str]:
        return self.resolve(path)

    # -- reads ---------------------------------------------------------------

    def _open_nofollow(self, real: str) -> int:
        return os.open(self._host(real), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))

    def read_bytes(self, path: str, limit: int = MAX_READ) -> Optional[bytes]:
        """File content (at most ``limit`` bytes) or ``None``; why is in :meth:`why`."""
        return self._read(path, limit, None)

    def _read(self, path: str, limit: int, ident: Optional[tuple]) -> Optional[bytes]:
        """:meth:`read_bytes`; with ``ident`` (device, inode), only from that file: None where ``path`` now leads
        to another."""
        # Fast path: resolve the directory (cached) and open the name without following a link;
        # only when the name is itself a link (ELOOP) is it resolved inside the root. Saves an
        # lstat per sysfs attribute.
        real = self._fast_parent(path)
        fd = -1
        if real is not None:
            try:
                fd = self._open_nofollow(real)
            except OSError as e:
                if e.errno != errno.ELOOP:
                    self._errors[path] = _why(e)
                    return None
        if fd < 0:
            real = self.resolve(path)
            if real is None:
                return None
            try:
                fd = self._open_nofollow(real)
            except OSError as e:
                self._errors[path] = _why(e)
                return None
        try:
            st = os.fstat(fd)
            if ident is not None and (st.st_dev, st.st_ino) != ident:
                self._errors[path] = "not read: replaced while it was looked at"
                return None
            if not stat.S_ISREG(st.st_mode):
                self._errors[path] = "not a regular file"
                return None
            chunks = []
            left = limit
            # a short read is the end of a file on disk (a --from tree) and of a sysfs attribute; /proc files
            # may come in pieces, so those are read until the read that returns nothing
            whole_on_short = not self.live or real.startswith("/sys/")
            while left > 0:
                want = min(left, 65536)
                b = os.read(fd, want)
                if not b:
                    break
                chunks.append(b)
                left -= len(b)
                if len(b) < want and whole_on_short:
                    break
            data = b"".join(chunks)
        except OSError as e:
            self._errors[path] = _why(e)
            return None
        finally:
            os.close(fd)
        self._note(real, "f", data)
        return data

    def read_text(self, path: str, limit: int = MAX_READ) -> Optional[str]:
        data = self.read_bytes(path, limit)
        if data is None:
            return None
        return data.decode("utf-8", "replace")

    def refuse(self, path: str, why: str) -> None:
        """``path`` is not read, for ``why`` (:mod:`gdrcheck.io.read_as`)."""
        self._errors[path] = why

    def read_text_if_same(self, path: str, limit: int, ident: tuple) -> Optional[str]:
        """``read_text(path)`` from the file ``ident`` (device, inode) names, None where ``path`` now leads to
        another: it was replaced after it was judged (:mod:`gdrcheck.io.read_as`)."""
        data = self._read(path, limit, ident)
        return None if data is None else data.decode("utf-8", "replace")

    def read_line(self, path: str) -> Optional[str]:
        """First line, stripped: the shape of most sysfs attributes."""
        text = self.read_text(path, 4096)
        if text is None:
            return None
        return text.split("\n", 1)[0].strip()

    def why(self, path: str) -> str:
        """Why the last read of ``path`` failed ("missing", "permission denied", ...)."""
        return self._errors.get(path, "missing")

    def readlink(self, path: str) -> Optional[str]:
        """The target of a link (as stored), or ``None`` when it is not a link."""
        d, _, name = path.rpartition("/")
        parent = self._dcache.get(d) if name not in ("", ".", "..") else None
        if parent is not None:  # a directory already resolved for a read (a device's driver, iommu_group)
            cand = parent + "/" + name if parent != "/" else "/" + name
        else:
            parent = self.resolve(posixpath.dirname(path))
            if parent is None:
                return None
            cand = posixpath.join(parent, posixpath.basename(path))
        try:
            target = os.readlink(self._host(cand))
        except OSError:
            return None
        self._note(cand, "l", target)
        return target

    def link_name(self, path: str) -> Optional[str]:
        """Last component of a link's target (``driver`` -> ``nvidia``)."""
        t = self.readlink(path)
        return posixpath.basename(t.rstrip("/")) if t else None

    def listdir(self, path: str) -> list[str]:
        real = self.resolve(path)
        if real is None:
            return []
        try:
            names = sorted(os.listdir(self._host(real)))
        except OSError as e:
            self._errors[path] = _why(e)
            return []
        self._note(real, "d")
        if self.recording:
            self._note_listing(real, names)
        return names

    def exists(self, path: str) -> bool:
        real = self._fast_parent(path)
        st = None
        if real is not None:  # one lstat in a resolved directory; only a link takes the walk below
            try:
                st = os.lstat(self._host(real))
            except OSError:
                return False
            if stat.S_ISLNK(st.st_mode):
                st = None
        if st is None:
            real = self.resolve(path)
            if real is None:
                return False
            try:
                st = os.stat(self._host(real), follow_symlinks=False)
            except OSError:
                return False
        if stat.S_ISDIR(st.st_mode):
            self._note(real, "d")
        elif stat.S_ISREG(st.st_mode) and self.recording and real not in self.recorded:
            self._note(real, "f", b"")
        return True

    # -- commands ------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult:
        """Run a tool with a fixed argv, no shell, a timeout; replayed from a capture."""
        argv = tuple(argv)
        key = " ".join(argv)
        if not self.live:
            return self._replay(argv, key)
        exe = _find_tool(argv[0])
        dl = self.deadline
        if exe is None:
            res = CommandResult(argv, error="not found")
        elif dl is not None and dl.expired():
            dl.miss(argv[0])
            res = CommandResult(argv, error="not run: the --timeout ran out")
        else:
            if dl is not None:
                timeout = dl.cap(timeout)
            import subprocess
            t0 = time.monotonic()
            try:
                p = subprocess.run([exe, *argv[1:]], stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=timeout, env=_tool_env(), check=False)
                res = CommandResult(argv, rc=p.returncode,
                                    stdout=p.stdout[:8 * MAX_READ].decode("utf-8", "replace"),
                                    stderr=p.stderr[:MAX_READ].decode("utf-8", "replace"),
                                    seconds=time.monotonic() - t0)
            except subprocess.TimeoutExpired:
                res = CommandResult(argv, error=f"timed out after {timeout:g} s", seconds=timeout)
                if dl is not None and dl.expired():
                    dl.miss(argv[0])
            except OSError as e:
                res = CommandResult(argv, error=_why(e))
        if self.recording:
            self.recorded_commands[key] = {"rc": res.rc, "stdout": res.stdout, "stderr": res.stderr,
                                           "error": res.error}
        return res

    def ip_addresses(self) -> CommandResult:
        """Each interface's IP addresses as ``getifaddrs`` gives them to NCCL, one ``name family address`` line
        each: IPv4 by ``SIOCGIFADDR`` (the interface's address), IPv6 from ``/proc/net/if_inet6``. Replayed from a
        capture, where it is kept like a command's output."""
        argv = ("getifaddrs",)
        if not self.live:
            return self._replay(argv, argv[0])
        import fcntl
        import socket

        lines: list[str] = []
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                for _index, name in socket.if_nameindex():
                    try:
                        got = fcntl.ioctl(sock.fileno(), 0x8915, name.encode()[:15].ljust(40, b"\0"))  # SIOCGIFADDR
                    except OSError:
                        continue  # no IPv4 address
                    lines.append(f"{name} inet {socket.inet_ntoa(got[20:24])}")
        except OSError as e:
            res = CommandResult(argv, error=_why(e))
        else:
            for row in (self.read_text("/proc/net/if_inet6") or "").splitlines():
                f = row.split()
                if len(f) == 6 and len(f[0]) == 32:
                    addr = ":".join(f[0][i:i + 4] for i in range(0, 32, 4))
                    lines.append(f"{f[5]} inet6 {addr}")
            res = CommandResult(argv, rc=0, stdout="".join(x + "\n" for x in lines))
        if self.recording:
            self.recorded_commands[argv[0]] = {"rc": res.rc, "stdout": res.stdout, "stderr": res.stderr,
                                               "error": res.error}
        return res

    def _replay(self, argv: tuple[str, ...], key: str) -> CommandResult:
        if self._commands is None:
            self._commands = {}
            text = self.read_text(COMMANDS_FILE, 64 * MAX_READ)
            if text:
                try:
                    data = json.loads(text)
                    if isinstance(data, dict):
                        self._commands = {k: v for k, v in data.items() if isinstance(v, dict)}
                except (ValueError, RecursionError):
                    self._commands = {}
        rec = self._commands.get(key)
        if rec is None:
            return CommandResult(argv, error="not captured")
        rc = rec.get("rc")
        return CommandResult(argv, rc=rc if isinstance(rc, int) else None,
                             stdout=str(rec.get("stdout") or ""), stderr=str(rec.get("stderr") or ""),
                             error=rec.get("error") if isinstance(rec.get("error"), str) else None)

    def has_capture(self) -> bool:
        """True for a gdrcheck snapshot (it carries command outputs and a manifest)."""
        return not self.live and self.exists("/gdrcheck/manifest.json")


def _why(e: OSError) -> str:
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.ENOENT:
        return "missing"
    if e.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    return os.strerror(e.errno or 0) or str(e)


def _search_path() -> list[str]:
    return [p for p in os.environ.get("GDRCHECK_TOOL_PATH", TOOL_PATH).split(":") if p.startswith("/")]


def _find_tool(name: str) -> Optional[str]:
    if name.startswith("/"):
        return name if os.access(name, os.X_OK) else None
    for d in _search_path():
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _tool_env() -> dict[str, str]:
    env = {"PATH": ":".join(_search_path()), "LC_ALL": "C", "LANG": "C"}
    for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "HOME"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env
