"""Probe steps in spawned workers, with scripted libraries at the ctypes boundary (tests/support/probe_fakes.py).

Every failure path the issue names: no libcuda.so.1, cuInit refusing, data that comes back wrong,
EFAULT / EOPNOTSUPP / ENOMEM from the verbs, a copy that never completes (the worker is killed at its
deadline), cuFile without nvidia-fs; and the real libibverbs.so.1 of this machine, which has no RDMA device.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import threading
from pathlib import Path

import pytest

from gdrcheck.probe.runner import run_step

TESTS = Path(__file__).resolve().parents[1]
GPU0, GPU1, NIC = "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"
SMALL = 4 << 20


def _env(fault=""):
    return {"GDRCHECK_PROBE_LIBS": "support.probe_fakes", "GDRCHECK_FAKE": fault,
            "GDRCHECK_FAKE_GPUS": f"{GPU0},{GPU1}", "PYTHONPATH": str(TESTS)}


def _run(check, params, fault="", deadline=60, harmless_only=False):
    r = run_step({"check": check, "params": params, "harmless_only": harmless_only}, deadline, _env(fault))
    assert r["status"] in ("ok", "degraded", "fail", "skipped", "unknown"), r
    return r


def _host(fault="", expected=None):
    return _run("host-bandwidth", {"gpu": GPU0, "bytes": SMALL, "cpulist": "0",
                                   "expected": expected or {"degraded_below_gb_per_s": 40.0}}, fault)


def _reg(fault=""):
    return _run("rdma-register", {"gpu": GPU0, "nic": NIC, "rdma_devices": ["mlx5_0"]}, fault)


def test_cuda_reports_the_attributes_nccl_reads():
    r = _run("cuda", {"gpu": GPU0})
    assert r["status"] == "ok"
    m = r["measured"]
    assert m["driver_api_version"] == "12.8" and m["gpu_direct_rdma_supported"] == 1 and m["dma_buf_supported"] == 1
    assert m["primary_context"] is True
    assert m["dmabuf_export"] == {"ok": True, "bytes": 2 << 20}
    failed = _run("cuda", {"gpu": GPU0}, "export-fail")
    assert failed["status"] == "ok" and "CUDA_ERROR_NOT_SUPPORTED" in failed["measured"]["dmabuf_export"]["error"]


def test_no_libcuda_at_all():
    r = _run("cuda", {"gpu": GPU0}, "no-cuda")
    assert r["status"] == "fail" and "libcuda.so.1" in r["evidence"]["error"]


def test_cuinit_refusing_is_named():
    r = _run("cuda", {"gpu": GPU0}, "cuinit-no-device")
    assert r["status"] == "fail" and r["evidence"]["cuda_result"] == "CUDA_ERROR_NO_DEVICE"


def test_a_gpu_cuda_cannot_find_by_bus_id():
    r = _run("cuda", {"gpu": "0000:99:00.0"})
    assert r["status"] == "fail" and r["evidence"]["call"] == "cuDeviceGetByPCIBusId"


def test_host_bandwidth_verified_and_against_the_link():
    r = _host()
    assert r["status"] == "ok" and r["measured"]["verified"] is True
    assert r["measured"]["h2d_gb_per_s"] > 40 and r["measured"]["cpus_pinned"] == "0"
    slow = _host("slow-link")
    assert slow["status"] == "degraded" and slow["measured"]["h2d_gb_per_s"] < 40


def test_host_copy_that_comes_back_different_fails():
    r = _host("h2d-corrupt")
    assert r["status"] == "fail" and r["measured"]["verified"] is False
    assert "first difference" in r["measured"]["mismatch"]


def test_a_copy_that_never_completes_is_killed_at_its_deadline():
    r = _run("host-bandwidth", {"gpu": GPU0, "bytes": 1 << 20}, "hang", deadline=3)
    ev = r["evidence"]
    assert r["status"] == "fail" and ev["hung"] is True and ev["killed"] is True
    assert "host copies" in ev["error"]  # the stage it stopped in
    assert r["elapsed_s"] < 30


def test_p2p_verified_and_compared_with_staged_copies():
    r = _run("p2p", {"gpus": [GPU0, GPU1], "bytes": SMALL})
    m = r["measured"]
    assert r["status"] == "ok" and m["small_verified"] and m["verified"]
    assert m["p2p_gb_per_s"] > m["staged_gb_per_s"]


def test_p2p_data_mismatch():
    r = _run("p2p", {"gpus": [GPU0, GPU1], "bytes": SMALL}, "p2p-zeros")
    assert r["status"] == "fail" and r["measured"]["verified"] is False and r["measured"]["small_verified"] is False


def test_p2p_slower_than_staged():
    r = _run("p2p", {"gpus": [GPU0, GPU1], "bytes": SMALL}, "p2p-slow")
    assert r["status"] == "degraded"


def test_p2p_denied_and_harmless_only():
    r = _run("p2p", {"gpus": [GPU0, GPU1], "bytes": SMALL}, "no-peer")
    assert r["status"] == "fail" and r["measured"]["can_access_peer"] is False
    h = _run("p2p", {"gpus": [GPU0, GPU1], "bytes": SMALL}, "p2p-zeros", harmless_only=True)
    assert h["status"] == "skipped" and h["measured"]["can_access_peer"] is True and "verified" not in h["measured"]


def test_rdma_register_every_path_works():
    r = _reg()
    m = r["measured"]
    assert r["status"] == "ok" and m["rdma_device"] == "mlx5_0"
    assert m["dmabuf_probe"] == {"ok": True, "errno": "EBADF", "meaning": "DMA-BUF supported by kernel and provider"}
    assert m["reg_mr"]["ok"] and m["dmabuf_export"]["ok"] and m["reg_dmabuf_mr"]["ok"]
    assert [(p["port"], p["state"], p["link_layer"]) for p in m["ports"]] == [(1, "DOWN", "InfiniBand")]


def test_rdma_register_efault_is_peer_memory():
    m = _reg("reg-efault")["measured"]
    assert m["reg_mr"]["errno"] == "EFAULT" and "peer-memory" in m["reg_mr"]["meaning"]


def test_rdma_register_enomem_and_no_dmabuf():
    r = _reg("reg-enomem,dmabuf-eopnotsupp")
    m = r["measured"]
    assert r["status"] == "fail"
    assert m["dmabuf_probe"]["ok"] is False and m["dmabuf_probe"]["errno"] == "EOPNOTSUPP"
    assert m["reg_mr"]["errno"] == "ENOMEM" and "BAR1" in m["reg_mr"]["meaning"]
    assert m["reg_dmabuf_mr"]["errno"] == "EOPNOTSUPP"


def test_rdma_register_enomem_after_some_mib_is_measured_and_released():
    r = _reg("reg-enomem-after-256")
    sweep = r["measured"]["pin_sweep"]
    assert r["status"] == "degraded" and r["measured"]["reg_mr"]["ok"]
    assert sweep["stopped_by"] == "ENOMEM" and 192 <= sweep["registered_mib"] <= 256 and sweep["target_mib"] == 1024
    assert "ran out of memory after" in r["evidence"]["error"]


def test_rdma_register_sweep_reaches_its_target_when_nothing_runs_out():
    sweep = _reg("")["measured"]["pin_sweep"]
    assert sweep == {"ok": True, "target_mib": 1024, "registered_mib": 1024, "chunk_mib": 64}


def test_dmabuf_export_failing():
    m = _reg("export-fail")["measured"]
    assert m["dmabuf_export"]["ok"] is False and "CUDA_ERROR_NOT_SUPPORTED" in m["dmabuf_export"]["error"]
    assert "reg_dmabuf_mr" not in m


def test_real_libibverbs_with_no_device():
    if not ctypes.util.find_library("ibverbs"):
        pytest.skip("libibverbs.so.1 is not installed (apt-get install libibverbs1)")
    r = _reg("verbs-real")
    assert r["status"] == "skipped" and r["reason"].startswith("no RDMA device")
    assert r["measured"]["rdma_devices_found"] == 0


def test_real_libraries_without_fakes():
    """This machine as it is: no libcuda.so.1 (a cuda step fails and says so), verbs with no device."""
    if ctypes.util.find_library("cuda"):
        pytest.skip("this machine has libcuda")
    r = run_step({"check": "cuda", "params": {"gpu": GPU0}}, 60)
    assert r["status"] == "fail" and "libcuda.so.1" in r["evidence"]["error"]
    if ctypes.util.find_library("ibverbs"):
        r = run_step({"check": "rdma-register", "params": {"gpu": GPU0, "nic": NIC}}, 60)
        assert r["status"] == "skipped" and "no RDMA device" in r["reason"]


def test_gds_read_in_compatibility_mode(tmp_path):
    if os.path.exists("/proc/driver/nvidia-fs/version"):
        pytest.skip("nvidia-fs is loaded here")
    params = {"gpu": GPU0, "gds_path": str(tmp_path), "bytes": 1 << 20}
    r = _run("gds-read", params)
    assert r["status"] == "degraded" and r["measured"]["mode"] == "compat" and r["measured"]["verified"]
    assert list(tmp_path.iterdir()) == []  # the test file is removed
    bad = _run("gds-read", params, "cufile-corrupt")
    assert bad["status"] == "fail" and bad["measured"]["verified"] is False
    short = _run("gds-read", params, "cufile-short")
    assert short["status"] == "fail" and "returned" in short["measured"]["error"]
    none = _run("gds-read", params, "no-cufile")
    assert none["status"] == "skipped" and "libcufile.so.0" in none["reason"]


def test_gds_read_never_writes_through_a_planted_link(tmp_path):
    """--gds-path names a scratch directory others can write to: a link planted at any name the probe might
    use must not make root write through it (the test file was .gdrcheck-probe-PID, opened without O_EXCL)."""
    if os.path.exists("/proc/driver/nvidia-fs/version"):
        pytest.skip("nvidia-fs is loaded here")
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for pid in range(os.getpid() - 50, os.getpid() + 5000):  # the worker's PID is a few above ours
        (scratch / f".gdrcheck-probe-{pid}").symlink_to(victim)
    r = _run("gds-read", {"gpu": GPU0, "gds_path": str(scratch), "bytes": 1 << 20})
    assert r["status"] == "degraded" and r["measured"]["verified"], r
    assert victim.read_bytes() == b"precious"
    assert all(p.is_symlink() for p in scratch.iterdir())  # its own file is gone, the planted links stay


def test_gds_p2pdma_mode_from_cufile_json(tmp_path):
    if os.path.exists("/proc/driver/nvidia-fs/version"):
        pytest.skip("nvidia-fs is loaded here")
    cfg = tmp_path / "cufile.json"
    cfg.write_text('// comment\n{"properties": {"use_pci_p2pdma": true, "allow_compat_mode": false}}\n')
    d = tmp_path / "data"
    d.mkdir()
    env = {**_env(), "CUFILE_ENV_PATH_JSON": str(cfg)}
    r = run_step({"check": "gds-read", "params": {"gpu": GPU0, "gds_path": str(d), "bytes": 1 << 20}}, 60, env)
    assert r["status"] == "ok" and r["measured"]["mode"] == "p2pdma"


def test_the_command_process_never_loads_cuda_or_verbs(tmp_path):
    """run_plan here, workers with the real libibverbs: this process's own maps hold neither library."""
    from builders import scenarios
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.probe.plan import build_plan
    from gdrcheck.probe.runner import run_plan
    from gdrcheck.rules.engine import evaluate

    snap = load_facts(str(scenarios.scenario(tmp_path, "healthy-gdr-node")))
    plan = build_plan(evaluate(snap), only=("cuda", "rdma-register"))
    plan.steps = plan.steps[:1] + [s for s in plan.steps if s.check == "rdma-register"][:1]
    results = run_plan(plan, env={**_env("verbs-real"), "GDRCHECK_FAKE_GPUS": scenarios.GPUS[0]})
    assert results[0]["status"] == "ok"
    assert results[1]["status"] in ("skipped", "ok")
    maps = Path("/proc/self/maps").read_text()
    assert "libcuda" not in maps and "libibverbs" not in maps


def test_worker_that_dies_is_reported(tmp_path):
    mod = tmp_path / "crashing_libs.py"
    mod.write_text("import os\ndef load(name):\n    os._exit(7)\n")
    r = run_step({"check": "cuda", "params": {"gpu": GPU0}}, 30,
                 {"GDRCHECK_PROBE_LIBS": "crashing_libs", "PYTHONPATH": str(tmp_path)})
    assert r["status"] == "fail" and "status 7" in r["evidence"]["error"]


def test_results_are_json_the_parent_can_read():
    r = _host()
    json.dumps(r)
    assert isinstance(r["elapsed_s"], float)


def _loop(fault):
    return _run("rdma-loopback", {"gpu": GPU0, "nic": NIC, "rdma_devices": ["mlx5_0"], "bytes": 1 << 20,
                                  "completion_timeout_s": 1}, fault)


def test_loopback_needs_an_active_port():
    r = _loop("")
    assert r["status"] == "skipped" and r["reason"] == "no ACTIVE port on mlx5_0"


def test_loopback_writes_gpu_to_gpu_through_the_nic():
    r = _loop("port-active")
    m = r["measured"]
    assert r["status"] == "ok" and m["host"]["verified"] and m["gpu"]["verified"]
    assert m["registered_by"] == "ibv_reg_mr"
    dmabuf = _loop("port-active,reg-efault")
    assert dmabuf["status"] == "ok" and dmabuf["measured"]["registered_by"].startswith("ibv_reg_dmabuf_mr")


def test_loopback_completion_errors_are_named():
    r = _loop("port-active,loopback-prot-err")
    assert r["status"] == "fail" and r["measured"]["wc_status"] == "LOC_PROT_ERR"
    assert "ACS" in r["evidence"]["error"]
    hang = _loop("port-active,loopback-hang")
    assert hang["status"] == "fail" and "no completion" in hang["evidence"]["error"]
    garbage = _loop("port-active,loopback-garbage")
    assert garbage["status"] == "fail" and garbage["measured"]["verified"] is False


def test_loopback_with_the_real_libibverbs():
    if not ctypes.util.find_library("ibverbs"):
        pytest.skip("libibverbs.so.1 is not installed")
    r = _loop("verbs-real")
    assert r["status"] == "skipped" and r["reason"].startswith("no RDMA device")


def test_kernel_log_lines_about_the_devices(tmp_path):
    """A FIFO stands in for /dev/kmsg: records are 'prio,seq,time,-;message'; only device words are kept."""
    from gdrcheck.probe.nvml_state import KernelLog

    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    w = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    log = KernelLog(str(fifo))
    assert log.readable
    os.write(w, b"6,100,5,-;usb 1-1: new device\n")
    os.write(w, b"4,101,6,-;NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n")
    assert log.new_lines() == ["NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus."]
    log.close()
    os.close(w)
    assert not KernelLog(str(tmp_path / "absent")).readable


def test_a_worker_that_cannot_be_killed_leaves_its_gpu_alone(tmp_path, monkeypatch):
    """Stuck in the driver, SIGKILL does not end it: the step says the GPU may need a reset, and no later
    step touches that GPU. (Simulated: the group is killed, but the wait is reported to have failed.)"""
    import signal

    from builders import scenarios
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.probe import runner
    from gdrcheck.probe.plan import build_plan
    from gdrcheck.rules.engine import evaluate

    def unkillable(p):
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return False

    monkeypatch.setattr(runner, "_kill_group", unkillable)
    plan = build_plan(evaluate(load_facts(str(scenarios.scenario(tmp_path, "healthy-gdr-node")))),
                      only=("cuda", "host-bandwidth"), copy_bytes=1 << 20)
    g0 = scenarios.GPUS[0]
    plan.steps = [s for s in plan.steps if s.subjects == (g0,)][::-1]  # host-bandwidth, then cuda
    assert [s.check for s in plan.steps] == ["host-bandwidth", "cuda"]
    results = runner.run_plan(plan, step_timeout=2, env={**_env("hang"), "GDRCHECK_FAKE_GPUS": g0})
    assert results[0]["evidence"]["killed"] is False and "may need a reset" in results[0]["evidence"]["error"]
    assert results[1]["status"] == "skipped" and "could not be killed" in results[1]["reason"]


def test_busy_from_the_live_driver():
    from gdrcheck.probe.plan import busy_reasons

    class Snap:
        gpus = ()

    got = busy_reasons(Snap(), {"0000:03:00.0": {"mig_enabled": True, "compute_mode": "default"},
                                "0000:04:00.0": {"mig_enabled": False, "compute_mode": "exclusive-process"}})
    assert got == ["GPU 0000:03:00.0 has MIG enabled", "GPU 0000:04:00.0 is in compute mode exclusive-process"]


def test_a_refused_plan_runs_nothing(tmp_path):
    from gdrcheck.probe.plan import Plan, Step
    from gdrcheck.probe.runner import run_plan

    step = Step("p2p", (GPU0, GPU1), "skipped", "", reason="risky", harmless_only=True)
    assert run_plan(Plan(steps=[step], busy=["GPU busy"], refused=True), env=_env()) == [None]


def test_ctrl_c_during_a_step_takes_its_worker_down(monkeypatch, tmp_path, ctrl_c):
    """The worker runs in its own session, so a terminal's Ctrl-C never reaches it: when the probe is
    interrupted (or sent SIGTERM) mid-step, it kills the worker's group before it goes, and no copy is left
    running on the GPU."""
    import signal
    import subprocess

    from gdrcheck.probe import runner

    started = []

    class Recorded(subprocess.Popen):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            started.append(self)

    monkeypatch.setattr(runner.subprocess, "Popen", Recorded)
    mark = tmp_path / "hanging"
    main = threading.get_ident()
    stop = threading.Event()

    def ctrl_c_once_hanging() -> None:  # Ctrl-C, to the main thread, once the worker is inside its step
        while not mark.exists() and not stop.wait(0.01):
            pass
        if not stop.is_set():
            signal.pthread_kill(main, signal.SIGINT)

    sender = threading.Thread(target=ctrl_c_once_hanging, daemon=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run_step({"check": "host-bandwidth", "params": {"gpu": GPU0, "bytes": 1 << 20}}, 600,
                            {**_env("hang"), "GDRCHECK_FAKE_HANGING": str(mark)})
        alive = [p for p in started if p.poll() is None]
    finally:
        stop.set()
        sender.join()
        for p in started:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert started and not alive, "the worker outlived the interrupted probe"


def test_p2p_each_way_and_both_at_once_held_to_the_link():
    exp = {"link": "NV18", "gb_per_s": 478.1, "degraded_below_gb_per_s": 358.6}
    r = _run("p2p", {"gpus": [GPU0, GPU1], "bytes": SMALL, "expected": exp})
    m = r["measured"]
    assert r["status"] == "ok" and m["verified"] and m["small_verified"]
    assert m["a_to_b_gb_per_s"] > 0 and m["b_to_a_gb_per_s"] > 0 and m["bidir_gb_per_s"] > 0
    assert m["p2p_gb_per_s"] == min(m["a_to_b_gb_per_s"], m["b_to_a_gb_per_s"])
    assert m["expected_gb_per_s"] == 478.1 and "below_expected" not in m
    slow = _run("p2p", {"gpus": [GPU0, GPU1], "bytes": SMALL, "expected": exp}, "p2p-slow")
    assert slow["status"] == "degraded" and "below 358.6 GB/s" in slow["measured"]["below_expected"]


def test_a_copy_wrong_in_one_chunk_is_found_where_it_differs():
    from gdrcheck.probe.checks_gpu import pattern_block

    block = pattern_block(7)
    assert len(block) == 1 << 20
    assert all(block[i] == (i * 131 + 7 * 17 + (i >> 8)) & 0xFF for i in range(0, 1 << 20, 4099))
