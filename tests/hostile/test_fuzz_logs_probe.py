"""Fuzzing two readers of files a user hands in: an NCCL log (``--from job.log``) and ``report --probe FILE``.

* The NCCL logs are the public ones in fixtures/nccl-logs-public and the node's own excerpt, mutated line by
  line (a number made hex, huge, negative or empty; a line repeated, cut, moved to another host, or given
  random bytes); each is read, judged and made into documents, or refused as bad input, never anything else.
* The probe document is the one measured on the H100 machine, with fields given random JSON of any type; it is
  read as ``report --probe`` reads it and drawn, or refused as bad input.

``benchmarks/fuzz_campaign.py`` runs these with many more examples.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdrcheck.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
LOGS = sorted((ROOT / "fixtures" / "nccl-logs-public").glob("*.log")) + \
    [ROOT / "fixtures" / "nccl-dump-h100-x1-vm" / "nccl-debug-excerpt.log"]
PROBE = ROOT / "fixtures" / "h100-x1-vm" / "probe.json"
EXAMPLES = int(os.environ.get("GDRCHECK_FUZZ_EXAMPLES", "25"))
# the suite's few examples are the same every run (a test that fails must fail every time); the campaign's
# many are drawn afresh
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize="GDRCHECK_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CASES: Counter = Counter()  # property name -> examples run (read by the campaign)
_NUMBER = re.compile(r"\b\d+\b")
_TEXT: dict = {}


def _lines(path: Path) -> list:
    if path not in _TEXT:
        _TEXT[path] = path.read_text(errors="replace").splitlines()
    return _TEXT[path]


NUMBERS = st.sampled_from(["a", "ff", "0x1f", "-1", "", "99999999999999999999", "1e9", "0", "3b", "٣"])
JUNK = st.text(alphabet=st.sampled_from("ab01:./ |#[]\x00\x1b\ufffd\u202e-_=,"), max_size=40)


@st.composite
def mutated_log(draw) -> str:
    lines = list(_lines(draw(st.sampled_from(LOGS))))
    for _ in range(draw(st.integers(1, 12))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["number", "repeat", "cut", "host", "junk", "drop"]))
        line = lines[i]
        if how == "number" and _NUMBER.search(line):
            matches = list(_NUMBER.finditer(line))
            m = matches[draw(st.integers(0, len(matches) - 1))]
            lines[i] = line[:m.start()] + draw(NUMBERS) + line[m.end():]
        elif how == "repeat":
            lines[i:i] = [line] * draw(st.integers(1, 3))
        elif how == "cut":
            lines[i] = line[:draw(st.integers(0, len(line)))]
        elif how == "host":
            lines[i] = re.sub(r"^[^:\s]+:", draw(st.sampled_from(["other:", f"h{i}:", ":", "a b:"])), line)
        elif how == "junk":
            lines[i] = line + draw(JUNK)
        else:
            del lines[i]
    return "\n".join(lines) + "\n"


def expect_judged_or_input_error(text: str) -> None:
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.documents.node import node_documents
    from gdrcheck.rules.engine import evaluate

    CASES["nccl-log"] += 1
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "job.log")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        try:
            facts = load_facts(path, want_driver=False)
        except InputError:
            return
    node_documents(evaluate(facts), describe_input=True)


@FUZZ
@given(mutated_log())
def test_nccl_log_mutations_are_judged_or_bad_input(text):
    expect_judged_or_input_error(text)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() |
                           st.text(max_size=8), lambda inner: st.lists(inner, max_size=3) |
                           st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def _places(doc, at=()):
    yield at
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _places(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            yield from _places(v, at + (i,))


@st.composite
def mutated_probe(draw) -> dict:
    doc = json.loads(PROBE.read_text())
    places = list(_places(doc))[1:]
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.sampled_from(places))
        parent = doc
        try:
            for k in at[:-1]:
                parent = parent[k]
            parent[at[-1]] = draw(JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue
    return copy.deepcopy(doc)


def expect_drawn_or_input_error(doc: dict) -> None:
    from gdrcheck.collectors.clip import printable
    from gdrcheck.documents.rules import rules_part
    from gdrcheck.probe.html import load_probe, measured_section

    CASES["probe-file"] += 1
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "probe.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        try:
            probe = printable(load_probe(path))
        except InputError:
            return
    codes = [f.get("code") for f in probe.get("findings") or [] if isinstance(f, dict)]
    measured_section(probe, rules_part(codes))


@FUZZ
@given(mutated_probe())
def test_probe_file_mutations_are_drawn_or_bad_input(doc):
    expect_drawn_or_input_error(doc)
