"""One place that makes the rich Console: colour on a terminal, plain text in a log.

Whatever is printed is data: no markup, no emoji codes, no highlighting. The width
is the terminal's (or ``COLUMNS``); in a pipe or a file it is ``COLUMNS`` or
:data:`LOG_WIDTH`. ``NO_COLOR`` (any non-empty value) means no escape codes at all.
"""

from __future__ import annotations

import os
import sys

LOG_WIDTH = 100  # lines of text written to a pipe or a file
MIN_WIDTH = 40


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def _columns():
    text = (os.environ.get("COLUMNS") or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def text_width(stream=None) -> int:
    """The width plain text is wrapped to, as the console's: ``COLUMNS``, else the terminal's, else
    :data:`LOG_WIDTH` in a pipe or a file; never below :data:`MIN_WIDTH`."""
    cols = _columns()
    if cols is None:
        stream = stream or sys.stdout
        try:
            cols = os.get_terminal_size(stream.fileno()).columns if stream.isatty() else LOG_WIDTH
        except (OSError, ValueError, AttributeError):
            cols = LOG_WIDTH
    return max(cols, MIN_WIDTH)


def tty_width(stream=None):
    """The width to wrap to where ``stream`` (stdout) is a terminal; None in a pipe or a file (a log keeps each
    line whole)."""
    stream = stream or sys.stdout
    try:
        return text_width(stream) if stream.isatty() else None
    except (ValueError, AttributeError):
        return None


def make_console(stderr: bool = False, to_file: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty() and not to_file
    kwargs = {"file": stream, "highlight": False, "markup": False, "emoji": False}
    if not tty:
        kwargs.update(force_terminal=False, no_color=True, color_system=None)
        kwargs["width"] = max(_columns() or LOG_WIDTH, MIN_WIDTH)
    else:
        cols = _columns()
        if cols:
            kwargs["width"] = max(cols, MIN_WIDTH)
        if no_color():
            kwargs.update(no_color=True, color_system=None)
    console = Console(**kwargs)
    console.on_broken_pipe = lambda: _reader_gone(console)  # rich would exit 1; the run has its own status
    return console


def _reader_gone(console) -> None:
    from gdrcheck.io.output import stdout_closed

    console.quiet = True
    stdout_closed()

