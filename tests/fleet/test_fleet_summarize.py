"""gdrcheck fleet summarize: inputs, grouping, diff, reference, expected nodes, findings, formats, exit status."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from support import fleet_docs as fd
from support import fleet_trees
from support.cli_util import assert_clean_error, call

from gdrcheck.cli.entry import main
from gdrcheck.status import exit_status

try:
    import jsonschema
except ImportError:  # the test extra
    jsonschema = None


def fleet(*args, stdin: bytes = b""):
    """Run ``gdrcheck fleet summarize ARGS`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    sys.stdout, sys.stderr = out, err
    try:
        main(["fleet", "summarize", *map(str, args)])
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def fleet_json(*args, stdin: bytes = b""):
    code, out, err = fleet("--format", "json", *args, stdin=stdin)
    assert "Traceback" not in err
    doc = json.loads(out)
    assert doc["exit_status"] == code
    return doc


def healthy(n: int, start: int = 1, **kw):
    return {f"gpu{i:03d}": fd.report(f"gpu{i:03d}", **kw) for i in range(start, start + n)}


# -- grouping, diff, reference ---------------------------------------------------------------------------


def test_alike_and_passing_is_0(tmp_path):
    d = fd.write_fleet(tmp_path / "out", healthy(8))
    code, out, err = fleet(d)
    assert code == 0, out + err
    assert "8 reports" in out and "gpu[001-008]  reference" in out
    assert out.rstrip().endswith("status: pass (exit 0): all nodes alike and passing")
    doc = fleet_json(d)
    assert [g["nodes"] for g in doc["groups"]] == ["gpu[001-008]"] and doc["outliers"] is False


def test_outlier_group_is_diffed_key_by_key(tmp_path):
    docs = healthy(6)
    for n in ("gpu003", "gpu005"):
        docs[n] = fd.report(n, changes={"bridge[bridge1].acs": "RR,CR", "host.module.nvidia_peermem": None,
                                        "host.module.nv_peer_mem": "loaded"})
    d = fd.write_fleet(tmp_path / "out", docs)
    code, out, _ = fleet(d)
    assert code == 1
    assert "gpu[001-002,004,006]  reference" in out
    assert "bridge[bridge1].acs: off -> RR,CR" in out
    assert "host.module.nv_peer_mem: (absent) -> loaded" in out
    assert "host.module.nvidia_peermem: loaded -> (absent)" in out
    doc = fleet_json(d)
    a, b = doc["groups"]
    assert (a["reference"], b["reference"], b["nodes"], b["count"]) == (True, False, "gpu[003,005]", 2)
    assert b["diff"] == [
        {"key": "bridge[bridge1].acs", "reference": "off", "value": "RR,CR"},
        {"key": "host.module.nv_peer_mem", "reference": None, "value": "loaded"},
        {"key": "host.module.nvidia_peermem", "reference": "loaded", "value": None},
    ]
    assert doc["status"] == "fail" and doc["outliers"] is True


def test_long_diffs_are_capped_in_text_and_whole_in_json(tmp_path):
    changes = {f"device[gpu{i}].link": "x8 max x16" for i in range(40)}
    docs = {**healthy(3), "gpu004": fd.report("gpu004", changes=changes)}
    d = fd.write_fleet(tmp_path / "out", docs)
    _, out, _ = fleet(d)
    assert "(+20 more)" in out
    # natural order: gpu2 before gpu10
    assert out.index("device[gpu2].link") < out.index("device[gpu10].link")
    assert len(fleet_json(d)["groups"][1]["diff"]) == 40


def test_same_shape_other_addresses_are_topology_variants(tmp_path):
    docs = healthy(5)
    docs["gpu006"] = fd.report("gpu006", positions=fd.renumbered())
    d = fd.write_fleet(tmp_path / "out", docs)
    code, out, _ = fleet(d)
    assert code == 1
    assert "same shape, different addresses (renumbered buses): 1 node gpu006" in out
    assert "gpu0: 0000:03:00.0 -> 0000:13:00.0" in out
    doc = fleet_json(d)
    assert len(doc["groups"]) == 1
    g = doc["groups"][0]
    assert g["count"] == 6 and g["nodes"] == "gpu[001-006]"
    (v,) = g["topology_variants"]
    assert v["nodes"] == "gpu006" and v["topology"] != g["topology"]
    assert {"position": "nic0", "reference": "0000:05:00.0", "value": "0000:15:00.0"} in v["positions_diff"]


def test_ties_are_broken_by_the_first_node_name_whatever_the_input_order(tmp_path):
    a = {f"n{i}": fd.report(f"n{i}") for i in (3, 4)}
    b = {f"n{i}": fd.report(f"n{i}", changes={"host.iommu.mode": "translated"}) for i in (1, 9)}
    d1 = fd.write_fleet(tmp_path / "one", {**a, **b})
    d2 = fd.write_fleet(tmp_path / "two", {**b, **a})
    j1 = tmp_path / "all.jsonl"
    j1.write_text("".join(fd.dumps(x) + "\n" for x in [*a.values(), *b.values()]))
    j2 = tmp_path / "rev.jsonl"
    j2.write_text("".join(fd.dumps(x) + "\n" for x in reversed([*a.values(), *b.values()])))
    outs = {fleet("--format", "json", p)[1] for p in (d1, d2, j1, j2)}
    assert len(outs) == 1
    doc = json.loads(outs.pop())
    assert doc["groups"][0]["nodes"] == "n[1,9]" and doc["groups"][0]["reference"] is True


def test_reference_file_overrides_the_majority(tmp_path):
    docs = healthy(5)
    docs["gpu006"] = fd.report("gpu006", changes={"host.iommu.mode": "translated"})
    # the whole fleet is built the same wrong way; the golden report says so
    golden = fd.write(tmp_path / "golden.json", fd.report("golden", changes={"host.iommu.mode": "translated"}),
                      pretty=True)
    d = fd.write_fleet(tmp_path / "out", docs)
    doc = fleet_json("--reference", golden, d)
    ref, other = doc["groups"]
    assert ref["nodes"] == "gpu006" and ref["reference"] is True
    assert other["diff"] == [{"key": "host.iommu.mode", "reference": "translated", "value": "passthrough"}]
    assert doc["reference"]["source"] == "file" and doc["reference"]["file"] == str(golden)
    # a golden report that no node matches: every group is an outlier
    alone = fd.write_fleet(tmp_path / "alone", healthy(3))
    doc = fleet_json("--reference", golden, alone)
    assert doc["exit_status"] == 1 and doc["reference"]["group"] is None
    assert doc["groups"][0]["diff"] == [{"key": "host.iommu.mode", "reference": "translated",
                                         "value": "passthrough"}]
    code, out, _ = fleet("--reference", golden, alone)
    assert "no node matches it" in out


def test_reference_file_must_be_a_report_with_a_fingerprint(tmp_path):
    d = fd.write_fleet(tmp_path / "out", healthy(2))
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    old = fd.write(tmp_path / "old.json", fd.report("x", with_fingerprint=False))
    for ref in (bad, old, tmp_path / "nonexistent.json"):
        code, _, err = fleet("--reference", ref, d)
        assert code == 2 and err.startswith("gdrcheck: error: --reference") and len(err.splitlines()) == 1


# -- expected, missing, unexpected, unknown, failing -----------------------------------------------------


def test_expect_lists_missing_and_unexpected_nodes(tmp_path):
    docs = healthy(6)
    del docs["gpu002"]
    docs["login1"] = fd.report("login1")
    d = fd.write_fleet(tmp_path / "out", docs)
    code, out, _ = fleet("--expect", "gpu[001-006],gpu[077,101]", d)
    assert code == 3
    assert "missing (no report): 3 nodes gpu[002,077,101]" in out
    assert "unexpected (not in --expect): 1 node login1" in out
    doc = fleet_json("--expect", "gpu[001-006],gpu[077,101]", d)
    assert doc["missing"] == {"count": 3, "nodes": "gpu[002,077,101]"}
    assert doc["unexpected"] == {"count": 1, "nodes": "login1"}
    assert doc["nodes"]["expected"] == 8 and doc["status"] == "unknown"


def test_bad_expect_is_a_usage_error(tmp_path):
    d = fd.write_fleet(tmp_path / "out", healthy(1))
    for bad in ("gpu[001-10]", "gpu[1", "gpu[3-1]"):
        code, out, err = fleet("--expect", bad, d)
        assert code == 2 and out == "" and err.startswith("gdrcheck: error: --expect")


def test_unknown_and_timed_out_nodes_are_listed_apart_from_failing_ones(tmp_path):
    docs = healthy(4)
    docs["gpu005"] = fd.report("gpu005", status="unknown", findings=[("GDR041", "info")],
                               summary_line="GDR041 acs-state-unknown 0000:02:00.0 (+7 more)")
    docs["gpu006"] = fd.report("gpu006", timed_out=True, changes={"devices.gpu": "0"}, findings=[("GDR122", "warning")])
    d = fd.write_fleet(tmp_path / "out", docs)
    code, out, _ = fleet(d)
    assert code == 3, out
    assert "unknown (could not decide): 2 nodes" in out
    assert "  timed out: 1 node gpu006" in out
    assert "  GDR041 acs-state-unknown: 1 node gpu005" in out
    assert "failing" not in out
    doc = fleet_json(d)
    # a timed-out report is partial: not grouped, its findings not counted
    assert [g["nodes"] for g in doc["groups"]] == ["gpu[001-005]"]
    assert [f["code"] for f in doc["findings"]] == ["GDR041"]
    assert doc["unknown"][0] == {"reason": "timed out", "timed_out": True, "count": 1, "nodes": "gpu006"}
    # a failing node makes it 1, and is listed as failing
    docs["gpu007"] = fd.report("gpu007", findings=[("GDR040", "error")])
    fd.write_fleet(d, {"gpu007": docs["gpu007"]})
    code, out, _ = fleet(d)
    assert code == 1 and "failing: 1 node gpu007" in out


def test_unknown_reasons_fold_across_nodes_and_are_capped_in_text(tmp_path):
    docs = healthy(2)
    for i in range(3, 6):
        docs[f"gpu{i:03d}"] = fd.report(f"gpu{i:03d}", status="unknown",
                                        summary_line=f"GDR041 acs-state-unknown 0000:0{i}:00.0 (+{i} more)")
    for i in range(6, 36):
        docs[f"gpu{i:03d}"] = fd.report(f"gpu{i:03d}", status="unknown", summary_line=f"GDR{i:03d} rule-{i}")
    d = fd.write_fleet(tmp_path / "out", docs)
    doc = fleet_json(d)
    assert {"reason": "GDR041 acs-state-unknown", "timed_out": False, "count": 3,
            "nodes": "gpu[003-005]"} in doc["unknown"]
    assert len(doc["unknown"]) == 31
    _, out, _ = fleet(d)
    assert "  (+11 more reasons)" in out


def test_findings_by_severity_then_code_with_folded_nodes_and_one_sample(tmp_path):
    docs = healthy(10)
    for i in (3, 4, 5, 9):
        n = f"gpu{i:03d}"
        docs[n] = fd.report(n, findings=[("GDR040", "error", f"0000:02:0{i}.0"), ("GDR003", "info")])
    docs["gpu010"] = fd.report("gpu010", findings=[("GDR080", "warning"), ("GDR003", "warning")])
    d = fd.write_fleet(tmp_path / "out", docs)
    doc = fleet_json(d)
    assert [(f["code"], f["severity"], f["count"], f["nodes"]) for f in doc["findings"]] == [
        ("GDR040", "error", 4, "gpu[003-005,009]"),
        ("GDR003", "warning", 1, "gpu010"),
        ("GDR080", "warning", 1, "gpu010"),
        ("GDR003", "info", 4, "gpu[003-005,009]"),
    ]
    s = doc["findings"][0]["sample"]
    assert s == {"node": "gpu003", "message": "GDR040 on 0000:02:03.0 of gpu003", "subject": ["0000:02:03.0"]}
    assert doc["findings"][0]["name"] == "acs-redirect-on-path"
    _, out, _ = fleet(d)
    rows = [ln.split() for ln in out.splitlines()]
    assert ["GDR040", "error", "acs-redirect-on-path", "4", "gpu[003-005,009]"] in rows
    assert "e.g. gpu003: GDR040 on 0000:02:03.0 of gpu003" in out


# -- inputs ----------------------------------------------------------------------------------------------


def test_directories_as_clush_srun_ansible_and_dshbak_leave_them(tmp_path):
    docs = healthy(3)
    clush = fd.write_fleet(tmp_path / "clush", docs)                        # --outdir: gpu001
    (clush / "err").mkdir()                                                  # --errdir inside: not read
    (clush / "err" / "gpu001").write_text("ssh: connect to host gpu001 port 22: Connection refused\n")
    (clush / ".gpu001.swp").write_text("x")                                  # hidden: skipped
    srun = fd.write_fleet(tmp_path / "srun", docs, suffix=".json")           # --output=%N.json
    (srun / "gpu001.err").write_text("slurmstepd: error: something\n")       # --error=%N.err: skipped
    ansible = fd.write_fleet(tmp_path / "ansible", docs, suffix=".json")     # fetch flat=true
    # file names win over the report's host (srun %N short names, FQDN in the report)
    for p in ansible.iterdir():
        doc = json.loads(p.read_text())
        doc["host"] = doc["host"] + ".cluster.example"
        fd.write(p, doc)
    dshbak = tmp_path / "dshbak"                                              # dshbak -d: pretty JSON per host
    for n, doc in docs.items():
        fd.write(dshbak / n, doc, pretty=True)
    for d in (clush, srun, ansible, dshbak):
        doc = fleet_json("--expect", "gpu[001-003]", d)
        assert doc["exit_status"] == 0, (d, doc)
        assert doc["groups"][0]["nodes"] == "gpu[001-003]" and doc["nodes"]["reported"] == 3


def test_several_paths_and_files(tmp_path):
    docs = healthy(4)
    a = fd.write(tmp_path / "gpu001.json", docs["gpu001"])
    b = fd.write_fleet(tmp_path / "rest", {k: v for k, v in docs.items() if k != "gpu001"})
    doc = fleet_json(a, b, "--expect", "gpu[001-004]")
    assert doc["exit_status"] == 0 and doc["nodes"]["reported"] == 4


def test_jsonl_names_nodes_by_their_host(tmp_path):
    docs = healthy(5)
    docs["gpu006"] = fd.report(None)
    p = tmp_path / "sweep.out"
    p.write_text("".join(fd.dumps(x) + "\n" + ("\nsrun: warning: a line between reports\n" if i == 2 else "")
                         for i, x in enumerate(docs.values())))
    doc = fleet_json(p)
    assert doc["groups"][0]["nodes"] == "gpu[001-005],sweep:8" and doc["unreadable"] == []
    # a .jsonl file holding one report is still named by its host
    one = fd.write(tmp_path / "one.jsonl", docs["gpu002"])
    assert fleet_json(one)["groups"][0]["nodes"] == "gpu002"
    # a .json file holding one compact report is named by the file
    assert fleet_json(fd.write(tmp_path / "gpu999.json", docs["gpu002"]))["groups"][0]["nodes"] == "gpu999"


@pytest.mark.parametrize("sep", [": ", ":"])
def test_prefixed_stdin_as_pdsh_and_clush_print_it(sep):
    docs = healthy(4)
    docs["gpu005"] = fd.report("gpu005", changes={"host.iommu.mode": "translated"})
    stream = fd.prefixed(docs, sep=sep).encode()
    for args in (("-",), ("--input-format", "prefixed", "-")):
        doc = fleet_json("--expect", "gpu[001-005]", *args, stdin=stream)
        assert [g["nodes"] for g in doc["groups"]] == ["gpu[001-004]", "gpu005"]
        assert doc["missing"]["count"] == 0


def test_prefixed_pretty_reports_interleaved_line_by_line():
    """pdsh without --jsonl: each host's pretty-printed lines arrive interleaved with the others'."""
    docs = healthy(3)
    per_host = {h: json.dumps(d, indent=2, sort_keys=True).splitlines() for h, d in docs.items()}
    lines = ["gpu009: Warning: Permanently added 'gpu009' (ED25519) to the list of known hosts."]
    for i in range(max(len(v) for v in per_host.values())):
        lines += [f"{h}: {v[i]}" for h, v in per_host.items() if i < len(v)]
    lines += ["gpu004: {\"format_version\": \"1.1\", \"pairs\": ["]  # cut off
    doc = fleet_json("--input-format", "prefixed", "-", stdin=("\n".join(lines) + "\n").encode())
    assert doc["groups"][0]["nodes"] == "gpu[001-003]"
    assert {(e["reason"], e["nodes"]) for e in doc["unreadable"]} == {
        ("truncated JSON (cut off mid-write?)", "gpu004"), ("no report in the output", "gpu009")}


def test_plain_json_on_stdin_is_named_by_its_host():
    doc = fleet_json("-", stdin=json.dumps(fd.report("gpu042"), indent=2).encode())
    assert doc["groups"][0]["nodes"] == "gpu042"


def test_unreadable_reports_are_nodes_not_crashes(tmp_path):
    d = fd.write_fleet(tmp_path / "out", healthy(3))
    (d / "gpu004").write_text("")
    (d / "gpu005").write_text(fd.dumps(fd.report("gpu005"))[:500])
    (d / "gpu006").write_text("Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'x'\n")
    (d / "gpu007").write_text('{"hello": "world"}')
    (d / "gpu008").write_text(json.dumps({**fd.report("gpu008"), "format_version": "2.0"}))
    (d / "gpu009").write_bytes(b"\xff\xfe{")
    (d / "gpu010").write_text("[" * 100000)
    code, out, err = fleet(d)
    assert code == 3 and "Traceback" not in err and err == ""
    doc = fleet_json(d)
    assert {e["reason"]: e["nodes"] for e in doc["unreadable"]} == {
        "empty file": "gpu004",
        "truncated JSON (cut off mid-write?)": "gpu005",
        "not JSON (a traceback?)": "gpu006",
        "JSON but not a gdrcheck report": "gpu007",
        "format_version 2.0 not supported": "gpu008",
        "not UTF-8 text": "gpu009",
        "JSON nests too deeply": "gpu010",
    }
    assert doc["nodes"]["unreadable"] == 7 and doc["nodes"]["reported"] == 3
    assert "unreadable reports: 7 nodes" in out and "  empty file: 1 node gpu004" in out
    # with a failing node it is 1
    fd.write(d / "gpu011", fd.report("gpu011", findings=[("GDR020", "error")]))
    assert fleet(d)[0] == 1


def test_reports_without_fingerprint_cannot_be_grouped(tmp_path):
    docs = healthy(2)
    docs["gpu003"] = fd.report("gpu003", with_fingerprint=False)
    doc = fleet_json(fd.write_fleet(tmp_path / "out", docs))
    assert doc["exit_status"] == 3 and doc["groups"][0]["nodes"] == "gpu[001-002]"
    assert doc["unknown"][0]["nodes"] == "gpu003" and "no fingerprint" in doc["unknown"][0]["reason"]
    # the counts say what the lists say: the node that cannot be compared is unknown, not pass
    assert doc["nodes"]["pass"] == 2 and doc["nodes"]["unknown"] == 1
    docs["gpu004"] = fd.report("gpu004", with_fingerprint=False, findings=[("GDR040", "error")], status="fail")
    doc = fleet_json(fd.write_fleet(tmp_path / "out2", docs))
    assert doc["nodes"]["fail"] == 1 and doc["failing"]["nodes"] == "gpu004"
    assert [u["nodes"] for u in doc["unknown"]] == ["gpu003"]


def test_nothing_to_read_is_3(tmp_path):
    (tmp_path / "empty").mkdir()
    code, out, _ = fleet(tmp_path / "empty")
    assert code == 3 and "status: unknown (exit 3): no reports" in out


@pytest.mark.parametrize("order", ["fail-first", "pass-first"])
def test_a_node_reported_twice_keeps_its_worse_report(tmp_path, order):
    """gpu001.json says fail and a stale gpu001.out says pass: whichever is read last, the node fails."""
    d = tmp_path / "out"
    d.mkdir()
    failing = fd.report("gpu001", findings=[("GDR040", "error")], status="fail")
    passing = fd.report("gpu001")
    first, second = (failing, passing) if order == "fail-first" else (passing, failing)
    fd.write(d / "gpu001.a.json", first)
    fd.write(d / "gpu001.b.out", second)
    (d / "gpu001.a.json").rename(d / "gpu001.json")
    (d / "gpu001.b.out").rename(d / "gpu001.out")
    code, out, err = fleet(d)
    assert code == 1 and "1 fail" in out and "the worst one is used" in err, (out, err)


def test_duplicate_reports_are_said_once(tmp_path):
    d = fd.write_fleet(tmp_path / "out", healthy(2))
    code, out, err = fleet(d, d)
    assert code == 0 and err.count("more than one report") == 2 and "2 reports" in out


@pytest.mark.parametrize("fmt", ["text", "md"])
def test_names_and_messages_from_reports_are_never_escape_sequences(tmp_path, fmt):
    """A report's host name or message holding ESC, BEL, a C1 CSI or a line break is shown with '?' and
    spaces, as node commands show input names: it can neither drive the terminal nor print a line of its own.
    The JSON keeps the strings as they are (JSON escapes them)."""
    evil_host = "gpuA\x1b[2J\x1b]0;T\x07\nFAKE LINE: status: pass (exit 0)"
    docs = {"x": fd.report(evil_host, findings=[{"code": "GDR121", "severity": "info", "subject": ["\x9b31m"],
                                                  "effect": "ok", "message": "msg \x1b[5mBLINK\x1b[0m"}])}
    p = tmp_path / "sweep.jsonl"
    p.write_text("".join(fd.dumps(x) + "\n" for x in docs.values()))
    code, out, err = fleet("--format", fmt, p)
    assert not any(c in out for c in "\x1b\x07\x9b"), out
    assert not any(line.startswith("FAKE LINE") for line in out.splitlines()), out
    assert "FAKE LINE" in out and "Traceback" not in err
    assert evil_host in fleet_json(p)["groups"][0]["nodes"]


# -- usage, formats, output ------------------------------------------------------------------------------


def test_usage_errors_are_one_line_and_2(tmp_path):
    assert_clean_error(call("fleet", "summarize", tmp_path / "nope"))
    assert_clean_error(call("fleet", "summarize"))
    assert_clean_error(call("fleet", "summarize", "-", "-"))
    assert_clean_error(call("fleet", "summarize", "--format", "yaml", tmp_path))
    assert_clean_error(call("fleet", "summarize", "--output", tmp_path / "no" / "such" / "dir.txt", tmp_path))


def test_formats_validate_and_are_deterministic(tmp_path):
    docs = healthy(6)
    docs["gpu007"] = fd.report("gpu007", changes={"pair[gpu0,nic0]": "SYS"}, findings=[("GDR003", "warning")])
    docs["gpu008"] = fd.report("gpu008", positions=fd.renumbered())
    d = fd.write_fleet(tmp_path / "out", docs)
    (d / "gpu009").write_text("")
    runs = [fleet("--format", fmt, "--expect", "gpu[001-010]", d) for fmt in ("json", "json", "md", "text")]
    assert runs[0] == runs[1]
    doc = json.loads(runs[0][1])
    assert doc["format_version"] == "1.0" and doc["document"] == "fleet"
    if jsonschema is not None:
        p = call("schema", "fleet")
        assert p.returncode == 0
        schema = json.loads(p.stdout)
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(doc, schema)
    md = runs[2][1]
    assert md.startswith("# gdrcheck fleet summary\n")
    assert "| A | `sha256:" in md and "### Group B: what differs from the reference" in md
    assert "pair[gpu0,nic0]: PIX -> SYS" in md and "## Missing (no report)" in md and "`gpu010`" in md
    assert "renumbered buses" in md and "| GDR003 | warning |" in md
    for code, out, _ in runs:
        assert code == 1 and "20" not in out.split("\n")[0][:4]  # no timestamps of any kind
    assert "Traceback" not in "".join(r[2] for r in runs)


def test_output_file_is_written_atomically(tmp_path):
    d = fd.write_fleet(tmp_path / "out", healthy(2))
    target = tmp_path / "fleet.md"
    target.write_text("old")
    code, out, _ = fleet("--format", "md", "--output", target, d)
    assert code == 0 and out == ""
    assert target.read_text().startswith("# gdrcheck fleet summary")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.md", "out"]


def test_fleet_does_not_import_rich(tmp_path):
    d = fd.write_fleet(tmp_path / "out", healthy(2))
    code = ("import sys\nfrom gdrcheck.cli.commands import cli\n"
            f"cli.main(['fleet', 'summarize', {str(d)!r}], standalone_mode=False)\n"
            "sys.stderr.write(repr(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'pynvml', 'psutil'))))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stderr.strip() == "[]", p.stderr


# -- a fleet of real reports with planted faults ---------------------------------------------------------

SLEEP = "/bin/sleep" if os.path.exists("/bin/sleep") else "/usr/bin/sleep"
FLEET = [f"gpu{i:03d}" for i in range(1, 211)]
PLANTED = {"gpu017": "nic-missing", "gpu042": "acs-redirect", "gpu099": "peermem-unloaded",
           "gpu150": "renumbered", "gpu151": "renumbered"}
TIMED_OUT, NEVER = "gpu180", "gpu205"


def _real_report(*args, env=None) -> dict:
    p = call("pairs", "--jsonl", *args, env=env)
    doc = json.loads(p.stdout)
    assert p.returncode == exit_status(doc["status"]), p.stderr  # the status the document says, not any
    return doc


@pytest.fixture(scope="module")
def real_fleet(tmp_path_factory):
    """210 expected nodes from real gdrcheck runs: one report per variant, written under many names."""
    base = tmp_path_factory.mktemp("fleet")
    reports = {name: _real_report("--from", build(base / "trees" / name))
               for name, build in fleet_trees.VARIANTS.items()}
    tools = base / "tools"
    tools.mkdir()
    (tools / "nvidia-smi").write_text(f"#!/bin/sh\nexec {SLEEP} 60\n")
    (tools / "nvidia-smi").chmod(0o755 | stat.S_IEXEC)
    timed_out = _real_report("--timeout", "1", env={"GDRCHECK_TOOL_PATH": str(tools)})
    out = base / "reports"
    out.mkdir()
    for node in FLEET:
        if node == NEVER:
            continue
        doc = dict(timed_out if node == TIMED_OUT else reports[PLANTED.get(node, "healthy")])
        doc["host"] = node
        (out / node).write_text(fd.dumps(doc) + "\n")
    return {"dir": out, "reports": reports, "timed_out": timed_out}


def _diff_keys(group):
    return {d["key"] for d in group["diff"]}


def test_planted_faults_are_named_and_nothing_else(real_fleet):
    reports = real_fleet["reports"]
    assert not reports["healthy"]["findings"] and reports["healthy"]["status"] == "pass"
    if real_fleet["timed_out"].get("timed_out") is not True:
        pytest.xfail("gdrcheck pairs --timeout did not report timed_out on this machine")
    doc = fleet_json("--expect", "gpu[001-210]", real_fleet["dir"])
    assert doc["exit_status"] == 1
    healthy_nodes = "gpu[001-016,018-041,043-098,100-179,181-204,206-210]"
    ref, *others = doc["groups"]
    assert ref["reference"] is True and ref["count"] == 205 and ref["nodes"] == healthy_nodes
    assert ref["diff"] == []
    (variant,) = ref["topology_variants"]
    assert variant["nodes"] == "gpu[150-151]" and variant["count"] == 2
    assert variant["positions_diff"] and all(
        int(d["value"].split(":")[1], 16) == int(d["reference"].split(":")[1], 16) + 0x10
        for d in variant["positions_diff"])
    by_nodes = {g["nodes"]: g for g in others}
    assert sorted(by_nodes) == ["gpu017", "gpu042", "gpu099"]
    nic = _diff_keys(by_nodes["gpu017"])
    assert "devices.nic" in nic and "device[nic0].id" in nic and "pair[gpu0,nic0]" in nic
    assert all("nic" in k or k.startswith("bridge[") for k in nic), nic
    acs = by_nodes["gpu042"]["diff"]
    assert acs and all(d["key"].endswith(".acs") and d["reference"] == "off" and "RR" in d["value"] for d in acs)
    assert _diff_keys(by_nodes["gpu099"]) == {"host.module.nvidia_peermem", "host.driver.flavor"}
    assert [(f["code"], f["severity"], f["nodes"]) for f in doc["findings"]] == [
        ("GDR020", "error", "gpu099"), ("GDR040", "error", "gpu042")]
    assert doc["failing"] == {"count": 2, "nodes": "gpu[042,099]"}
    assert doc["unknown"] == [{"reason": "timed out", "timed_out": True, "count": 1, "nodes": TIMED_OUT}]
    assert doc["unreadable"] == [] and doc["unexpected"] == {"count": 0, "nodes": ""}
    assert doc["missing"] == {"count": 1, "nodes": NEVER}
    assert doc["nodes"] == {"expected": 210, "reported": 209, "grouped": 208, "pass": 206, "fail": 2,
                            "unknown": 1, "unreadable": 0, "missing": 1, "unexpected": 0}
    _, text, _ = fleet("--expect", "gpu[001-210]", real_fleet["dir"])
    for needle in (healthy_nodes, "gpu017", "devices.nic: 1x15b3:1021 -> 0", "gpu042", "GDR040",
                   "gpu099", "GDR020", "host.module.nvidia_peermem: loaded -> absent",
                   "renumbered buses): 2 nodes gpu[150-151]", "timed out: 1 node gpu180",
                   "missing (no report): 1 node gpu205"):
        assert needle in text, needle


def test_a_real_fleet_reads_the_same_from_a_pdsh_stream(real_fleet):
    stream = b"".join(f"{p.name}: ".encode() + p.read_bytes() for p in sorted(real_fleet["dir"].iterdir()))
    from_dir = fleet("--format", "json", "--expect", "gpu[001-210]", real_fleet["dir"])
    from_stdin = fleet("--format", "json", "--expect", "gpu[001-210]", "-", stdin=stream)
    assert from_dir == from_stdin


def test_a_real_fleet_as_srun_files(real_fleet, tmp_path):
    srun = tmp_path / "srun"
    shutil.copytree(real_fleet["dir"], srun)
    for p in srun.iterdir():
        p.rename(p.with_name(p.name + ".json"))
    assert fleet("--format", "json", real_fleet["dir"]) == fleet("--format", "json", srun)


def test_a_huge_file_that_is_no_report_is_read_past_a_mib_at_a_time():
    """A core dump or an image in the output directory (300 MB of NULs, no line break) is an unreadable node,
    read a MiB at a time and never held whole (it took 640 MB, and MemoryError under a ulimit)."""
    from gdrcheck.fleet import reader

    class Nuls:
        def __init__(self, size):
            self.left, self.asked = size, 0

        def readline(self, n=-1):
            self.asked = max(self.asked, n)
            k = self.left if n < 0 else min(n, self.left)
            self.left -= k
            return b"\0" * k

        def read(self, n=-1):
            return self.readline(n)

    f = Nuls(300 << 20)
    items = list(reader.read_stream(f, "gpu009", "auto", "gpu009"))
    assert [(i.name, i.doc) for i in items] == [("gpu009", None)] and items[0].problem
    assert f.left == 0 and f.asked <= 1 << 20


def test_a_reference_read_through_a_pipe(tmp_path):
    """`--reference <(ssh gold cat report.json)`: a pipe is read as the file would be (it was "no such file")."""
    d = fd.write_fleet(tmp_path / "out", healthy(3))
    gold = fd.write(tmp_path / "gold.json", fd.report("gold"))
    fifo = tmp_path / "gold-pipe"
    os.mkfifo(fifo)
    import threading

    writer = threading.Thread(target=lambda: fifo.write_bytes(gold.read_bytes()), daemon=True)
    writer.start()
    doc = fleet_json("--reference", fifo, d)
    writer.join(10)
    assert doc["reference"] and doc["exit_status"] == fleet_json("--reference", gold, d)["exit_status"]
