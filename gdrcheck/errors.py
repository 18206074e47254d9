"""Errors that end a run with a one-line message (never a traceback)."""

from gdrcheck.status import exit_status


class InputError(Exception):
    """Unreadable or damaged input: exit status 2, one line on stderr."""

    exit_code = exit_status("usage")

