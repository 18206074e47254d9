"""Run gdrcheck with its address space capped (RLIMIT_AS), as a node short of memory or a hostile input would
find it: a run that tries to hold more fails with MemoryError instead of taking the machine's memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from support.cli_util import ROOT

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
