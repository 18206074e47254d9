"""The report's header agrees with the findings and with ``pairs``: a virtual machine GDR121 saw, the CPU as
pairs knows it, GPUs by their model where the input gives only a device id, an idle GPU link as normal."""

from __future__ import annotations

import re

from support.cli_util import call

from gdrcheck.render import tree_model as tm

# an HGX H200 guest as `lspci -tv` prints it with a PCI database older than the H200 (no real paste is stored)
HGX_H200_GUEST_DEVICE_2335 = (
    "-[0000:00]-+-00.0  Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller\n"
    "           +-05.0  Red Hat, Inc. Virtio 1.0 network device\n"
    "           +-06.0  NVIDIA Corporation Device 2335\n"
    "           \\-07.0  NVIDIA Corporation Device 2335\n")


def _text(html: str) -> str:
    html = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_guest_header_says_vm_and_names_the_h200(tmp_path):
    src = tmp_path / "hgx-h200-guest-device-2335-lspci-tv.txt"
    src.write_text(HGX_H200_GUEST_DEVICE_2335)
    out = tmp_path / "r.html"
    call("report", "--from", src, "-o", out)
    html = out.read_text()
    text = _text(html)
    assert re.search(r"Virtual machine yes \(GDR121: virtual machine", text), text[:2000]
    assert "Device 2335" not in html and "H200 SXM 141GB" in html
    assert "GPU P2P:" in text and "GPUDirect RDMA:" in text and "GPUDirect Storage:" in text
    assert "white-space: nowrap" in html.split(".verdict .word", 1)[1].split("}", 1)[0]  # no UNKNO / WN


def test_header_cpu_is_the_one_pairs_knows(realworld, tmp_path):
    out = tmp_path / "r.html"
    call("report", "--from", realworld / "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt", "-o", out)
    row = re.search(r"CPU (.*?) Virtual machine", _text(out.read_text())).group(1)
    assert row.startswith("amd"), row


def test_idle_gpu_link_is_not_degraded():
    """A GPU at rest lowers its link to Gen1; only a narrower link is degraded (as Prometheus counts it)."""
    idle = {"kind": "gpu", "link": {"current_speed_gts": 2.5, "current_width": 16, "max_speed_gts": 32.0,
                                    "max_width": 16}}
    text, low = tm.link_text(idle)
    assert not low and "idle" in text
    narrow = dict(idle, link=dict(idle["link"], current_width=8))
    assert tm.link_text(narrow)[1]
    nic = dict(idle, kind="nic")
    assert tm.link_text(nic)[1]
