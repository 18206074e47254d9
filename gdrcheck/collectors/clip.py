"""Names read from an input, made safe to carry: one sane length, no control characters.

A paste or a capture may hold a device name of a megabyte, or escape sequences
that a terminal would obey. Every collector passes the names it reads through
:func:`clip_name`; what was cut says so in the name itself, so the note travels
with it into text, JSON and HTML.

Other strings from an input (an NCCL setting's value, a file name) are kept as
they are in the facts and in JSON, and shown through the same sanitiser: every
text output (text, DOT, Prometheus, the engines' lines, ``fingerprint --explain``,
HTML, fleet summaries) renders :func:`printable` of its document, so no line it
prints was begun, cleared or coloured by the input.
"""

from __future__ import annotations

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

MAX_NAME = 200  # characters; the longest pci.ids vendor + device name is about 130
HOST_NAME_MAX = 253  # a fully qualified DNS name
# C0 and C1 controls (ESC, BEL, CR, CSI ...), the Unicode line and paragraph separators, which
# str.splitlines() and some viewers take for line breaks, and lone surrogates (a JSON input's "\\ud800", a
# file name that is not UTF-8), which no output can encode; and the bidirectional controls (U+202E RIGHT-TO-LEFT
# OVERRIDE and its kin: U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), which make a terminal or a page show
# text in another order than it is (a NIC named "mlx5_0\u202e..." could show as another); \n and \t are made
# spaces below
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = lazy_pattern(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{_BIDI}]")
_UNSHOWN = lazy_pattern(f"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{_BIDI}]")  # the above, \n and \t
SHOWN_MAX = 1 << 20  # characters of one string a text output shows; a message of a large fabric fits


def clip_name(name: Optional[str], limit: int = MAX_NAME) -> Optional[str]:
    """``name`` cut to ``limit`` characters with a note of its length, control characters shown as '?'."""
    if not isinstance(name, str):
        return name
    if len(name) > limit:
        name = f"{name[:limit].rstrip()}... (name cut: {len(name)} characters in the input)"
    if (name.isascii() and name.isprintable()) or not _UNSHOWN.search(name):
        return name  # (printable ASCII holds none of the characters below: the pattern need not be compiled)
    if _CONTROL.search(name):
        name = _CONTROL.sub("?", name)
    return name.replace("\n", " ").replace("\t", " ")


def printable(value):
    """``value`` (a document, a list of lines, a string) with every string, dictionary keys too, as
    :func:`clip_name` shows a name: control characters as '?', a line break or tab as a space. What a
    renderer writes between the strings (its own line breaks, colours, quoting) is its own. A document
    with nothing to change is given back as it is."""
    if isinstance(value, (dict, list, tuple)) and _clean(value):
        return value
    return _shown(value)


def _shown(value):
    if isinstance(value, str):
        return clip_name(value, SHOWN_MAX)
    if isinstance(value, dict):
        return {_shown(k): _shown(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shown(v) for v in value]
    return value


def _clean(doc) -> bool:
    """True when no string of ``doc`` holds a character :func:`clip_name` changes, found by the C encoder:
    ASCII-only JSON writes every character below U+0020 and above U+007F with a backslash, and DEL is looked
    for itself, so a document whose JSON has neither has nothing to change (a 64-GPU fabric's pairs: some
    40 ms, not 120 ms of walking). A document with either (a non-ASCII name, a backslash) is walked."""
    import json

    try:
        text = json.dumps(doc, check_circular=False)
    except (TypeError, ValueError):
        return False
    return "\\" not in text and "\x7f" not in text
