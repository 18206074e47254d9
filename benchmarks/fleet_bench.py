"""Time and peak memory of ``gdrcheck fleet summarize`` on 1,000 and N (default 10,000) node reports.

    python3 benchmarks/fleet_bench.py [--nodes 10000] [--report FILE] [--keep DIR]

One real report (``gdrcheck pairs --jsonl`` on the ``healthy-gdr-node`` scenario tree
from tests/builders/scenarios.py, or ``--report FILE``) is written under N node names, with a
few outliers planted (ACS redirect on, nvidia_peermem unloaded, renumbered buses, an
empty file), as ``clush --outdir`` leaves them; the same reports also as one
``host: {json}`` stream on stdin, as pdsh prints them. Each size is summarized once per
input; the table shows wall time, peak RSS of the summarize process, and
``gdrcheck --version`` as the floor. Time should grow with N and memory stay nearly
flat. A benchmark, not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gdrcheck(*args: str) -> list:
    return [sys.executable, "-m", "gdrcheck", *args]


def timed(argv, stdin_path=None):
    """Wall seconds, peak RSS (KiB) and exit status of one child run."""
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        _, status, ru = os.wait4(p.pid, 0)
        took = time.perf_counter() - t0
    finally:
        if stdin_path:
            stdin.close()
    return took, ru.ru_maxrss, os.waitstatus_to_exitcode(status)


def real_reports(work: Path, report_file):
    """The base report and its planted variants, from real gdrcheck runs on scenario trees."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the machines the tests build too
    from builders.scenarios import scenario  # tests/builders

    def run(tree: Path) -> dict:
        p = subprocess.run(gdrcheck("pairs", "--jsonl", "--from", str(tree)), capture_output=True, text=True,
                           cwd=ROOT)
        return json.loads(p.stdout)

    base = json.loads(Path(report_file).read_text()) if report_file else run(scenario(work, "healthy-gdr-node"))
    out = {"base": base,
           "acs": run(scenario(work, "acs-redirect-on-switch")),
           "peermem": run(scenario(work, "no-peer-memory-module"))}
    moved = json.loads(json.dumps(base))
    fp = moved.get("fingerprint") or {}
    if fp.get("topology"):
        fp["topology"] = "sha256:" + "f" * 64  # the same board, other bus numbers
    out["renumbered"] = moved
    return out


def write_fleet(directory: Path, stream: Path, n: int, reports: dict) -> None:
    directory.mkdir(parents=True)
    planted = {7: "acs", n // 2: "peermem", n // 3: "renumbered", n - 5: "renumbered"}
    with open(stream, "w") as s:
        for i in range(1, n + 1):
            name = f"gpu{i:05d}"
            if i == n - 1:
                (directory / name).write_text("")  # killed mid-write
                continue
            doc = reports[planted.get(i, "base")]
            doc["host"] = name
            line = json.dumps(doc, sort_keys=True, separators=(",", ":"))
            (directory / name).write_text(line + "\n")
            s.write(f"{name}: {line}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000, help="largest fleet (default 10000)")
    ap.add_argument("--report", help="a gdrcheck pairs --json report to clone (default: a scenario tree's)")
    ap.add_argument("--keep", help="write the fleets here and keep them")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="gdrcheck-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        reports = real_reports(work / "trees", args.report)
        size = len(json.dumps(reports["base"], separators=(",", ":")))
        print(f"report: {size} bytes each; python {sys.version.split()[0]}")
        floor_t, floor_rss, _ = timed(gdrcheck("--version"))
        print(f"{'input':<28} {'nodes':>7} {'wall s':>8} {'peak RSS MiB':>13} {'exit':>5}")
        print(f"{'gdrcheck --version (floor)':<28} {'-':>7} {floor_t:>8.2f} {floor_rss / 1024:>13.1f} {'-':>5}")
        for n in sorted({1000, args.nodes}):
            d, stream = work / f"fleet-{n}", work / f"stream-{n}.txt"
            write_fleet(d, stream, n, reports)
            for label, argv, stdin in (
                    ("directory (clush --outdir)", gdrcheck("fleet", "summarize", "--format", "json", str(d)), None),
                    ("stdin host: {json} (pdsh)", gdrcheck("fleet", "summarize", "--format", "json", "-"), stream)):
                t, rss, code = timed(argv, stdin)
                print(f"{label:<28} {n:>7} {t:>8.2f} {rss / 1024:>13.1f} {code:>5}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
