"""Time per NVML function while gdrcheck asks a plain run's questions (one process, real driver).

    python3 benchmarks/gpu_node/nvml_profile.py      (from the repository root, on a GPU node)
"""

import collections
import sys
import time

sys.path.insert(0, ".")

import pynvml  # noqa: E402

from gdrcheck.collectors.nvml import query_nvml  # noqa: E402

stats = collections.defaultdict(lambda: [0, 0.0])


def _wrap(name, fn):
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            s = stats[name]
            s[0] += 1
            s[1] += time.perf_counter() - t
    return timed


for _name in dir(pynvml):
    if _name.startswith("nvml") and callable(getattr(pynvml, _name)):
        setattr(pynvml, _name, _wrap(_name, getattr(pynvml, _name)))

t0 = time.perf_counter()
query_nvml(pynvml, full=False)
print(f"total {(time.perf_counter() - t0) * 1000:.1f} ms")
for n, (c, s) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
    print(f"{n:45s} {c:4d} calls {s * 1000:8.1f} ms")
