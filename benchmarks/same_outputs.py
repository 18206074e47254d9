"""Write every command's output on every stored input into a directory, so two trees can be compared.

    python3 benchmarks/same_outputs.py OUT [--jobs 2] [--only TEXT]
    diff -r OUT_BEFORE OUT_AFTER

Inputs: every file and snapshot under fixtures/ and ../shared/realworld/ that gdrcheck reads (notes and
sources excepted). Commands: pairs, pairs --json, topology, check, fingerprint --explain, bar1. Each output
file holds the command's stdout, then its stderr and exit status, so a change in any of them shows in the diff.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "realworld"
COMMANDS = (
    ("pairs",),
    ("pairs", "--json"),
    ("topology",),
    ("check",),
    ("fingerprint", "--explain"),
    ("bar1",),
)
SKIP_NAMES = {"NOTE.md", "SOURCE.md", "README.md", "INDEX.md", "probe.json", "bandwidth.json"}


def inputs() -> list[pathlib.Path]:
    found = []
    for base in (ROOT / "fixtures", SHARED):
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.is_file() and path.name not in SKIP_NAMES:
                found.append(path)
    return found


def run_one(path: pathlib.Path, command: tuple, out: pathlib.Path) -> None:
    given = os.path.relpath(path, ROOT)  # the same text in every checkout: fixtures/... or ../shared/...
    name = given.replace("../", "").replace("/", "__") + "__" + "_".join(c.strip("-") for c in command)
    env = dict(os.environ, COLUMNS="100", TZ="UTC", NO_COLOR="1")
    done = subprocess.run(
        [sys.executable, "-m", "gdrcheck", *command, "--from", given],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    (out / name).write_text(done.stdout + "\n--- stderr\n" + done.stderr + f"\n--- exit {done.returncode}\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="only inputs whose path contains this text")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = [(path, command) for path in inputs() if args.only in str(path) for command in COMMANDS]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for future in [pool.submit(run_one, path, command, out) for path, command in work]:
            future.result()
    print(f"{len(work)} outputs in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
