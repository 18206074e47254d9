"""When each part of one live ``gdrcheck pairs --json`` happens, in both threads: where the time above the
floor goes, and what the NVML thread overlaps.

    python3 -S benchmarks/gpu_node/live_timeline.py [RUNS]    (from the repository root, on a GPU node;
                                                               PYTHONPATH holding the site packages)

Runs the console script's path in this process with the stages wrapped, RUNS times (each in a fresh
interpreter), and prints the median time each mark was reached, from the interpreter's start.
"""

import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time, threading
T0 = time.perf_counter()
marks = []
def mark(what):
    marks.append((threading.current_thread().name, what, (time.perf_counter() - T0) * 1000))
sys.path.insert(0, ".")
import gdrcheck.cli.entry as entry
mark("entry imported")
orig_early = entry._begin_driver_early
def early(args):
    import gdrcheck.collectors.nvml as nv
    mark("nvml module imported")
    b, q = nv._bindings, nv.query_nvml
    def bindings(*a, **k):
        mark("import pynvml: begin")
        try:
            return b(*a, **k)
        finally:
            mark("import pynvml: end")
    def query(*a, **k):
        mark("NVML questions: begin")
        try:
            return q(*a, **k)
        finally:
            mark("NVML questions: end")
    nv._bindings, nv.query_nvml = bindings, query
    orig_early(args)
    mark("NVML thread started")
    import gdrcheck.cli.run as run_mod  # after the thread started, as in a plain run
    import gdrcheck.cli.views as views
    mark("gdrcheck.cli run and views imported")
    run_mod.Run.load = wrap(run_mod.Run.load, "read the node")
    run_mod.Run.emit = wrap(run_mod.Run.emit, "JSON out")
    views.View.subject = wrap(views.View.subject, "evaluate")
    views.PairsView.document = wrap(views.PairsView.document, "document")
def wrap(fn, name):
    def inner(*a, **k):
        mark(name + ": begin")
        try:
            return fn(*a, **k)
        finally:
            mark(name + ": end")
    return inner
entry._begin_driver_early = early
sys.argv = ["gdrcheck", "pairs", "--json"]
try:
    entry.main()
except SystemExit:
    pass
mark("exit")
sys.stderr.write("TIMELINE " + json.dumps(marks) + "\n")
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    runs = []
    for _ in range(n):
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-S", "-c", CHILD], capture_output=True, text=True, env=os.environ)
        wall = (time.perf_counter() - t) * 1000
        line = [ln for ln in p.stderr.splitlines() if ln.startswith("TIMELINE ")]
        if not line:
            print(p.stderr[-2000:])
            return
        runs.append((wall, json.loads(line[-1][len("TIMELINE "):])))
    keys = [(th, what) for th, what, _t in runs[0][1]]
    print(f"process wall (median of {n}): {statistics.median(w for w, _ in runs):.1f} ms")
    for th, what in keys:
        ts = [t for _w, m in runs for (th2, w2, t) in m if (th2, w2) == (th, what)]
        print(f"  {statistics.median(ts):8.1f} ms  [{th}] {what}")


if __name__ == "__main__":
    main()
