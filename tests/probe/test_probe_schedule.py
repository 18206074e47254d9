"""Which probe steps run at the same time: p2p steps over NVLink on disjoint GPUs (they share no link); every
other step alone, in plan order. A group that hangs is killed at its deadline, each of its steps saying so."""

from __future__ import annotations

from pathlib import Path

from support.limits import hang_guard

from gdrcheck.probe.plan import Plan, Step
from gdrcheck.probe.runner import run_plan, schedule

TESTS = Path(__file__).resolve().parents[1]
G = ["0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:06:00.0"]
NV18 = {"link": "NV18", "nvlinks": 18, "gb_per_s": 478.1, "degraded_below_gb_per_s": 358.6}
PCIE = {"link": "PCIe Gen5 x16", "gb_per_s": 53.5, "degraded_below_gb_per_s": 40.1}


def _plan(expected=NV18):
    steps = [Step("cuda", (g,), "planned", "", params={"gpu": g}) for g in G]
    for i, a in enumerate(G):
        for b in G[i + 1:]:
            steps.append(Step("p2p", (a, b), "planned", "", expected=dict(expected),
                              params={"gpus": [a, b], "bytes": 1 << 20, "expected": dict(expected)}, deadline_s=90))
    return Plan(steps=steps, busy=[], refused=False)


def test_nvlink_pairs_run_in_rounds_of_disjoint_gpus():
    plan = _plan()
    groups = schedule(plan)
    assert groups[:4] == [[0], [1], [2], [3]]  # the cuda steps, alone
    rounds = [[plan.steps[i].subjects for i in g] for g in groups[4:]]
    assert len(rounds) == 3 and all(len(r) == 2 for r in rounds)  # 6 pairs of 4 GPUs: 3 rounds of 2
    for r in rounds:
        assert not set(r[0]) & set(r[1])
    assert sorted(i for g in groups for i in g) == list(range(len(plan.steps)))


def test_pcie_pairs_and_serial_runs_are_one_at_a_time():
    assert all(len(g) == 1 for g in schedule(_plan(PCIE)))
    assert all(len(g) == 1 for g in schedule(_plan(), serial=True))


def _env(fault=""):
    return {"GDRCHECK_PROBE_LIBS": "support.probe_fakes", "GDRCHECK_FAKE": fault, "GDRCHECK_FAKE_GPUS": ",".join(G),
            "PYTHONPATH": str(TESTS)}


def test_a_round_runs_and_each_pair_has_its_result():
    plan = _plan()
    res = run_plan(plan, env=_env())
    p2p = [r for s, r in zip(plan.steps, res) if s.check == "p2p"]
    assert all(r["status"] == "ok" and r["measured"]["verified"] for r in p2p), p2p
    assert all(len(r["evidence"]["ran_beside"]) == 1 for r in p2p)
    assert "worker_opened" in res[0]["evidence"]


def test_a_round_that_hangs_is_killed_at_its_deadline():
    plan = _plan()
    plan.steps = [s for s in plan.steps if s.subjects in ((G[0], G[1]), (G[2], G[3]))]
    with hang_guard(300):  # the fake's copies never return: only the deadline ends the round
        res = run_plan(plan, step_timeout=3, env=_env("hang"))
    for r in res:
        ev = r["evidence"]
        assert r["status"] == "fail" and ev["hung"] is True and ev["killed"] is True
        assert "peer copies" in ev["error"]


def test_bar1_held_by_open_contexts_is_not_a_leak_but_what_stays_after_the_worker_is(monkeypatch):
    """An H200's primary context holds about 550 MiB of BAR1 while the worker lives: judged from before the
    contexts were opened to after the worker ended, on each GPU's last step."""
    from gdrcheck.probe import nvml_state, runner

    state = {"open": False, "ended": False}
    leak = {G[1]: 64 << 20}

    class Nvml:
        def __init__(self):
            self.handles = {g: object() for g in G[:2]}

        def sample(self, bdf):
            held = (528 << 20) if state["open"] and not state["ended"] else 0
            left = leak.get(bdf, 0) if state["ended"] else 0
            return {"bar1_used_bytes": (2 << 20) + held + left, "replay_counter": 0}

        def close(self):
            pass

    real_ask, real_close = runner.Worker.ask, runner.Worker.close

    def ask(self, payload, deadline):
        state["open"] = True
        return real_ask(self, payload, deadline)

    def close(self):
        real_close(self)
        state["ended"] = True

    monkeypatch.setattr(nvml_state, "NvmlState", Nvml)
    monkeypatch.setattr(runner.Worker, "ask", ask)
    monkeypatch.setattr(runner.Worker, "close", close)
    plan = _plan()
    plan.steps = [s for s in plan.steps if set(s.subjects) <= set(G[:2])]
    res = run_plan(plan, env=_env())
    assert [r["status"] for r in res] == ["ok", "ok", "ok"]
    assert "left_behind" not in res[0]["evidence"]  # GPU0's last step is the pair: 66 MiB only on GPU1
    assert res[2]["evidence"]["left_behind"] == "0000:04:00.0: BAR1 used 2 MiB before, 66 MiB after"
    assert res[1]["evidence"]["cleanup"][G[1]]["before"]["bar1_used_bytes"] == 530 << 20  # recorded, not judged


def test_an_opening_that_hangs_is_killed_and_each_step_opens_its_own(monkeypatch):
    from gdrcheck.probe import runner

    monkeypatch.setattr(runner, "OPEN_DEADLINE_S", 2.0)
    plan = _plan()
    plan.steps = plan.steps[:2]
    with hang_guard(300):  # the fake's openings never return: only their deadline ends them
        res = run_plan(plan, env=_env("open-hang"))
    assert [r["status"] for r in res] == ["ok", "ok"]
    assert "no answer within 2 s" in res[0]["evidence"]["worker_opened"]["error"]


def test_a_worker_started_early_initialises_cuda_while_the_facts_are_read():
    from gdrcheck.probe.runner import start_early

    plan = _plan()
    plan.steps = plan.steps[:2]
    w = start_early(_env())
    res = run_plan(plan, env=_env(), worker=w)
    assert [r["status"] for r in res] == ["ok", "ok"]
    opened = res[0]["evidence"]["worker_opened"]
    assert "cuinit_s" in opened["started_early"] and set(opened["contexts_s"]) == set(G[:2])
    assert not w.alive and w.p.poll() is not None


def test_a_refused_plan_ends_the_early_worker():
    from gdrcheck.probe.runner import start_early

    w = start_early(_env())
    plan = _plan()
    plan.refused = True
    assert run_plan(plan, env=_env(), worker=w) == [None] * len(plan.steps)
    assert w.p.poll() is not None
