"""Running one command: its deadline and watchdog, loading the facts, delivering the output.

The command-line module declares options and calls these; this module holds the
state of one run (when it started, its ``--timeout``, where the output goes, what
to say if the watchdog has to end it).
"""

from __future__ import annotations

import os
import sys
from typing import Optional


def fmt_of(fmt: str, as_json: bool, flag: str = "json") -> str:
    """The format asked for: ``--json`` (or ``--jsonl``, ``flag``) is ``--format json``; with another
    ``--format`` it is a usage error, not a silent choice of one of the two."""
    if not as_json:
        return fmt
    if fmt not in ("text", flag):
        import click

        raise click.UsageError(f"--{flag} and --format {fmt} ask for two different outputs; give one")
    return flag


def redacted(snap, redact: bool):
    """The snapshot with its host name replaced; the text itself is redacted in emit."""
    if not redact:
        return snap
    from dataclasses import replace

    return replace(snap, hostname="redacted-host" if snap.hostname else None)


def emit(doc, fmt: str, as_json: bool, redact: bool, render_text, output: Optional[str] = None) -> None:
    """Write a document: JSON (stable bytes) or text through one console; to stdout or ``--output``."""
    if not RUN.begin_output():
        return
    if fmt_of(fmt, as_json) in ("json", "jsonl"):
        from gdrcheck.render.json_out import render_json

        deliver_text(render_json(doc, pretty=fmt_of(fmt, as_json) == "json" and not output and sys.stdout.isatty()),
                 redact, output)
        return
    from gdrcheck.render.console import make_console

    console = make_console(to_file=bool(output))
    if redact or output:
        import io

        buf = io.StringIO()
        console.file = buf
        render_text(doc, console)
        deliver_text(buf.getvalue(), redact, output)
        return
    try:
        render_text(doc, console)
        sys.stdout.flush()
    except BrokenPipeError:
        from gdrcheck.io.output import stdout_closed

        stdout_closed()


def deliver_text(text: str, redact: bool, output: Optional[str]) -> None:
    from gdrcheck.io.output import deliver

    if redact:
        from gdrcheck.io.redact import redact_text

        text = redact_text(text, None)
    deliver(text, output)


class _Run:
    """The run's deadline and its watchdog; what the watchdog prints if the run overstays."""

    def __init__(self) -> None:
        import time

        self.started = time.monotonic()
        self.deadline = None
        self.watchdog = None
        self.fmt = "text"
        self.output: Optional[str] = None

    def start(self, timeout: Optional[float], fmt: str, output: Optional[str], from_path: Optional[str] = None):
        from gdrcheck.io.deadline import Deadline, Watchdog

        if output:
            from gdrcheck.io.output import check_target

            check_target(output)
        self.fmt, self.output, self.live = fmt, output, from_path is None
        if timeout is None:  # health checks run live under an engine's limit; replays take their time
            from gdrcheck.io.deadline import DEFAULT_SECONDS

            timeout = DEFAULT_SECONDS if from_path is None else 0
        self.deadline = Deadline(timeout)
        self.watchdog = Watchdog(self.deadline, self._last_words)
        return self.deadline

    def begin_output(self) -> bool:
        """False when the watchdog has already spoken: print nothing more."""
        return self.watchdog is None or self.watchdog.disarm()

    def _last_words(self) -> None:
        from gdrcheck.collectors.inputs import remove_temp_dirs
        from gdrcheck.documents.pairs import timeout_doc

        remove_temp_dirs()
        host = None
        if self.live:  # the facts were never read: the name the node goes by
            import socket

            host = os.environ.get("NODE_NAME") or socket.gethostname() or None
        doc = timeout_doc(self.deadline.seconds, host)
        sys.stderr.write(f"gdrcheck: {doc['summary_line']}\n")
        if self.output:
            return
        if self.fmt in ("json", "jsonl"):
            from gdrcheck.render.json_out import render_json

            sys.stdout.write(render_json(doc))
        elif self.fmt in ("nhc", "npd", "nagios"):
            sys.stdout.write(("GDRCHECK UNKNOWN - " if self.fmt == "nagios" else "") + doc["summary_line"] + "\n")
        if self.fmt == "npd":
            sys.stdout.flush()
            from gdrcheck.status import NPD_EXIT_OF_STATUS

            os._exit(NPD_EXIT_OF_STATUS["unknown"])  # NPD's unknown; the process is past tidy exits


RUN = _Run()


def progress_reporter():
    """Progress on stderr for a slow live read, only when a person is watching."""
    if not sys.stderr.isatty():
        return None

    def say(msg: str) -> None:
        sys.stderr.write(f"\r\x1b[2Kgdrcheck: {msg}...")
        sys.stderr.flush()

    return say


def end_progress(progress) -> None:
    if progress is not None:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()


def load(from_path: Optional[str], want_driver: bool = True, endpoint_config: bool = False):
    from gdrcheck.collectors.inputs import load_snapshot

    progress = progress_reporter() if from_path is None else None
    try:
        return load_snapshot(from_path, want_driver=want_driver, endpoint_config=endpoint_config,
                             progress=progress, deadline=RUN.deadline)
    finally:
        end_progress(progress)
