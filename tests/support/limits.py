"""Run gdrcheck with its address space capped (RLIMIT_AS), as a node short of memory or a hostile input would
find it: a run that tries to hold more fails with MemoryError instead of taking the machine's memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

from support.cli_util import ROOT

GIB = 1 << 30


def run_limited(*args, mem: int = GIB, timeout: float = 60, env=None, stdin=None):
    """``python -m gdrcheck ARGS`` under an address-space cap; the CompletedProcess, with ``.seconds``."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("GDRCHECK_DEBUG", None)
    e.update(env or {})

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "gdrcheck", *map(str, args)], capture_output=True, text=True,
                       env=e, cwd=ROOT, timeout=timeout, preexec_fn=cap,
                       stdin=subprocess.DEVNULL if stdin is None else stdin)
    p.seconds = time.monotonic() - t0
    return p
