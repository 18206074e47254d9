"""Running the steps in a spawned worker, each with its own deadline.

One worker serves a whole run (``gdrcheck/probe/worker.py``): a fresh interpreter, started isolated
(``python3 -I``) by the module's own path with ``/`` as its working directory, in a new session, so it
and anything it starts form one process group: never a ``fork`` of a process that has CUDA or verbs
loaded. It initialises the driver once and opens every GPU's primary context once (all at the same
time), which is most of what a step used to cost. A step that overstays its deadline has the group
killed, and the run goes on in a fresh worker; a process stuck inside the driver survives SIGKILL, and
then the step says the GPU may need a reset and no later step touches that GPU. The worker dies with
this process (``PR_SET_PDEATHSIG``) and ends when its stdin closes.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

import gdrcheck
from gdrcheck.probe.stages import PREFIX as STAGE_PREFIX
from gdrcheck.probe.stages import stages_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

KILL_WAIT_S = 5.0
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gdrcheck.__file__)))
WORKER_PATH = os.path.join(PACKAGE_ROOT, "gdrcheck", "probe", "worker.py")
GPU_CHECKS = ("cuda", "host-bandwidth", "p2p")
OPEN_DEADLINE_S = 60.0  # cuInit and every GPU's primary context, at once: the cuda check's deadline


def worker_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CUDA_MODULE_LOADING", "LAZY")
    env.pop("CUDA_VISIBLE_DEVICES", None)  # the step names its GPU by bus id
    if extra:
        env.update(extra)
    return env


def worker_argv(env: dict[str, str]) -> list[str]:
    """The isolated interpreter, the worker by its path, and the only directories it may import from: the
    package's own parent first, then the absolute entries of ``PYTHONPATH`` (never an empty or relative
    one, which would mean the working directory)."""
    paths = [PACKAGE_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                              if p and os.path.isabs(p) and p != PACKAGE_ROOT]
    if os.path.isfile(WORKER_PATH):
        argv = [sys.executable, "-I", WORKER_PATH, "--parent", str(os.getpid())]
    else:  # imported from inside an archive (gdrcheck.pyz with no cache directory): its path goes first, then -c
        argv = [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[sys.argv.index('--path') + 1]); "
                "from gdrcheck.probe.worker import main; sys.exit(main())", "--parent", str(os.getpid())]
    for p in paths:
        argv += ["--path", p]
    return argv


def _stages(err: str) -> list:
    return stages_of(err)


class Worker:
    """One worker process; :meth:`ask` sends a step and waits for its result within the step's deadline."""

    def __init__(self, env: Optional[dict[str, str]] = None) -> None:
        full = worker_env(env)
        self.err = tempfile.TemporaryFile("w+b")
        self.p = subprocess.Popen(worker_argv(full), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, env=full, cwd="/", start_new_session=True, close_fds=True)
        self.buf = b""
        self.alive = True
        self.killed: Optional[bool] = None  # after a hang: whether the group went
        self.pending = (time.monotonic(), 0)  # when the step sent last was sent, and where its stderr begins

    def _err_from(self, offset: int) -> str:
        self.err.seek(offset)
        return self.err.read().decode("utf-8", "replace")

    def _readline(self, deadline_s: float) -> Optional[bytes]:
        """The next line of stdout; None at the deadline; b'' when the worker closed it (ended)."""
        fd = self.p.stdout.fileno()
        end = time.monotonic() + deadline_s if deadline_s > 0 else None
        while b"\n" not in self.buf:
            wait = None if end is None else end - time.monotonic()
            if wait is not None and wait <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def send(self, step: dict[str, Any]) -> None:
        """Hand the worker a step without waiting: :meth:`receive` takes its result."""
        self.pending = (time.monotonic(), os.fstat(self.err.fileno()).st_size)
        try:
            self.p.stdin.write(json.dumps(step).encode() + b"\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it has ended: the read says how
        except BaseException:
            self.kill()
            raise

    def ask(self, step: dict[str, Any], deadline_s: float) -> dict[str, Any]:
        """The worker's result for ``step``, or a ``fail`` saying it hung (and whether it could be killed)."""
        self.send(step)
        return self.receive(deadline_s)

    def receive(self, deadline_s: float) -> dict[str, Any]:
        """The result of the step sent last, within ``deadline_s`` of now."""
        t0, offset = self.pending
        try:
            line = self._readline(deadline_s)
        except BaseException:  # Ctrl-C, SIGTERM: the worker goes too
            self.kill()
            raise
        if line is None:
            killed = self.kill()
            stages = _stages(self._err_from(offset))
            ev = {"hung": True, "deadline_s": deadline_s, "killed": killed, "stages": stages[-3:],
                  "error": f"no answer within {deadline_s:g} s"
                           + (f" (last stage: {stages[-1]})" if stages else "")
                           + ("; worker killed" if killed else
                              "; worker could not be killed (stuck in the driver): the GPU may need a reset")}
            return {"status": "fail", "measured": {"hung": True}, "evidence": ev,
                    "elapsed_s": round(time.monotonic() - t0, 3)}
        try:
            result = json.loads(line) if line.strip() else None
        except ValueError:
            result = None
        if not isinstance(result, dict):
            errtext = self._err_from(offset)
            self.alive = False
            try:
                rc = self.p.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                rc = self.p.returncode
            why = f"worker ended with status {rc}" if rc is not None and rc >= 0 else \
                f"worker killed by signal {signal.Signals(-rc).name}" if rc is not None else "worker gave no answer"
            tail = [ln for ln in errtext.splitlines() if ln.strip() and not ln.startswith(STAGE_PREFIX)][-3:]
            return {"status": "fail", "measured": {}, "evidence": {"error": why, "stages": _stages(errtext)[-3:],
                                                                   "stderr": tail},
                    "elapsed_s": round(time.monotonic() - t0, 3)}
        result["worker_s"] = result.get("elapsed_s")
        result["elapsed_s"] = round(time.monotonic() - t0, 3)
        return result

    def kill(self) -> bool:
        self.alive = False
        self.killed = _kill_group(self.p)
        return self.killed

    def close(self) -> None:
        """Close its stdin (it ends by itself, releasing what it holds); kill it if it does not."""
        if self.alive:
            self.alive = False
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                _kill_group(self.p)
        for f in (self.p.stdin, self.p.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        self.err.close()


def run_step(step: dict[str, Any], deadline_s: float, env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """One step in a worker of its own."""
    w = Worker(env)
    try:
        return w.ask(step, deadline_s)
    finally:
        w.close()


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
    return True


def _sample(nv, peer_reg_bytes, g: str) -> dict[str, Any]:
    return {**nv.sample(g), "peer_reg_bytes": peer_reg_bytes()}


def _runs_beside(step) -> bool:
    """A p2p step over NVLink: it shares no link with a p2p step on two other GPUs (each GPU's NVLinks are its
    own, and NVSwitches are non-blocking), so such steps run at the same time. Pairs over PCIe may share a
    switch's uplink or a root complex: they run alone."""
    return (step.check == "p2p" and step.status == "planned" and not step.harmless_only
            and bool((step.expected or {}).get("nvlinks")))


def schedule(plan, serial: bool = False) -> list[list[int]]:
    """The steps' indexes in the order they run, grouped: a group of more than one runs at the same time
    (p2p steps over NVLink on disjoint GPUs, at most one per GPU); every other step runs alone, in plan order."""
    steps = plan.steps
    done: set = set()
    out: list[list[int]] = []
    for i, step in enumerate(steps):
        if i in done:
            continue
        group = [i]
        done.add(i)
        if not serial and _runs_beside(step):
            used = set(step.subjects)
            for j in range(i + 1, len(steps)):
                if j not in done and _runs_beside(steps[j]) and not used & set(steps[j].subjects):
                    group.append(j)
                    done.add(j)
                    used |= set(steps[j].subjects)
        out.append(group)
    return out


def start_early(env: Optional[dict[str, str]] = None) -> Worker:
    """A worker started before the facts are read, initialising the driver (``cuInit`` only: no context, so
    a busy node that is then refused is not touched) while the facts are read; :func:`run_plan` takes it."""
    w = Worker(env)
    w.send({"check": "init"})
    return w


def run_plan(plan, deadline_scale: float = 1.0, step_timeout: Optional[float] = None, env=None,
             progress=None, worker: Optional[Worker] = None) -> list:
    """Every planned step in one worker (a fresh one after a hang), BAR1 sampled around each; a GPU whose
    worker hung unkillably is left alone. P2P steps over NVLink on disjoint GPUs run at the same time
    (:func:`schedule`; ``GDRCHECK_PROBE_SERIAL=1`` runs every step alone).

    Before its first GPU step a worker opens every GPU's context (its own request, with the cuda check's
    deadline: if it hangs, the worker is killed and each step opens its own GPU's context within the step's
    deadline), and those contexts stay open to the end (a context holds hundreds of MiB of BAR1 on an
    H200), so what a GPU holds is judged from before the contexts were opened to after the worker has
    ended, on the GPU's last step; each step records its own before and after."""
    from gdrcheck.probe.nvml_state import KernelLog, NvmlState, left_behind, peer_reg_bytes

    if plan.refused:  # a busy node: not even the harmless calls
        if worker is not None:
            worker.close()
        return [None] * len(plan.steps)
    early, open_failed = _early_answer(worker, deadline_scale)
    run = _PlanRun(plan, NvmlState(), KernelLog(), (peer_reg_bytes, left_behind), env, worker)
    run.scale, run.step_timeout, run.progress = deadline_scale, step_timeout, progress
    run.early, run.open_failed = early, open_failed
    serial = (env or {}).get("GDRCHECK_PROBE_SERIAL", os.environ.get("GDRCHECK_PROBE_SERIAL", "")) == "1"
    try:
        for group in schedule(plan, serial):
            run.run_group(group)
    finally:
        run.finish()
    return run.results


def _early_answer(worker: Optional[Worker], deadline_scale: float):
    """What a worker started early said of its ``cuInit`` (empty: none was), and whether it hung."""
    if worker is None:
        return {}, False
    got = worker.receive(OPEN_DEADLINE_S * deadline_scale)  # its cuInit ran while the facts were read
    early = {"cuinit_s": (got.get("measured") or {}).get("cuinit_s"), "error": (got.get("evidence") or {})
             .get("error")}
    # cuInit did not answer: each step tries on its own, within its deadline
    return early, bool((got.get("evidence") or {}).get("hung"))


def _runs(step) -> bool:
    """Whether a step goes to the worker: planned, or the harmless calls of a skipped p2p step."""
    return step.status == "planned" or (step.harmless_only and step.check == "p2p")


def _gpus_to_open(plan) -> list[str]:
    """The GPUs of every GPU step that runs, in plan order: a worker opens their contexts first."""
    to_open: list[str] = []
    for step in plan.steps:
        if step.check in GPU_CHECKS and _runs(step):
            to_open.extend(s for s in step.subjects if s not in to_open)
    return to_open


class _PlanRun:
    """One run of a plan: its worker, the results so far, the GPUs that hung unkillably (``wedged``), and
    each GPU's first sample and last step (for the judgement after the worker has ended)."""

    def __init__(self, plan, nv, klog, nvml_calls, env, worker: Optional[Worker]) -> None:
        self.plan, self.nv, self.klog, self.env, self.worker = plan, nv, klog, env, worker
        self.peer_reg_bytes, self.left_behind = nvml_calls
        self.scale, self.step_timeout, self.progress = 1.0, None, None
        self.early: dict[str, Any] = {}
        self.open_failed = False
        self.results: list = [None] * len(plan.steps)
        self.wedged: set = set()
        self.first_before: dict[str, dict[str, Any]] = {}
        self.last_step: dict[str, int] = {}
        self.to_open = _gpus_to_open(plan)
        self.fresh = True  # a new worker opens the contexts (of the GPUs not wedged) before its first GPU step

    def run_group(self, group: list[int]) -> None:
        """One group of :func:`schedule`: its steps sent at once, each result recorded."""
        todo = self._todo(group)
        if not todo:
            return
        steps = [self.plan.steps[i] for i in todo]
        if self.progress:
            self.progress("; ".join(f"{s.check} on {', '.join(s.subjects)}" for s in steps))
        gpus_of, before = self._sample_before(todo, steps)
        self.klog.mark()
        payloads = [{"check": s.check, "params": s.params, "harmless_only": s.harmless_only} for s in steps]
        payload = payloads[0] if len(payloads) == 1 else {"check": "batch", "steps": payloads}
        self._ensure_worker()
        opened = self._open_contexts(steps)
        deadline = self.step_timeout if self.step_timeout is not None else \
            max(s.deadline_s for s in steps) * self.scale
        rs = _split_answer(self.worker.ask(payload, deadline), todo, steps)
        if opened and isinstance(rs[0], dict):
            rs[0].setdefault("evidence", {})["worker_opened"] = opened
        lines = self.klog.new_lines()
        for i, step, r in zip(todo, steps, rs):
            self._record(i, step, r, gpus_of[i], before, lines)

    def _todo(self, group: list[int]) -> list[int]:
        """The group's steps that go to the worker; one on a wedged device is skipped here."""
        todo = []
        for i in group:
            step = self.plan.steps[i]
            if not _runs(step):
                continue
            if self.wedged & set(step.subjects):
                self.results[i] = {"status": "skipped", "reason": "an earlier step on this device could not be "
                                   "killed", "measured": {}, "evidence": {}}
                continue
            todo.append(i)
        return todo

    def _sample_before(self, todo: list[int], steps):
        """Each step's GPUs, and their samples now; every GPU's start too when a worker is about to open
        their contexts."""
        nv, w = self.nv, self.worker
        gpus_of = {i: [s for s in self.plan.steps[i].subjects if s in nv.handles]
                   or list(self.plan.steps[i].subjects[:1]) for i in todo}
        opening = (w is None or not w.alive or self.fresh) and any(s.check in GPU_CHECKS for s in steps)
        if opening:  # every GPU's start, before the worker opens their contexts
            for g in self.to_open:
                if g in nv.handles and g not in self.wedged:
                    self.first_before.setdefault(g, _sample(nv, self.peer_reg_bytes, g))
        before = {g: _sample(nv, self.peer_reg_bytes, g) for i in todo for g in gpus_of[i]}
        for i in todo:
            for g in gpus_of[i]:
                self.first_before.setdefault(g, before[g])
                self.last_step[g] = max(self.last_step.get(g, -1), i)
        return gpus_of, before

    def _ensure_worker(self) -> None:
        if self.worker is None or not self.worker.alive:
            if self.worker is not None:
                self.worker.close()  # a killed one: its pipes and stderr file
            self.worker = Worker(self.env)
            self.fresh = True

    def _open_contexts(self, steps) -> dict[str, Any]:
        """A fresh worker opens every GPU's context before its first GPU step: what that took, or why not."""
        opened: dict[str, Any] = {}
        if not (self.fresh and not self.open_failed and any(s.check in GPU_CHECKS for s in steps)):
            return opened
        self.fresh = False
        got = self.worker.ask({"check": "open", "gpus": [g for g in self.to_open if g not in self.wedged]},
                              OPEN_DEADLINE_S * self.scale)
        opened = {**(got.get("measured") or {}), "elapsed_s": got.get("elapsed_s")}
        if self.early:
            opened["started_early"] = {k: v for k, v in self.early.items() if v is not None}
            self.early = {}
        if (got.get("evidence") or {}).get("hung"):
            self.open_failed = True  # each step then opens its own GPU's context, within its own deadline
            opened["error"] = got["evidence"]["error"]
            self.worker.close()
            self.worker = Worker(self.env)
        return opened

    def _record(self, i: int, step, r, gpus: list[str], before, lines: list[str]) -> None:
        """A step's result with its kernel log lines and BAR1 before and after (recorded, not judged)."""
        if not isinstance(r, dict):
            r = {"status": "unknown", "measured": {}, "evidence": {"error": "no result from the worker"}}
        if step.status == "skipped":  # harmless calls only: the step stays skipped, with what they said
            r = {"status": "skipped", "reason": step.reason, "measured": r.get("measured") or {},
                 "evidence": r.get("evidence") or {}, "elapsed_s": r.get("elapsed_s")}
        ev = r.setdefault("evidence", {})
        if lines:
            ev["kernel_log"] = lines
        if ev.get("hung") and not ev.get("killed"):
            self.wedged.update(step.subjects)
        _judge_cleanup(self.nv, self.peer_reg_bytes, self.left_behind, gpus, {g: before[g] for g in gpus}, r,
                       judge=False)
        rc = [(before[g].get("replay_counter"), (r.get("evidence", {}).get("cleanup", {}).get(g, {})
                                                 .get("after") or {}).get("replay_counter")) for g in gpus]
        if step.check == "host-bandwidth" and rc and None not in rc[0]:
            r.setdefault("measured", {})["replay_counter_delta"] = rc[0][1] - rc[0][0]
        self.results[i] = r

    def finish(self) -> None:
        """The worker ends; then each GPU is judged from before its first step to now, on its last step."""
        if self.worker is not None:
            self.worker.close()
        try:
            for g, i in self.last_step.items():  # from before the GPU's first step to after the worker ended
                r = self.results[i]
                if isinstance(r, dict) and g not in self.wedged:
                    _judge_cleanup(self.nv, self.peer_reg_bytes, self.left_behind, [g], {g: self.first_before[g]}, r)
        finally:
            self.nv.close()
            self.klog.close()


def _split_answer(got: dict[str, Any], todo: list[int], steps) -> list:
    """The worker's answer as one result per step of the group: a batch's own results (each naming the steps
    that ran beside it), else (hung, or the worker died) the one answer, copied to every step."""
    if len(todo) == 1:
        return [got]
    if isinstance(got.get("results"), list) and len(got["results"]) == len(todo):
        rs = got["results"]
        for r in rs:
            if isinstance(r, dict):
                r.setdefault("evidence", {})["ran_beside"] = [
                    ", ".join(s.subjects) for s in steps if r is not rs[steps.index(s)]]
        return rs
    return [json.loads(json.dumps(got)) for _ in todo]


def _judge_cleanup(nv, peer_reg_bytes, left_behind, gpus, before, r, judge: bool = True) -> None:
    """BAR1 and registered bytes after, against before (a moment's grace: the driver may release late).
    ``judge`` False: recorded only (the step opened contexts that stay open to the end)."""
    after = {}
    for g in gpus:
        after[g] = _sample(nv, peer_reg_bytes, g)
        if judge and left_behind(before[g], after[g]):
            time.sleep(0.5)
            after[g] = _sample(nv, peer_reg_bytes, g)
    ev = r.setdefault("evidence", {})
    cleanup = {g: {"before": before[g], "after": after[g]} for g in gpus if before[g] or after[g]}
    if cleanup:
        ev.setdefault("cleanup", {}).update(cleanup)
        if not judge:
            return
        left = "; ".join(f"{g}: {x}" for g in gpus if (x := left_behind(before[g], after[g])))
        if left:
            ev["left_behind"] = left
        elif "left_behind" in ev and all(g in cleanup for g in gpus):
            ev.pop("left_behind")
