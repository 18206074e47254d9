"""One NIC numbering everywhere: the HTML report and the tree drawings number NICs as `pairs` does (NIC0 is the
first GPUDirect NIC; an X710 or virtio port that makes no pair gets no number)."""

from __future__ import annotations

import json

from support.cli_util import call

from gdrcheck.render.tree_model import device_names

PUGET = "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"  # an X710 at 14:00.0 before the ConnectX-7 at 21:00


def test_tree_names_are_the_pairs_labels(realworld):
    path = realworld / PUGET
    pairs = json.loads(call("pairs", "--json", "--from", path).stdout)
    topology = json.loads(call("topology", "--json", "--from", path).stdout)
    labels = {d["bdf"]: d["label"] for d in pairs["devices"] if "label" in d}
    names = device_names(topology)
    assert labels["0000:21:00.0"] == "NIC0"
    assert {b: names.get(b) for b in labels} == labels
    assert "0000:14:00.0" not in names


def test_html_report_numbers_nics_as_pairs_does(realworld, tmp_path):
    out = tmp_path / "puget.html"
    call("report", "--from", realworld / PUGET, "-o", out)
    page = out.read_text()
    assert '<th title="0000:21:00.0">NIC0</th>' in page
    assert 'title="0000:14:00.0">NIC' not in page  # the X710 makes no GPU-NIC pair: no column, no number
