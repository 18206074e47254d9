"""Where the facts come from: the live machine or ``--from PATH``.

PATH is a directory laid out like ``/``, an archive of one (unpacked safely
into a temporary directory that is always removed), or a single file whose
content is one of :data:`gdrcheck.collectors.input_kinds.INPUT_KINDS` (recognised by content, not name).
``--from`` may be given several times: the inputs are one node's facts,
merged by :mod:`gdrcheck.collectors.pastes.merge`.

A PATH that can be read only once (``-`` for stdin, a pipe such as the
``<(ssh node lspci -tv)`` of a shell, a FIFO) is first copied into a temporary
directory, removed with the rest, and read from there like a file.
"""

from __future__ import annotations

import contextlib
import os

from gdrcheck.errors import InputError
from gdrcheck.io.source import Source
from gdrcheck.model import Snapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Callable, Optional


_FROM_INPUT_KINDS = ("ACCEPTED_KINDS", "FILE_KINDS_TEXT", "INPUT_KINDS", "MAX_SINGLE_FILE", "sniff")
_FROM_ARCHIVE = ("MAX_TOTAL_BYTES", "NO_ROOM", "is_archive", "no_room", "unpack_archive")


def __getattr__(name: str):
    """The input-kind table's names and the archive reader's, here too, imported when first asked (a directory
    input never needs them)."""
    if name in _FROM_INPUT_KINDS:
        from gdrcheck.collectors import input_kinds

        return getattr(input_kinds, name)
    if name in _FROM_ARCHIVE or name == "MAX_STREAM_BYTES":
        from gdrcheck.collectors import archive

        return getattr(archive, "MAX_TOTAL_BYTES" if name == "MAX_STREAM_BYTES" else name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_single_file(path: str) -> Snapshot:
    """One file of an accepted kind, recognised by content."""
    from gdrcheck.collectors.input_kinds import TREE_KINDS

    parts = read_parts(path)
    part = parts[0]
    if len(parts) == 1 and isinstance(part.data, Snapshot) and part.input_kind in TREE_KINDS:
        return part.data
    from gdrcheck.collectors.pastes.merge import merge

    return merge(parts)


def read_parts(path: str) -> list:
    """A single file as the parts it holds: one, or for a job's NCCL log pasted with the node's
    ``nvidia-smi topo -m`` above it, the log and the matrix."""
    name = os.path.basename(path)
    from gdrcheck.collectors.input_kinds import BY_NAME, looks_like, read_kind

    kind, text = read_kind(path, name)
    parts = [_part(name, kind, text)]
    above = BY_NAME[kind].above_it
    if above is not None and looks_like(above, text):
        parts.append(_part(name, above, text))
    return parts


def read_part(path: str):
    """A single file, read and parsed by its kind: a :class:`gdrcheck.collectors.pastes.merge.Part`."""
    name = os.path.basename(path)
    from gdrcheck.collectors.input_kinds import read_kind

    kind, text = read_kind(path, name)
    return _part(name, kind, text)


def _part(name: str, kind: str, text: str):
    from gdrcheck.collectors.input_kinds import parse_as
    from gdrcheck.collectors.pastes.merge import Part

    reads_as, data = parse_as(kind, text, name)
    return Part(name, reads_as, data)


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
    from gdrcheck.collectors.archive import is_archive, unpack_archive

    if is_archive(from_path):
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
    from gdrcheck.collectors.input_kinds import sniff

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
    """Copy one stream, refused past :data:`MAX_STREAM_BYTES` (an archive's bound on what it unpacks)."""
    import sys

    from gdrcheck.collectors.archive import MAX_TOTAL_BYTES as MAX_STREAM_BYTES
    from gdrcheck.collectors.archive import NO_ROOM, no_room

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
        if e.errno in NO_ROOM:
            raise no_room(name, os.path.dirname(dest), e) from None
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None


def load_facts(from_path, *, want_driver: bool = True, endpoint_config: bool = True,
               progress: Optional[Callable[[str], None]] = None, deadline=None,
               while_waiting: Optional[Callable[[], None]] = None, cpulists: bool = True) -> Snapshot:
    """Read the facts once, from wherever they are (within ``deadline``, a :class:`gdrcheck.io.deadline.Deadline`).

    ``from_path`` is None (this machine), one path, or several paths of one node (merged).
    ``while_waiting``: work the caller has for the time a live run waits on the NVIDIA driver.
    ``cpulists``: each PCI function's ``local_cpulist`` from sysfs, which only a probe uses (it pins by it).
    """
    from gdrcheck.collectors.bounds import check_snapshot

    with streams_copied(from_path) as paths:
        snap = _load_facts(paths, want_driver=want_driver, endpoint_config=endpoint_config,
                           progress=progress, deadline=deadline, while_waiting=while_waiting, cpulists=cpulists)
    return check_snapshot(snap, _shown(from_path))


def _shown(from_path) -> str:
    """How an error names the input: the file's name, or this machine."""
    if from_path is None:
        return "this machine"
    paths = list(from_path) if isinstance(from_path, (tuple, list)) else [from_path]
    return ", ".join("stdin" if p == "-" else os.path.basename(os.path.normpath(p)) or p for p in paths)


def _load_facts(from_path, *, want_driver: bool, endpoint_config: bool, progress, deadline,
                while_waiting, cpulists: bool = True) -> Snapshot:
    from gdrcheck.collectors.gather import gather

    if isinstance(from_path, (tuple, list)):
        if len(from_path) != 1:
            return load_many(tuple(from_path), want_driver=want_driver, endpoint_config=endpoint_config,
                             deadline=deadline, cpulists=cpulists)
        from_path = from_path[0]
    with open_source(from_path) as src:
        if isinstance(src, Snapshot):
            return src
        src.deadline = deadline
        return gather(src, want_driver=want_driver, endpoint_config=endpoint_config, progress=progress,
                      while_waiting=while_waiting, cpulists=cpulists)


def load_many(paths, *, want_driver: bool = True, endpoint_config: bool = True, deadline=None,
              cpulists: bool = True) -> Snapshot:
    """Several inputs of one node (``--from`` repeated), each read by its kind, merged into one snapshot."""
    from gdrcheck.collectors.archive import is_archive
    from gdrcheck.collectors.pastes.merge import Part, merge

    parts = []
    for p in paths:
        if os.path.isdir(p) or (os.path.exists(p) and is_archive(p)):
            snap = load_facts(p, want_driver=want_driver, endpoint_config=endpoint_config, deadline=deadline,
                              cpulists=cpulists)
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
