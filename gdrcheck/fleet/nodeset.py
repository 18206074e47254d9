"""Node sets: ``gpu[001-076,078]`` folding and expansion, as ClusterShell writes them.

ClusterShell's ``NodeSet`` is used when it is installed (it also knows ``@group``
names and multi-dimensional folding such as ``r[1-2]n[1-4]``). Without it a small
folding of our own gives the same text for names with one number (prefix, number,
suffix: ``gpu001``, ``a12b``, ``x-3.ib``), keeps zero padding, and folds names with
several numbers on their last one; expansion reads comma-separated names with any
number of bracketed ranges (``a[1-3,5]b``, ``r[1-2]n[01-04]``, ``n[1-9/2]``).
"""

from __future__ import annotations

import re
from itertools import product

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# names ClusterShell's parser reads as plain node names (no operators, groups or brackets)
_SAFE = lazy_pattern(r"^[A-Za-z0-9._+-]+$")
_LAST_NUMBER = lazy_pattern(r"^(.*?)(\d+)(\D*)$")
_SEVERAL_NUMBERS = lazy_pattern(r"^\D*\d+\D+\d")
_RANGE = lazy_pattern(r"^(\d+)(?:-(\d+)(?:/(\d+))?)?$")
EXPAND_MAX = 1_000_000


class NodeSetError(ValueError):
    """A node set that cannot be read."""


def _clustershell():
    try:
        from ClusterShell.NodeSet import NodeSet
    except Exception:  # noqa: BLE001 - optional; any failure to import means: not there
        return None
    return NodeSet


# -- folding ---------------------------------------------------------------------------------------------


def fold(names: Iterable[str], use_clustershell: bool = True) -> str:
    """``["gpu001", "gpu002", "gpu004"]`` -> ``"gpu[001-002,004]"`` (sorted, duplicates dropped)."""
    names = sorted(set(names))
    if not names:
        return ""
    if not any(_SEVERAL_NUMBERS.match(n) for n in names):
        return fold_own(names)  # the same text as ClusterShell's (tests/test_nodeset.py), and faster
    NodeSet = _clustershell() if use_clustershell else None
    if NodeSet is not None and all(_SAFE.match(n) for n in names):
        try:
            return str(NodeSet.fromlist(names))
        except Exception:  # noqa: BLE001 - fall back to our own folding
            pass
    return fold_own(names)


def fold_own(names: Iterable[str]) -> str:
    """Our own folding (what ``fold`` gives without ClusterShell)."""
    patterns: dict[tuple[str, str], list[str]] = {}
    plain: list[str] = []
    for n in set(names):
        m = _LAST_NUMBER.match(n) if _SAFE.match(n) else None
        if m:
            patterns.setdefault((m.group(1), m.group(3)), []).append(m.group(2))
        else:
            plain.append(n)
    parts = [(p.replace("%", "%%") + "%s" + s, _fold_numbers(nums), len(nums), p, s)
             for (p, s), nums in patterns.items()]
    out: list[tuple[str, str]] = [(n, n) for n in plain]
    for key, ranges, count, p, s in parts:
        out.append((key, f"{p}[{ranges}]{s}" if count > 1 else f"{p}{ranges}{s}"))
    return ",".join(text for _key, text in sorted(out))


def _fold_numbers(nums: list[str]) -> str:
    """Runs of consecutive numbers, zero padding kept apart: ``1,01,001-002,100`` as ClusterShell orders them."""
    runs: list[tuple[int, int, int]] = []  # start, last, pad (0 = not padded)
    last = pad = None
    padded_run = False
    for s in sorted(set(nums), key=lambda e: (len(e), e)):
        idx, width = int(s), len(s)
        padded = width > 1 and s[0] == "0"
        fits = (width == pad) if padded_run else not padded
        if runs and fits and idx == last + 1:
            runs[-1] = (runs[-1][0], idx, runs[-1][2])
        else:
            runs.append((idx, idx, width if padded else 0))
            padded_run, pad = padded, width
        last = idx
    return ",".join(f"{a:0{p}d}" if a == b else f"{a:0{p}d}-{b:0{p}d}" for a, b, p in runs)


# -- expansion -------------------------------------------------------------------------------------------


def expand(text: str, use_clustershell: bool = True) -> list[str]:
    """``"gpu[001-003],login"`` -> the names, sorted and without duplicates. Names separated by spaces or
    lines (what ``$(scontrol show hostnames)`` gives) are as good as commas."""
    text = ",".join(text.split())
    if not text:
        raise NodeSetError("empty node set")
    NodeSet = _clustershell() if use_clustershell else None
    if NodeSet is not None:
        try:
            ns = NodeSet(text)
            if len(ns) > EXPAND_MAX:
                raise NodeSetError(f"{len(ns)} nodes is more than {EXPAND_MAX}")
            if not len(ns):
                raise NodeSetError(f"{text!r} names no node (an unknown @group?)")
            return sorted(ns)
        except NodeSetError:
            raise
        except Exception as e:  # noqa: BLE001 - ClusterShell's parse errors: one line for the user
            raise NodeSetError(f"{text!r}: {' '.join(str(e).split()) or e.__class__.__name__}") from None
    return sorted(set(expand_own(text)))


def expand_own(text: str) -> list[str]:
    """Our own expansion: comma-separated names, each with any number of ``[ranges]``."""
    if "@" in text or any(op in text for op in "!&^"):
        raise NodeSetError(f"{text!r}: groups (@name) and set operators need ClusterShell (pip install ClusterShell)")
    out: list[str] = []
    for term in _split_top(text):
        term = term.strip()
        if not term:
            continue
        pieces: list[list[str]] = []
        pos = 0
        for m in re.finditer(r"\[([^\[\]]*)\]", term):
            pieces.append([term[pos:m.start()]])
            pieces.append(_expand_ranges(m.group(1), term))
            pos = m.end()
        pieces.append([term[pos:]])
        if any(c in "[]" for p in pieces[::2] for c in p[0]):
            raise NodeSetError(f"{term!r}: unbalanced brackets")
        size = 1
        for p in pieces:
            size *= len(p)
        if len(out) + size > EXPAND_MAX:
            raise NodeSetError(f"{text!r}: more than {EXPAND_MAX} nodes")
        out.extend("".join(parts) for parts in product(*pieces))
    if not out:
        raise NodeSetError(f"{text!r}: no node names")
    return out


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise NodeSetError(f"{text!r}: unbalanced brackets")
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if depth:
        raise NodeSetError(f"{text!r}: unbalanced brackets")
    parts.append("".join(cur))
    return parts


def _expand_ranges(body: str, term: str) -> list[str]:
    out: list[str] = []
    for r in body.split(","):
        m = _RANGE.match(r.strip())
        if not m:
            raise NodeSetError(f"{term!r}: {r.strip()!r} is not a number or range (a-b, a-b/step)")
        a, b, step = m.group(1), m.group(2), int(m.group(3) or 1)
        if b is None:
            out.append(a)
            continue
        pad = len(a) if len(a) > 1 and a[0] == "0" else 0
        if (pad or (len(b) > 1 and b[0] == "0")) and len(a) != len(b):
            raise NodeSetError(f"{term!r}: padding of {a} and {b} differ")
        lo, hi = int(a), int(b)
        if hi < lo or step < 1:
            raise NodeSetError(f"{term!r}: {r.strip()!r} is an empty range")
        if (hi - lo) // step + 1 > EXPAND_MAX:
            raise NodeSetError(f"{term!r}: more than {EXPAND_MAX} nodes")
        out.extend(f"{i:0{pad}d}" for i in range(lo, hi + 1, step))
    return out

