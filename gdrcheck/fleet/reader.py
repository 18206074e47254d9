"""Per-node reports from files, directories and ``host: {json}`` streams, one at a time.

What fan-out tools leave behind:

* ``clush --outdir DIR`` and ``dshbak -d DIR``: one file per node, named by the node;
* ``srun --output=DIR/%N.json`` and Ansible ``fetch ... flat=true``: ``node.json``;
* a JSONL file: one compact report per line (``gdrcheck pairs --jsonl`` collected);
* ``pdsh``/``clush`` without ``-b``: ``host: {json}`` lines (clush separates with ``": "``).

The node's name is the ``host:`` prefix, else the file name (without ``.json``,
``.jsonl`` or ``.out``); in a JSONL file, and on stdin, it is the report's ``host``.
A directory is read at its top level only, in name order: hidden files, ``*.err``
files and subdirectories (``clush --errdir``) are left out. An empty or damaged report
is an ``unreadable`` node, never an error of the run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from typing import IO, NamedTuple, Optional

from gdrcheck.errors import InputError
from gdrcheck.patterns import lazy_pattern

SUFFIXES = (".jsonl", ".json", ".out")
_PREFIXED = lazy_pattern(rb"^([^\s:]+): ?(.*)$", re.S)
MAX_REPORT_BYTES = 256 << 20


class Item(NamedTuple):
    """One node's report (``doc``), or why there is none (``problem``)."""

    name: str
    doc: Optional[dict]
    problem: Optional[str]


def check_paths(paths: Sequence[str]) -> None:
    """Usage errors before anything is read: a PATH that does not exist, stdin named twice."""
    if not paths:
        raise InputError("name at least one report file, directory, or - for stdin")
    if sum(1 for p in paths if p == "-") > 1:
        raise InputError("- (stdin) given more than once")
    for p in paths:
        if p != "-" and not os.path.exists(p):
            from gdrcheck.collectors.inputs import missing_why

            raise InputError(f"{p}: {missing_why(p)}")


def node_name(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    for suf in SUFFIXES:
        if base.endswith(suf) and len(base) > len(suf):
            return base[:-len(suf)]
    return base


def report_problem(doc) -> Optional[str]:
    """None for a report ``fleet summarize`` can read; else the reason, in a few words
    (:mod:`gdrcheck.fleet.fields` checks every field the summary reads)."""
    from gdrcheck.fleet.fields import report_problem as problem

    return problem(doc)


def _parse(raw: bytes) -> tuple[Optional[dict], Optional[str]]:
    if not raw.strip():
        return None, "empty file"
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except RecursionError:
        return None, "JSON nests too deeply"
    except ValueError as e:
        pos = getattr(e, "pos", None)
        if (pos is not None and pos >= len(raw.rstrip())) or str(e).startswith("Unterminated string"):
            return None, "truncated JSON (cut off mid-write?)"
        return None, "not JSON" + (" (a traceback?)" if b"Traceback" in raw[:4096] else "")
    problem = report_problem(doc)
    return (None, problem) if problem else (doc, None)


def _host(doc: Optional[dict]) -> Optional[str]:
    h = doc.get("host") if doc else None
    return h.strip() if isinstance(h, str) and h.strip() else None


def read_inputs(paths: Sequence[str], input_format: str = "auto", stdin: Optional[IO[bytes]] = None) -> Iterator[Item]:
    for p in paths:
        if p == "-":
            yield from read_stream(stdin, None, input_format, "stdin")
        elif os.path.isdir(p):
            yield from read_dir(p, input_format)
        else:
            yield from read_file(p, input_format)


def read_dir(path: str, input_format: str) -> Iterator[Item]:
    try:
        with os.scandir(path) as it:
            names = sorted(e.name for e in it if not e.name.startswith(".") and not e.name.endswith(".err")
                           and _is_file(e))
    except OSError as e:
        raise InputError(f"{path}: cannot list: {e.strerror or e}") from None
    for n in names:
        yield from read_file(os.path.join(path, n), input_format)


def _is_file(entry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def read_file(path: str, input_format: str) -> Iterator[Item]:
    name = node_name(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        yield Item(name, None, f"cannot read: {e.strerror or e}")
        return
    with f:
        try:
            yield from read_stream(f, name, input_format, name, jsonl=path.endswith(".jsonl"))
        except OSError as e:
            yield Item(name, None, f"cannot read: {e.strerror or e}")


def read_stream(f: IO[bytes], name: Optional[str], input_format: str, label: str,
                jsonl: bool = False) -> Iterator[Item]:
    """One file or stdin: a report, JSONL reports, or ``host: {json}`` lines (detected from the first line)."""
    first = b""
    lines = _bounded_lines(f)
    for line in lines:
        if line.strip():
            first = line
            break
    if not first:
        if name is not None:
            yield Item(name, None, "empty file")
        return
    if first == b"\x00\n":  # what _bounded_lines makes of a line that is not text
        yield Item(name or label, None, "binary file, not a report")
        return
    stripped = first.lstrip()
    if input_format == "prefixed" or (input_format == "auto" and not stripped.startswith(b"{")
                                      and _looks_prefixed(first)):
        yield from _read_prefixed(first, lines)
        return
    if stripped.startswith(b"{"):
        doc, problem = _parse(first)
        if doc is not None or problem not in ("truncated JSON (cut off mid-write?)",):
            # the first line is a whole report (or a damaged line): one report per line
            yield from _read_lines(first, doc, problem, lines, name, label, jsonl)
            return
    # one (pretty-printed) document, or something that is not a report at all
    raw = first + f.read(MAX_REPORT_BYTES)
    doc, problem = _parse(raw)
    yield Item(name or _host(doc) or label, doc, problem)


def _looks_prefixed(line: bytes) -> bool:
    m = _PREFIXED.match(line)
    return bool(m) and m.group(2).lstrip().startswith(b"{")


def _read_lines(first: bytes, doc, problem, f, name, label, jsonl) -> Iterator[Item]:
    """JSONL: the file's name is the node's only when the file holds one report and is not ``*.jsonl``."""
    pending: Optional[tuple[Optional[dict], Optional[str], int]] = (doc, problem, 1)
    lineno = 1
    for line in f:
        lineno += 1
        if not line.lstrip().startswith(b"{"):
            continue  # blank lines, or a warning printed between reports
        if pending is not None:
            yield _line_item(*pending, label)
            pending = None
            jsonl = True
        d, p = _parse(line)
        yield _line_item(d, p, lineno, label)
    if pending is not None:
        d, p, n = pending
        if jsonl or name is None:
            yield _line_item(d, p, n, label)
        else:
            yield Item(name, d, p)


def _line_item(doc, problem, lineno: int, label: str) -> Item:
    return Item(_host(doc) or f"{label}:{lineno}", doc, problem)


def _read_prefixed(first: bytes, f) -> Iterator[Item]:
    """``host: {json}`` lines; a report spread over several lines of one host is joined up to its ``}``."""
    partial: dict[str, list[bytes]] = {}
    seen = set()
    noise = set()
    lines = _chain(first, f)
    # pdsh/clush interleave hosts line by line: a pretty-printed report is joined per host
    for line in lines:
        m = _PREFIXED.match(line)
        if not m:
            continue
        host, body = m.group(1).decode("utf-8", "replace"), m.group(2)
        if host in partial:
            partial[host].append(body)
            if body.rstrip(b"\r\n") == b"}":  # the closing brace of a pretty-printed report
                doc, problem = _parse(b"".join(partial[host]))
                if doc is not None or not problem.startswith("truncated"):
                    del partial[host]
                    seen.add(host)
                    yield Item(host, doc, problem)
            continue
        if body.lstrip().startswith(b"{"):
            doc, problem = _parse(body)
            if problem and problem.startswith("truncated"):
                partial[host] = [body]
                continue
            seen.add(host)
            yield Item(host, doc, problem)
        elif body.strip() and host not in seen:
            noise.add(host)
    for host, parts in sorted(partial.items()):
        seen.add(host)
        doc, problem = _parse(b"".join(parts))
        yield Item(host, doc, problem)
    for host in sorted(noise - seen):
        yield Item(host, None, "no report in the output")


def _bounded_lines(f) -> Iterator[bytes]:
    """``f``'s lines, none longer than a report may be, read a MiB at a time: the rest of a longer line is read
    past, never held, and so is a line that is not text (a NUL in it: a core dump or an image left in the
    directory), which comes out as one NUL."""
    block = 1 << 20
    while True:
        chunk = f.readline(block)
        if not chunk:
            return
        if b"\x00" in chunk:
            while chunk and not chunk.endswith(b"\n"):
                chunk = f.readline(block)
            yield b"\x00\n"
            continue
        parts, size = [chunk], len(chunk)
        while not parts[-1].endswith(b"\n"):
            more = f.readline(block)
            if not more:
                break
            size += len(more)
            if size > MAX_REPORT_BYTES:
                while more and not more.endswith(b"\n"):
                    more = f.readline(block)
                break
            parts.append(more)
        yield parts[0] if len(parts) == 1 else b"".join(parts)


def _chain(first: bytes, f) -> Iterator[bytes]:
    yield first
    yield from f


def read_reference(path: str) -> dict:
    """``--reference FILE``: one golden report with a fingerprint, else a usage error."""
    if not os.path.exists(path) or os.path.isdir(path):
        from gdrcheck.collectors.inputs import missing_why

        raise InputError(f"--reference {path}: " + ("a directory, not a report" if os.path.isdir(path)
                                                      else missing_why(path)))
    items = list(read_file(path, "json"))  # a pipe too (--reference <(ssh gold cat report.json)): read once
    if len(items) != 1 or items[0].doc is None:
        why = items[0].problem if len(items) == 1 else f"{len(items)} reports in one file"
        raise InputError(f"--reference {path}: {why}")
    doc = items[0].doc
    fp = doc.get("fingerprint")
    if not isinstance(fp, dict) or not isinstance(fp.get("shape"), str):
        raise InputError(f"--reference {path}: the report has no fingerprint (made by an older gdrcheck?)")
    return doc
