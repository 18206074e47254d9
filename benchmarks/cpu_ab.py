"""CPU time of a few commands, this checkout against another, run alternately (wall time on a shared machine
swings by tens of milliseconds; the CPU time a process used swings much less).

    git worktree add /tmp/base REV && python3 -m compileall -q gdrcheck /tmp/base/gdrcheck
    python3 benchmarks/cpu_ab.py /tmp/base [--runs 41]

Prints, per command, the minimum and median CPU time (user + system) of ``python3 -S -m gdrcheck ...`` here and
there, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "realworld"
SNAPSHOT = str(ROOT / "fixtures/h200-x4-vm/snapshot.tar.gz")
CASES = (
    ("pairs --json, 4x H200 snapshot", ["pairs", "--json", "--from", SNAPSHOT]),
    ("topology, 4x H200 snapshot", ["topology", "--from", SNAPSHOT]),
    ("check, lspci -tv (ESC8000A)",
     ["check", "--from", str(REAL / "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt")]),
    ("pairs --json, NCCL XML (IBM 8x H100)",
     ["pairs", "--json", "--from", str(REAL / "ibm-cloud-gx3d-h100x8-vsi/nccl-topo.xml")]),
    ("--version", ["--version"]),
)


def cpu_ms(cwd: Path, args: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-S", "-m", "gdrcheck", *args], cwd=cwd, capture_output=True,
                   env=dict(os.environ, COLUMNS="100"), check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline", help="another checkout of gdrcheck")
    ap.add_argument("--runs", type=int, default=41)
    a = ap.parse_args()
    base = Path(a.baseline).resolve()
    for name, args in CASES:
        here, there = [], []
        for _ in range(a.runs):
            here.append(cpu_ms(ROOT, args))
            there.append(cpu_ms(base, args))
        print(f"{name:38s} here min {min(here):6.1f} med {statistics.median(here):6.1f} | "
              f"baseline min {min(there):6.1f} med {statistics.median(there):6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
