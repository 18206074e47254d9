"""Running each step in a spawned worker, with its own deadline.

The worker is a fresh interpreter (``python3 -m gdrcheck.probe.worker``) in a new
session, so it and anything it starts form one process group: never a ``fork`` of
a process that has CUDA or verbs loaded. When it overstays its deadline the
group is killed; a process stuck inside the driver survives SIGKILL, and then the
step says the GPU may need a reset.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import gdrcheck
from gdrcheck.probe.stages import PREFIX as STAGE_PREFIX
from gdrcheck.probe.stages import stages_of

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

KILL_WAIT_S = 5.0
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gdrcheck.__file__)))


def worker_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    pp = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + pp if pp else "")
    env.setdefault("CUDA_MODULE_LOADING", "LAZY")
    env.pop("CUDA_VISIBLE_DEVICES", None)  # the step names its GPU by bus id
    if extra:
        env.update(extra)
    return env


def _stages(err: str) -> list:
    return stages_of(err)


def run_step(step: Dict[str, Any], deadline_s: float, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The worker's result for ``step``, or a ``fail`` saying it hung (and whether it could be killed)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, "-m", "gdrcheck.probe.worker"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=err, env=worker_env(env), start_new_session=True,
                             text=True, close_fds=True)
        try:
            out, _ = p.communicate(json.dumps(step), timeout=deadline_s if deadline_s > 0 else None)
        except BaseException as e:
            if not isinstance(e, subprocess.TimeoutExpired):  # Ctrl-C, SIGTERM: the worker goes too
                _kill_group(p)
                raise
            killed = _kill_group(p)
            err.seek(0)
            stages = _stages(err.read())
            ev = {"hung": True, "deadline_s": deadline_s, "killed": killed, "stages": stages[-3:],
                  "error": f"no answer within {deadline_s:g} s"
                           + (f" (last stage: {stages[-1]})" if stages else "")
                           + ("; worker killed" if killed else
                              "; worker could not be killed (stuck in the driver): the GPU may need a reset")}
            return {"status": "fail", "measured": {"hung": True}, "evidence": ev,
                    "elapsed_s": round(time.monotonic() - t0, 3)}
        err.seek(0)
        errtext = err.read()
    lines = [ln for ln in (out or "").splitlines() if ln.strip()]
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        why = f"worker ended with status {p.returncode}" if p.returncode >= 0 else \
            f"worker killed by signal {signal.Signals(-p.returncode).name}"
        tail = [ln for ln in errtext.splitlines() if ln.strip() and not ln.startswith(STAGE_PREFIX)][-3:]
        return {"status": "fail", "measured": {}, "evidence": {"error": why, "stages": _stages(errtext)[-3:],
                                                               "stderr": tail},
                "elapsed_s": round(time.monotonic() - t0, 3)}
    result["elapsed_s"] = round(time.monotonic() - t0, 3)
    return result


def _kill_group(p: subprocess.Popen) -> bool:
    """SIGKILL the worker's process group; True once it has gone."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        return False
    for f in (p.stdin, p.stdout):
        try:
            if f:
                f.close()
        except OSError:
            pass
    return True


def run_plan(plan, deadline_scale: float = 1.0, step_timeout: Optional[float] = None, env=None,
             progress=None) -> list:
    """Every planned step in order, BAR1 sampled around each; a GPU whose worker hung unkillably is left alone."""
    from gdrcheck.probe.nvml_state import KernelLog, NvmlState, left_behind, peer_reg_bytes

    if plan.refused:  # a busy node: not even the harmless calls
        return [None] * len(plan.steps)
    nv = NvmlState()
    klog = KernelLog()
    results: list = []
    wedged: set = set()
    try:
        for step in plan.steps:
            gpus = [s for s in step.subjects if s in nv.handles] or list(step.subjects[:1])
            if step.status != "planned" and not (step.harmless_only and step.check == "p2p"):
                results.append(None)
                continue
            if wedged & set(step.subjects):
                results.append({"status": "skipped", "reason": "an earlier step on this device could not be killed",
                                "measured": {}, "evidence": {}})
                continue
            if progress:
                progress(f"{step.check} on {', '.join(step.subjects)}")
            before = {g: {**nv.sample(g), "peer_reg_bytes": peer_reg_bytes()} for g in gpus}
            klog.mark()
            payload = {"check": step.check, "params": step.params, "harmless_only": step.harmless_only}
            deadline = step_timeout if step_timeout is not None else step.deadline_s * deadline_scale
            r = run_step(payload, deadline, env)
            if step.status == "skipped":  # harmless calls only: the step stays skipped, with what they said
                r = {"status": "skipped", "reason": step.reason, "measured": r.get("measured") or {},
                     "evidence": r.get("evidence") or {}, "elapsed_s": r.get("elapsed_s")}
            ev = r.setdefault("evidence", {})
            lines = klog.new_lines()
            if lines:
                ev["kernel_log"] = lines
            if ev.get("hung") and not ev.get("killed"):
                wedged.update(step.subjects)
            after = {}
            for g in gpus:
                after[g] = {**nv.sample(g), "peer_reg_bytes": peer_reg_bytes()}
                if left_behind(before[g], after[g]):  # the driver may release a moment after exit
                    time.sleep(0.5)
                    after[g] = {**nv.sample(g), "peer_reg_bytes": peer_reg_bytes()}
            cleanup = {g: {"before": before[g], "after": after[g]} for g in gpus if before[g] or after[g]}
            if cleanup:
                ev["cleanup"] = cleanup
                left = "; ".join(f"{g}: {x}" for g in gpus if (x := left_behind(before[g], after[g])))
                if left:
                    ev["left_behind"] = left
                rc = [(before[g].get("replay_counter"), after[g].get("replay_counter")) for g in gpus]
                if step.check == "host-bandwidth" and rc and None not in rc[0]:
                    r.setdefault("measured", {})["replay_counter_delta"] = rc[0][1] - rc[0][0]
            results.append(r)
    finally:
        nv.close()
        klog.close()
    return results
