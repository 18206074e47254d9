"""GDR003 says cross-socket only where the input shows the sockets (a node's sysfs package ids); two NUMA nodes
of one socket (AMD NPS4) are inter-NUMA, and an input without sockets says it cannot tell."""

from __future__ import annotations

from support.fact_cases import pairs_json

from builders import scenarios


def _gdr003(path, a="GPU0 ", b="GPU2 "):
    doc = pairs_json(path)
    return [f["message"] for f in doc["findings"] if f["code"] == "GDR003" and a in f["message"] and b in f["message"]]


def test_two_sockets_in_sysfs_are_cross_socket(tmp_path):
    path = scenarios.scenario(tmp_path, "pcie-gpus-p2p-level-sys")
    (line,) = _gdr003(path)
    assert "of different sockets (SYS, cross-socket)" in line


def test_two_numa_nodes_of_one_socket_nps_are_inter_numa(tmp_path):
    path = scenarios.scenario(tmp_path, "pcie-gpus-p2p-level-sys")
    for f in (path / "sys" / "devices" / "system" / "cpu").glob("cpu*/topology/physical_package_id"):
        f.write_text("0\n")  # one EPYC socket split into NUMA nodes (NPS2/NPS4)
    (line,) = _gdr003(path)
    assert "of one socket (SYS, inter-NUMA)" in line and "cross-socket" not in line


def test_nccl_xml_of_an_epyc_vm_with_four_numa_nodes_cannot_tell_sockets(realworld):
    (line,) = _gdr003(realworld / "azure-ncv4" / "nccl-topo.xml", "GPU0 ", "GPU1 ")
    assert "(SYS, inter-NUMA; the nccl-xml input does not show whether they are different sockets)" in line
