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
        # every document carries its status word, and the exit status follows it (topology: pass, when read)
        assert p.returncode == exit_status(doc["status"]), (name, p.returncode, p.stderr)
        assert name != "topology" or doc["status"] == "pass"
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


@pytest.mark.parametrize("machine", ["h100-x1-vm", "h200-x2-vm"])
def test_every_document_carries_its_status_word(machine):
    """h100-x1-vm, h200-x2-vm snapshots: topology, bar1 and fingerprint say their status in the document (a new
    key: format_version 1.5), and the exit status is the one that word gives."""
    snap = FIXTURES / machine / "snapshot.tar.gz"
    for argv in (("topology", "--json"), ("bar1", "--json"), ("fingerprint", "--json")):
        p = call(*argv, "--from", snap)
        doc = json.loads(p.stdout)
        assert doc["status"] in ("pass", "fail", "unknown"), argv
        assert p.returncode == exit_status(doc["status"]), (argv, p.returncode, p.stderr)
        assert doc["format_version"] == "1.5", argv
    assert json.loads(call("pairs", "--json", "--from", snap).stdout)["format_version"] == "1.4"
