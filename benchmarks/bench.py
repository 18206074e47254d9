"""Time gdrcheck against hwloc's lstopo on the same generated sysfs trees, and say where the time goes.

    python3 benchmarks/bench.py [--runs 11] [--chassis 0] [--site] [--baseline DIR]

For each tree (1 GPU; DGX-H100-like 8 GPUs + 8 NICs + 8 NVMe under nested switches on
2 sockets; 64 + 64 + 64 on 8 NUMA nodes; optionally a composable chassis), runs
``gdrcheck pairs --json --from TREE``, ``gdrcheck topology --json --from TREE`` and
``lstopo-no-graphics --whole-io --of xml`` (HWLOC_FSROOT=TREE) alternately, and prints
medians of each process's CPU time (user + system: wall time swings with a shared machine's load), the
ratio to lstopo and peak memory.

gdrcheck runs under ``python3 -S`` with its dependencies on PYTHONPATH: a Python
start-up that leaves out the site packages' ``.pth`` files, which on some images
(a CA bundle hook, editable installs) cost more than gdrcheck itself; ``--site``
runs a plain ``python3`` instead. The floors (``python3 -c pass``, ``python3 -S -c
pass``, and a click console script that parses the same options and does nothing: the
design card's floor, which a plain node command line no longer pays, since
:mod:`gdrcheck.cli.node_argv` reads it without click) are measured in the same run;
"over py" is a run's time above ``python3 -S -c pass``.

The split (imports / reads / evaluate / document / JSON) comes from running the
stages in one process, each timed, medians of the runs: what is left of a run's
time above the floor. A benchmark, not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the machines the tests build too
from builders.servers import build  # noqa: E402 - tests/builders

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CLICK_ONLY = """
import click

@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--from", "from_path")
def main(as_json, from_path):
    pass

main()
"""

# the stages of `pairs --json` (or `topology --json`), each timed in one process
SPLIT = """
import json, sys, time
t1 = time.perf_counter()
command, path = sys.argv[1], sys.argv[2]
from gdrcheck.cli import entry, node_argv, node_commands  # noqa: F401  (what a plain node command line loads)
from gdrcheck.collectors.inputs import load_facts
from gdrcheck.render.json_out import render_json
if command == "pairs":
    from gdrcheck.documents.pairs import pairs_doc
    from gdrcheck.rules.base import Options
    from gdrcheck.rules.engine import evaluate
else:
    from gdrcheck.documents.topology import topology_doc
    from gdrcheck.pcie.topology import Topology
t2 = time.perf_counter()
facts = load_facts(path, want_driver=True, endpoint_config=False)
t3 = time.perf_counter()
subject = evaluate(facts, Options()) if command == "pairs" else Topology(facts)
t4 = time.perf_counter()
doc = pairs_doc(subject) if command == "pairs" else topology_doc(subject)
t5 = time.perf_counter()
text = render_json(doc)
t6 = time.perf_counter()
print(json.dumps({"imports": t2 - t1, "reads": t3 - t2, "evaluate": t4 - t3,
                  "document": t5 - t4, "json": t6 - t5, "bytes": len(text)}))
"""


def timed(argv, env=None, cwd=ROOT):
    # cwd: `python3 -m gdrcheck` imports from the current directory first, so a run starts in its own checkout
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, _, ru = os.wait4(p.pid, 0)
    # the CPU time the process used (user + system): on a shared machine wall time swings with the others' load
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss  # KiB on Linux


def median_ms(values) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--chassis", type=int, default=0, help="also a composable chassis of N devices")
    ap.add_argument("--site", action="store_true", help="run gdrcheck under plain python3 (site packages loaded)")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout (git worktree add DIR REV), run in the same "
                                                     "loop, alternately: its medians and ratios follow each tree's")
    a = ap.parse_args()
    lstopo = shutil.which("lstopo-no-graphics")
    py = sys.executable
    purelib = sysconfig.get_paths()["purelib"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), purelib]))
    pyargs = [py] if a.site else [py, "-S"]
    base = Path(a.baseline).resolve() if a.baseline else None
    base_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(base), purelib])) if base else None
    for checkout in (ROOT, base) if base else (ROOT,):
        subprocess.run([py, "-m", "compileall", "-q", str(checkout / "gdrcheck")], check=False)
    tmp = Path(tempfile.mkdtemp(prefix="gdrcheck-bench-"))
    trees = [("1 GPU", dict(gpus=1, nics=1, nvme=0, sockets=1, nested=False)),
             ("DGX-like 8+8+8", dict(gpus=8, nics=8, nvme=8, sockets=2, nested=True)),
             ("64+64+64, 8 NUMA", dict(gpus=64, nics=64, nvme=64, sockets=8, nested=True))]
    if a.chassis:
        trees.append((f"chassis {a.chassis}", dict(gpus=0, nics=0, nvme=0, sockets=2, nested=False,
                                                    chassis=a.chassis)))
    try:
        click_only = tmp / "click_only.py"
        click_only.write_text(CLICK_ONLY)
        split_py = tmp / "split.py"
        split_py.write_text(SPLIT)
        floors = {
            "python3 -c pass": [py, "-c", "pass"],
            "python3 -S -c pass": [py, "-S", "-c", "pass"],
            f"click console script ({' '.join(['python3'] + pyargs[1:])})": pyargs + [str(click_only), "--json",
                                                                                       "--from", "x"],
        }
        floor_ms = {k: median_ms([timed(v, env)[0] for _ in range(a.runs)]) for k, v in floors.items()}
        for k, v in floor_ms.items():
            print(f"floor  {k:<44}{v:>8.1f} ms")
        py_floor = floor_ms[f"{' '.join(['python3'] + pyargs[1:])} -c pass"]
        print(f"gdrcheck runs as: {' '.join(['python3'] + pyargs[1:])} -m gdrcheck ...; medians of {a.runs}")
        print(f"{'tree':<19}{'funcs':>6}{'pairs':>7}{'topology':>10}{'x lstopo':>9}{'pairs --json':>13}"
              f"{'x lstopo':>9}{'lstopo':>8}{'over py':>9}{'peak MiB':>9}")
        splits = []
        for label, kw in trees:
            root = tmp / label.replace(" ", "_").replace("+", "_").replace(",", "")
            t = build(root, **kw)
            runs = {"pairs": [], "topology": [], "lstopo": [], "base pairs": [], "base topology": []}
            peak = 0
            for _ in range(a.runs):
                dt, rss = timed(pyargs + ["-m", "gdrcheck", "pairs", "--json", "--from", str(root)], env)
                runs["pairs"].append(dt)
                peak = max(peak, rss)
                runs["topology"].append(timed(pyargs + ["-m", "gdrcheck", "topology", "--json", "--from",
                                                        str(root)], env)[0])
                for command in ("topology", "pairs") if base else ():
                    runs[f"base {command}"].append(timed(pyargs + ["-m", "gdrcheck", command, "--json", "--from",
                                                                   str(root)], base_env, base)[0])
                if lstopo:
                    runs["lstopo"].append(timed([lstopo, "--whole-io", "--of", "xml"],
                                                dict(os.environ, HWLOC_FSROOT=str(root), HWLOC_COMPONENTS="-x86"))[0])
            out = subprocess.run(pyargs + ["-m", "gdrcheck", "pairs", "--json", "--from", str(root)], env=env, cwd=ROOT,
                                 capture_output=True, text=True).stdout
            n_pairs = len(json.loads(out)["pairs"]) if out.strip() else 0
            med = {k: median_ms(v) for k, v in runs.items()}
            print(f"{label:<19}{len(t.funcs):>6}{n_pairs:>7}{med['topology']:>8.1f}ms"
                  f"{med['topology'] / med['lstopo']:>8.1f}x{med['pairs']:>11.1f}ms"
                  f"{med['pairs'] / med['lstopo']:>8.1f}x{med['lstopo']:>6.1f}ms"
                  f"{med['pairs'] - py_floor:>7.1f}ms{peak / 1024:>9.1f}")
            if base:
                print(f"{'  baseline':<32}{med['base topology']:>8.1f}ms{med['base topology'] / med['lstopo']:>8.1f}x"
                      f"{med['base pairs']:>11.1f}ms{med['base pairs'] / med['lstopo']:>8.1f}x")
            for command in ("topology", "pairs"):
                parts = [json.loads(subprocess.run(pyargs + [str(split_py), command, str(root)], env=env,
                                                   capture_output=True, text=True).stdout)
                         for _ in range(max(3, a.runs // 2))]
                splits.append((label, command, {k: median_ms([p[k] for p in parts])
                                                for k in ("imports", "reads", "evaluate", "document",
                                                          "json")}, parts[0]["bytes"]))
        print()
        print("split, in one process (ms): imports = gdrcheck's modules for the command (a plain node command line "
              "loads no click)")
        print(f"{'tree':<19}{'command':<10}{'imports':>8}{'reads':>8}{'evaluate':>9}{'document':>9}"
              f"{'json':>7}{'JSON bytes':>12}")
        for label, command, s, size in splits:
            print(f"{label:<19}{command:<10}{s['imports']:>8.1f}{s['reads']:>8.1f}"
                  f"{s['evaluate']:>9.1f}{s['document']:>9.1f}{s['json']:>7.1f}{size:>12,}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
