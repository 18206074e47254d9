"""Run gdrcheck with its address space capped (RLIMIT_AS), as a node short of memory or a hostile input would
find it: a run that tries to hold more fails with MemoryError instead of taking the machine's memory."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import resource
import subprocess
import sys
import time

from support.cli_util import ROOT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

GIB = 1 << 30


def run_limited(*args, mem: int = GIB, timeout: float = 60, env=None, stdin=None):
    """``python -m gdrcheck ARGS`` under an address-space cap; the CompletedProcess, with ``.cpu_seconds``: the
    CPU time (user and system) the run used, what an input makes it do whatever the machine's load."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("GDRCHECK_DEBUG", None)
    e.update(env or {})

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, "-m", "gdrcheck", *map(str, args)], capture_output=True, text=True,
                       env=e, cwd=ROOT, timeout=timeout, preexec_fn=cap,
                       stdin=subprocess.DEVNULL if stdin is None else stdin)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    p.cpu_seconds = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return p


def children_cpu_seconds() -> float:
    """The CPU time (user and system) this process's ended and waited-for children have used so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextlib.contextmanager
def cpu_seconds_at_most(limit: float) -> Iterator[None]:
    """The block's CPU time (user and system, this process) is under ``limit``: the work an input makes the code
    do, whatever the machine's load (wall time is not)."""
    t0 = time.process_time()
    yield
    used = time.process_time() - t0
    assert used < limit, f"{used:.1f} s of CPU time, more than {limit} s"


@contextlib.contextmanager
def hang_guard(seconds: float = 600) -> Iterator[None]:
    """A bound for a broken run only, never a measure of speed: a block still going after ``seconds`` (a walk
    that never ends) has every thread's stack written out and its process ended, so the test fails instead of
    hanging the suite."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def least_cpu_seconds(fn: Callable[[], object], tries: int = 3) -> float:
    """The least CPU time (user and system, this process) of ``tries`` calls of ``fn``: what the work costs,
    however loaded the machine is."""
    best = float("inf")
    for _ in range(tries):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def assert_linear_cpu(make: Callable[[int], str], work: Callable[[str], object], small: int) -> None:
    """``work`` on ten times the input costs well under a hundred times as much CPU time (a quadratic walk would):
    linear time, shown with two sizes instead of one huge input."""
    a, b = make(small), make(small * 10)
    assert len(b) >= 8 * len(a)
    ta = max(least_cpu_seconds(lambda: work(a)), 1e-4)
    tb = least_cpu_seconds(lambda: work(b), tries=1)
    if tb >= 30 * ta + 0.05:  # once more before failing: one slow run is not a slope
        tb = min(tb, least_cpu_seconds(lambda: work(b), tries=1))
    assert tb < 30 * ta + 0.05, (ta, tb)
