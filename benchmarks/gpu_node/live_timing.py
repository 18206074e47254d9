"""gdrcheck live on a GPU node beside `nvidia-smi topo -m` and the floor: alternating runs, medians.

    python3 benchmarks/gpu_node/live_timing.py [RUNS]      (from the repository root, on a GPU node; 11 runs)

Each gdrcheck command runs twice over: with a plain ``python3`` and with ``python3 -S`` (the site
packages' ``.pth`` hooks left out, the packages themselves on PYTHONPATH), because on some images
those hooks alone cost more than gdrcheck. The floor is the design card's, measured in the same
run: ``python3 -S`` importing click and pynvml, then ``nvmlInit`` and the NVML questions a
``pairs`` run asks (``FLOOR`` below). A plain node command line no longer imports click
(:mod:`gdrcheck.cli.node_argv`), so a run can come in under that floor. Then the time of each
NVML function in one ``pairs`` run's questions, so the next reader sees what the driver costs.
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


def split() -> None:
    """One live ``pairs --json`` run's stages in this process, each timed (run it under ``python3 -S``)."""
    marks = [("start", time.perf_counter())]

    def mark(what):
        marks.append((what, time.perf_counter()))

    import pynvml  # noqa: F401
    mark("import pynvml")
    sys.path.insert(0, ".")
    try:  # a plain node command line loads no click
        from gdrcheck.cli import entry, node_argv, node_commands  # noqa: F401
    except ImportError:  # gdrcheck before gdrcheck.cli.node_argv: click read every command line
        import click  # noqa: F401
        mark("import click")
        from gdrcheck.cli import commands, entry  # noqa: F401
    from gdrcheck.collectors import host as host_mod
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.documents.pairs import pairs_doc
    from gdrcheck.render.json_out import render_json
    from gdrcheck.rules.base import Options
    from gdrcheck.rules.engine import evaluate
    mark("import gdrcheck (pairs)")
    parts = collections.defaultdict(float)
    guard = host_mod._guard

    def timed_guard(name, fn, errors):
        t = time.perf_counter()
        try:
            return guard(name, fn, errors)
        finally:
            parts[f"host: {name}"] += time.perf_counter() - t
    host_mod._guard = timed_guard
    import gdrcheck.collectors.driver as driver_mod
    import gdrcheck.collectors.sysfs_pci as pci_mod
    for mod, name in ((pci_mod, "collect_sysfs_pci"), (driver_mod, "collect_driver")):
        orig = getattr(mod, name)

        def wrapped(*a, _orig=orig, _name=name, **k):
            t = time.perf_counter()
            try:
                return _orig(*a, **k)
            finally:
                parts[_name + (" (waits for NVML)" if _name == "collect_driver" else "")] += time.perf_counter() - t
        setattr(mod, name, wrapped)
    facts = load_facts(None, want_driver=True, endpoint_config=False)
    mark("read the node (sysfs, host, NVML in a thread)")
    ev = evaluate(facts, Options())
    mark("evaluate")
    doc = pairs_doc(ev)
    mark("document")
    render_json(doc)
    mark("json")
    for (_a, t0), (what, t1) in zip(marks, marks[1:]):
        print(f"  {what:<48} {(t1 - t0) * 1000:8.1f} ms")
    for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"    {k:<46} {v * 1000:8.1f} ms")


# what pip writes for the `gdrcheck` console script (no runpy, unlike `python3 -m gdrcheck`)
CONSOLE_SCRIPT = "import sys\nfrom gdrcheck.cli.entry import main\nsys.exit(main())\n"


def main() -> None:
    if sys.argv[1:] == ["--split"]:
        split()
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    py = sys.executable
    env_s = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + [sysconfig.get_paths()["purelib"]]))
    g, gs = [py, "-m", "gdrcheck"], [py, "-S", "-m", "gdrcheck"]
    cmds = {
        "python3 -c pass": ([py, "-c", "pass"], None),
        "python3 -S -c pass": ([py, "-S", "-c", "pass"], None),
        "python3 -S, import click + pynvml": ([py, "-S", "-c", "import click, pynvml"], env_s),
        "floor: python3 -S, click + pynvml + NVML": ([py, "-S", "-c", FLOOR], env_s),
        "nvidia-smi topo -m": (["nvidia-smi", "topo", "-m"], None),
        "gdrcheck pairs --json": (g + ["pairs", "--json"], None),
        "gdrcheck pairs": (g + ["pairs"], None),
        "-S gdrcheck pairs --json": (gs + ["pairs", "--json"], env_s),
        "-S console script: gdrcheck pairs --json": ([py, "-S", "-c", CONSOLE_SCRIPT, "pairs", "--json"], env_s),
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
    for k in ("gdrcheck pairs --json", "-S gdrcheck pairs --json", "-S console script: gdrcheck pairs --json",
              "-S gdrcheck pairs"):
        print(f"{k}: {med[k] / smi:.2f}x nvidia-smi topo -m; {med[k] - floor:+.1f} ms over the floor")
    print("one live pairs --json run, in one process (python3 -S):")
    subprocess.run([py, "-S", __file__, "--split"], env=env_s)
    per_function()


if __name__ == "__main__":
    main()
