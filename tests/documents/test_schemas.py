"""Every document gdrcheck prints validates against the JSON Schema it ships (`gdrcheck schema`)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from support.cli_util import call

from builders import scenarios
from gdrcheck.status import exit_status

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL = ["stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt", "aws-p4d-24xlarge/nccl-topo.xml",
        "rccl-mi300x-8p-8nic/nccl-topo.xml", "hwloc-nvidia-dgx2h/hwloc.xml",
        "kata-vra-a100x-bluefield2/host-lspci-tv-fragment.txt"]


def _schema(name):
    p = call("schema", name)
    assert p.returncode == 0
    s = json.loads(p.stdout)
    jsonschema.Draft202012Validator.check_schema(s)
    return s


@pytest.fixture(scope="module")
def schemas():
    return {n: _schema(n) for n in ("pairs", "topology", "bar1")}


def _check(schemas, path):
    for name in ("pairs", "topology", "bar1"):
        p = call(name, "--json", "--from", path)
        doc = json.loads(p.stdout)
        # pairs: the status its document says; topology: pass; bar1: a status its document does not carry
        want = (exit_status(doc["status"]),) if name == "pairs" else (0,) if name == "topology" else (0, 1, 3)
        assert p.returncode in want, (name, p.returncode, p.stderr)
        jsonschema.validate(doc, schemas[name])


@pytest.mark.parametrize("rel", REAL)
def test_realworld_outputs_validate(schemas, realworld, rel):
    _check(schemas, realworld / rel)


@pytest.mark.parametrize("case", ["healthy-gdr-node", "acs-redirect-on-switch", "bar1-256mib", "bare-sysfs-tree"])
def test_scenario_outputs_validate(schemas, tmp_path, case):
    _check(schemas, scenarios.scenario(tmp_path, case))


@pytest.mark.parametrize("machine", sorted(p.name for p in FIXTURES.glob("h200-*-vm")))
def test_h200_outputs_validate(schemas, machine):
    _check(schemas, FIXTURES / machine / "snapshot.tar.gz")


def test_live_outputs_validate(schemas):
    for name in ("pairs", "topology", "bar1"):
        jsonschema.validate(json.loads(call(name, "--json").stdout), schemas[name])
