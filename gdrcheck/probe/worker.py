"""One probe step in a process of its own: ``python3 -m gdrcheck.probe.worker``.

Reads the step (JSON) on stdin, pins itself to the GPU's local CPUs, runs the
check and writes the result (JSON) as the last line of stdout. The stages it goes
through are written to stderr, so a parent that has to kill it can say where it
stopped. Only this process loads libcuda, libibverbs or libcufile.
"""

from __future__ import annotations

import json
import os
import sys
import time

from gdrcheck.probe.stages import stage

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional


def parse_cpulist(text: Optional[str]) -> List[int]:
    """``0-3,8,10-11`` (sysfs local_cpulist) -> CPU numbers."""
    out: List[int] = []
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


def pin(cpulist: Optional[str]) -> Optional[str]:
    """Pin to the GPU's local CPUs (host memory is then first touched on its NUMA node)."""
    try:
        cpus = set(parse_cpulist(cpulist)) & os.sched_getaffinity(0)
    except (ValueError, AttributeError, OSError):
        return None
    if not cpus:
        return None
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        return None
    return cpulist


def run(step: Dict[str, Any]) -> Dict[str, Any]:
    from gdrcheck.probe.libs import LibraryMissing

    check, params = step["check"], step.get("params") or {}
    pinned = pin(params.get("cpulist"))
    stage(f"{check} started" + (f", pinned to CPUs {pinned}" if pinned else ""))
    try:
        if check in ("rdma-register", "rdma-loopback", "gds-read"):
            from gdrcheck.probe import checks_gds, checks_rdma

            fn = {"rdma-register": checks_rdma.check_rdma_register,
                  "rdma-loopback": checks_rdma.check_rdma_loopback,
                  "gds-read": checks_gds.check_gds_read}[check]
            result = fn(params)
        else:
            from gdrcheck.probe import checks_gpu
            from gdrcheck.probe.cuda import Cuda

            cu = Cuda()
            if check == "cuda":
                result = checks_gpu.check_cuda(cu, params)
            elif check == "host-bandwidth":
                result = checks_gpu.check_host_bandwidth(cu, params)
            elif check == "p2p":
                result = checks_gpu.check_p2p(cu, params, harmless_only=bool(step.get("harmless_only")))
            else:
                return {"status": "unknown", "reason": f"no check named {check}", "measured": {}, "evidence": {}}
    except LibraryMissing as e:
        return {"status": "fail" if check == "cuda" else "skipped", "reason": str(e) if check != "cuda" else "",
                "measured": {}, "evidence": {"error": str(e)}}
    if pinned:
        result.setdefault("measured", {})["cpus_pinned"] = pinned
    stage(f"{check} done")
    return result


def main() -> int:
    step = json.loads(sys.stdin.read())
    t0 = time.monotonic()
    try:
        result = run(step)
    except Exception as e:  # a result, never a traceback the parent has to parse
        result = {"status": "unknown", "measured": {}, "evidence": {"error": f"{type(e).__name__}: {e}"}}
    result["elapsed_s"] = round(time.monotonic() - t0, 3)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
