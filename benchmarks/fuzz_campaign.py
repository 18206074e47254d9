"""A long fuzz campaign over every input parser, outside CI.

Runs the properties of ``tests/collectors/test_fuzz.py`` (any input parses or is refused
with the parser's documented error, never anything else) with many more
examples than the test suite does, and prints the cases run per parser and
every failure (hypothesis's shrunk example and the traceback).

    python3 benchmarks/fuzz_campaign.py --examples 20000
    python3 benchmarks/fuzz_campaign.py --examples 5000 --only lspci
    python3 benchmarks/fuzz_campaign.py --examples 5000 --only archive   # the snapshot archive unpacker

Exit status: 0 when every property held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=20000, help="examples per property (default 20000)")
    ap.add_argument("--only", default="", help="run only the properties whose name contains this")
    args = ap.parse_args(argv)

    os.environ["GDRCHECK_FUZZ_EXAMPLES"] = str(args.examples)
    sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "collectors"), str(ROOT / "tests" / "hostile")]
    import test_fuzz  # noqa: E402 - reads GDRCHECK_FUZZ_EXAMPLES at import
    import test_fuzz_archives  # noqa: E402 - the archive unpacker, the same way

    tests = [(name, fn, mod) for mod in (test_fuzz, test_fuzz_archives) for name, fn in vars(mod).items()
             if name.startswith("test_") and hasattr(fn, "hypothesis") and args.only in name]
    failures = []
    t_all = time.monotonic()
    cases = test_fuzz.CASES
    for name, fn, mod in tests:
        before = sum(mod.CASES.values())
        t0 = time.monotonic()
        try:
            fn()
            status = "ok"
        except BaseException as e:  # noqa: BLE001 - report every failure, go on with the next property
            if isinstance(e, KeyboardInterrupt):
                raise
            status = f"FAILED: {e.__class__.__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            failures.append((name, traceback.format_exc()))
        n = sum(mod.CASES.values()) - before
        print(f"{name:36s} {n:8d} cases {time.monotonic() - t0:7.1f} s  {status}", flush=True)
    cases = cases + test_fuzz_archives.CASES
    total = sum(cases.values())
    print("\nper parser: " + ", ".join(f"{k} {v}" for k, v in sorted(cases.items())))
    print(f"total: {total} cases in {time.monotonic() - t_all:.1f} s; {len(failures)} failing properties")
    for name, tb in failures:
        print(f"\n--- {name}\n{tb}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
