"""Where the facts come from: the live machine or ``--from PATH``.

PATH is a directory laid out like ``/``, an archive of one (unpacked safely
into a temporary directory that is always removed), or a single file whose
content is one of :data:`ACCEPTED_KINDS` (recognised by content, not name).
``--from`` may be given several times: the inputs are one node's facts,
merged by :mod:`gdrcheck.collectors.pastes.merge`.

A PATH that can be read only once (``-`` for stdin, a pipe such as the
``<(ssh node lspci -tv)`` of a shell, a FIFO) is first copied into a temporary
directory, removed with the rest, and read from there like a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re

from gdrcheck.errors import InputError
from gdrcheck.io.source import Source
from gdrcheck.model import Snapshot
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    import tarfile
    from typing import Callable, Iterator, Optional

MAX_MEMBERS = 65_536  # a snapshot keeps some 12 entries per PCI function: 4,096 functions fit
MAX_MEMBER_BYTES = 64 << 20
MAX_TOTAL_BYTES = 1 << 30
# the most a tar stream may decompress to: its members' data, with room for their headers
MAX_TAR_STREAM = MAX_TOTAL_BYTES + (256 << 20)
MAX_SINGLE_FILE = 32 << 20
# gdrcheck reads no path of more than 64 names (Source.resolve), 65 in an archive that holds the tree inside
# one directory: what lies deeper is never read, so it is not unpacked (a deep junk directory costs nothing)
MAX_MEMBER_DEPTH = 65


COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")  # gzip, bzip2, xz: what tar -z, -j and -J write


def _is_archive(path: str) -> bool:
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
        if e.errno in _NO_ROOM:
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
    for m in tar:
        seen += 1
        total += max(m.size, 0) if m.isfile() else 0
        _check_member(m, name, seen, total)
        norm = posixpath.normpath(m.name)
        if norm in (".", "") or norm.count("/") >= MAX_MEMBER_DEPTH:
            continue
        parent = os.path.realpath(os.path.join(dest, posixpath.dirname(norm)))
        if not inside(parent):
            raise outside(m)
        target = os.path.join(parent, posixpath.basename(norm))
        if m.isdir():
            real = os.path.realpath(target)
            if not inside(real):
                raise outside(m)
            os.makedirs(real, exist_ok=True)
        elif m.issym():
            if not inside(os.path.realpath(os.path.join(parent, m.linkname))):
                raise outside(m)
            os.makedirs(parent, exist_ok=True)
            if os.path.lexists(target):
                raise InputError(f"{name}: archive member {m.name!r} appears twice")
            os.symlink(m.linkname, target)
        elif m.isfile():
            os.makedirs(parent, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                continue
            if os.path.lexists(target):
                os.unlink(target)
            with open(target, "xb") as out:
                shutil.copyfileobj(src, out)


_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)  # only writing fails so: the disk, not the archive


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


# Every input kind --from accepts, with the command that produces it (README and --help list the same).
ACCEPTED_KINDS = (
    ("a directory laid out like /", "a copy of /sys and /proc, or an unpacked snapshot archive"),
    ("a snapshot archive", "gdrcheck snapshot -o node.tar.gz"),
    ("an lspci tree", "lspci -tv (also -t, -tvv, -tvnn)"),
    ("lspci details", "sudo lspci -vvv (also -vv, -nnvvv, -D, -s BDF, -xxx, or plain lspci)"),
    ("ACS Control lines, beside a tree", "the ACSCtl lines of sudo lspci -vvv"),
    ("the driver's GPU list", "nvidia-smi -q, or nvidia-smi -q -x"),
    ("a topology matrix", "nvidia-smi topo -m, or nvidia-smi topo -mp"),
    ("the driver's P2P status, with its command line", "nvidia-smi topo -p2p r (also w, rw, n)"),
    ("an NCCL topology XML", "NCCL_TOPO_DUMP_FILE=FILE"),
    ("an hwloc XML", "lstopo FILE.xml"),
    ("a job's NCCL log", "NCCL_DEBUG=INFO (every rank's output, or several ranks' files)"),
)
FILE_KINDS_TEXT = ("lspci -tv, lspci -vvv, nvidia-smi -q (text or -x XML), nvidia-smi topo -m/-mp/-p2p, "
                   "NCCL topology XML (<system>), hwloc XML (<topology>), an NCCL_DEBUG=INFO log, or a directory or "
                   "snapshot archive (gdrcheck snapshot)")


def sniff(text: str) -> Optional[str]:
    """The kind of a single-file input, from its content."""
    from gdrcheck.collectors.pastes.lspci_tree import looks_like_lspci_tree

    head = text.lstrip("\ufeff \t\r\n")[:4096]
    if head.startswith("<"):
        body = _skip_xml_prolog(text)
        if body.startswith("<system"):
            return "nccl-xml"
        if body.startswith("<topology"):
            return "hwloc-xml"
        if body.startswith("<nvidia_smi_log"):
            return "nvidia-smi-q-xml"
    from gdrcheck.collectors.pastes.nccl_log import looks_like_nccl_log

    if looks_like_nccl_log(text):  # a host written <cluster_name> starts with '<' too
        return "nccl-log"
    if head.startswith("<"):
        return None
    if looks_like_lspci_tree(text):
        return "lspci"
    return sniff_paste(text)


def sniff_paste(text: str) -> Optional[str]:
    """The paste kinds (issue 17): lspci -vvv, nvidia-smi -q, nvidia-smi topo -m; None when none fits."""
    from gdrcheck.collectors.pastes.lspci_verbose import looks_like_acsctl_grep, looks_like_lspci_verbose
    from gdrcheck.collectors.pastes.topo_matrix import looks_like_topo_matrix

    if "==============NVSMI LOG==============" in text[:65536] or _SMI_GPU.search(text[:65536]):
        return "nvidia-smi-q"
    if looks_like_topo_matrix(text):
        return "topo-matrix"
    if looks_like_lspci_verbose(text):
        return "lspci-vvv"
    if looks_like_acsctl_grep(text):
        return "acsctl-grep"
    return None


# 'GPU 00000000:18:00.0' then an indented section or field ('nvidia-smi -q -d MEMORY' has no Product Name)
_SMI_GPU = lazy_pattern(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*\n[ \t]+[A-Z][\w /()-]*", re.M)


_PROLOG = lazy_pattern(r"\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>)", re.S | re.I)


def _skip_xml_prolog(text: str) -> str:
    """Text after the XML declaration, comments and DOCTYPE."""
    s = text.lstrip("\ufeff")
    pos = 0
    while True:
        m = _PROLOG.match(s, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    return s[pos:].lstrip()


def parse_single_file(path: str) -> Snapshot:
    """One file of an accepted kind, recognised by content."""
    parts = read_parts(path)
    part = parts[0]
    if len(parts) == 1 and isinstance(part.data, Snapshot) and part.input_kind in ("lspci", "nccl-xml", "hwloc-xml"):
        return part.data
    from gdrcheck.collectors.pastes.merge import merge

    return merge(parts)


def read_parts(path: str) -> list:
    """A single file as the parts it holds: one, or for a job's NCCL log pasted with the node's
    ``nvidia-smi topo -m`` above it, the log and the matrix."""
    from gdrcheck.collectors.pastes.merge import Part

    name = os.path.basename(path)
    kind, text = _read_kind(path, name)
    if kind == "nccl-log":
        from gdrcheck.collectors.pastes.nccl_log import parse_nccl_log
        from gdrcheck.collectors.pastes.topo_matrix import looks_like_topo_matrix

        parts = [Part(name, kind, parse_nccl_log(text, name))]
        if looks_like_topo_matrix(text):
            from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrices

            parts.append(Part(name, "topo-matrix", parse_topo_matrices(text, name)))
        return parts
    return [_part(name, kind, text)]


def read_part(path: str):
    """A single file, read and parsed by its kind: a :class:`gdrcheck.collectors.pastes.merge.Part`."""
    name = os.path.basename(path)
    kind, text = _read_kind(path, name)
    return _part(name, kind, text)


def _part(name: str, kind: str, text: str):
    from gdrcheck.collectors.pastes.merge import Part

    if kind == "nccl-log":
        from gdrcheck.collectors.pastes.nccl_log import parse_nccl_log

        return Part(name, kind, parse_nccl_log(text, name))
    if kind == "lspci":
        from gdrcheck.collectors.pastes.lspci_tree import parse_lspci_tree

        return Part(name, kind, parse_lspci_tree(text, name))
    if kind == "nccl-xml":
        from gdrcheck.collectors.pastes.nccl_xml import parse_nccl_xml

        return Part(name, kind, parse_nccl_xml(text, name))
    if kind == "hwloc-xml":
        from gdrcheck.collectors.pastes.hwloc_xml import parse_hwloc_xml

        return Part(name, kind, parse_hwloc_xml(text, name))
    if kind == "lspci-vvv":
        from gdrcheck.collectors.pastes.lspci_verbose import parse_lspci_verbose

        return Part(name, kind, parse_lspci_verbose(text, name))
    if kind == "acsctl-grep":
        from gdrcheck.collectors.pastes.lspci_verbose import parse_acsctl_grep

        return Part(name, kind, parse_acsctl_grep(text, name))
    if kind == "topo-matrix":
        from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrices

        return Part(name, kind, parse_topo_matrices(text, name))
    from gdrcheck.collectors.pastes.nvidia_smi import parse_smi_text, parse_smi_xml

    if kind == "nvidia-smi-q-xml":
        try:
            rows = parse_smi_xml(text)
        except ValueError as e:
            raise InputError(f"{name}: {e}") from None
    else:
        rows = parse_smi_text(text)
    if not rows:
        raise InputError(f"{name}: nvidia-smi -q output that lists no GPU with a bus id")
    return Part(name, "nvidia-smi-q", rows)


def _read_kind(path: str, name: str):
    """(kind, text) of a single file; one-line errors for what is none of the accepted kinds."""
    try:
        size = os.path.getsize(path)
        if size > MAX_SINGLE_FILE:
            raise InputError(f"{name}: file is larger than {MAX_SINGLE_FILE >> 20} MiB")
        with open(path, "rb") as f:
            data = f.read(MAX_SINGLE_FILE + 1)
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with its BOM: what PowerShell's > writes
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{name}: damaged UTF-16 text") from None
    if not data.strip():
        raise InputError(f"{name}: empty file")
    if b"\x00" in data[:65536]:
        raise InputError(f"{name}: binary file, not one of the accepted kinds: {FILE_KINDS_TEXT}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    kind = sniff(text)
    if kind is None:
        raise InputError(f"{name}: not one of the accepted kinds: {FILE_KINDS_TEXT}")
    return kind, text


def remove_temp_dirs() -> None:
    """Remove unpacked archives and copied streams not yet removed (:mod:`gdrcheck.io.tempdirs`)."""
    from gdrcheck.io import tempdirs

    tempdirs.remove_all()


def missing_why(path: str) -> str:
    """Why a path named on the command line cannot be opened: not there, or a link that leads nowhere."""
    if path and os.path.lexists(path):
        return "a symbolic link that leads nowhere (it dangles, or loops)"
    return "no such file or directory"


@contextlib.contextmanager
def open_source(from_path: Optional[str], *, record: bool = False) -> Iterator[object]:
    """Yield a :class:`Source` (live, directory, archive) or a parsed :class:`Snapshot`."""
    if from_path is None:
        yield Source("/", record=record)
        return
    if not os.path.exists(from_path):
        raise InputError(f"{from_path or repr(from_path)}: {missing_why(from_path)}")
    if os.path.isdir(from_path):
        require_machine(from_path, from_path)
        yield Source(from_path, live=False, label=from_path)
        return
    if _is_archive(from_path):
        from gdrcheck.io import tempdirs

        tmp = tempdirs.make()
        try:
            unpack_archive(from_path, tmp)
            root = _archive_root(tmp)
            require_machine(root, from_path)
            yield Source(root, live=False, label=os.path.basename(from_path))
        finally:  # here, once unpacking and reading have stopped (a --timeout stops them first)
            tempdirs.remove(tmp)
        return
    yield parse_single_file(from_path)


PCI_DEVICES = "sys/bus/pci/devices"
MANIFEST = "gdrcheck/manifest.json"


def _inside(root: str, rel: str) -> Optional[str]:
    """``root/rel`` with every link resolved, or None when it dangles, loops or leaves ``root``."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, rel))
    try:
        os.stat(real)  # realpath(strict=True) is 3.10: a dangling or looping link fails here
    except (OSError, RuntimeError):
        return None
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        return None
    return real


def require_machine(root: str, shown: str) -> None:
    """A directory (or unpacked archive) is a machine only if it holds a readable PCI device list or
    a gdrcheck snapshot manifest; anything else (an empty folder, notes, a missing, dangling or
    looping ``sys``) is bad input, never an empty machine that passes."""
    pci = _inside(root, PCI_DEVICES)
    if pci is not None and os.path.isdir(pci):
        try:
            os.listdir(pci)
            return
        except OSError:
            pass
    manifest = _inside(root, MANIFEST)
    if manifest is not None and os.path.isfile(manifest):
        return
    why = _why_no_machine(root)
    raise InputError(f"no machine found in {shown} (looked for {PCI_DEVICES} and a gdrcheck snapshot's "
                     f"{MANIFEST}): {why}")


def _why_no_machine(root: str) -> str:
    sys_dir = os.path.join(root, "sys")
    if os.path.islink(sys_dir) and _inside(root, "sys") is None:
        return "sys is a link that dangles, loops or points outside"
    if os.path.isdir(sys_dir):
        return f"sys has no readable {PCI_DEVICES[4:]}"
    try:
        names = sorted(n for n in os.listdir(root) if not n.startswith("."))
    except OSError as e:
        return f"cannot list it ({e.strerror or e})"
    if not names:
        return "it is empty"
    known = []
    for n in names[:50]:
        path = os.path.join(root, n)
        if os.path.isfile(path) and _sniff_path(path):
            known.append(n)
    if known:
        return (f"it holds {len(names)} entr{'y' if len(names) == 1 else 'ies'}; to read one file, pass it: "
                f"--from {os.path.join(root, known[0])}")
    return f"it holds {len(names)} entr{'y' if len(names) == 1 else 'ies'} ({', '.join(names[:3])}" \
           f"{', ...' if len(names) > 3 else ''}), none of them a machine"


def _sniff_path(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            data = f.read(65536)
    except OSError:
        return None
    if b"\x00" in data:
        return None
    return sniff(data.decode("utf-8", "replace"))


def _archive_root(tmp: str) -> str:
    """An archive may hold the tree at its top or inside one directory."""
    names = [n for n in os.listdir(tmp)]
    if any(n in ("sys", "proc", "gdrcheck") for n in names):
        return tmp
    only = os.path.join(tmp, names[0]) if len(names) == 1 else None
    if only is not None and os.path.isdir(only) and not os.path.islink(only):
        return only
    return tmp


MAX_STREAM_BYTES = MAX_TOTAL_BYTES


def _read_once(path: str) -> bool:
    """``-``, or a pipe, a FIFO or a device (:func:`gdrcheck.io.output.is_stream`)."""
    from gdrcheck.io.output import is_stream

    return path == "-" or is_stream(path)


@contextlib.contextmanager
def streams_copied(from_path) -> Iterator[object]:
    """``from_path`` with each input that can be read only once copied into a temporary directory (named as
    the input is, ``stdin`` for ``-``), removed when the block ends."""
    paths = list(from_path) if isinstance(from_path, (tuple, list)) else [from_path]
    once = [p for p in paths if p is not None and _read_once(p)]
    if not once:
        yield from_path
        return
    from gdrcheck.io import tempdirs

    tmp = tempdirs.make()
    try:
        copied = {}
        for i, p in enumerate(once):
            name = "stdin" if p == "-" else os.path.basename(p) or "input"
            dest = os.path.join(tmp, str(i), name)
            os.mkdir(os.path.dirname(dest))
            _copy_stream(p, name, dest)
            copied[p] = dest
        out = [copied.get(p, p) for p in paths]
        yield out if isinstance(from_path, (tuple, list)) else out[0]
    finally:
        tempdirs.remove(tmp)


def _copy_stream(path: str, name: str, dest: str) -> None:
    import sys

    total = 0
    try:
        with contextlib.ExitStack() as stack:
            src = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
            out = stack.enter_context(open(dest, "wb"))
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                total += len(block)
                if total > MAX_STREAM_BYTES:
                    raise InputError(f"{name}: more than {MAX_STREAM_BYTES >> 20} MiB")
                out.write(block)
    except OSError as e:
        if e.errno in _NO_ROOM:
            raise no_room(name, os.path.dirname(dest), e) from None
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None


def load_facts(from_path, *, want_driver: bool = True, endpoint_config: bool = True,
               progress: Optional[Callable[[str], None]] = None, deadline=None,
               while_waiting: Optional[Callable[[], None]] = None) -> Snapshot:
    """Read the facts once, from wherever they are (within ``deadline``, a :class:`gdrcheck.io.deadline.Deadline`).

    ``from_path`` is None (this machine), one path, or several paths of one node (merged).
    ``while_waiting``: work the caller has for the time a live run waits on the NVIDIA driver.
    """
    from gdrcheck.collectors.bounds import check_snapshot

    with streams_copied(from_path) as paths:
        snap = _load_facts(paths, want_driver=want_driver, endpoint_config=endpoint_config,
                           progress=progress, deadline=deadline, while_waiting=while_waiting)
    return check_snapshot(snap, _shown(from_path))


def _shown(from_path) -> str:
    """How an error names the input: the file's name, or this machine."""
    if from_path is None:
        return "this machine"
    paths = list(from_path) if isinstance(from_path, (tuple, list)) else [from_path]
    return ", ".join("stdin" if p == "-" else os.path.basename(os.path.normpath(p)) or p for p in paths)


def _load_facts(from_path, *, want_driver: bool, endpoint_config: bool, progress, deadline,
                while_waiting) -> Snapshot:
    from gdrcheck.collectors.gather import gather

    if isinstance(from_path, (tuple, list)):
        if len(from_path) != 1:
            return load_many(tuple(from_path), want_driver=want_driver, endpoint_config=endpoint_config,
                             deadline=deadline)
        from_path = from_path[0]
    with open_source(from_path) as src:
        if isinstance(src, Snapshot):
            return src
        src.deadline = deadline
        return gather(src, want_driver=want_driver, endpoint_config=endpoint_config, progress=progress,
                      while_waiting=while_waiting)


def load_many(paths, *, want_driver: bool = True, endpoint_config: bool = True, deadline=None) -> Snapshot:
    """Several inputs of one node (``--from`` repeated), each read by its kind, merged into one snapshot."""
    from gdrcheck.collectors.pastes.merge import Part, merge

    parts = []
    for p in paths:
        if os.path.isdir(p) or (os.path.exists(p) and _is_archive(p)):
            snap = load_facts(p, want_driver=want_driver, endpoint_config=endpoint_config, deadline=deadline)
            parts.append(Part(os.path.basename(os.path.normpath(p)) or p, snap.input_kind, snap))
        elif not os.path.exists(p):
            raise InputError(f"{p or repr(p)}: {missing_why(p)}")
        else:
            parts.extend(read_parts(p))
    seen = {}
    for part in parts:
        key = (part.label, part.input_kind)  # a log with the node's topo -m in it is two parts of one name
        if key in seen:
            part.label = f"{part.label}#{seen[key] + 1}"
        seen[key] = seen.get(key, 0) + 1
    return merge(parts)
