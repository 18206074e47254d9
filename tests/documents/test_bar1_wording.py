"""`bar1` on an input without a driver view (an lspci paste) says so; "not listed by the NVIDIA driver" is kept
for a GPU the driver's own list leaves out."""

from __future__ import annotations

import json

from support.cli_util import call

PUGET = "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"


def test_lspci_paste_has_no_driver_view(realworld):
    path = realworld / PUGET
    text = call("bar1", "--from", path).stdout
    assert "not listed by the NVIDIA driver" not in text
    assert "GPU0: no driver view in this input" in text
    doc = json.loads(call("bar1", "--json", "--from", path).stdout)
    assert doc["gpus"] and all(g["driver_listed"] is None for g in doc["gpus"])
