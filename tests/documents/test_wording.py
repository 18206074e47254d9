"""Wording on real inputs: an assumption is said in words (never 'GDR004 not in the way'), the NCCL levels' line
has no nested parentheses, and a switch an input only declares (Azure's ffff:ff:01.0) gets no fix that needs its
address."""

from __future__ import annotations

import re

from support.cli_util import call
from support.fact_cases import pairs_json

VVV = "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-vvv-selected.txt"


def test_esc8000a_vvv_assumptions_are_words_not_codes(realworld):
    doc = pairs_json(realworld / VVV)
    briefs = {a["brief"] for a in doc["assumes"]}
    assert "no obstacle where the input does not say enough to classify the path" in briefs
    assert not any(re.search(r"GDR\d{3}", b) for b in briefs), briefs
    line = next(ln for ln in call("check", "--from", realworld / VVV).stdout.splitlines() if ln.startswith("gate:"))
    assert not re.search(r"GDR\d{3} not in the way", line), line


def test_azure_ndv2_nccl_levels_without_nested_parentheses(realworld):
    out = call("pairs", "--from", realworld / "azure-ndv2" / "nccl-topo.xml", env={"COLUMNS": "200"}).stdout
    assert "  GDR level P2C: NCCL default: P2C while NCCL_NET_GDR_C2C is on, PXB on machines without C2C" in out
    assert "  P2P level PXB: NCCL 2.30.7 default on intel" in out
    assert "((" not in out and "))" not in out


def test_azure_ndv4_declared_switch_gets_no_setpci(realworld):
    doc = pairs_json(realworld / "azure-ndv4" / "nccl-topo.xml")
    acs = [f for f in doc["findings"] if f["code"] == "GDR041"]
    assert acs and all(f["subject"][0].startswith("ffff:ff:") for f in acs)
    assert all("a switch the input declares, with no address on the node" in f["message"] for f in acs)
    assert all("no setpci" in f["settle"] and "lspci -vvv" not in f["settle"] for f in acs)
    (assumed,) = [a for a in doc["assumes"] if a["fact"] == "ACS redirect"]
    assert "ask the provider" in assumed["settle"] and "lspci" not in assumed["settle"].replace("no lspci", "")
