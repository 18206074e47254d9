"""Plain-text layout for the text renderers: wrapped lines that keep their indent, and grids.

Every line is laid out here to the console's width and printed as it is (rich
neither wraps nor crops it): a word is never cut, a grid row never wraps; a grid
too wide for the width is split into blocks of columns that each fit, every
block repeating the key columns. Cells are ``(text, style)`` pairs; the text is
data, never markup.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional, Union
    Cell = tuple[str, str]
    LineLike = Union[str, "object"]


GAP = 2  # spaces between grid columns


def _text(line):
    from rich.text import Text

    return Text(line) if isinstance(line, str) else line


def wrap(line, width: int, hang: Optional[int] = None) -> list:
    """``line`` (str or rich Text) broken at spaces into lines of at most ``width`` characters.

    Continuation lines are indented by ``hang`` spaces (default: the line's own leading
    indent). Fields (two spaces apart) are kept together where the room allows. A word longer
    than the room is kept whole on a line of its own.
    """
    text = _text(line)
    plain = text.plain
    if len(plain) <= width or width <= 0:
        return [text]
    if hang is None:
        hang = len(plain) - len(plain.lstrip(" "))
    hang = min(hang, max(width // 2, 0))
    spans = _breaks(plain, width, hang)
    # one division of the text at every break (slicing a rich Text copies all of it: a slice per piece was
    # quadratic in a long line)
    cuts = sorted({p for span in spans for p in span} - {0, len(plain)})
    parts = text.divide(cuts)
    at = {0: 0}
    for i, c in enumerate(cuts):
        at[c] = i + 1
    out = []
    for k, (start, end) in enumerate(spans):
        piece = parts[at[start]] if at.get(end, len(cuts) + 1) == at[start] + 1 else text[start:end]
        piece.rstrip()
        if k:
            piece = _text(" " * hang) + piece
        out.append(piece)
    return out


def _breaks(plain: str, width: int, hang: int) -> list:
    """``(start, end)`` of each wrapped piece of ``plain``."""
    spans = []
    start, first = 0, True
    n = len(plain)
    while start < n:
        room = width - (0 if first else hang)
        if n - start <= room:
            end = n
        else:
            # a double space separates fields: break there first, then between words
            end = plain.rfind("  ", start + 1, start + room + 1)
            if end <= start + room // 2:
                end = plain.rfind(" ", start + 1, start + room + 1)
            if end <= start:  # one long word: keep it whole
                end = plain.find(" ", start + room)
                end = n if end == -1 else end
        spans.append((start, end))
        first = False
        start = end
        while start < n and plain[start] == " ":
            start += 1
    return spans


def put(console, line, hang: Optional[int] = None) -> None:
    """Print ``line`` wrapped to the console's width, each piece exactly as laid out."""
    for piece in wrap(line, console.width, hang):
        console.print(piece, soft_wrap=True)


def blank(console) -> None:
    console.print(soft_wrap=True)


def column_blocks(widths: Sequence[int], fixed: int, width: int) -> list[list[int]]:
    """Indexes of the value columns, split into consecutive blocks whose rows fit ``width``.

    ``fixed`` is the width every row of every block carries anyway (key columns and
    their gaps, a tail column); each value column costs its width plus :data:`GAP`.
    A block holds at least one column, even if that overflows.
    """
    blocks: list[list[int]] = []
    cur: list[int] = []
    used = fixed
    for i, w in enumerate(widths):
        cost = w + GAP
        if cur and used + cost > width:
            blocks.append(cur)
            cur, used = [], fixed
        cur.append(i)
        used += cost
    if cur:
        blocks.append(cur)
    if len(blocks) > 1:  # as many blocks, but even: 4 + 4 columns rather than 7 + 1
        per = -(-len(widths) // len(blocks))
        even = [list(range(i, min(i + per, len(widths)))) for i in range(0, len(widths), per)]
        if len(even) == len(blocks) and all(fixed + sum(widths[i] + GAP for i in b) <= width for b in even):
            return even
    return blocks


def grid(header: Sequence[str], rows: Sequence[Sequence[Cell]], width: int, keys: int = 1, tail: int = 0,
         right: Sequence[int] = (), header_style: str = "bold") -> list[list]:
    """A table as blocks of rich Text lines: ``keys`` leading columns and ``tail`` trailing columns
    repeat in every block; the value columns between them are split so each block fits ``width``.

    Column widths come from the widest cell (header included); columns are :data:`GAP` apart;
    columns whose index is in ``right`` are right-aligned.
    """
    from rich.text import Text

    ncol = len(header)
    widths = [len(header[c]) for c in range(ncol)]
    for r in rows:
        for c in range(ncol):
            widths[c] = max(widths[c], len(r[c][0]))
    key_idx = list(range(keys))
    tail_idx = list(range(ncol - tail, ncol))
    val_idx = list(range(keys, ncol - tail))
    fixed = sum(widths[c] for c in key_idx) + GAP * max(len(key_idx) - 1, 0)
    fixed += sum(widths[c] + GAP for c in tail_idx)
    blocks = column_blocks([widths[c] for c in val_idx], fixed, width) if val_idx else [[]]

    def line(cells: Sequence[Cell], cols: list[int], style_all: str = "") -> Text:
        t = Text()
        for j, c in enumerate(cols):
            s, style = cells[c]
            pad = widths[c] - len(s)
            if j:
                t.append(" " * GAP)
            if c in right:
                t.append(" " * pad)
            t.append(s, style=style_all or style)
            if c not in right and j < len(cols) - 1:
                t.append(" " * pad)
        t.rstrip()
        return t

    out = []
    for block in blocks:
        cols = key_idx + [val_idx[i] for i in block] + tail_idx
        lines = [line([(h, "") for h in header], cols, header_style)]
        lines += [line(r, cols) for r in rows]
        out.append(lines)
    return out
