"""gdrcheck live on a GPU node beside `nvidia-smi topo -m` and the floor: alternating runs, medians.

    python3 benchmarks/gpu_node/live_timing.py [RUNS]      (from the repository root, on a GPU node; 11 runs)

Each gdrcheck command runs twice over: with a plain ``python3`` and with ``python3 -S`` (the site
packages' ``.pth`` hooks left out, the packages themselves on PYTHONPATH), because on some images
those hooks alone cost more than gdrcheck. The floor is the design card's, measured in the same
run: ``python3 -S`` importing click and pynvml, then ``nvmlInit`` and the NVML questions a
``pairs`` run asks (``FLOOR`` below). Then the time of each NVML function in one ``pairs`` run's
questions, so the next reader sees what the driver costs.
"""

import collections
import os
import statistics
import subprocess
import sys
import sysconfig
import time

FLOOR = """
import click, pynvml as N
N.nvmlInit()
hs = [N.nvmlDeviceGetHandleByIndex(i) for i in range(N.nvmlDeviceGetCount())]
for h in hs:
    N.nvmlDeviceGetPciInfo(h); N.nvmlDeviceGetName(h); N.nvmlDeviceGetBAR1MemoryInfo(h)
    N.nvmlDeviceGetMemoryInfo(h); N.nvmlDeviceGetCudaComputeCapability(h)
    N.nvmlDeviceGetComputeRunningProcesses(h); N.nvmlDeviceGetGraphicsRunningProcesses(h)
for i, a in enumerate(hs):
    for b in hs[i + 1:]:
        N.nvmlDeviceGetP2PStatus(a, b, 0); N.nvmlDeviceGetP2PStatus(a, b, 1)
N.nvmlShutdown()
"""


def per_function() -> None:
    """Time per NVML function while gdrcheck asks a plain run's questions (one process)."""
    sys.path.insert(0, ".")
    import pynvml

    from gdrcheck.collectors.nvml import query_nvml

    stats = collections.defaultdict(lambda: [0, 0.0])

    def wrap(name, fn):
        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                s = stats[name]
                s[0] += 1
                s[1] += time.perf_counter() - t
        return timed

    for name in dir(pynvml):
        if name.startswith("nvml") and callable(getattr(pynvml, name)):
            setattr(pynvml, name, wrap(name, getattr(pynvml, name)))
    t0 = time.perf_counter()
    query_nvml(pynvml, full=False)
    print(f"NVML questions of a plain run: {(time.perf_counter() - t0) * 1000:.1f} ms in all")
    for n, (c, s) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
        print(f"  {n:45s} {c:4d} calls {s * 1000:8.2f} ms")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    py = sys.executable
    env_s = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + [sysconfig.get_paths()["purelib"]]))
    g, gs = [py, "-m", "gdrcheck"], [py, "-S", "-m", "gdrcheck"]
    cmds = {
        "python3 -c pass": ([py, "-c", "pass"], None),
        "python3 -S -c pass": ([py, "-S", "-c", "pass"], None),
        "floor: python3 -S, click + pynvml + NVML": ([py, "-S", "-c", FLOOR], env_s),
        "nvidia-smi topo -m": (["nvidia-smi", "topo", "-m"], None),
        "gdrcheck pairs --json": (g + ["pairs", "--json"], None),
        "gdrcheck pairs": (g + ["pairs"], None),
        "-S gdrcheck pairs --json": (gs + ["pairs", "--json"], env_s),
        "-S gdrcheck pairs": (gs + ["pairs"], env_s),
        "-S gdrcheck topology --json": (gs + ["topology", "--json"], env_s),
        "-S gdrcheck check --format npd": (gs + ["check", "--format", "npd"], env_s),
    }
    times = {k: [] for k in cmds}
    for _ in range(n):
        for k, (argv, env) in cmds.items():
            t = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            times[k].append(time.perf_counter() - t)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:<44} {v:8.1f} ms  (min {min(times[k]) * 1000:.1f}, max {max(times[k]) * 1000:.1f}, n={n})")
    smi, floor = med["nvidia-smi topo -m"], med["floor: python3 -S, click + pynvml + NVML"]
    for k in ("gdrcheck pairs --json", "-S gdrcheck pairs --json", "-S gdrcheck pairs"):
        print(f"{k}: {med[k] / smi:.2f}x nvidia-smi topo -m; {med[k] - floor:+.1f} ms over the floor")
    per_function()


if __name__ == "__main__":
    main()
