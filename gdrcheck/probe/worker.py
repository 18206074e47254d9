"""Probe steps in a process of their own, started by the runner as ``python3 -I <this file>``.

The runner starts it isolated (``-I``: no ``PYTHONPATH``, no working directory or script directory on
``sys.path``, no user site), by this file's own path, with ``/`` as its working directory; the only paths
it adds are the ones the runner names on its command line (the installed package's parent directory first).
So nothing planted in the caller's working directory is imported as root.

It dies with its parent (``PR_SET_PDEATHSIG``: a SIGKILLed probe leaves no worker copying on a GPU), and
otherwise ends when its stdin closes. It reads one step (JSON) per line on stdin and writes each result
(JSON) as one line on stdout, so one worker serves a whole run: the driver is initialised once and the
GPUs' primary contexts are opened once (all at the same time, one thread each) and kept until it ends.
Before each step it pins itself to the GPU's local CPUs. The stages it goes through are written to
stderr, so a parent that has to kill it can say where it stopped. Only this process loads libcuda,
libibverbs or libcufile.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

PR_SET_PDEATHSIG = 1


def parse_cpulist(text: Optional[str]) -> list[int]:
    """``0-3,8,10-11`` (sysfs local_cpulist) -> CPU numbers."""
    out: list[int] = []
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


_ALL_CPUS: Optional[set] = None


def pin(cpulist: Optional[str]) -> Optional[str]:
    """Pin to the GPU's local CPUs (host memory is then first touched on its NUMA node); a later step
    may pin elsewhere, so the choice is among the CPUs the worker was started with."""
    global _ALL_CPUS
    try:
        if _ALL_CPUS is None:
            _ALL_CPUS = set(os.sched_getaffinity(0))
        cpus = set(parse_cpulist(cpulist)) & _ALL_CPUS
    except (ValueError, AttributeError, OSError):
        return None
    try:
        os.sched_setaffinity(0, cpus or _ALL_CPUS)
    except OSError:
        return None
    return cpulist if cpus else None


class Session:
    """What one worker keeps between steps: the driver API and the primary contexts it holds open."""

    def __init__(self) -> None:
        self.cu: Any = None
        self.opened: dict[str, Any] = {}
        self.buffers: dict[Any, Any] = {}  # (key, bytes) -> two pinned host buffers

    def pinned(self, key: Any):
        """A function giving two pinned host buffers of n bytes, kept for the worker's life and shared by the
        steps with the same ``key`` (the NUMA node the step runs on: the buffers are first touched there)."""

        def get(n: int):
            got = self.buffers.get((key, n))
            if got is None:
                cu = self.cuda()
                a = cu.host_alloc(n)
                try:
                    b = cu.host_alloc(n)
                except Exception:
                    cu.host_free(a)
                    raise
                got = self.buffers[(key, n)] = (a, b)
            return got
        return get

    def close(self) -> None:
        for a, b in self.buffers.values():
            for p in (a, b):
                try:
                    self.cu.host_free(p)
                except Exception:  # noqa: BLE001 - the process ends next
                    pass
        self.buffers.clear()

    def cuda(self):
        if self.cu is None:
            from gdrcheck.probe.cuda import Cuda

            self.cu = Cuda()
        return self.cu

    def open(self, gpus: list[str]) -> dict[str, Any]:
        """cuInit once, then every GPU's primary context at the same time; what each took (or its error)."""
        from gdrcheck.probe.cuda import CudaError
        from gdrcheck.probe.libs import LibraryMissing
        from gdrcheck.probe.stages import stage

        todo = [g for g in gpus if g not in self.opened]
        if not todo:
            return {}
        t0 = time.monotonic()
        try:
            cu = self.cuda()
            stage("cuInit")
            cu.init()
        except (CudaError, LibraryMissing) as e:
            return {"error": str(e)}
        out: dict[str, Any] = {"cuinit_s": round(time.monotonic() - t0, 3)}
        stage("opening the primary contexts of " + ", ".join(todo))

        def one(bdf: str) -> None:
            t = time.monotonic()
            try:
                cu.hold(cu.device_by_bus_id(bdf))
                self.opened[bdf] = round(time.monotonic() - t, 3)
            except CudaError as e:
                self.opened[bdf] = str(e)

        import threading

        threads = [threading.Thread(target=one, args=(g,), daemon=True) for g in todo]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out["contexts_s"] = {g: self.opened.get(g) for g in todo}
        out["open_s"] = round(time.monotonic() - t0, 3)
        return out


def run(step: dict[str, Any], session: Optional[Session] = None) -> dict[str, Any]:
    from gdrcheck.probe.libs import LibraryMissing
    from gdrcheck.probe.stages import stage

    session = session or Session()
    if step.get("check") == "batch":
        return run_batch(step, session)
    if step.get("check") == "init":
        from gdrcheck.probe.cuda import CudaError

        t0 = time.monotonic()
        stage("cuInit")
        try:
            session.cuda().init()
        except (CudaError, LibraryMissing) as e:
            return {"status": "fail", "measured": {}, "evidence": {"error": str(e)}}
        return {"status": "ok", "measured": {"cuinit_s": round(time.monotonic() - t0, 3)}, "evidence": {}}
    if step.get("check") == "open":
        got = session.open(list(step.get("gpus") or ()))
        return {"status": "fail" if got.get("error") else "ok", "measured": got, "evidence": {}}
    check, params = step["check"], step.get("params") or {}
    pinned = pin(params.get("cpulist"))
    stage(f"{check} started" + (f", pinned to CPUs {pinned}" if pinned else ""))
    opened: dict[str, Any] = {}
    try:
        if check in ("rdma-register", "rdma-loopback", "gds-read"):
            from gdrcheck.probe import checks_gds, checks_rdma

            fn = {"rdma-register": checks_rdma.check_rdma_register,
                  "rdma-loopback": checks_rdma.check_rdma_loopback,
                  "gds-read": checks_gds.check_gds_read}[check]
            result = fn(params)
        else:
            from gdrcheck.probe import checks_gpu

            if step.get("open"):
                opened = session.open(list(step["open"]))
            cu = session.cuda()
            if check == "cuda":
                result = checks_gpu.check_cuda(cu, params)
            elif check == "host-bandwidth":
                result = checks_gpu.check_host_bandwidth(cu, params,
                                                         pinned=session.pinned(("numa", params.get("numa_node"))))
            elif check == "p2p":  # the pairs of a round run at once, on other GPUs: each its first GPU's buffers
                result = checks_gpu.check_p2p(cu, params, harmless_only=bool(step.get("harmless_only")),
                                              pinned=session.pinned(("p2p", (params.get("gpus") or [None])[0])))
            else:
                return {"status": "unknown", "reason": f"no check named {check}", "measured": {}, "evidence": {}}
    except LibraryMissing as e:
        return {"status": "fail" if check == "cuda" else "skipped", "reason": str(e) if check != "cuda" else "",
                "measured": {}, "evidence": {"error": str(e)}}
    if pinned:
        result.setdefault("measured", {})["cpus_pinned"] = pinned
    if opened:
        result.setdefault("evidence", {})["worker_opened"] = opened
    stage(f"{check} done")
    return result


def run_batch(batch: dict[str, Any], session: Session) -> dict[str, Any]:
    """Steps that share no link, at the same time (one thread each; the driver calls release the GIL, and each
    thread has its own current context): ``{"results": [...]}`` in their order."""
    import threading

    opened = session.open(list(batch["open"])) if batch.get("open") else {}
    steps = list(batch.get("steps") or ())
    results: list[Any] = [None] * len(steps)

    def one(k: int) -> None:
        t0 = time.monotonic()
        try:
            r = run(steps[k], session)
        except Exception as e:  # noqa: BLE001 - a result, never a traceback
            r = {"status": "unknown", "measured": {}, "evidence": {"error": f"{type(e).__name__}: {e}"}}
        r["elapsed_s"] = round(time.monotonic() - t0, 3)
        results[k] = r

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(len(steps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"status": "ok", "results": results, "evidence": {"worker_opened": opened} if opened else {}}


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when the one that started it dies (Linux ``PR_SET_PDEATHSIG``); if it has already
    gone (the worker is then someone else's child), end now."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if parent and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)  # as PR_SET_PDEATHSIG would have


def serve(inp=None, out=None) -> None:
    """One result line per step line, until stdin closes."""
    inp = inp or sys.stdin
    out = out or sys.stdout
    session = Session()
    for line in inp:
        if not line.strip():
            continue
        t0 = time.monotonic()
        try:
            result = run(json.loads(line), session)
        except Exception as e:  # a result, never a traceback the parent has to parse
            result = {"status": "unknown", "measured": {}, "evidence": {"error": f"{type(e).__name__}: {e}"}}
        result["elapsed_s"] = round(time.monotonic() - t0, 3)
        out.write(json.dumps(result) + "\n")
        out.flush()
    session.close()


def main(argv: Optional[list[str]] = None) -> None:
    """``worker.py [--parent PID] [--path DIR]...``: the paths go first on sys.path, in order."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parent = 0
    paths: list[str] = []
    while argv:
        opt = argv.pop(0)
        if opt == "--parent" and argv:
            parent = int(argv.pop(0))
        elif opt == "--path" and argv:
            p = argv.pop(0)
            if os.path.isabs(p):
                paths.append(p)
    sys.path[:0] = [p for p in paths if p not in sys.path[:len(paths)]]
    die_with_parent(parent)
    serve()


if __name__ == "__main__":
    main()
