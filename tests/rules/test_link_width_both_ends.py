"""GDR080/GDR081: a link trains to the lower of its two ends' maximum. A x16 card in a x8 slot is not
downtrained; where the input does not show the upstream port's maximum, the finding says it is unknown."""

from __future__ import annotations

from support.fact_cases import drawn_verbose, gpu_and_nic_on_root_ports, needs_lspci, pairs_json

GPU_PORT, GPU, NIC_PORT, NIC = "0000:00:01.0", "0000:01:00.0", "0000:00:02.0", "0000:02:00.0"
# (port type, max speed code, max width, current speed code, current width); 4 = 16 GT/s, 5 = 32 GT/s
NIC_LINKS = {NIC_PORT: (4, 4, 16, 4, 16), NIC: (0, 5, 16, 4, 16)}


def _findings(tmp_path, name, links):
    doc = pairs_json(drawn_verbose(gpu_and_nic_on_root_ports(), links, tmp_path, name))
    return [f for f in doc["findings"] if f["code"] in ("GDR080", "GDR081")]


@needs_lspci
def test_x16_gpu_in_x8_gen4_slot_is_not_downtrained(tmp_path):
    links = {GPU_PORT: (4, 4, 8, 4, 8), GPU: (0, 5, 16, 4, 8), **NIC_LINKS}
    assert _findings(tmp_path, "x16-gen5-gpu-in-x8-gen4-slot", links) == []


@needs_lspci
def test_x16_gpu_at_x8_in_x16_slot_is_downtrained(tmp_path):
    links = {GPU_PORT: (4, 4, 16, 4, 8), GPU: (0, 4, 16, 4, 8), **NIC_LINKS}
    (f,) = _findings(tmp_path, "x16-gpu-trained-x8-in-x16-slot", links)
    assert (f["code"], f["severity"]) == ("GDR080", "warning")
    assert "link x8, both ends capable of x16" in f["message"]


@needs_lspci
def test_upstream_maximum_not_in_input_is_unknown_not_downtrained(tmp_path):
    # `lspci -vvv -s` of the devices only: the root ports show no PCIe capability
    links = {GPU: (0, 4, 16, 4, 8), NIC: (0, 5, 16, 4, 16)}
    got = {f["code"]: f for f in _findings(tmp_path, "x16-gpu-at-x8-upstream-port-not-shown", links)}
    width = got["GDR080"]
    assert width["severity"] == "info" and "not in this" in width["message"] and "unknown" in width["message"]
    assert "GDR081" in got and "not in this" in got["GDR081"]["message"]
