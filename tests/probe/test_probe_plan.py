"""``gdrcheck probe --dry-run``: the plan from the static pairs, on generated nodes; the options that change it.

The nodes are the named scenarios (scenarios.py): an HGX-like node, and that node with ACS redirect
on its switches, a translating IOMMU, or no RDMA NIC; with ``no_nvlink`` where GPU pairs must cross PCIe.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from support.cli_util import assert_clean_error, call

from builders import scenarios
from builders.sysfs_tree import ACS_CR, ACS_RR


def _plan(path, *extra):
    p = call("probe", "--dry-run", "--json", "--from", path, *extra)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    return json.loads(p.stdout)


def _by(doc, check):
    return {tuple(c["subjects"]): c for c in doc["checks"] if c["check"] == check}


@pytest.fixture(scope="module")
def schema():
    p = call("schema", "probe")
    assert p.returncode == 0
    s = json.loads(p.stdout)
    jsonschema.Draft202012Validator.check_schema(s)
    return s


def test_dgx_like_node_plans_every_check_in_order(tmp_path, schema):
    doc = _plan(scenarios.scenario(tmp_path, "healthy-gdr-node"))
    jsonschema.validate(doc, schema)
    assert doc["dry_run"] is True and doc["status"] == "planned" and doc["refused"] is False
    order = [c["check"] for c in doc["checks"]]
    assert order == sorted(order, key=["cuda", "host-bandwidth", "p2p", "rdma-register", "rdma-loopback",
                                       "gds-read"].index)
    gpus = scenarios.GPUS
    assert set(_by(doc, "cuda")) == {(g,) for g in gpus}
    assert len(_by(doc, "p2p")) == 6 and all(c["status"] == "planned" for c in _by(doc, "p2p").values())
    # each GPU with the NIC under its own switch (PIX), NCCL's choice
    assert set(_by(doc, "rdma-register")) == {(gpus[0], scenarios.NICS[0]), (gpus[1], scenarios.NICS[0]),
                                              (gpus[2], scenarios.NICS[1]), (gpus[3], scenarios.NICS[1])}
    reg = _by(doc, "rdma-register")[(gpus[0], scenarios.NICS[0])]
    assert reg["predicted"]["nccl_gdr"] == "enabled" and reg["predicted"]["peermem_loaded"] is True
    hb = _by(doc, "host-bandwidth")[(gpus[0],)]
    assert hb["expected"]["h2d_gb_per_s"] > 0 and "85%" in hb["expected"]["basis"]
    assert hb["cpus"] and hb["numa_node"] == 0
    assert all(c["status"] == "skipped" and "--gds-path" in c["reason"] for c in _by(doc, "gds-read").values())


def test_dry_run_text_says_why(tmp_path):
    p = call("probe", "--dry-run", "--from", scenarios.scenario(tmp_path, "healthy-gdr-node"))
    assert p.returncode == 0
    for word in ("cuda", "host-bandwidth", "p2p", "rdma-register", "why:", "expected: about"):
        assert word in p.stdout
    assert p.stdout.strip().splitlines()[-1].startswith("PLAN ")


def test_acs_redirect_pairs_get_only_harmless_calls_unless_risky(tmp_path):
    path = scenarios.build(tmp_path / "acs", acs=ACS_RR | ACS_CR, no_nvlink=True)
    doc = _plan(path)
    g = scenarios.GPUS
    p2p = _by(doc, "p2p")[(g[0], g[1])]  # two GPUs under one switch whose ports redirect
    assert p2p["status"] == "skipped" and p2p["harmless_only"] is True
    assert "ACS redirect" in p2p["reason"] and "--risky" in p2p["reason"]
    loop = _by(doc, "rdma-loopback")[(g[0], scenarios.NICS[0])]
    assert loop["status"] == "skipped" and "GDR040" in loop["reason"]
    # registering memory moves no data: it stays planned
    assert _by(doc, "rdma-register")[(g[0], scenarios.NICS[0])]["status"] == "planned"
    risky = _plan(path, "--risky")
    assert _by(risky, "p2p")[(g[0], g[1])]["status"] == "planned"
    assert _by(risky, "rdma-loopback")[(g[0], scenarios.NICS[0])]["status"] == "planned"


def test_translating_iommu_pairs_are_skipped(tmp_path):
    doc = _plan(scenarios.build(tmp_path / "iommu", iommu_type="DMA-FQ", no_nvlink=True))
    p2p = _by(doc, "p2p")
    assert p2p and all(c["status"] == "skipped" and "GDR042" in c["reason"] for c in p2p.values())
    assert all(c["status"] == "planned" for c in _by(doc, "host-bandwidth").values())


def test_nvlink_pairs_are_not_risky_under_acs(tmp_path):
    """ACS acts on PCIe: GPU pairs joined by NVLink copy over NVLink."""
    doc = _plan(scenarios.scenario(tmp_path, "acs-redirect-on-switch"))
    assert all(c["status"] == "planned" for c in _by(doc, "p2p").values())


def test_node_without_rdma_nic_plans_no_rdma_checks(tmp_path):
    doc = _plan(scenarios.scenario(tmp_path, "nic-without-rdma-driver"))
    assert not _by(doc, "rdma-register") and not _by(doc, "rdma-loopback")
    assert any("no RDMA NIC" in n for n in doc["notes"])


def _busy_node(tmp_path):
    path = scenarios.scenario(tmp_path, "healthy-gdr-node")
    nvml = path / "gdrcheck" / "nvml.json"
    doc = json.loads(nvml.read_text())
    doc["gpus"][1]["processes"] = [{"pid": 4242, "name": "python3", "used_memory": 1 << 30}]
    nvml.write_text(json.dumps(doc))
    return path


def test_busy_node_is_refused_unless_forced(tmp_path):
    path = _busy_node(tmp_path)
    doc = _plan(path)
    assert doc["refused"] is True and any("4242" in b for b in doc["busy"])
    assert all(c["status"] == "skipped" for c in doc["checks"])
    assert "--force" in doc["checks"][0]["reason"]
    assert "busy" in doc["summary_line"]
    forced = _plan(path, "--force")
    assert forced["refused"] is False and forced["busy"]
    assert _by(forced, "cuda")[(scenarios.GPUS[0],)]["status"] == "planned"


def test_check_option_and_gds_path(tmp_path):
    d = tmp_path / "gds"
    d.mkdir()
    doc = _plan(scenarios.scenario(tmp_path, "healthy-gdr-node"), "--check", "gds-read", "--gds-path", d)
    assert {c["check"] for c in doc["checks"]} == {"gds-read"}
    assert all(c["status"] == "planned" for c in doc["checks"])


def test_from_without_dry_run_is_a_usage_error(tmp_path):
    p = call("probe", "--from", scenarios.scenario(tmp_path, "healthy-gdr-node"))
    assert_clean_error(p)
    assert "--dry-run" in p.stderr


@pytest.mark.parametrize("args", [("--copy-size", "lots"), ("--copy-size", "1KiB"), ("--gds-path", "/nonexistent/x"),
                                  ("--check", "nope"), ("--step-timeout", "nan")])
def test_bad_options_are_usage_errors(tmp_path, args):
    assert_clean_error(call("probe", "--dry-run", "--from", scenarios.scenario(tmp_path, "healthy-gdr-node"), *args))


def test_live_probe_on_a_node_without_gpu(tmp_path):
    """This machine has no GPU: nothing to probe, nothing measured (exit 3), a document all the same."""
    p = call("probe", "--json")
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    if doc["checks"]:
        pytest.skip("this machine has a GPU")
    assert doc["status"] == "unknown" and doc["dry_run"] is False


def test_p2p_prediction_carries_nvml_status(tmp_path):
    doc = _plan(scenarios.scenario(tmp_path, "p2p-chipset-not-supported"))
    p = next(iter(_by(doc, "p2p").values()))
    assert p["predicted"]["nvml_p2p_read"] == "CNS" and p["predicted"]["nccl_p2p"] == "disabled"


def test_plan_from_the_h100_snapshot(schema):
    from pathlib import Path

    snap = Path(__file__).resolve().parents[2] / "fixtures" / "h100-x1-vm" / "snapshot.tar.gz"
    doc = _plan(snap)
    jsonschema.validate(doc, schema)
    assert [c["check"] for c in doc["checks"]] == ["cuda", "host-bandwidth", "gds-read"]
    hb = _by(doc, "host-bandwidth")[("0000:00:06.0",)]
    assert hb["expected"]["link"] == "Gen5 x16" and hb["expected"]["h2d_gb_per_s"] == 53.6


REAL = ["stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt", "aws-p4d-24xlarge/nccl-topo.xml",
        "hwloc-nvidia-dgx2h/hwloc.xml", "kata-vra-a100x-bluefield2/host-lspci-tv-fragment.txt"]


@pytest.mark.parametrize("rel", REAL)
def test_plan_from_real_inputs(rel, realworld, schema):
    """Inputs that show no links, no NUMA or no driver facts still plan, and say what they cannot expect."""
    doc = _plan(realworld / rel)
    jsonschema.validate(doc, schema)
    assert _by(doc, "cuda")
    for c in _by(doc, "host-bandwidth").values():
        assert c["expected"].get("h2d_gb_per_s") or c["expected"]["basis"]


def test_dry_run_and_live_probe_write_nothing(tmp_path, guarded):  # noqa: F811
    proc, lines = guarded("probe", "--dry-run", "--json", "--from", scenarios.scenario(tmp_path, "healthy-gdr-node"))
    assert proc.returncode == 0 and not [ln for ln in lines if ln.startswith("EXEC")]
    proc, _ = guarded("probe", "--json")  # no GPU here: nothing to spawn
    assert proc.returncode == 3


def test_redact_replaces_the_host_name(tmp_path):
    p = call("probe", "--dry-run", "--redact", "--from", scenarios.scenario(tmp_path, "healthy-gdr-node"))
    assert p.returncode == 0 and "gpu-node-01" not in p.stdout
