"""A command line read with the options' one declaration (:mod:`gdrcheck.cli.options`), without click.

Health-check engines run ``gdrcheck check ...`` or ``gdrcheck pairs --json`` on every node every few
minutes; importing click costs more than reading a DGX-like node. :func:`read` reads a command line the
way click's parser (click/parser.py, click 8) reads it: which command, which options with which values,
and whether anything is left that click would refuse or answer itself (help, an unknown option, an
argument). The entry point asks that reading which command runs and which output format the line asks
for. For ``topology``, ``pairs``, ``bar1``, ``check`` and ``fingerprint``, :func:`parse` turns a reading
with nothing left over into the keyword arguments click would pass the command, with values it can fully
check; anything else it declines (None) and click reads the line, made from the same table, and is the
only thing that prints help and usage errors.
"""

from __future__ import annotations

import os

from gdrcheck.cli.options import COMMANDS, ENGINE_FORMATS, NODE_COMMANDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


class Reading:
    """What a command line names: ``command`` (None: not one declared in the table), ``given`` (each option's
    text as given, a list for a repeatable one, True for a flag), ``plain`` (nothing left that click would
    refuse or answer itself: help, an unknown option, an argument), ``engine`` (the health-check engine
    whose format the line names, see :func:`engine_of`)."""

    __slots__ = ("command", "given", "plain", "engine")

    def __init__(self, command: Optional[str], given: dict, plain: bool) -> None:
        self.command, self.given, self.plain = command, given, plain
        self.engine: Optional[str] = None


def engine_of(args) -> Optional[str]:
    """'npd' or 'nagios' where the line names one of those formats (``--format npd``, ``--format=nagios``)
    anywhere. Such an engine reads stdout and its own exit codes, bad usage included, so this holds for a
    line the options' table or click refuses too: under --format nagios a broken line is UNKNOWN, never
    CRITICAL, whatever else in it is wrong."""
    for i, a in enumerate(args):
        for fmt in ENGINE_FORMATS:
            if a == f"--format={fmt}" or (a == "--format" and args[i + 1:i + 2] == [fmt]):
                return fmt
    return None


def read(args) -> Reading:
    """The command line ``args`` (without the program's name) read with its command's options."""
    reading = _read(args)
    reading.engine = engine_of(args)
    return reading


def _read(args) -> Reading:
    if not args or not isinstance(args[0], str) or args[0] not in COMMANDS:
        return Reading(None, {}, False)
    if not all(isinstance(a, str) for a in args):
        return Reading(args[0], {}, False)
    by_name = {name: opt for opt in COMMANDS[args[0]] for name in opt.names}
    given, plain = {}, True
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        if arg == "--":  # the end of options: what follows is arguments, which these commands do not take
            return Reading(args[0], given, False)
        if arg[:1] != "-" or len(arg) < 2:  # a positional argument, or "-"
            plain = False
            continue
        if arg.startswith("--"):  # click matches a long option whole, with an optional =VALUE
            name, eq, value = arg.partition("=")
            opt = by_name.get(name)
            if opt is None or (eq and not opt.takes_value):
                plain = False
                continue
            if opt.takes_value and not eq:
                if not rest:
                    return Reading(args[0], given, False)
                value = rest.pop(0)  # click takes the next argument whatever it looks like
        else:  # a short option: -oFILE, -o FILE (-o=FILE is "=FILE" to click)
            opt = by_name.get(arg[:2])
            if opt is None or not opt.takes_value:
                plain = False
                continue
            value = arg[2:]
            if not value:
                if not rest:
                    return Reading(args[0], given, False)
                value = rest.pop(0)
        if opt.flag:
            given[opt.dest] = True
        elif opt.multiple:
            given.setdefault(opt.dest, []).append(value)
        else:
            given[opt.dest] = value  # given twice: the last one counts, as in click
    return Reading(args[0], given, plain)


def _values_fit(command: str, kw) -> bool:
    """What the command's body would refuse as a usage error, refused here first (then click says why)."""
    from gdrcheck.cli import views
    from gdrcheck.cli.run import formats_conflict

    if command in ("topology", "pairs", "bar1") and formats_conflict(kw["fmt"], kw["as_json"]):
        return False
    if command == "pairs" and formats_conflict("json" if kw["as_json"] else kw["fmt"], kw["as_jsonl"], "jsonl"):
        return False
    if command == "check" and formats_conflict(kw["fmt"], kw["as_jsonl"], "jsonl"):
        return False
    if "env" in kw:
        views.env_of(kw["env"])
    if "min_bar1" in kw:
        views.size_of(kw["min_bar1"])
    if "require" in kw:
        views.requirements_of(kw["require"])
    return True


def parse(args, reading: Optional[Reading] = None):
    """``(command, keyword arguments)`` for a plain command line of a node command; None for anything else."""
    reading = read(args) if reading is None else reading
    if not reading.plain or reading.command not in NODE_COMMANDS or os.environ.get("_GDRCHECK_COMPLETE"):
        return None  # (click's shell completion reads the line itself)
    kw = {}
    try:
        for opt in COMMANDS[reading.command]:
            value = reading.given.get(opt.dest)
            if opt.flag:
                value = bool(value)
            elif opt.multiple:
                value = tuple(opt.check(v) for v in value or ())
            elif value is None:
                value = opt.default
            else:
                value = opt.check(value)
            kw[opt.dest] = opt.callback(value) if opt.callback else value
        if not _values_fit(reading.command, kw):
            return None
    except Exception:  # noqa: BLE001 - whatever a value makes of a check, click says it
        return None
    return reading.command, kw
