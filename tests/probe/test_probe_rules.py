"""Every probe finding (GDR140-GDR154, GDR205) has a case that fires it and one that does not.

A case is a step run in a worker over scripted libraries (tests/support/probe_fakes.py) with what ``pairs``
predicted for its subjects; the finding comes from the check document as ``gdrcheck probe`` builds it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrcheck.probe.runner import run_step
from gdrcheck.rules.probe_rules import PROBE_CODES, probe_findings

TESTS = Path(__file__).resolve().parents[1]
GPU0, GPU1, NIC = "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"
HOST = ("host-bandwidth", {"gpu": GPU0, "bytes": 4 << 20, "expected": {"degraded_below_gb_per_s": 40.0}})
P2P = ("p2p", {"gpus": [GPU0, GPU1], "bytes": 4 << 20})
P2P_NV18 = ("p2p", {"gpus": [GPU0, GPU1], "bytes": 4 << 20,
                    "expected": {"link": "NV18", "gb_per_s": 478.1, "degraded_below_gb_per_s": 358.6}})
REG = ("rdma-register", {"gpu": GPU0, "nic": NIC, "rdma_devices": ["mlx5_0"]})
CUDA = ("cuda", {"gpu": GPU0})
LOOP = ("rdma-loopback", {"gpu": GPU0, "nic": NIC, "rdma_devices": ["mlx5_0"], "bytes": 1 << 20})
PEERMEM = {"peermem_loaded": True, "nccl_gdr": "enabled"}
DMABUF = {"dmabuf_expected": True, "nccl_gdr": "enabled"}
BLIND = {"nccl_gdr": "disabled", "nccl_reason": "path beyond NCCL_NET_GDR_LEVEL=PXB"}


def _gds(tmp):
    return ("gds-read", {"gpu": GPU0, "gds_path": str(tmp), "bytes": 1 << 20})


# code -> ((step, fault, predicted), (step, fault, predicted)): fires, stays quiet
CASES = {
    "GDR140": ((CUDA, "no-cuda", {}), (CUDA, "", {})),
    "GDR141": ((HOST, "slow-link", {}), (HOST, "", {})),
    "GDR142": ((HOST, "h2d-corrupt", {}), (HOST, "", {})),
    "GDR143": ((P2P, "p2p-zeros", {}), (P2P, "", {})),
    "GDR144": ((P2P, "p2p-slow", {}), (P2P, "", {})),
    "GDR145": ((P2P, "no-peer", {"nccl_p2p": "enabled"}), (P2P, "", {"nccl_p2p": "enabled"})),
    "GDR146": ((REG, "reg-efault,dmabuf-eopnotsupp", PEERMEM), (REG, "reg-efault", PEERMEM)),
    "GDR147": ((REG, "export-fail", DMABUF), (REG, "", DMABUF)),
    "GDR148": ((REG, "", BLIND), (REG, "", PEERMEM)),
    "GDR149": ((REG, "reg-enomem", {}), (REG, "", {})),
    "GDR150": ((LOOP, "port-active,loopback-prot-err", {}), (LOOP, "port-active", {})),
    "GDR151": (("gds", "", {}), ("gds", "p2pdma", {})),
    "GDR152": (("gds", "cufile-corrupt", {}), ("gds", "", {})),
    "GDR205": ((P2P_NV18, "p2p-slow", {}), (P2P_NV18, "", {})),
    "GDR153": ((("host-bandwidth", {"gpu": GPU0, "bytes": 1 << 20}), "hang", {}), (HOST, "", {})),
}


def _doc(step, fault, predicted, tmp_path):
    if step == "gds":
        d = tmp_path / "gds"
        d.mkdir(exist_ok=True)
        step = _gds(d)
    check, params = step
    env = {"GDRCHECK_PROBE_LIBS": "support.probe_fakes", "GDRCHECK_FAKE": fault, "GDRCHECK_FAKE_GPUS": f"{GPU0},{GPU1}",
           "PYTHONPATH": str(TESTS)}
    if fault == "p2pdma":
        cfg = tmp_path / "cufile.json"
        cfg.write_text('{"properties": {"use_pci_p2pdma": true}}')
        env["CUFILE_ENV_PATH_JSON"] = str(cfg)
    r = run_step({"check": check, "params": params}, 4 if fault == "hang" else 60, env)
    subjects = params.get("gpus") or [params["gpu"]] + ([params["nic"]] if "nic" in params else [])
    return {"check": check, "subjects": subjects, "status": r["status"], "predicted": predicted,
            "measured": r.get("measured") or {}, "evidence": r.get("evidence") or {}, "expected": {}}


@pytest.mark.parametrize("code", sorted(CASES))
def test_probe_rule_fires_and_stays_quiet(code, tmp_path):
    if code in ("GDR151", "GDR152") and Path("/proc/driver/nvidia-fs/version").exists():
        pytest.skip("nvidia-fs is loaded here")
    fires, quiet = CASES[code]
    got = {f.code for f in probe_findings([_doc(*fires, tmp_path)])}
    assert code in got, (code, got)
    got = {f.code for f in probe_findings([_doc(*quiet, tmp_path)])}
    assert code not in got, (code, got)


def _plan_with_bar1(tmp_path, monkeypatch, leak):
    """run_plan over one cuda step, NVML answering BAR1 used; ``leak`` bytes stay used after the step."""
    from builders import scenarios
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.probe import nvml_state
    from gdrcheck.probe.doc import probe_doc
    from gdrcheck.probe.plan import build_plan
    from gdrcheck.probe.runner import run_plan
    from gdrcheck.rules.engine import evaluate

    class Nvml:
        def __init__(self):
            self.handles = {GPU0: object()}
            self.calls = 0

        def sample(self, bdf):
            self.calls += 1
            return {"bar1_used_bytes": (2 << 20) + (leak if self.calls > 1 else 0), "replay_counter": 0}

        def close(self):
            pass

    monkeypatch.setattr(nvml_state, "NvmlState", Nvml)
    report = evaluate(load_facts(str(scenarios.scenario(tmp_path, "healthy-gdr-node"))))
    plan = build_plan(report, only=("cuda",))
    plan.steps = [s for s in plan.steps if s.subjects == (GPU0,)]
    env = {"GDRCHECK_PROBE_LIBS": "support.probe_fakes", "GDRCHECK_FAKE_GPUS": GPU0, "PYTHONPATH": str(TESTS)}
    return probe_doc(report, plan, run_plan(plan, env=env), dry_run=False)


def test_gdr154_resources_left_fires_and_stays_quiet(tmp_path, monkeypatch):
    doc = _plan_with_bar1(tmp_path, monkeypatch, 64 << 20)
    assert "GDR154" in {f["code"] for f in doc["findings"]}
    assert "BAR1 used 2 MiB before, 66 MiB after" in doc["checks"][0]["evidence"]["left_behind"]
    doc = _plan_with_bar1(tmp_path / "q", monkeypatch, 0)
    assert "GDR154" not in {f["code"] for f in doc["findings"]}
    assert doc["checks"][0]["evidence"]["cleanup"][GPU0]["after"]["bar1_used_bytes"] == 2 << 20
    assert doc["status"] == "pass" and doc["summary_line"].startswith("OK probe")


def test_every_probe_rule_has_cases():
    from gdrcheck.rules import all_rules

    probe = {r.code for r in all_rules() if r.code in PROBE_CODES}
    assert probe == set(CASES) | {"GDR154"}


def test_a_gpu_far_below_the_others_is_degraded():
    from gdrcheck.probe.doc import compare_across_gpus

    checks = [{"check": "host-bandwidth", "status": "ok", "measured": {"h2d_gb_per_s": h, "d2h_gb_per_s": h}}
              for h in (53.0, 52.5, 24.0)]
    compare_across_gpus(checks)
    assert [c["status"] for c in checks] == ["ok", "ok", "degraded"]
    assert "node's best GPU" in checks[2]["measured"]["low_beside_node"]
    assert {f.code for f in probe_findings([{**checks[2], "subjects": [GPU0]}])} == {"GDR141"}


def test_explain_a_probe_rule():
    from support.cli_util import run

    p = run("explain", "probe-peermem-loaded-not-working")
    assert p.returncode == 0 and "GDR146" in p.stdout and "modprobe" in p.stdout
