"""What ``fleet summarize`` reads of a report, checked field by field as the report is read.

A report comes from any node, any gdrcheck version, or an editor: every field the summary uses has
the type it must have, or the report is an ``unreadable`` node with the reason (``findings[].severity
is a list, not a string``), and the other nodes are summarised. Fields the summary does not use are
not looked at; a field an older gdrcheck did not write (``fingerprint``, ``status``) may be absent.
The reason names a list item as ``[]``, so one kind of damage folds into one line across nodes.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

NOT_A_REPORT = "JSON but not a gdrcheck report"
_TYPE_WORDS = {dict: "an object", list: "a list", str: "a string", bool: "true or false", int: "a number",
               float: "a number", type(None): "null"}


def _word(value) -> str:
    return _TYPE_WORDS.get(type(value), type(value).__name__)


class _Bad(Exception):
    pass


def _want(value, types, where: str, optional: bool = True) -> None:
    """``value`` is one of ``types`` (None allowed when ``optional``), else the report is unreadable."""
    if (value is None and optional) or isinstance(value, types):
        return
    raise _Bad(f"{where} is {_word(value)}, not {_TYPE_WORDS[types[0]]}")


def _strings(value, where: str) -> None:
    _want(value, (list,), where)
    for s in value or ():
        _want(s, (str,), where + "[]", optional=False)


def _finding(f) -> None:
    _want(f, (dict,), "findings[]", optional=False)
    _want(f.get("code"), (str,), "findings[].code", optional=False)
    _want(f.get("severity"), (str,), "findings[].severity")
    _want(f.get("message"), (str,), "findings[].message")
    _strings(f.get("subject"), "findings[].subject")


def _fingerprint(fp) -> None:
    _want(fp, (dict,), "fingerprint")
    if fp is None:
        return  # made by an older gdrcheck: the summary says so
    _want(fp.get("shape"), (str,), "fingerprint.shape", optional=False)
    _want(fp.get("topology"), (str,), "fingerprint.topology")
    _strings(fp.get("lines"), "fingerprint.lines")
    pos = fp.get("positions")
    _want(pos, (dict,), "fingerprint.positions")
    for v in (pos or {}).values():
        _want(v, (str,), "fingerprint.positions{}", optional=False)


def check_report(doc) -> None:
    """Raises ``_Bad`` with the first field that is not as the summary reads it."""
    if not isinstance(doc, dict):
        raise _Bad(NOT_A_REPORT)
    if not isinstance(doc.get("format_version"), str) or not isinstance(doc.get("findings"), list):
        raise _Bad(NOT_A_REPORT)
    if not isinstance(doc.get("pairs", []), list):
        raise _Bad(NOT_A_REPORT)
    if doc["format_version"].split(".")[0] != "1":
        raise _Bad(f"format_version {doc['format_version'][:20]} not supported")
    _want(doc.get("host"), (str,), "host")
    _want(doc.get("status"), (str,), "status")
    _want(doc.get("timed_out"), (bool,), "timed_out")
    _want(doc.get("summary_line"), (str,), "summary_line")
    for p in doc.get("pairs") or ():
        _want(p, (dict,), "pairs[]", optional=False)
        _want(p.get("verdict"), (str,), "pairs[].verdict")
    for f in doc["findings"]:
        _finding(f)
    _fingerprint(doc.get("fingerprint"))


def report_problem(doc) -> Optional[str]:
    """None for a report ``fleet summarize`` can read; else the reason, in a few words."""
    try:
        check_report(doc)
    except _Bad as e:
        return str(e)
    return None
