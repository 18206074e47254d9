"""XML read safely, for every XML input (NCCL's topology, hwloc's, nvidia-smi -q -x).

Parsed with defusedxml: a DTD (unless admitted), an entity declaration or an external reference is refused
with a one-line :class:`InputError`; elements and PCI functions are counted as they are read, so a file larger
than any node's is refused before it is held whole; each element's line is kept for errors that name it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import defusedxml
from defusedxml.ElementTree import DefusedXMLParser

from gdrcheck.collectors.bounds import MAX_FUNCTIONS, too_many_functions
from gdrcheck.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

# hwloc's XML of a 2-socket, 384-thread node with its PCI tree has some 10,000; nvidia-smi -q -x some 400 a GPU
MAX_XML_ELEMENTS = 500_000


class _LineBuilder(ET.TreeBuilder):
    """A TreeBuilder that remembers the line each element starts on."""

    def __init__(self, label: str = "input") -> None:
        super().__init__()
        self.lines: dict[int, int] = {}
        self.expat = None
        self.label = label
        self.elements = self.functions = 0

    def start(self, tag, attrs):  # noqa: D401 - TreeBuilder API
        # counted as they are read: a file of more functions or elements than a node's is refused before it
        # is held whole (32 MiB of "<a/>" would be some 8 million elements)
        self.elements += 1
        if self.elements > MAX_XML_ELEMENTS:
            raise InputError(f"{self.label}: more than {MAX_XML_ELEMENTS} XML elements, more than any real "
                             "node's topology has")
        if tag == "pci" or (tag == "object" and attrs.get("type") in ("PCIDev", "Bridge")):
            self.functions += 1
            if self.functions > MAX_FUNCTIONS:
                raise too_many_functions(self.label, self.functions)
        el = super().start(tag, attrs)
        if self.expat is not None:
            self.lines[id(el)] = self.expat.CurrentLineNumber
        return el

    # Comments and processing instructions are not kept. TreeBuilder's own handlers would
    # flush the text around each one, joining an element's text anew every time: quadratic
    # time for a file of many comments.
    def comment(self, text):  # noqa: D401 - TreeBuilder API
        return None

    def pi(self, target, text=None):  # noqa: D401 - TreeBuilder API
        return None


def parse_xml_safely(text: str, label: str, *, allow_doctype: bool,
                     what: str = "this kind of XML") -> tuple[ET.Element, dict[int, int]]:
    """Root element and {id(element): line}; any unsafe or damaged XML is an InputError.

    ``allow_doctype`` admits a plain ``<!DOCTYPE>`` (hwloc writes one); entity declarations and
    external references are refused either way.
    """
    builder = _LineBuilder(label)
    try:
        parser = DefusedXMLParser(target=builder, forbid_dtd=not allow_doctype, forbid_entities=True,
                                  forbid_external=True)
        builder.expat = parser.parser
        parser.feed(text)
        root = parser.close()
    except defusedxml.DTDForbidden:
        raise InputError(f"{label}: a DTD (<!DOCTYPE>) is not accepted in {what}") from None
    except defusedxml.EntitiesForbidden:
        raise InputError(f"{label}: XML entity declarations are not accepted") from None
    except defusedxml.ExternalReferenceForbidden:
        raise InputError(f"{label}: XML external references are not accepted") from None
    except ET.ParseError as e:
        line, col = getattr(e, "position", (0, 0))
        msg = str(e).split(":", 1)[0]
        raise InputError(f"{label}: line {line}: damaged XML ({msg}, column {col + 1})") from None
    except (ValueError, LookupError) as e:  # encoding declared that expat cannot take from a str
        raise InputError(f"{label}: unreadable XML ({e})") from None
    return root, builder.lines


_TAG = None


def close_cut_xml(text: str) -> Optional[tuple[str, int, int]]:
    """A file cut short (a post's excerpt, a full disk): (its text up to the last complete tag with the open
    elements closed, the line of that tag, the file's last line), or None where the cut is not a clean end
    (a closing tag that does not match)."""
    import re

    global _TAG
    if _TAG is None:
        _TAG = re.compile(r"<!--.*?-->|<\?.*?\?>|<(/?)([A-Za-z_][\w.:-]*)[^<>]*?(/?)>", re.S)
    end = text.rfind(">") + 1
    if end <= 0:
        return None
    kept = text[:end]
    stack: list[str] = []
    for m in _TAG.finditer(kept):
        closing, name, empty = m.group(1), m.group(2), m.group(3)
        if name is None or empty:
            continue
        if closing:
            if not stack or stack[-1] != name:
                return None
            stack.pop()
        else:
            stack.append(name)
    if not stack:
        return None  # complete as far as it goes: not a cut
    return kept + "".join(f"</{t}>" for t in reversed(stack)), kept.count("\n") + 1, text.count("\n") + 1
