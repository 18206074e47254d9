"""The probe measured on the H100 machine (fixtures/h100-x1-vm/probe.json), and ``report --probe``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from support.cli_util import assert_clean_error, call

H100 = Path(__file__).resolve().parents[2] / "fixtures" / "h100-x1-vm"


def _probe():
    return json.loads((H100 / "probe.json").read_text())


def test_h100_probe_validates_and_says_what_it_measured():
    doc = _probe()
    schema = json.loads(call("schema", "probe").stdout)
    jsonschema.validate(doc, schema)
    by = {c["check"]: c for c in doc["checks"]}
    assert by["cuda"]["status"] == "ok" and by["cuda"]["measured"]["gpu_direct_rdma_supported"] == 1
    assert by["cuda"]["measured"]["dmabuf_export"]["ok"] is True
    hb = by["host-bandwidth"]
    assert hb["status"] == "ok" and hb["measured"]["verified"] is True
    assert hb["expected"]["link"] == "Gen5 x16"
    for k in ("h2d_gb_per_s", "d2h_gb_per_s"):  # the measurement stands beside the link's expectation
        assert hb["measured"][k] >= hb["expected"]["degraded_below_gb_per_s"]
    for c in doc["checks"]:  # BAR1 back where it was after every step
        cl = c["evidence"]["cleanup"]["0000:00:06.0"]
        assert cl["after"]["bar1_used_bytes"] == cl["before"]["bar1_used_bytes"]
    assert by["gds-read"]["measured"]["mode"] == "compat"  # cuFile without nvidia-fs
    assert {"GDR151"} <= {f["code"] for f in doc["findings"]}


def test_report_gains_a_measured_section(tmp_path):
    out = tmp_path / "node.html"
    p = call("report", "--from", H100 / "snapshot.tar.gz", "--probe", H100 / "probe.json", "-o", out)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    h2d = next(c for c in _probe()["checks"] if c["check"] == "host-bandwidth")["measured"]["h2d_gb_per_s"]
    assert '<section id="measured">' in page and f"{h2d} GB/s" in page and "Gen5 x16" in page
    assert page.index('id="measured"') < page.index('id="findings"')
    plain = tmp_path / "plain.html"
    call("report", "--from", H100 / "snapshot.tar.gz", "-o", plain)
    assert 'id="measured"' not in plain.read_text()


def test_report_probe_that_is_not_a_probe_document(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"pairs": []}')
    out = tmp_path / "node.html"
    assert_clean_error(call("report", "--from", H100 / "snapshot.tar.gz", "--probe", bad, "-o", out))
    assert not out.exists()
