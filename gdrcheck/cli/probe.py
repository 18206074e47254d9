"""``gdrcheck probe``: read the facts, plan, run the steps in workers, print, exit per the contract."""

from __future__ import annotations

import time

from gdrcheck.errors import InputError
from gdrcheck.status import exit_status
from gdrcheck.units import parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional


def run_probe(from_path: Optional[str], dry_run: bool, risky: bool, force: bool, gds_path: Optional[str],
              only: Sequence[str], step_timeout: Optional[float], fmt: str, redact: bool, fail_on: str,
              output: Optional[str], nccl_version: Optional[str] = None, copy_size: Optional[str] = None) -> int:
    from gdrcheck.cli.run import Run
    from gdrcheck.probe.doc import probe_doc, probe_status
    from gdrcheck.probe.plan import build_plan
    from gdrcheck.rules.base import Options
    from gdrcheck.rules.engine import evaluate

    gds_path, copy_bytes = _checked(from_path, dry_run, gds_path, copy_size)
    t0 = time.monotonic()
    # reading the facts has the usual limit on a live node (a hung nvidia-smi is not waited for); the
    # steps then have their own deadlines, so the run-wide watchdog stops once the facts are in
    early = None
    if not dry_run and from_path is None:  # the worker starts (and initialises CUDA) while the facts are read
        from gdrcheck.probe.runner import start_early

        early = start_early()
    try:
        run = Run(fmt, output, from_path, None, redact)
        evaluation = evaluate(run.load(), Options(nccl_version=nccl_version))
        if not run.stop_watching():
            return exit_status("unknown")  # it has already spoken
        plan = build_plan(evaluation, risky=risky, force=force, gds_path=gds_path, live_state=_live_state(from_path),
                          only=only, copy_bytes=copy_bytes)
        results = None
        if not dry_run:
            worker, early = early, None  # run_plan ends it
            results = _measure(plan, step_timeout, worker)
    finally:
        if early is not None:
            early.close()
    doc = probe_doc(evaluation, plan, results, dry_run, fail_on, elapsed_s=time.monotonic() - t0)
    run.emit(doc, _text)
    word = probe_status(doc, fail_on)
    if word == "unknown":
        import sys

        sys.stderr.write(f"gdrcheck: {doc['summary_line']}\n")
    return exit_status(word)


def _checked(from_path: Optional[str], dry_run: bool, gds_path: Optional[str],
             copy_size: Optional[str]) -> tuple[Optional[str], int]:
    """The options probe refuses together or by value; the --gds-path made absolute (the worker runs in /) and
    the bytes of a host copy."""
    import os

    from gdrcheck.probe.plan import HOST_COPY_BYTES

    if from_path is not None and not dry_run:
        raise InputError("probe acts on the live node: --from is only for --dry-run (a plan from a snapshot)")
    if gds_path is not None and not os.path.isdir(gds_path):
        raise InputError(f"--gds-path {gds_path}: not a directory")
    if gds_path is not None:
        gds_path = os.path.abspath(gds_path)
    copy_bytes = HOST_COPY_BYTES
    if copy_size is not None:
        copy_bytes = parse_size(copy_size)
        if copy_bytes is None or not (1 << 20) <= copy_bytes <= (16 << 30):
            raise InputError(f"--copy-size {copy_size!r}: a size between 1MiB and 16GiB (e.g. 64MiB)")
    return gds_path, copy_bytes


def _live_state(from_path: Optional[str]):
    """What NVML says keeps a live node busy (compute processes, MIG, compute mode); None for a snapshot."""
    if from_path is not None:
        return None
    from gdrcheck.probe.nvml_state import NvmlState

    nv = NvmlState()
    try:
        return nv.busy_state()
    finally:
        nv.close()


def _measure(plan, step_timeout: Optional[float], worker):
    """Every step of the plan run in workers, with progress on stderr while it runs."""
    from gdrcheck.cli.run import end_progress, progress_reporter
    from gdrcheck.probe.runner import run_plan

    progress = progress_reporter()
    try:
        return run_plan(plan, step_timeout=step_timeout, progress=progress, worker=worker)
    finally:
        end_progress(progress)


def _text(doc, console) -> None:
    from gdrcheck.probe.text import render_probe

    render_probe(doc, console)
