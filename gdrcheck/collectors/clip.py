"""Names read from an input, made safe to carry: one sane length, no control characters.

A paste or a capture may hold a device name of a megabyte, or escape sequences
that a terminal would obey. Every collector passes the names it reads through
:func:`clip_name`; what was cut says so in the name itself, so the note travels
with it into text, JSON and HTML.
"""

from __future__ import annotations

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Optional

MAX_NAME = 200  # characters; the longest pci.ids vendor + device name is about 130
HOST_NAME_MAX = 253  # a fully qualified DNS name
_CONTROL = lazy_pattern(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clip_name(name: Optional[str], limit: int = MAX_NAME) -> Optional[str]:
    """``name`` cut to ``limit`` characters with a note of its length, control characters shown as '?'."""
    if not isinstance(name, str):
        return name
    if len(name) > limit:
        name = f"{name[:limit].rstrip()}... (name cut: {len(name)} characters in the input)"
    if _CONTROL.search(name):
        name = _CONTROL.sub("?", name)
    name = name.replace("\n", " ").replace("\t", " ")
    return name
