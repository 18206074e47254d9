"""A snapshot archive given to ``--from``, unpacked safely into a directory.

Every member is checked before it is made (:func:`unpack_archive`): no absolute path, no path or link that
leads outside, no device, FIFO or hard link, no member or total past the bounds below; the headers are read
first, so an archive over a bound is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath

from gdrcheck.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import tarfile

MAX_MEMBERS = 65_536  # a snapshot keeps some 12 entries per PCI function: 4,096 functions fit
MAX_MEMBER_BYTES = 64 << 20
MAX_TOTAL_BYTES = 1 << 30
# the most a tar stream may decompress to: its members' data, with room for their headers
MAX_TAR_STREAM = MAX_TOTAL_BYTES + (256 << 20)
# gdrcheck reads no path of more than 64 names (Source.resolve), 65 in an archive that holds the tree inside
# one directory: what lies deeper is never read, so it is not unpacked (a deep junk directory costs nothing)
MAX_MEMBER_DEPTH = 65


COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")  # gzip, bzip2, xz: what tar -z, -j and -J write


def is_archive(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    if head.startswith(COMPRESSED):
        return True
    return len(head) >= 262 and head[257:262] == b"ustar"


def _check_member(m: tarfile.TarInfo, name: str, seen: int, total: int) -> None:
    if seen > MAX_MEMBERS:
        raise InputError(f"{name}: archive has more than {MAX_MEMBERS} members")
    mname = m.name
    if mname.startswith("/") or "\\" in mname:
        raise InputError(f"{name}: archive member {mname!r} has an absolute path")
    norm = posixpath.normpath(mname)
    if norm == ".." or norm.startswith("../") or "/../" in f"/{mname}/":
        raise InputError(f"{name}: archive member {mname!r} points outside the archive")
    if m.isdev() or m.isfifo() or m.ischr() or m.isblk():
        raise InputError(f"{name}: archive member {mname!r} is a device or fifo")
    if m.islnk():
        raise InputError(f"{name}: archive member {mname!r} is a hard link")
    if m.issym():
        target = m.linkname
        if target.startswith("/"):
            raise InputError(f"{name}: link {mname!r} points outside the archive")
        dest = posixpath.normpath(posixpath.join(posixpath.dirname(norm), target))
        if dest == ".." or dest.startswith("../"):
            raise InputError(f"{name}: link {mname!r} points outside the archive")
    if m.isfile():
        if m.size > MAX_MEMBER_BYTES:
            raise InputError(f"{name}: archive member {mname!r} is larger than {MAX_MEMBER_BYTES >> 20} MiB")
        if total > MAX_TOTAL_BYTES:
            raise InputError(f"{name}: archive unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB")


def unpack_archive(path: str, dest: str) -> None:
    """Unpack ``path`` into ``dest``, refusing anything that could land outside it.

    Each member is made at the place its parent resolves to now, links the archive already made included,
    and only there: a link member whose target resolves outside, or a member whose parent does, is refused
    (a link to ``.`` reached through another could otherwise climb out one level per link)."""
    import lzma
    import tarfile
    import zlib

    from gdrcheck.io.bounded import Decompressed, scan_tar

    name = os.path.basename(path)
    dest = os.path.realpath(dest)  # a $TMPDIR reached through a link: compare resolved with resolved
    try:
        with open(path, "rb") as raw:
            # the headers first, each size checked before it is read: the whole archive is refused from them
            scan_tar(Decompressed(raw, MAX_TAR_STREAM, name), name, max_members=MAX_MEMBERS,
                     max_member_bytes=MAX_MEMBER_BYTES, max_total_bytes=MAX_TOTAL_BYTES)
            raw.seek(0)
            stream = Decompressed(raw, MAX_TAR_STREAM, name)
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                _unpack_members(tar, name, dest)
    except InputError:
        raise
    except MemoryError:
        raise InputError(f"{name}: archive too large for the memory available") from None
    except OSError as e:
        if e.errno in NO_ROOM:
            raise no_room(name, dest, e) from None
        raise _archive_error(path, name, e) from None
    except (tarfile.TarError, EOFError, ValueError, zlib.error, lzma.LZMAError) as e:
        raise _archive_error(path, name, e) from None


def _unpack_members(tar, name: str, dest: str) -> None:
    import shutil

    def inside(p: str) -> bool:
        return p == dest or p.startswith(dest + os.sep)

    def outside(m) -> InputError:
        return InputError(f"{name}: archive member {m.name!r} points outside the archive")

    seen = total = 0
    made: set = set()
    walk = _Resolver(dest)
    for m in tar:
        seen += 1
        total += max(m.size, 0) if m.isfile() else 0
        _check_member(m, name, seen, total)
        norm = posixpath.normpath(m.name)
        if norm in (".", "") or norm.count("/") >= MAX_MEMBER_DEPTH:
            continue
        if not m.isdir():
            if norm in made:
                raise InputError(f"{name}: archive member {m.name!r} appears twice (which one is meant?)")
            made.add(norm)
        parent = walk.inside(posixpath.dirname(norm))
        if parent is None:
            continue  # deeper than gdrcheck ever reads, or through too many links: not unpacked
        if parent is False:
            raise outside(m)
        target = os.path.join(parent, posixpath.basename(norm))
        if m.isdir():
            real = walk.inside(norm)
            if real is False:
                raise outside(m)
            if real is not None:
                os.makedirs(real, exist_ok=True)
        elif m.issym():
            dest_of_link = walk.inside(posixpath.join(posixpath.dirname(norm), m.linkname))
            if dest_of_link is False:
                raise outside(m)
            if dest_of_link is None:
                continue
            os.makedirs(parent, exist_ok=True)
            if os.path.lexists(target):
                raise InputError(f"{name}: archive member {m.name!r} appears twice")
            os.symlink(m.linkname, target)
            walk.forget()
        elif m.isfile():
            os.makedirs(parent, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                continue
            if os.path.lexists(target):
                os.unlink(target)
            with open(target, "xb") as out:
                shutil.copyfileobj(src, out)


MAX_LINK_HOPS = 40  # as the kernel's own limit on links in one lookup


class _Resolver:
    """Where a path inside the unpacked tree leads now, links the archive made followed, without
    ``os.path.realpath``'s unbounded walk: None where it passes deeper than ``MAX_MEMBER_DEPTH`` names
    or through more than ``MAX_LINK_HOPS`` links (gdrcheck reads nothing there: link chains could make
    the real tree thousands of names deep), False where it leads outside. Directories already resolved
    are kept until a link is made."""

    def __init__(self, dest: str) -> None:
        self.dest = dest
        self._known: dict = {}

    def forget(self) -> None:
        self._known.clear()

    def inside(self, rel: str):
        if rel not in self._known:
            self._known[rel] = self._walk(rel)
        return self._known[rel]

    def _walk(self, rel: str):
        todo = [c for c in rel.split("/") if c not in ("", ".")][::-1]
        done: list = []
        hops = 0
        while todo:
            comp = todo.pop()
            if comp == "..":
                if not done:
                    return False
                done.pop()
                continue
            done.append(comp)
            if len(done) > MAX_MEMBER_DEPTH or len(todo) > 4 * MAX_MEMBER_DEPTH:
                return None
            here = self.dest + "/" + "/".join(done)
            try:
                target = os.readlink(here)
            except OSError:
                continue  # a directory, a file, or not there yet
            hops += 1
            if hops > MAX_LINK_HOPS or target.startswith("/"):
                return None if hops > MAX_LINK_HOPS else False
            done.pop()
            todo.extend(c for c in target.split("/")[::-1] if c not in ("", "."))
        return self.dest + "/" + "/".join(done) if done else self.dest


NO_ROOM = (errno.ENOSPC, errno.EDQUOT)  # only writing fails so: the disk, not the archive


def no_room(name: str, dest: str, e: OSError) -> InputError:
    where = os.path.dirname(dest.rstrip(os.sep)) or dest
    return InputError(f"{name}: cannot unpack it into {where}: {e.strerror or e} (set TMPDIR to a place with room)")


def _archive_error(path: str, name: str, e: Exception) -> InputError:
    """One line on what is wrong with an archive, not tarfile's list of every method it tried."""
    import gzip
    import tarfile

    with contextlib.suppress(OSError):
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        if gz:
            try:
                with gzip.open(path, "rb") as f:
                    block = f.read(512)
            except (OSError, EOFError, ValueError):
                return InputError(f"{name}: damaged gzip file (it does not decompress)")
            try:
                tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
            except tarfile.TarError:
                return InputError(f"{name}: a gzip file that does not hold a tar archive (--from takes a "
                                  "snapshot .tar.gz, or an lspci tree or XML file uncompressed)")
    detail = " ".join(str(e).split()) or e.__class__.__name__
    return InputError(f"{name}: damaged archive ({detail[:200]})")
