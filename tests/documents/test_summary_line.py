"""The one-line verdict names a GPU by its index where gdrcheck made its address up (a `topo -m` matrix has no bus
ids). On a failing or passing node it names the most severe finding first and counts every other finding the
document lists; on an undecided node it names a fact that is missing, never a definite finding, and counts the
other missing facts (the document's ``missing``, as the why line and stderr list them)."""

from __future__ import annotations

from support.fact_cases import drawn, hgx_guest, needs_lspci, pairs_json

from gdrcheck.status import SEVERITY_RANK


def _check(doc):
    line = doc["summary_line"]
    if doc["status"] == "unknown" and doc.get("missing"):
        missing = doc["missing"]
        assert line.split()[0] == missing[0]["code"], line
        lead = [f for f in doc["findings"] if f["code"] == missing[0]["code"]]
        assert lead and all(f.get("effect") == "unknown" for f in lead), line
        more = len(missing) - 1
        assert line.endswith(f"(+{more} more missing)") if more else "more" not in line, (line, missing)
        return line
    worst = max(doc["findings"], key=lambda f: SEVERITY_RANK[f["severity"]])
    code = line.split()[0]
    lead = [f for f in doc["findings"] if f["code"] == code]
    assert lead and SEVERITY_RANK[lead[0]["severity"]] == SEVERITY_RANK[worst["severity"]], line
    total = sum(doc["summary"]["findings"].values())
    assert line.endswith(f"(+{total - 1} more)"), (line, total)
    return line


def test_matrix_of_a_dgx1_leads_with_a_missing_fact_and_names_gpu0(realworld):
    doc = pairs_json(realworld / "gengwg-dgx1" / "nvidia-smi-topo-mp.txt")
    line = _check(doc)
    assert "ffff:" not in line and " GPU0 " in line
    assert not line.startswith("GDR002")  # the node is unknown: a definite warning never says why


def test_matrix_of_a_dgx_a100_with_infos_only_counts_them_all(realworld):
    line = _check(pairs_json(realworld / "gengwg-dgx-a100-ash6" / "nvidia-smi-topo-m.txt"))
    assert "ffff:" not in line


@needs_lspci
def test_hgx_guest_line_keeps_real_addresses(tmp_path):
    doc = pairs_json(drawn(hgx_guest(), tmp_path, "hgx-h200-guest-device-2335"))
    assert " 0000:00:06.0 " in _check(doc)
