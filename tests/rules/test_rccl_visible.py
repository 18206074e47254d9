"""The job's GPUs on an AMD node: ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES,
which HIP honours) counting among the GPUs ROCr left, as ROCm's GPU isolation page describes
(gdrcheck.rules.rccl.visible). On the real MI50 dump (8 GPUs, two PCIe switches of four)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli_util import call

from gdrcheck.rules.cuda_visible import GpuId
from gdrcheck.rules.rccl.visible import select

BUS = [f"0000:{b:02x}:00.0" for b in (0x1d, 0x20, 0x23, 0x26, 0x3f, 0x43, 0x46, 0x49)]
GPUS = [GpuId(b) for b in BUS]


def _mi50() -> Path:
    from conftest import REALWORLD

    path = REALWORLD / "rccl-mi50-8p-pcie-2nic" / "nccl-topo.xml"
    if not path.is_file():
        pytest.skip("../shared/realworld is not present")
    return path


def test_hip_indices_count_among_the_gpus_rocr_left():
    job = select({"ROCR_VISIBLE_DEVICES": "2,3,4", "HIP_VISIBLE_DEVICES": "1,2"}, GPUS)
    assert job.gpus == (BUS[3], BUS[4]) and job.count == 2 and job.device == "hip"
    assert job.said() == "ROCR_VISIBLE_DEVICES=2,3,4, HIP_VISIBLE_DEVICES=1,2"


def test_cuda_visible_devices_is_hips_alias_and_hips_own_name_wins():
    assert select({"CUDA_VISIBLE_DEVICES": "0,5"}, GPUS).gpus == (BUS[0], BUS[5])
    job = select({"CUDA_VISIBLE_DEVICES": "0,5", "HIP_VISIBLE_DEVICES": "7"}, GPUS)
    assert job.gpus == (BUS[7],) and "CUDA_VISIBLE_DEVICES" not in job.said()


def test_rocr_order_kept_empty_list_and_bad_entry():
    assert select({"ROCR_VISIBLE_DEVICES": "4,0"}, GPUS).gpus == (BUS[4], BUS[0])
    assert select({"HIP_VISIBLE_DEVICES": ""}, GPUS).gpus == ()
    job = select({"ROCR_VISIBLE_DEVICES": "1,9,2"}, GPUS)
    assert job.gpus == (BUS[1],) and "ending at '9'" in job.note
    assert select({}, GPUS) is None


def test_rocr_uuid_the_input_does_not_show_is_unknown():
    job = select({"ROCR_VISIBLE_DEVICES": "GPU-4b2c1a9f8d3e6f7a"}, GPUS)
    assert job.gpus is None and "rocm-smi --showuniqueid" in job.note


def test_mi50_job_on_two_switches_has_no_p2p():
    """GPU3 and GPU4 (ROCR 2,3,4 then HIP 1,2) sit under different switches (NODE): beyond RCCL's PXB on the
    dump's Intel CPU (paths.cc:295-301@rocm-6.2.2), so the job's one pair has no P2P; the other pairs are
    not the job's."""
    env = ("--env", "ROCR_VISIBLE_DEVICES=2,3,4", "--env", "HIP_VISIBLE_DEVICES=1,2")
    doc = json.loads(call("pairs", "--json", "--from", str(_mi50()), *env).stdout)
    p2p = doc["capabilities"]["p2p"]
    assert p2p["answer"] == "no" and p2p["pairs"] == 1
    source = doc["nccl"]["p2p_level_source"]
    assert "hip:0" in source and "ROCR_VISIBLE_DEVICES=2,3,4" in source
    pair = next(p for p in doc["pairs"] if {p["a"], p["b"]} == {BUS[3], BUS[4]})
    assert "the job's hip:0 and hip:1" in pair["nccl"]["reason"]
    other = next(p for p in doc["pairs"] if {p["a"], p["b"]} == {BUS[0], BUS[1]})
    assert "not a pair of this job" in other["nccl"]["reason"]
