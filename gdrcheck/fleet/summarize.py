"""Fold node reports into small records, group them by fingerprint, and build the fleet document.

Memory: per node a name and a tuple (status, group ids, finding-code set id, reason);
per distinct shape its canonical lines once; per finding code one sample message.
No report is kept after ``add`` returns.
"""

from __future__ import annotations

import re

from gdrcheck.fleet.nodeset import fold
from gdrcheck.fleet.reader import Item
from gdrcheck.status import SEVERITIES, SEVERITY_RANK, STATUSES, exit_status, node_status
from gdrcheck.units import natural_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Optional

FLEET_FORMAT_VERSION = "1.0"  # the fleet document's own version (fleet.schema.json)
NO_FINGERPRINT = "no fingerprint in the report (made by an older gdrcheck?)"
WORSE = {"pass": 0, "unreadable": 1, "unknown": 2, "fail": 3}  # of two reports of one node, the worse is kept
TIMED_OUT = "timed out"


def _status(doc: dict) -> str:
    """The node's status: its report's own word, never better than its pairs and findings allow (a report
    from an older gdrcheck could say pass beside a failing pair)."""
    verdicts = [p.get("verdict") for p in doc.get("pairs") or () if isinstance(p, dict)]
    severities = [f.get("severity") for f in doc.get("findings") or ()
                  if isinstance(f, dict) and f.get("severity") in SEVERITY_RANK]
    derived = node_status(verdicts, severities, "error")
    st = doc.get("status")
    if st not in STATUSES:
        return derived
    return max(st, derived, key=("pass", "unknown", "fail").index)


def _fingerprint(doc: dict) -> Optional[dict]:
    fp = doc.get("fingerprint")
    if not isinstance(fp, dict) or not isinstance(fp.get("shape"), str):
        return None
    return fp


def _lines(fp: dict) -> tuple[str, ...]:
    return tuple(str(x) for x in fp.get("lines") or () if isinstance(x, str))


def _positions(fp: dict) -> dict[str, str]:
    pos = fp.get("positions")
    return {str(k): str(v) for k, v in pos.items()} if isinstance(pos, dict) else {}


class Fleet:
    """Accumulates one report at a time (``add``); ``document`` builds the fleet document."""

    def __init__(self) -> None:
        # name -> (status, timed_out, shape, topology, codeset id, reason)
        self.nodes: dict[str, tuple[str, bool, Optional[str], Optional[str], int, Optional[str]]] = {}
        self.shape_lines: dict[str, tuple[str, ...]] = {}
        self.positions: dict[tuple[str, str], dict[str, str]] = {}
        self._codesets: dict[frozenset[tuple[str, str]], int] = {frozenset(): 0}
        self.codesets: list[frozenset[tuple[str, str]]] = [frozenset()]
        self.samples: dict[tuple[str, str], tuple[str, str, list[str]]] = {}
        self._strings: dict[str, str] = {}
        self.duplicates: list[str] = []

    def _intern(self, s: Optional[str]) -> Optional[str]:
        if s is None:
            return None
        return self._strings.setdefault(s, s)

    def add(self, item: Item) -> None:
        name = item.name
        before = self.nodes.get(name)
        if before is not None and name not in self.duplicates:
            self.duplicates.append(name)
        doc = item.doc
        if doc is None:
            if before is None or WORSE[before[0]] <= WORSE["unreadable"]:
                self.nodes[name] = ("unreadable", False, None, None, 0, self._intern(item.problem or "unreadable"))
            return
        timed_out = doc.get("timed_out") is True
        status = "unknown" if timed_out else _status(doc)
        if before is not None and WORSE[before[0]] > WORSE[status]:
            return  # a node reported twice keeps its worse report: a passing copy never hides a failing one
        fp = None if timed_out else _fingerprint(doc)
        shape = topo = reason = None
        if fp is not None:
            shape = self._intern(fp["shape"])
            topo = self._intern(str(fp.get("topology") or ""))
            if shape not in self.shape_lines:
                self.shape_lines[shape] = _lines(fp)
            if (shape, topo) not in self.positions:
                self.positions[(shape, topo)] = _positions(fp)
        if timed_out:
            reason = TIMED_OUT
        elif fp is None:
            reason = NO_FINGERPRINT
            if status == "pass":  # the fleet cannot compare it with the others: not known to be alike
                status = "unknown"
        elif status == "unknown":
            reason = _unknown_reason(doc.get("summary_line"))
        codes = 0
        if not timed_out:
            codes = self._findings(name, doc["findings"])
        self.nodes[name] = (status, timed_out, shape, topo, codes, self._intern(reason))

    def _findings(self, name: str, findings: Iterable) -> int:
        seen = set()
        for f in findings:
            if not isinstance(f, dict) or not isinstance(f.get("code"), str):
                continue
            sev = f.get("severity") if f.get("severity") in SEVERITIES else "info"
            key = (f["code"], sev)
            if key in seen:
                continue
            seen.add(key)
            old = self.samples.get(key)
            if old is None or name < old[0]:
                subject = f.get("subject")
                subject = [str(s) for s in subject] if isinstance(subject, list) else []
                self.samples[key] = (name, " ".join(str(f.get("message") or "").split())[:300], subject)
        fs = frozenset(seen)
        idx = self._codesets.get(fs)
        if idx is None:
            idx = self._codesets[fs] = len(self.codesets)
            self.codesets.append(fs)
        return idx

    # -- the document ------------------------------------------------------------------------------------

    def document(self, expected: Optional[Sequence[str]] = None, reference: Optional[dict] = None,
                 reference_path: Optional[str] = None) -> dict[str, Any]:
        from gdrcheck import __version__

        by_status: dict[str, list[str]] = {"pass": [], "fail": [], "unknown": [], "unreadable": []}
        shapes: dict[str, dict[str, list[str]]] = {}
        unknown: dict[tuple[str, bool], list[str]] = {}
        unreadable: dict[str, list[str]] = {}
        for name in sorted(self.nodes):
            status, timed_out, shape, topo, _codes, reason = self.nodes[name]
            by_status[status].append(name)
            if status == "unreadable":
                unreadable.setdefault(reason, []).append(name)
                continue
            if shape is not None:
                shapes.setdefault(shape, {}).setdefault(topo, []).append(name)
            if reason is not None and status == "unknown":  # a failing node is listed as failing only
                unknown.setdefault((reason, timed_out), []).append(name)
        groups, outliers, ref = self._groups(shapes, reference, reference_path)
        reported = set(self.nodes)
        missing = sorted(set(expected) - reported) if expected is not None else []
        unexpected = sorted(reported - set(expected)) if expected is not None else []
        if outliers or by_status["fail"]:
            word = "fail"
        elif missing or unknown or unreadable or not self.nodes:
            word = "unknown"
        else:
            word = "pass"
        return {
            "format_version": FLEET_FORMAT_VERSION,
            "document": "fleet",
            "gdrcheck_version": __version__,
            "status": word,
            "exit_status": exit_status(word),
            "outliers": outliers,
            "nodes": {
                "expected": len(expected) if expected is not None else None,
                "reported": len(self.nodes) - len(by_status["unreadable"]),
                "grouped": sum(len(v) for s in shapes.values() for v in s.values()),
                "pass": len(by_status["pass"]), "fail": len(by_status["fail"]),
                "unknown": len(by_status["unknown"]), "unreadable": len(by_status["unreadable"]),
                "missing": len(missing), "unexpected": len(unexpected),
            },
            "reference": ref,
            "groups": groups,
            "findings": self._finding_docs(),
            "failing": _set_doc(by_status["fail"]),
            "unknown": [{"reason": r, "timed_out": t, **_set_doc(names)}
                        for (r, t), names in sorted(unknown.items(), key=lambda kv: (not kv[0][1], kv[0][0]))],
            "unreadable": [{"reason": r, **_set_doc(names)} for r, names in sorted(unreadable.items())],
            "missing": _set_doc(missing),
            "unexpected": _set_doc(unexpected),
        }

    def _groups(self, shapes: dict[str, dict[str, list[str]]], reference: Optional[dict],
                reference_path: Optional[str]):
        def size(shape: str) -> int:
            return sum(len(v) for v in shapes[shape].values())

        def first(shape: str) -> str:
            return min(n for v in shapes[shape].values() for n in v)

        order = sorted(shapes, key=lambda s: (-size(s), first(s)))
        if reference is not None:
            fp = reference["fingerprint"]
            ref_shape, ref_topo = fp["shape"], str(fp.get("topology") or "")
            ref_lines, ref_pos = _lines(fp), _positions(fp)
            source = "file"
        elif order:
            ref_shape = order[0]
            ref_topo = _main_topology(shapes[ref_shape])
            ref_lines, ref_pos = self.shape_lines[ref_shape], self.positions[(ref_shape, ref_topo)]
            source = "largest-group"
        else:
            ref_shape = ref_topo = None
            ref_lines, ref_pos, source = (), {}, "none"
        if ref_shape in shapes:
            order.remove(ref_shape)
            order.insert(0, ref_shape)
        ref_map = dict(_split(line) for line in ref_lines)
        groups = []
        outliers = False
        for i, shape in enumerate(order):
            topos = shapes[shape]
            is_ref = shape == ref_shape
            main = ref_topo if is_ref else _main_topology(topos)
            main_pos = ref_pos if is_ref else self.positions[(shape, main)]
            variants = []
            for topo in sorted((t for t in topos if t != main), key=lambda t: (-len(topos[t]), topos[t][0])):
                variants.append({"topology": topo, **_set_doc(topos[topo]),
                                 "positions_diff": _diff(main_pos, self.positions[(shape, topo)], "position")})
            diff = [] if is_ref else _diff(ref_map, dict(_split(line) for line in self.shape_lines[shape]), "key")
            names = [n for v in topos.values() for n in v]
            groups.append({"label": _label(i), "shape": shape, "topology": main, "reference": is_ref,
                           **_set_doc(names), "diff": diff, "topology_variants": variants})
            outliers = outliers or bool(variants) or not is_ref
        ref = {"source": source, "file": reference_path if reference is not None else None,
               "shape": ref_shape, "topology": ref_topo,
               "group": next((g["label"] for g in groups if g["reference"]), None)}
        return groups, outliers, ref

    def _finding_docs(self) -> list[dict[str, Any]]:
        nodes_of: dict[tuple[str, str], list[str]] = {}
        for name, rec in self.nodes.items():
            for key in self.codesets[rec[4]]:
                nodes_of.setdefault(key, []).append(name)
        names = _rule_names()
        out = []
        for (code, sev), nodes in sorted(nodes_of.items(), key=lambda kv: (SEVERITIES.index(kv[0][1]), kv[0][0])):
            node, message, subject = self.samples[(code, sev)]
            out.append({"code": code, "name": names.get(code), "severity": sev, **_set_doc(nodes),
                        "sample": {"node": node, "message": message, "subject": subject}})
        return out


def _unknown_reason(line) -> str:
    """``GDR041 acs-state-unknown 0000:02:00.0 (+7 more)`` -> ``GDR041 acs-state-unknown``: folds across nodes."""
    words = line.split() if isinstance(line, str) else []
    if not words:
        return "status unknown"
    if re.match(r"^[A-Z]+\d+$", words[0]):
        return " ".join(words[:2])
    return " ".join(words)[:120]


def _rule_names() -> dict[str, str]:
    try:
        from gdrcheck.rules import by_code

        return {code: r.name for code, r in by_code().items()}
    except Exception:  # noqa: BLE001 - names are a courtesy; codes are the contract
        return {}


def _main_topology(topos: dict[str, list[str]]) -> str:
    return min(topos, key=lambda t: (-len(topos[t]), topos[t][0]))


def _split(line: str) -> tuple[str, str]:
    key, _, value = line.partition("=")
    return key, value


def _diff(ref: dict[str, str], other: dict[str, str], what: str) -> list[dict[str, Optional[str]]]:
    """What differs, by key in natural order: ``reference`` or ``value`` is None where the key is absent."""
    out = []
    for key in sorted(set(ref) | set(other), key=natural_key):
        a, b = ref.get(key), other.get(key)
        if a != b:
            out.append({what: key, "reference": a, "value": b})
    return out


def _label(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def _set_doc(names: Sequence[str]) -> dict[str, Any]:
    return {"count": len(names), "nodes": fold(names)}
