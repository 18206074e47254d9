"""``bar1`` speaks the one status vocabulary: an input whose functions may be GPUs it cannot recognise (AWS's g5
topology file names its devices by bus id alone) is unknown (exit 3), as ``check`` says, not a pass with "no
GPU found"."""

from __future__ import annotations

import json

from support.cli_util import call

G5 = "aws-g5-48xlarge/nccl-topo.xml"


def test_aws_g5_bar1_is_unknown_as_check_is(realworld):
    check = call("check", "--from", realworld / G5)
    bar1 = call("bar1", "--from", realworld / G5)
    assert check.returncode == 3 and bar1.returncode == 3
    assert "no NVIDIA GPU recognised in this input" in bar1.stdout
    assert "9 PCI functions named by address only may be GPUs" in bar1.stderr
    doc = json.loads(call("bar1", "--json", "--from", realworld / G5).stdout)
    assert doc["gpus"] == []


def test_aws_p4d_bar1_without_a_driver_view_is_unknown_too(realworld):
    path = realworld / "aws-p4d-24xlarge" / "nccl-topo.xml"
    assert call("bar1", "--from", path).returncode == call("check", "--from", path).returncode == 3
