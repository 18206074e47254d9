"""JSON output: stable bytes (sorted keys), nothing else on stdout."""

from __future__ import annotations

import json

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def render_json(doc: dict[str, Any], pretty: bool = False) -> str:
    """Compact (C encoder, fast) for pipes and files; indented when a person reads a terminal. A document is a
    tree (built fresh by gdrcheck.documents; parts may be shared, never contain themselves), so the encoder's
    cycle check, a lookup per object of a large fabric's tens of thousands, is left out. Strings are kept
    exactly; every control character in them is written as an escape (see :func:`escape_controls`)."""
    if pretty:
        text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, check_circular=False) + "\n"
    else:
        text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), check_circular=False) + "\n"
    return escape_controls(text)


_RAW = lazy_pattern("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def escape_controls(text: str) -> str:
    """JSON text with DEL, the C1 controls (U+0080-U+009F: a terminal may take U+009B for ESC [), the line
    and paragraph separators and lone surrogates (which UTF-8 cannot carry) written as ``\\uXXXX``; ``json``
    escapes only those below U+0020. Outside strings JSON text has none of them, so the result is the same
    document. An ASCII text (what nearly every node gives) can hold none of them but DEL: one look for it
    instead of a pattern scan of the whole text (some 40 ms of a 64-GPU fabric's 13 MB), and the pattern is not
    even compiled."""
    if (text.isascii() and "\x7f" not in text) or not _RAW.search(text):
        return text
    return _RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
