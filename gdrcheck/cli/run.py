"""Running one command: load -> evaluate -> document -> emit, once for every command.

A :class:`Run` is one command's run: when it started, its ``--timeout`` and watchdog, where
the output goes, whether it is redacted, what to say if the watchdog has to end it. The
commands build one and hand it, with a :class:`gdrcheck.cli.views.View` saying what differs
(which facts, which document, which text, which exit status), to :func:`run_view`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional


def fmt_of(fmt: str, as_json: bool, flag: str = "json") -> str:
    """The format asked for: ``--json`` (or ``--jsonl``, ``flag``) is ``--format json``; with another
    ``--format`` it is a usage error, not a silent choice of one of the two."""
    if formats_conflict(fmt, as_json, flag):
        import click

        raise click.UsageError(f"--{flag} and --format {fmt} ask for two different outputs; give one")
    return flag if as_json else fmt


def formats_conflict(fmt: str, as_json: bool, flag: str = "json") -> bool:
    """Whether ``--json`` (``flag``) was given with another ``--format`` (:func:`fmt_of` refuses it)."""
    return as_json and fmt not in ("text", flag)


def redacted(facts, redact: bool):
    """The facts with their host name replaced; the text itself is redacted when delivered."""
    if not redact:
        return facts
    from gdrcheck.record import replace

    return replace(facts, hostname="redacted-host" if facts.hostname else None)


def deliver_text(text: str, redact: bool, output: Optional[str]) -> None:
    from gdrcheck.io.output import deliver

    if redact:
        from gdrcheck.io.redact import redact_text

        text = redact_text(text, None)
    deliver(text, output)


class Run:
    """One command's run: its deadline and watchdog, its format and output, what the watchdog prints
    if the run overstays. ``timeout`` None: the default limit, on a live machine and with ``--from`` alike (a
    FIFO no one writes, an input too large to read in time); it covers writing the output too."""

    def __init__(self, fmt: str = "text", output: Optional[str] = None, from_path=None,
                 timeout: Optional[float] = None, redact: bool = False, watch: bool = True) -> None:
        import time

        self.started = time.monotonic()
        output = None if output == "-" else output  # -o -: stdout, as --from - is stdin
        self.fmt, self.output, self.from_path, self.redact = fmt, output, from_path, redact
        self.live = from_path is None
        self.deadline = None
        self.watchdog = None
        if output is not None:
            from gdrcheck.io.output import check_target

            check_target(output)
        if not watch:
            return
        from gdrcheck.io.deadline import Deadline, Watchdog

        if timeout is None:  # health checks run under an engine's limit, and so does a replay
            from gdrcheck.io.deadline import DEFAULT_SECONDS

            timeout = DEFAULT_SECONDS
        self.deadline = Deadline(timeout)
        self.watchdog = Watchdog(self.deadline, self._last_words)

    def begin_output(self) -> bool:
        """False when the watchdog has already spoken: print nothing more. The deadline goes on while the output
        is written (a reader that never reads, a FIFO no one opens): :meth:`end_output` ends it."""
        return self.watchdog is None or self.watchdog.writing()

    def end_output(self) -> None:
        if self.watchdog is not None:
            self.watchdog.disarm()

    def stop_watching(self) -> bool:
        """End the run-wide watchdog (later steps keep their own deadlines); False when it already spoke."""
        spoke = self.watchdog is not None and not self.watchdog.disarm()
        self.watchdog = None
        return not spoke

    def load(self, want_driver: bool = True, endpoint_config: bool = False, while_waiting=None,
             cpulists: bool = True):
        """The facts of the input (this machine or ``--from``), redacted as asked. ``while_waiting``: what to
        load while a live run waits for the NVIDIA driver; ``cpulists``: each PCI function's local CPUs."""
        from gdrcheck.collectors.inputs import load_facts

        progress = progress_reporter() if self.live else None
        try:
            facts = load_facts(self.from_path, want_driver=want_driver, endpoint_config=endpoint_config,
                               progress=progress, deadline=self.deadline, while_waiting=while_waiting,
                               cpulists=cpulists)
        finally:
            end_progress(progress)
        return redacted(facts, self.redact)

    def deliver(self, text: str, redact: Optional[bool] = None) -> None:
        """Text ready to print: to stdout or ``--output``, unless the watchdog has spoken."""
        if self.begin_output():
            try:
                deliver_text(text, self.redact if redact is None else redact, self.output)
            finally:
                self.end_output()

    def emit(self, doc, render_text: Optional[Callable] = None) -> None:
        """A document: JSON (stable bytes), or text through one console (``render_text(doc, console)``)."""
        if not self.begin_output():
            return
        try:
            self._emit(doc, render_text)
        finally:
            self.end_output()

    def _emit(self, doc, render_text: Optional[Callable]) -> None:
        if self.fmt in ("json", "jsonl"):
            from gdrcheck.render.json_out import render_json

            pretty = self.fmt == "json" and not self.output and sys.stdout.isatty()
            deliver_text(render_json(doc, pretty=pretty), self.redact, self.output)
            return
        from gdrcheck.collectors.clip import printable
        from gdrcheck.render.console import make_console

        doc = printable(doc)  # text shows the input's strings without their control characters; JSON keeps them
        console = make_console(to_file=bool(self.output))
        if self.redact or self.output:
            import io

            buf = io.StringIO()
            console.file = buf
            render_text(doc, console)
            deliver_text(buf.getvalue(), self.redact, self.output)
            return
        try:
            render_text(doc, console)
            sys.stdout.flush()
        except BrokenPipeError:
            from gdrcheck.io.output import stdout_closed

            stdout_closed()

    def _last_words(self) -> int:
        """What the watchdog says when the run overstays (from its thread): the timeout document in the
        format asked, to ``--output`` (so a textfile collector's file says unknown, not the last good
        answer) or stdout; its exit status. The main thread is stopped after, and removes what it unpacked."""
        from gdrcheck.cli.options import LINE_FORMATS
        from gdrcheck.documents.pairs import timeout_doc
        from gdrcheck.status import exit_status

        host = None
        if self.live:  # the facts were never read: the name the node goes by
            import socket

            host = os.environ.get("NODE_NAME") or socket.gethostname() or None
        doc = timeout_doc(self.deadline.seconds, host)
        sys.stderr.write(f"gdrcheck: {doc['summary_line']}\n")
        text = None
        if self.fmt in ("json", "jsonl"):
            from gdrcheck.render.json_out import render_json

            text = render_json(doc)
        elif self.fmt in LINE_FORMATS:
            from gdrcheck.render.adapters import cut_short_line

            text = cut_short_line(self.fmt, doc)
        elif self.fmt == "prometheus":
            import time

            from gdrcheck import __version__
            from gdrcheck.render.prometheus import render_prometheus

            text = render_prometheus(doc, None, {"devices": []}, __version__, time.monotonic() - self.started,
                                     time.time())
        if text is not None:
            if self.output:
                from gdrcheck.errors import InputError
                from gdrcheck.io.output import write_atomic

                try:
                    write_atomic(self.output, text)
                except InputError as e:
                    sys.stderr.write(f"gdrcheck: error: {e}\n")
            else:
                sys.stdout.write(text)
        return exit_status("unknown", self.fmt)


def run_view(view, run: Run, options: Any = None) -> int:
    """load -> evaluate -> document -> emit, the one way every node command goes; the exit status, from the
    view's status word and the engine that reads it."""
    from gdrcheck.status import exit_status

    facts = run.load(want_driver=view.want_driver, endpoint_config=view.endpoint_config,
                     while_waiting=view.prepare, cpulists=view.cpulists)
    subject = view.subject(facts, options)
    out = view.document(subject, run)
    if isinstance(out, str):
        run.deliver(out, view.redact_text)
    else:
        run.emit(out, view.render_text)
    return exit_status(view.status(subject, out), view.engine)


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


def capture_to(output: str, redact: bool, timeout: Optional[float] = None) -> int:
    """``gdrcheck snapshot``: everything gdrcheck reads on this machine, into one archive, under the same
    ``--timeout`` as every command: what has not answered by then (NVML, cuInit, a tool) is not waited for and
    the manifest says so (exit 3); a run still going 2 s past it is stopped, and no archive is written."""
    from gdrcheck.collectors.capture import capture, write_archive
    from gdrcheck.io.deadline import DEFAULT_SECONDS, Deadline, Watchdog
    from gdrcheck.io.output import check_target
    from gdrcheck.status import exit_status

    check_target(output)  # a link it must not write through is refused before the machine is read
    deadline = Deadline(DEFAULT_SECONDS if timeout is None else timeout)

    def last_words() -> int:
        sys.stderr.write(f"gdrcheck: the snapshot was not finished within {deadline.seconds:g} s "
                         "(a driver call or a tool did not answer); no archive written\n")
        return exit_status("unknown")

    watchdog = Watchdog(deadline, last_words)
    progress = progress_reporter()
    try:
        src, manifest = capture(redact=redact, progress=progress, deadline=deadline)
        if progress:
            progress("writing " + output)
        count = write_archive(src, manifest, output, redact=redact)
    finally:
        end_progress(progress)
    if not watchdog.disarm():
        return exit_status("unknown")
    if deadline.missed:
        sys.stderr.write(f"gdrcheck: wrote {output}, without what did not answer within {deadline.seconds:g} s: "
                         f"{', '.join(deadline.missed)}\n")
        return exit_status("unknown")
    if output == "-":
        sys.stderr.write(f"gdrcheck: wrote the snapshot to stdout ({count} entries)\n")
    else:
        sys.stderr.write(f"gdrcheck: wrote {output} ({count} entries); replay with: gdrcheck pairs --from {output}\n")
    return exit_status("pass")
