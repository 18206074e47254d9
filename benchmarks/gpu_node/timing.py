"""Whole-process time of gdrcheck pairs (live) against nvidia-smi topo -m: alternating runs, medians."""
import statistics
import subprocess
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 9
cmds = {"gdrcheck pairs": [sys.executable, "-m", "gdrcheck", "pairs"],
        "gdrcheck pairs --json": [sys.executable, "-m", "gdrcheck", "pairs", "--json"],
        "nvidia-smi topo -m": ["nvidia-smi", "topo", "-m"],
        "python3 -c pass": [sys.executable, "-c", "pass"]}
t = {k: [] for k in cmds}
for _ in range(N):
    for k, argv in cmds.items():
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t[k].append(time.perf_counter() - t0)
med = {k: statistics.median(v) for k, v in t.items()}
for k, v in med.items():
    print(f"{k:<24} median {v*1000:8.1f} ms  (min {min(t[k])*1000:.1f}, max {max(t[k])*1000:.1f}, n={N})")
print(f"ratio gdrcheck pairs / nvidia-smi topo -m = {med['gdrcheck pairs']/med['nvidia-smi topo -m']:.2f}")
ratio_json = med['gdrcheck pairs --json'] / med['nvidia-smi topo -m']
print(f"ratio gdrcheck pairs --json / nvidia-smi topo -m = {ratio_json:.2f}")
