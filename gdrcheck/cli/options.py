"""The command line's options, declared once: every option of the commands that read a node, with its
value's type, default, help and what it makes of its value.

:mod:`gdrcheck.cli.commands` makes click's options from this table (click prints help and usage errors);
:mod:`gdrcheck.cli.node_argv` reads a command line with it, without click (a plain node command line runs
on that reading, and the entry point asks it which command and output format a line names). The check
formats and the probe's checks are tables here too; help and errors are made from them, and a test holds
README's command table to them. Nothing here imports click.
"""

from __future__ import annotations


class Opt:
    """One option. ``choices``: the values it takes (case-sensitive, as click.Choice); ``bounds``: a float
    between closed bounds (as click.FloatRange; None: unbounded); ``callback``: what the command gets of the
    value (ValueError: refused, with its text as the reason); ``help``: a text, or a function giving it."""

    __slots__ = ("dest", "names", "flag", "multiple", "choices", "bounds", "default", "callback", "help",
                 "metavar", "show_default", "required")

    def __init__(self, dest, *names, flag=False, multiple=False, choices=None, bounds=None, default=None,
                 callback=None, help=None, metavar=None, show_default=False, required=False) -> None:
        self.dest, self.names, self.flag, self.multiple = dest, names, flag, multiple
        self.choices, self.bounds, self.callback = choices, bounds, callback
        self.default = False if flag else default
        self.help, self.metavar, self.show_default, self.required = help, metavar, show_default, required

    @property
    def takes_value(self) -> bool:
        return not self.flag

    def but(self, **changes) -> Opt:
        """The same option with other help (or another field)."""
        fields = {k: getattr(self, k) for k in self.__slots__ if k not in ("dest", "names")}
        fields.update(changes)
        return Opt(self.dest, *self.names, **fields)

    def check(self, text: str):
        """The value the option's type makes of the text (ValueError: refused), before the callback."""
        if self.choices is not None:
            if text not in self.values():
                raise ValueError(text)
            return text
        if self.bounds is not None:
            value = float(text)  # what click.FloatRange does, then its closed bounds
            low, high = self.bounds
            if (low is not None and value < low) or (high is not None and value > high):
                raise ValueError(text)
            if value != value:  # click lets NaN through its bounds (--timeout's callback refuses it): declined
                raise ValueError(text)
            return value
        return text

    def values(self):
        """The values a choice takes (a table declared elsewhere is named by a function giving it)."""
        return self.choices() if callable(self.choices) else self.choices

    def help_text(self):
        return self.help() if callable(self.help) else self.help


def _from_paths(value):
    """() -> None (this machine); one path -> that path; several -> the tuple (one node's files, merged)."""
    if not value:
        return None
    return value[0] if len(value) == 1 else tuple(value)


def _joined(value):
    """--require given several times: every list named, in one (a repeat used to keep only the last)."""
    return ",".join(value) if value else None


def _no_nan(value):
    if value is not None and value != value:
        raise ValueError("not a number of seconds")
    return value


def _nccl_version(value):
    """``--nccl-version``: the :class:`gdrcheck.rules.nccl.core.Version` asked for (None: not given); ValueError,
    its reason in one line, when the text is not an NCCL release gdrcheck models (NCCL's one version grammar)."""
    if value is None:
        return None
    from gdrcheck.rules.nccl.core import parse_version

    return parse_version(value)


def _timeout_help() -> str:
    from gdrcheck.io.deadline import DEFAULT_SECONDS

    return (f"give up on what has not answered by then: those verdicts become unknown (exit 3); default "
            f"{DEFAULT_SECONDS:g}, on a live machine and with --from; it covers writing the output; 0 waits forever")


def _from_help() -> str:
    """--from's help, from collectors/input_kinds.py's table (loaded only for help: a run never needs it)."""
    from gdrcheck.collectors.input_kinds import ACCEPTED_KINDS

    return ("read facts from PATH instead of this machine; repeat it for several files of one node (merged): "
            + "; ".join(f"{what}: {how}" for what, how in ACCEPTED_KINDS))


def __getattr__(name: str):
    if name == "FROM_HELP":
        return _from_help()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


REDACT_WHAT = "replace the host name, serial numbers, UUIDs, MAC and IP addresses, home user names"
REDACT_HELP = REDACT_WHAT + " in the output"

# the formats of one summary line for a health-check engine, each with its exit codes
LINE_FORMATS = ("nhc", "npd", "nagios")
# `check --format`: the formats in groups, each with what it is (the option's help is made from the groups)
CHECK_FORMAT_GROUPS = (
    (("text",), ""),
    (("json", "jsonl"), "the pairs document"),
    (LINE_FORMATS, "one line, each engine's exit codes"),
    (("prometheus",), "node_exporter textfile"),
)
CHECK_FORMATS = tuple(name for names, _ in CHECK_FORMAT_GROUPS for name in names)
# the formats whose engine reads stdout and its own exit codes, bad usage included (gdrcheck.status)
ENGINE_FORMATS = ("npd", "nagios")


def _check_format_help() -> str:
    def group(names, what) -> str:
        listed = ("/" if len(names) == 2 else ", ").join(names)
        return f"{listed} ({what})" if what else listed

    return "; ".join(group(names, what) for names, what in CHECK_FORMAT_GROUPS)


def _probe_checks():
    from gdrcheck.probe import CHECKS

    return CHECKS


FROM = Opt("from_path", "--from", multiple=True, callback=_from_paths, metavar="PATH", help=_from_help)
REDACT = Opt("redact", "--redact", flag=True, help=REDACT_HELP)
JSON = Opt("as_json", "--json", flag=True, help="same as --format json")
FAIL_ON = Opt("fail_on", "--fail-on", choices=("error", "warning"), default="error", show_default=True,
              help="lowest finding severity that makes the exit status 1")
NCCL = Opt("nccl_version", "--nccl-version", metavar="X.Y.Z", callback=_nccl_version,
           help="judge with the rules of this NCCL release (default: the newest NCCL found on the node: "
                "libnccl.so.2.X.Y, a pip nvidia-nccl wheel or PyTorch's; else the newest known)")
ENV = Opt("env", "--env", multiple=True, metavar="NAME=VALUE",
          help="what the job sets, applied last (repeatable): NCCL settings, and CUDA_VISIBLE_DEVICES (which GPUs "
               "share the job's communicator); a paste carries none")
OUTPUT = Opt("output", "-o", "--output", metavar="FILE",
             help="write to FILE instead of stdout (a temporary file renamed into place; - is stdout)")
TIMEOUT = Opt("timeout", "--timeout", bounds=(0, None), callback=_no_nan, metavar="SECONDS", help=_timeout_help)


def _snapshot_timeout_help() -> str:
    from gdrcheck.io.deadline import DEFAULT_SECONDS

    return (f"give up on what has not answered by then (NVML, cuInit, a tool): the archive is written without it "
            f"and its manifest says so (exit 3); default {DEFAULT_SECONDS:g}; 0 waits forever")


SNAPSHOT_TIMEOUT = TIMEOUT.but(help=_snapshot_timeout_help)


def _format(*choices, help="output format") -> Opt:
    return Opt("fmt", "--format", choices=choices, default="text", show_default=True, help=help)


FORMATS = (_format("text", "json"), JSON, REDACT)  # --format, --json, --redact, as most commands have them

# the options of each command that reads a node, in the order click lists them and passes them
COMMANDS = {
    "topology": (FROM, _format("text", "json", "dot", help="output format; dot: Graphviz (dot -Tsvg)"), JSON,
                 REDACT, Opt("show_all", "--all", flag=True,
                             help="show every PCI function, not only the paths that matter"), TIMEOUT, OUTPUT),
    "pairs": (FROM, *FORMATS, FAIL_ON, NCCL, ENV,
              Opt("as_jsonl", "--jsonl", flag=True, help="the JSON document on one line (for 'host: line' streams)"),
              TIMEOUT, OUTPUT),
    "report": (FROM, OUTPUT.but(required=True, metavar="FILE.html",
                                help="page to write (written to a temporary file and renamed into place); - for "
                                     "stdout"),
               REDACT.but(help=REDACT_WHAT), FAIL_ON, NCCL,
               Opt("probe_file", "--probe", metavar="FILE",
                   help="add a Measured section from `gdrcheck probe --json`")),
    "probe": (FROM, *FORMATS, FAIL_ON, NCCL,
              Opt("dry_run", "--dry-run", flag=True,
                  help="print the plan (which checks on which devices, and why); run nothing"),
              Opt("risky", "--risky", flag=True, help="also copy on pairs the static check fails for ACS redirect or a "
                                                      "translating IOMMU (they may hang or return garbage)"),
              Opt("force", "--force", flag=True,
                  help="probe a busy node (compute processes, MIG, non-default compute mode)"),
              Opt("gds_path", "--gds-path", metavar="DIR",
                  help="run gds-read with a test file in DIR, on the target filesystem"),
              Opt("only", "--check", multiple=True, metavar="NAME", choices=_probe_checks,
                  help="run only this check (repeatable)"),
              Opt("step_timeout", "--step-timeout", bounds=(0, None), callback=_no_nan, metavar="SECONDS",
                  help="deadline of every step (default: each check's own); a worker past it is killed"),
              Opt("copy_size", "--copy-size", metavar="SIZE",
                  help="bytes per host copy (default 256MiB; P2P copies at most 256MiB)"),
              OUTPUT.but(help="write to FILE instead of stdout")),
    "bar1": (FROM, *FORMATS, FAIL_ON,
             Opt("min_bar1", "--min-bar1", metavar="SIZE", default="1GiB", show_default=True,
                 help="smallest BAR1 that is not a finding"),
             Opt("bar1_used_max", "--max-used", bounds=(0, 100), default=90.0, show_default=True,
                 help="BAR1 use (percent) above which it is a finding"), TIMEOUT, OUTPUT),
    "check": (FROM, _format(*CHECK_FORMATS, help=_check_format_help),
              Opt("as_jsonl", "--jsonl", flag=True, help="same as --format jsonl"),
              Opt("require", "--require", multiple=True, callback=_joined, metavar="LIST",
                  help="what must work: gdr (GPU-NIC), p2p (GPU-GPU), gds (GPU-NVMe); one that nothing on the node "
                       "could satisfy fails; repeat it or list several. Default: judge the pairs the node has (a node "
                       "without a GPU fails)"),
              Opt("per_pair_metrics", "--per-pair-metrics", flag=True, help="prometheus: also one series per pair"),
              REDACT.but(help=REDACT_WHAT), FAIL_ON, NCCL, ENV,
              TIMEOUT, OUTPUT),
    "fingerprint": (FROM, Opt("explain", "--explain", flag=True,
                              help="print the canonical key=value lines the hashes are made of"),
                    Opt("addresses", "--addresses", flag=True,
                        help="with --explain: PCI addresses instead of positions (gpu0, nic1)"),
                    JSON.but(help="hashes, lines and positions as JSON"), TIMEOUT, OUTPUT),
}
# what gdrcheck.cli.node_commands runs from a plain command line, without click
NODE_COMMANDS = ("topology", "pairs", "bar1", "check", "fingerprint")
# the commands that, without --from, ask the NVIDIA driver a plain run's questions (gdrcheck.cli.views)
DRIVER_COMMANDS = (*NODE_COMMANDS, "report")
