"""Time gdrcheck against hwloc's lstopo on the same generated sysfs trees.

    python3 benchmarks/bench.py [--runs 7] [--chassis 0]

For each tree (1 GPU; DGX-H100-like 8 GPUs + 8 NICs + 8 NVMe under nested switches on
2 sockets; 64 + 64 + 64 on 8 NUMA nodes; optionally a composable chassis), runs
``gdrcheck pairs --json --from TREE``, ``gdrcheck topology --json --from TREE`` and
``lstopo-no-graphics --whole-io --of xml`` (HWLOC_FSROOT=TREE) alternately, several times
each, and prints medians, the ratio to lstopo, peak memory, and ``python3 -c pass``
as the floor. A benchmark, not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trees.servers import build  # benchmarks/trees, beside this script

HERE = Path(__file__).resolve().parent

ROOT = HERE.parent


def timed(argv, env=None):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, _, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t0, ru.ru_maxrss  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--chassis", type=int, default=0, help="also a composable chassis of N devices")
    a = ap.parse_args()
    lstopo = shutil.which("lstopo-no-graphics")
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "gdrcheck")], check=False)
    tmp = Path(tempfile.mkdtemp(prefix="gdrcheck-bench-"))
    trees = [("1 GPU", dict(gpus=1, nics=1, nvme=0, sockets=1, nested=False)),
             ("DGX-like 8+8+8", dict(gpus=8, nics=8, nvme=8, sockets=2, nested=True)),
             ("64+64+64, 8 NUMA", dict(gpus=64, nics=64, nvme=64, sockets=8, nested=True))]
    if a.chassis:
        trees.append((f"chassis {a.chassis}", dict(gpus=0, nics=0, nvme=0, sockets=2, nested=False,
                                                    chassis=a.chassis)))
    try:
        floor = statistics.median(timed([py, "-c", "pass"])[0] for _ in range(a.runs))
        print(f"python3 -c pass: {floor * 1000:.1f} ms (median of {a.runs})")
        print(f"{'tree':<20}{'funcs':>6}{'pairs':>8}{'pairs --json':>14}{'topology':>10}{'lstopo':>9}"
              f"{'pairs/lstopo':>13}{'over floor':>11}{'peak MiB':>9}")
        for label, kw in trees:
            root = tmp / label.replace(" ", "_").replace("+", "_").replace(",", "")
            t = build(root, **kw)
            runs = {"pairs": [], "topology": [], "lstopo": []}
            peak = 0
            for _ in range(a.runs):
                dt, rss = timed([py, "-m", "gdrcheck", "pairs", "--json", "--from", str(root)], env)
                runs["pairs"].append(dt)
                peak = max(peak, rss)
                topo_argv = [py, "-m", "gdrcheck", "topology", "--json", "--from", str(root)]
                runs["topology"].append(timed(topo_argv, env)[0])
                if lstopo:
                    runs["lstopo"].append(timed([lstopo, "--whole-io", "--of", "xml"],
                                                dict(os.environ, HWLOC_FSROOT=str(root), HWLOC_COMPONENTS="-x86"))[0])
            out = subprocess.run([py, "-m", "gdrcheck", "pairs", "--json", "--from", str(root)], env=env,
                                 capture_output=True, text=True).stdout
            n_pairs = out.count('"verdict":')
            med = {k: statistics.median(v) if v else float("nan") for k, v in runs.items()}
            print(f"{label:<20}{len(t.funcs):>6}{n_pairs:>8}{med['pairs'] * 1000:>12.1f}ms"
                  f"{med['topology'] * 1000:>8.1f}ms{med['lstopo'] * 1000:>7.1f}ms"
                  f"{med['pairs'] / med['lstopo']:>12.1f}x{(med['pairs'] - floor) * 1000:>9.1f}ms{peak / 1024:>9.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
