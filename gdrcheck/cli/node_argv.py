"""A plain node command line, read without click.

Health-check engines run ``gdrcheck check ...`` or ``gdrcheck pairs --json`` on every node every few
minutes; importing click costs more than reading a DGX-like node. For ``topology``, ``pairs``, ``bar1``,
``check`` and ``fingerprint``, :func:`parse` reads a command line made only of the command and its own
options with values it can fully check, the way click's parser (click/parser.py, click 8) reads it,
and gives the keyword arguments click would pass to the command. Anything else, or anything click
would refuse, it declines (None) and click reads the line as always: click stays the one declaration
of the command line (:mod:`gdrcheck.cli.commands`) and the only thing that prints help and usage
errors. tests/cli/test_node_argv.py holds this table to click's declarations and this reading to
click's own.
"""

from __future__ import annotations

import os

from gdrcheck.cli import views
from gdrcheck.cli.run import formats_conflict


class Opt:
    """One option as click declares it. ``check``: the value click's type makes of the text (ValueError where
    click refuses it); ``callback``: what the option's click callback makes of that (ValueError: refused)."""

    __slots__ = ("dest", "names", "flag", "multiple", "choices", "bounds", "default", "check", "callback")

    def __init__(self, dest, *names, flag=False, multiple=False, choices=None, bounds=None, default=None,
                 check=None, callback=None) -> None:
        self.dest, self.names, self.flag, self.multiple = dest, names, flag, multiple
        self.choices, self.bounds, self.callback = choices, bounds, callback
        self.default = False if flag else default
        if choices is not None:
            check = _choice(choices)
        elif bounds is not None:
            check = _float_range(*bounds)
        self.check = check

    @property
    def takes_value(self) -> bool:
        return not self.flag


def _choice(choices):
    def check(text: str) -> str:
        if text not in choices:  # click.Choice, case-sensitive
            raise ValueError(text)
        return text

    return check


def _float_range(low, high):
    def check(text: str) -> float:
        value = float(text)  # what click.FloatRange does, then its closed bounds
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(text)
        if value != value:  # click lets NaN through its bounds (--timeout's callback refuses it): declined
            raise ValueError(text)
        return value

    return check


def _from_paths(value):
    """commands._from_paths: none -> None (this machine), one -> that path, several -> the tuple."""
    if not value:
        return None
    return value[0] if len(value) == 1 else tuple(value)


def _joined(value):
    """commands._joined: every --require given, in one list."""
    return ",".join(value) if value else None


def _no_nan(value):
    """commands._no_nan: NaN seconds are refused."""
    if value is not None and value != value:
        raise ValueError("not a number of seconds")
    return value


FROM = Opt("from_path", "--from", multiple=True, callback=_from_paths)
REDACT = Opt("redact", "--redact", flag=True)
JSON = Opt("as_json", "--json", flag=True)
JSONL = Opt("as_jsonl", "--jsonl", flag=True)
FAIL_ON = Opt("fail_on", "--fail-on", choices=("error", "warning"), default="error")
NCCL = Opt("nccl_version", "--nccl-version")
ENV = Opt("env", "--env", multiple=True)
OUTPUT = Opt("output", "-o", "--output")
TIMEOUT = Opt("timeout", "--timeout", bounds=(0, None), callback=_no_nan)
CHECK_FORMATS = ("text", "json", "jsonl", "nhc", "npd", "nagios", "prometheus")


def _format(*choices) -> Opt:
    return Opt("fmt", "--format", choices=choices, default="text")


# the options of each command, as commands.py declares them
COMMANDS = {
    "topology": (FROM, _format("text", "json", "dot"), JSON, REDACT, Opt("show_all", "--all", flag=True),
                 TIMEOUT, OUTPUT),
    "pairs": (FROM, _format("text", "json"), JSON, REDACT, FAIL_ON, NCCL, ENV, JSONL, TIMEOUT, OUTPUT),
    "bar1": (FROM, _format("text", "json"), JSON, REDACT, FAIL_ON, Opt("min_bar1", "--min-bar1", default="1GiB"),
             Opt("bar1_used_max", "--max-used", bounds=(0, 100), default=90.0), TIMEOUT, OUTPUT),
    "check": (FROM, _format(*CHECK_FORMATS), JSONL, Opt("require", "--require", multiple=True, callback=_joined),
              Opt("per_pair_metrics", "--per-pair-metrics", flag=True), REDACT, FAIL_ON, NCCL, ENV, TIMEOUT, OUTPUT),
    "fingerprint": (FROM, Opt("explain", "--explain", flag=True), Opt("addresses", "--addresses", flag=True), JSON,
                    TIMEOUT, OUTPUT),
}


def _values_fit(command: str, kw) -> bool:
    """What the command's body would refuse as a usage error, refused here first (then click says why)."""
    if command in ("topology", "pairs", "bar1") and formats_conflict(kw["fmt"], kw["as_json"]):
        return False
    if command == "pairs" and formats_conflict("json" if kw["as_json"] else kw["fmt"], kw["as_jsonl"], "jsonl"):
        return False
    if command == "check" and formats_conflict(kw["fmt"], kw["as_jsonl"], "jsonl"):
        return False
    if "nccl_version" in kw:
        views.nccl_version_of(kw["nccl_version"])
    if "env" in kw:
        views.env_of(kw["env"])
    if "min_bar1" in kw:
        views.size_of(kw["min_bar1"])
    if "require" in kw:
        views.requirements_of(kw["require"])
    return True


def parse(args):
    """``(command, keyword arguments)`` for a plain command line of a node command; None for anything else."""
    if not args or args[0] not in COMMANDS or os.environ.get("_GDRCHECK_COMPLETE"):  # click's shell completion
        return None
    if not all(isinstance(a, str) for a in args):
        return None
    command, table = args[0], COMMANDS[args[0]]
    by_name = {name: opt for opt in table for name in opt.names}
    given = {}
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        if arg[:1] != "-" or len(arg) < 2 or arg == "--":  # a positional argument, "-" or the end of options
            return None
        if arg.startswith("--"):  # click matches a long option whole, with an optional =VALUE
            name, eq, value = arg.partition("=")
            opt = by_name.get(name)
            if opt is None or (eq and not opt.takes_value):
                return None
            if opt.takes_value and not eq:
                if not rest:
                    return None
                value = rest.pop(0)  # click takes the next argument whatever it looks like
        else:  # a short option: -oFILE, -o FILE (-o=FILE is "=FILE" to click)
            opt = by_name.get(arg[:2])
            if opt is None or not opt.takes_value:
                return None
            value = arg[2:]
            if not value:
                if not rest:
                    return None
                value = rest.pop(0)
        if opt.flag:
            given[opt.dest] = True
        elif opt.multiple:
            given.setdefault(opt.dest, []).append(value)
        else:
            given[opt.dest] = value  # given twice: the last one counts, as in click
    kw = {}
    try:
        for opt in table:
            value = given.get(opt.dest)
            if opt.flag:
                value = bool(value)
            elif opt.multiple:
                value = tuple(opt.check(v) if opt.check else v for v in value or ())
            elif value is None:
                value = opt.default
            elif opt.check is not None:
                value = opt.check(value)
            kw[opt.dest] = opt.callback(value) if opt.callback else value
        if not _values_fit(command, kw):
            return None
    except Exception:  # noqa: BLE001 - whatever a value makes of a check, click says it
        return None
    return command, kw
