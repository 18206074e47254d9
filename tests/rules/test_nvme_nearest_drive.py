"""Why the ESC8000A's GPU0 gets 'ok' on its far NVMe drives where GPU1-3 get 'degraded' on the same drives: GPU0
has a drive nearer (0000:02:00.0, PHB), so the far ones are not the ones to use and only inform (one folded
finding), as a far NIC does; GPU1-3 have no nearer drive, so their nearest (the far ones) are judged. A node whose
every GPU has its own close drive thus has no warning for the drives of other GPUs."""

from __future__ import annotations

from collections import Counter

from support.fact_cases import pairs_json

ESC8000A = "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt"


def test_esc8000a_gpu0_has_a_nearer_drive_so_far_drives_only_inform(realworld):
    doc = pairs_json(realworld / ESC8000A)
    names = {d["bdf"]: d.get("label") for d in doc["devices"]}
    nvme = [p for p in doc["pairs"] if p["kind"] == "gpu-nvme"]
    got = Counter((names[p["a"]], p["expected"]["verdict"]) for p in nvme)
    assert got == {("GPU0", "degraded"): 1, ("GPU0", "ok"): 16, **{(f"GPU{i}", "degraded"): 17 for i in (1, 2, 3)}}
    (near,) = [p for p in nvme if names[p["a"]] == "GPU0" and p["expected"]["verdict"] == "degraded"]
    assert near["b"] == "0000:02:00.0" and near["path"] == "PHB"
