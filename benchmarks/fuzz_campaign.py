"""A long fuzz campaign over every input parser, the fleet reader and the output writers, outside CI.

Runs the hypothesis properties of

* ``tests/collectors/test_fuzz.py``: any input parses or is refused with the parser's
  documented error, never anything else;
* ``tests/hostile/test_fleet_malformed.py``: ``fleet summarize`` over mutated real reports and
  over whatever a fan-out tool leaves in a file (cut, prefixed, binary) summarises the good
  reports, lists the rest as unreadable, never ends in an internal error;
* ``tests/hostile/test_escapes.py``: every writer (text, DOT, Prometheus, the engines' lines,
  HTML, JSON through the ``--output`` file writer) shows documents whose input strings hold
  control characters, separators and lone surrogates without a raw control character, and
  JSON keeps them exactly;
* ``tests/hostile/test_fuzz_logs_probe.py``: mutated NCCL logs (the public ones and the node's own) are read,
  judged and made into documents, or refused as bad input; ``report --probe`` files with fields of any JSON
  type are drawn or refused as bad input;

with many more examples than the test suite does, and prints the cases run per property
and every failure (hypothesis's shrunk example and the traceback).

    python3 benchmarks/fuzz_campaign.py --examples 20000
    python3 benchmarks/fuzz_campaign.py --examples 5000 --only lspci
    python3 benchmarks/fuzz_campaign.py --examples 2000 --only fleet
    python3 benchmarks/fuzz_campaign.py --examples 5000 --only archive   # the snapshot archive unpacker
    python3 benchmarks/fuzz_campaign.py --examples 5000 --only nccl_log  # NCCL logs; --only probe: report --probe

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
# (folder under tests/, module): the modules whose hypothesis properties the campaign runs, each counting
# its examples in a CASES counter
MODULES = (("collectors", "test_fuzz"), ("hostile", "test_fleet_malformed"), ("hostile", "test_escapes"),
           ("hostile", "test_fuzz_archives"), ("hostile", "test_fuzz_logs_probe"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=20000, help="examples per property (default 20000)")
    ap.add_argument("--only", default="", help="run only the properties whose name contains this")
    args = ap.parse_args(argv)

    os.environ["GDRCHECK_FUZZ_EXAMPLES"] = str(args.examples)
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")] + [str(ROOT / "tests" / d) for d, _m in MODULES]
    from importlib import import_module

    modules = [import_module(m) for _d, m in MODULES]  # each reads GDRCHECK_FUZZ_EXAMPLES at import

    tests = [(name, fn, mod) for mod in modules for name, fn in vars(mod).items()
             if name.startswith("test_") and hasattr(fn, "hypothesis") and args.only in name]
    failures = []
    t_all = time.monotonic()
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
        print(f"{name:48s} {n:8d} cases {time.monotonic() - t0:7.1f} s  {status}", flush=True)
    cases = {k: v for mod in modules for k, v in mod.CASES.items()}
    total = sum(cases.values())
    print("\nper property: " + ", ".join(f"{k} {v}" for k, v in sorted(cases.items())))
    print(f"total: {total} cases in {time.monotonic() - t_all:.1f} s; {len(failures)} failing properties")
    for name, tb in failures:
        print(f"\n--- {name}\n{tb}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
