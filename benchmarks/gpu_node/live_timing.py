"""Median wall time of gdrcheck's live commands beside `nvidia-smi topo -m` and the interpreter's start.

    python3 benchmarks/gpu_node/live_timing.py [RUNS]      (from the repository root, on a GPU node)
"""

import statistics
import subprocess
import sys
import time


def median_ms(cmd, n):
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        xs.append(time.perf_counter() - t)
    return statistics.median(xs) * 1000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    g = [sys.executable, "-m", "gdrcheck"]
    for name, cmd in [("python3 -c pass", [sys.executable, "-c", "pass"]),
                      ("python3 -c 'import pynvml'", [sys.executable, "-c", "import pynvml"]),
                      ("gdrcheck pairs", g + ["pairs"]), ("gdrcheck pairs --json", g + ["pairs", "--json"]),
                      ("gdrcheck check --format npd", g + ["check", "--format", "npd"]),
                      ("gdrcheck check --format prometheus", g + ["check", "--format", "prometheus"]),
                      ("gdrcheck fingerprint", g + ["fingerprint"]),
                      ("nvidia-smi topo -m", ["nvidia-smi", "topo", "-m"])]:
        print(f"{name}: {median_ms(cmd, n):.1f} ms", flush=True)


if __name__ == "__main__":
    main()
