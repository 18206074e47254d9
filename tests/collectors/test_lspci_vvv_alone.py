"""An ``lspci -vvv`` alone shows each function's NUMA node but not the bridges above it: two functions on
different NUMA nodes are SYS whatever the tree, two on one node are anything but SYS; and no root bus is made up
for a function the input places in no tree."""

from __future__ import annotations

import json

from support.cli_util import call
from support.fact_cases import pairs_json

VVV = "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-vvv-selected.txt"  # 4 GPUs, 2 CX-7, NUMA 0 and 1


def test_esc8000a_vvv_numa_nodes_decide_sys_and_rule_it_out(realworld):
    doc = pairs_json(realworld / VVV)
    names = {d["bdf"]: d.get("label") for d in doc["devices"]}
    by = {(names[p["a"]], names[p["b"]]): p for p in doc["pairs"]}
    cross = by[("GPU0", "GPU2")]
    assert cross["pcie_path"] == "SYS" and cross["path_candidates"] == []
    same = by[("GPU0", "GPU1")]
    assert same["pcie_path"] is None and same["path_candidates"] == ["PIX", "PXB", "PHB", "NODE"]
    assert by[("GPU2", "NIC0")]["pcie_path"] == "SYS" and by[("GPU2", "NIC1")]["pcie_path"] is None


def test_esc8000a_vvv_topology_invents_no_root_bus(realworld):
    p = call("topology", "--json", "--from", realworld / VVV)
    doc = json.loads(p.stdout)
    assert doc["roots"] == []
    text = call("topology", "--from", realworld / VVV, env={"COLUMNS": "200"}).stdout
    assert "root bus" not in text
    assert "not placed in a PCIe tree" in text and "0000:c1:00.0  GPU2" in text and "NUMA 1" in text
