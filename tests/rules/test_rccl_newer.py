"""An RCCL release newer than the newest modelled (2.21.5): where a later release's rule could change the answer
(PXN on for gfx942 at 64+ ranks and gfx950 at 32+, rcclSetPxn in src/rccl_wrap.cc, not read at a tag), the pair
is `unknown` and says why, not 2.21.5's answer presented as the newer release's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from support.cli_util import call

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "rccl-models"


def _mi300x() -> Path:
    from conftest import REALWORLD

    path = REALWORLD / "rccl-mi300x-8p-8nic" / "nccl-topo.xml"
    if not path.is_file():
        pytest.skip("../shared/realworld is not present")
    return path


def _gdr(*args) -> tuple[Counter, dict]:
    doc = json.loads(call("pairs", "--json", *args).stdout)
    gn = [p for p in doc["pairs"] if p["kind"] == "gpu-nic" and p["nccl"].get("gdr")]
    return Counter(p["nccl"]["gdr"] for p in gn), doc


def test_newer_release_on_gfx942_leaves_the_pxn_pairs_unknown():
    counts, doc = _gdr("--from", str(_mi300x()), "--nccl-version", "2.22.3")
    assert counts == {"enabled": 8, "unknown": 56}
    assert "judged with 2.21.5" in doc["nccl"]["version_reason"]
    open_ = next(p for p in doc["pairs"] if p["kind"] == "gpu-nic" and p["nccl"]["gdr"] == "unknown")
    assert any("rcclSetPxn" in d for d in open_["nccl"]["depends_on"])


def test_modelled_release_and_pxn_set_by_the_job_keep_the_answer():
    assert _gdr("--from", str(_mi300x()), "--nccl-version", "2.21.5")[0] == {"enabled": 8, "disabled": 56}
    got = _gdr("--from", str(_mi300x()), "--nccl-version", "2.22.3", "--env", "NCCL_PXN_DISABLE=1")[0]
    assert got == {"enabled": 8, "disabled": 56}


def test_newer_release_on_other_gfx_is_not_touched():
    """gfx90a (the topo_8p_90a model, gcn 910): rcclSetPxn's rule names gfx942 and gfx950 only."""
    old = _gdr("--from", str(MODELS / "topo_8p_90a.xml"), "--nccl-version", "2.21.5")[0]
    new = _gdr("--from", str(MODELS / "topo_8p_90a.xml"), "--nccl-version", "2.22.3")[0]
    assert old == new and "unknown" not in new


def test_the_later_release_pxn_pairs_are_counted_as_the_jobs_to_settle():
    """The rank count a later release's PXN rests on is the job's (``nccl.depends.job``), not a fact not shown."""
    _counts, doc = _gdr("--from", str(_mi300x()), "--nccl-version", "2.22.3")
    assert doc["nccl"]["depends"] == {"job": 56}
