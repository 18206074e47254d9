"""``report --probe FILE`` with a field of the wrong type: one line, exit 2, never a crash.

The file is the real probe document measured on the H100 machine (fixtures/h100-x1-vm/probe.json) with one
field at a time given another JSON type; each variant is read as ``report --probe`` reads it (the document
held to probe.schema.json's types) and, when accepted, drawn into the report's "Measured" section.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from support.cli_util import assert_clean_error, run

from gdrcheck.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "fixtures" / "h100-x1-vm"
OTHERS = ([], {}, 7, 1.5, "x", None, True, [[1]], {"a": [1]})


def places(doc, at=()):
    yield at
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from places(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from places(v, at + (i,))


def variant(doc, at, value):
    out = copy.deepcopy(doc)
    parent = out
    for k in at[:-1]:
        parent = parent[k]
    parent[at[-1]] = value
    return out


def read_and_draw(path):
    from gdrcheck.collectors.clip import printable
    from gdrcheck.documents.rules import rules_part
    from gdrcheck.probe.html import load_probe, measured_section

    probe = printable(load_probe(str(path)))
    codes = [f.get("code") for f in probe.get("findings") or [] if isinstance(f, dict)]
    measured_section(probe, rules_part(codes))


def test_every_field_of_another_type_is_bad_input_or_drawn(tmp_path):
    doc = json.loads((H100 / "probe.json").read_text())
    crashes = []
    f = tmp_path / "probe.json"
    for at in list(places(doc))[1:]:
        for value in OTHERS:
            f.write_text(json.dumps(variant(doc, at, value)))
            try:
                read_and_draw(f)
            except InputError:
                pass
            except Exception as e:  # noqa: BLE001 - the finding
                crashes.append(f"{'.'.join(map(str, at))} = {value!r}: {type(e).__name__}: {e}")
    assert crashes == [], f"{len(crashes)} crashes, e.g. " + "\n".join(crashes[:10])


@pytest.mark.parametrize("field,value", [("checks", [{"check": "p2p", "elapsed_s": "soon"}]),
                                         ("findings", [{"code": ["GDR001"]}]), ("host", {"a": 1})])
def test_the_command_says_which_field_in_one_line(tmp_path, field, value):
    doc = json.loads((H100 / "probe.json").read_text())
    doc[field] = value
    bad = tmp_path / "probe.json"
    bad.write_text(json.dumps(doc))
    p = run("report", "--from", H100 / "snapshot.tar.gz", "--probe", bad, "-o", tmp_path / "r.html")
    assert_clean_error(p)
    assert "not a probe document" in p.stderr


def test_a_deeply_nested_file_is_bad_input(tmp_path):
    bad = tmp_path / "probe.json"
    bad.write_text('{"dry_run": false, "checks": [], "notes": ' + "[" * 200000 + "]" * 200000 + "}")
    p = run("report", "--from", H100 / "snapshot.tar.gz", "--probe", bad, "-o", tmp_path / "r.html")
    assert_clean_error(p)
