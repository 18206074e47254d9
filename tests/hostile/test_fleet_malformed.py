"""One malformed report among many: ``fleet summarize`` lists it as unreadable, with its reason, and
summarises the others; never ``internal error`` (exit 3 with nothing for the other nodes).

The reports are real: ``gdrcheck pairs --json --from <fixture snapshot>``, run once per module. The
property replaces any value of one report (a finding's severity by a list, ``fingerprint.lines`` by a
number, the host by an object...), deletes keys, and gives names Markdown's specials; the summary is
made in every format.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdrcheck.cli.entry import main
from gdrcheck.status import exit_status

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ("h100-x1-vm", "h200-x1-vm", "h200-x2-vm")
EXAMPLES = int(os.environ.get("GDRCHECK_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CASES: Counter = Counter()  # property name -> examples run (read by benchmarks/fuzz_campaign.py)


def _gdrcheck(*argv: str):
    """``gdrcheck ARGV`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    sys.stdout, sys.stderr = out, err
    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


_REPORTS: dict = {}


def reports() -> dict:
    """{node name: the ``pairs --json`` report of a fixture snapshot}, made once."""
    if not _REPORTS:
        for name in FIXTURES:
            code, out, err = _gdrcheck("pairs", "--json", "--from", str(ROOT / "fixtures" / name / "snapshot.tar.gz"))
            assert code == 0 and "error" not in err, (name, code, err)  # each fixture guest passes
            _REPORTS[name] = json.loads(out)
    return _REPORTS


def _paths(value, at=()):
    """Every place in a JSON value, as a tuple of keys and indexes, the value itself first."""
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:6]):  # a long list: its first items stand for the rest
            yield from _paths(v, at + (i,))


MD_TEXT = st.text(alphabet=st.sampled_from("a|`*_[]<>~&\\#!-\n\r\x1b\u2028 "), max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2 ** 64) | st.floats(allow_nan=False) | st.text(max_size=8)
    | MD_TEXT | st.sampled_from(["error", "warning", "info", "pass", "fail", "unknown", "1.2", "2.0", "sha256:x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)


@st.composite
def mutations(draw):
    """(node name, the report mutated): one to three values replaced or keys removed."""
    name = draw(st.sampled_from(FIXTURES))
    doc = json.loads(json.dumps(reports()[name]))
    for _ in range(draw(st.integers(1, 3))):
        places = list(_paths(doc))
        at = draw(st.sampled_from(places))
        if not at:
            doc = draw(JSON_VALUES) if draw(st.booleans()) else doc
            continue
        parent = doc
        for k in at[:-1]:
            parent = parent[k]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[at[-1]]
        else:
            parent[at[-1]] = draw(JSON_VALUES)
    return name, doc


def expect_summary(bad_name: str, bad_doc) -> None:
    """The property: the two untouched reports are summarised, the mutated one is summarised or unreadable,
    in every format; no internal error."""
    CASES["fleet-malformed"] += 1
    good = [n for n in FIXTURES if n != bad_name]
    with tempfile.TemporaryDirectory() as d:
        for n in good:
            Path(d, f"{n}.json").write_text(json.dumps(reports()[n]))
        Path(d, f"bad-{bad_name}.json").write_text(json.dumps(bad_doc))
        code, out, err = _gdrcheck("fleet", "summarize", "--format", "json", d)
        assert "internal error" not in err and "Traceback" not in err, err
        doc = json.loads(out)
        assert code == doc["exit_status"] == exit_status(doc["status"]), (code, doc["status"], err)
        assert doc["nodes"]["reported"] + doc["nodes"]["unreadable"] == 3, doc["nodes"]
        grouped = ",".join(g["nodes"] for g in doc["groups"])
        for n in good:
            assert n.split("-")[1] in grouped, (n, grouped)  # h100-x1-vm folds into h[100,200]-x1-vm
        for fmt in ("text", "md"):
            code2, out2, err2 = _gdrcheck("fleet", "summarize", "--format", fmt, d)
            assert (code2, "internal error" in err2) == (code, False), (fmt, code2, err2)
            _assert_markdown_cells(out2) if fmt == "md" else None


def _assert_markdown_cells(text: str) -> None:
    """Every row of every table has as many cells as its header: no name or message ended a cell."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    head = cells = 0
    for t in tokens:
        if t.type == "thead_open":
            head, cells = -1, 0
        elif t.type in ("th_open", "td_open"):
            cells += 1
        elif t.type == "tr_close":
            if head == -1:
                head = cells
            assert cells == head, text
            cells = 0


@FUZZ
@given(mutations())
def test_fleet_malformed_report_never_stops_the_summary(case):
    expect_summary(*case)


@pytest.mark.parametrize("where, value, reason", [
    (("findings", 0, "severity"), ["error"], "findings[].severity is a list, not a string"),
    (("fingerprint", "lines"), 7, "fingerprint.lines is a number, not a list"),
    (("fingerprint", "lines", 0), {"a": 1}, "fingerprint.lines[] is an object, not a string"),
    (("fingerprint", "positions"), [], "fingerprint.positions is a list, not an object"),
    (("fingerprint", "shape"), None, "fingerprint.shape is null, not a string"),
    (("findings", 0), "GDR001", "findings[] is a string, not an object"),
    (("findings", 0, "subject"), "host", "findings[].subject is a string, not a list"),
    (("pairs",), {"a": 1}, "JSON but not a gdrcheck report"),
    (("pairs", 0, "verdict"), ["fail"], "pairs[].verdict is a list, not a string"),
    (("timed_out",), "yes", "timed_out is a string, not true or false"),
    (("host",), ["gpu1"], "host is a list, not a string"),
    (("status",), 1, "status is a number, not a string"),
])
def test_each_bad_field_is_named(where, value, reason):
    name = "h200-x2-vm"
    doc = json.loads(json.dumps(reports()[name]))
    parent = doc
    for k in where[:-1]:
        parent = parent[k]
    if isinstance(parent, list) and not parent:
        pytest.skip(f"{name} has no {where[0]}")
    parent[where[-1]] = value
    with tempfile.TemporaryDirectory() as d:
        for n in FIXTURES[:2]:
            Path(d, f"{n}.json").write_text(json.dumps(reports()[n]))
        Path(d, "bad.json").write_text(json.dumps(doc))
        code, out, err = _gdrcheck("fleet", "summarize", "--format", "json", d)
    assert "internal error" not in err, err
    got = json.loads(out)
    assert got["unreadable"] == [{"reason": reason, "count": 1, "nodes": "bad"}]
    assert got["nodes"]["reported"] == 2


def test_markdown_specials_in_names_stay_in_their_cell():
    docs = json.loads(json.dumps(reports()))
    with tempfile.TemporaryDirectory() as d:
        for n, doc in docs.items():
            doc["findings"][0]["code"] = "GDR121|x"
            doc["findings"][0]["message"] = "a | b `c` *d* <b>e</b> [f](g) ~~h~~ &amp;"
            Path(d, f"gpu|{n}*.json").write_text(json.dumps(doc))
        code, out, err = _gdrcheck("fleet", "summarize", "--format", "md", d)
    assert "internal error" not in err
    _assert_markdown_cells(out)
    assert "`gpu\\|h100-x1-vm*" in out and "GDR121\\|x" in out
    assert "\\<b\\>e\\</b\\>" in out and "\\*d\\*" in out and "\\[f\\](g)" in out


def test_a_fence_outlasts_the_lines_it_holds():
    from markdown_it import MarkdownIt

    docs = json.loads(json.dumps(reports()))
    docs["h200-x2-vm"]["fingerprint"]["lines"].append("host.x=```\n# heading")
    with tempfile.TemporaryDirectory() as d:
        for n, doc in docs.items():
            Path(d, f"{n}.json").write_text(json.dumps(doc))
        code, out, err = _gdrcheck("fleet", "summarize", "--format", "md", d)
    tokens = MarkdownIt("commonmark").parse(out)
    fenced = "".join(t.content for t in tokens if t.type == "fence")
    assert "host.x: (absent) -> ``` # heading" in fenced, out
    assert not any(t.type == "heading_open" and t.markup == "#" for t in tokens[1:]), out


@st.composite
def streams(draw):
    """What a fan-out tool may leave in one file: reports (whole, cut, pretty, ``host: `` prefixed), noise,
    bytes that are not text."""
    docs = reports()
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        doc = docs[draw(st.sampled_from(FIXTURES))]
        kind = draw(st.sampled_from(["line", "pretty", "prefixed", "cut", "noise", "binary"]))
        host = draw(st.sampled_from(["gpu01", "gpu|02", "a`b", "n\u00e9", "x"]))
        if kind == "line":
            parts.append(json.dumps(doc).encode() + b"\n")
        elif kind == "pretty":
            parts.append(json.dumps(doc, indent=1).encode() + b"\n")
        elif kind == "prefixed":
            body = json.dumps(doc, indent=draw(st.sampled_from([None, 1]))).encode()
            parts.append(b"".join(host.encode() + b": " + ln + b"\n" for ln in body.split(b"\n")))
        elif kind == "cut":
            raw = json.dumps(doc).encode()
            parts.append(raw[:draw(st.integers(0, len(raw)))] + b"\n")
        elif kind == "noise":
            parts.append(draw(st.text(max_size=30)).encode("utf-8", "surrogatepass") + b"\n")
        else:
            parts.append(draw(st.binary(max_size=30)))
    return b"".join(parts)


def expect_reader_summary(data: bytes, name: str) -> None:
    CASES["fleet-reader"] += 1
    with tempfile.TemporaryDirectory() as d:
        Path(d, name).write_bytes(data)
        said = None  # the status the JSON summary says; every format exits with it
        for fmt in ("json", "text", "md"):
            code, out, err = _gdrcheck("fleet", "summarize", "--format", fmt, d)
            assert "internal error" not in err and "Traceback" not in err, err
            if fmt == "json":
                said = json.loads(out)["exit_status"]
            assert code == said, (fmt, code, said, err)
            out.encode()


@FUZZ
@given(streams(), st.sampled_from(["node.json", "nodes.jsonl", "clush.out", "gpu\udcff.json"]))
def test_fleet_reader_takes_whatever_a_file_holds(data, name):
    expect_reader_summary(data, name)
