"""A plain node command line read without click (gdrcheck.cli.node_argv) is read exactly as click reads it,
or not at all: both read with the one table of options (gdrcheck.cli.options), and for every command line
the quick path either declines or gives the keyword arguments click gives the command."""

from __future__ import annotations

import inspect

import click
import pytest

from gdrcheck.cli import node_argv, node_commands, options
from gdrcheck.cli.commands import cli

NODE_COMMANDS = ("topology", "pairs", "bar1", "check", "fingerprint")


def test_the_quick_path_knows_the_node_commands_and_only_them():
    assert options.NODE_COMMANDS == NODE_COMMANDS
    assert set(options.COMMANDS) <= set(cli.commands)


@pytest.mark.parametrize("name", NODE_COMMANDS)
def test_a_node_command_takes_what_its_options_give(name):
    """What click hands the command (the table's options, in order) is what node_commands takes."""
    dests = [opt.dest for opt in options.COMMANDS[name]]
    assert list(inspect.signature(getattr(node_commands, name)).parameters) == dests
    assert [p.name for p in cli.commands[name].params] == dests


# command lines the quick path reads (each must also be read so by click)
ACCEPTED = [
    ("pairs", "--env", "NCCL_P2P_LEVEL=SYS", "--env=CUDA_VISIBLE_DEVICES=0,1"),
    ("check", "--env", "NCCL_NET_GDR_LEVEL=PHB"),
    ("topology",),
    ("topology", "--json"),
    ("topology", "--json", "--from", "/x"),
    ("topology", "--from=/x", "--format=dot", "--all"),
    ("topology", "--format", "json", "--json"),
    ("topology", "--json", "--json", "--redact", "--redact"),
    ("topology", "-o", "out.json", "--json"),
    ("topology", "-oout.json", "--json"),
    ("topology", "-o=out.json"),  # click: the value is "=out.json"
    ("topology", "--output=a=b"),
    ("topology", "--output", "a", "--output", "b"),  # last wins
    ("topology", "--from", "/a", "--from", "/b", "--from=/c"),
    ("topology", "--from", ""),
    ("topology", "--from="),
    ("topology", "--from", "-"),
    ("topology", "--from", "--json"),  # click takes the next argument as the value, whatever it looks like
    ("topology", "--from", "--help"),
    ("topology", "--from", "--"),
    ("topology", "-o", "-x"),
    ("topology", "--timeout", "0"),
    ("topology", "--timeout", "2.5"),
    ("topology", "--timeout=1e3"),
    ("topology", "--timeout", " 7 "),
    ("topology", "--timeout", "1_000"),
    ("topology", "--timeout", "inf"),
    ("topology", "--timeout", "-0"),
    ("topology", "--timeout", "abc", "--timeout", "3"),  # only the last one is converted
    ("pairs", "--json"),
    ("pairs", "--jsonl"),
    ("pairs", "--json", "--from", "/x", "--fail-on", "warning", "--nccl-version", "2.21.5"),
    ("pairs", "--format", "json", "--json"),
    ("pairs", "--format", "text", "--jsonl"),
    ("pairs", "--nccl-version", " v2.18 "),
    ("pairs", "--nccl-version", "2.99.1"),
    ("pairs", "--nccl-version", "2.27.5", "--redact", "--timeout", "30", "--output", "p.json"),
    ("bar1",),
    ("bar1", "--json", "--min-bar1", "256MiB", "--max-used", "50"),
    ("bar1", "--max-used", "0", "--max-used=100"),
    ("bar1", "--format", "json", "--fail-on=warning", "--min-bar1=4096"),
    ("bar1", "--from", "/x", "--redact", "--timeout", "9", "-o", "b.txt"),
    ("check",),
    ("check", "--format", "nagios"),
    ("check", "--format=nhc", "--from", "/x"),
    ("check", "--format", "npd", "--require", "gdr,p2p"),
    ("check", "--require", "gdr", "--require", "p2p", "--require=gds"),
    ("check", "--jsonl", "--format", "text"),
    ("check", "--format", "prometheus", "--per-pair-metrics", "--require", " GDS "),
    ("check", "--format", "json", "--nccl-version", "2.19", "--fail-on", "warning", "--redact", "-o", "x"),
    ("check", "--timeout", "0.5", "--output", "check.prom"),
    ("fingerprint",),
    ("fingerprint", "--json", "--from", "/x"),
    ("fingerprint", "--explain", "--addresses", "--timeout", "5", "-o", "f.txt"),
]

# command lines click refuses (a usage error) and the quick path must decline
REFUSED = [
    ("pairs", "--env", "NOVALUE"),
    ("topology", "--format", "xml"),
    ("topology", "--format", "JSON"),
    ("topology", "--format", "dot", "--json"),
    ("topology", "--timeout", "-1"),
    ("topology", "--timeout", "nan"),
    ("topology", "--timeout", "abc"),
    ("topology", "--timeout", ""),
    ("topology", "--timeout", "3", "--timeout", "x"),
    ("topology", "--from"),
    ("topology", "-o"),
    ("topology", "--json=1"),
    ("topology", "--jsonn"),
    ("topology", "--js"),  # click does not complete abbreviations
    ("topology", "-x"),
    ("topology", "-oj", "-q"),
    ("topology", "extra"),
    ("topology", "--json", "extra"),
    ("topology", "-"),
    ("topology", ""),
    ("topology", "--nccl-version", "2.21.5"),  # not an option of topology
    ("pairs", "--json", "--jsonl"),
    ("pairs", "--format", "json", "--jsonl"),
    ("pairs", "--format", "dot"),
    ("pairs", "--fail-on", "info"),
    ("pairs", "--nccl-version", "9"),
    ("pairs", "--nccl-version", ""),
    ("pairs", "--nccl-version", "2.0.1"),
    ("pairs", "--nccl-version", "1234.1.1"),
    ("bar1", "--min-bar1", "lots"),
    ("bar1", "--min-bar1", ""),
    ("bar1", "--max-used", "101"),
    ("bar1", "--max-used", "-1"),
    ("bar1", "--max-used", "x"),
    ("bar1", "--json", "--format", "text", "--all"),
    ("check", "--format", "html"),
    ("check", "--require", "gpu"),
    ("check", "--format", "nagios", "--jsonl"),
    ("check", "--jsonl", "--format=npd"),
    ("check", "--require", ","),
    ("check", "--require", ""),
    ("check", "--json"),
    ("check", "--jsonl=yes"),
    ("fingerprint", "--format", "json"),
    ("fingerprint", "--redact"),
]

# command lines click reads (help, another command, ...) that the quick path leaves to click
DECLINED = [
    (),
    ("--help",),
    ("-h",),
    ("--version",),
    ("--help", "topology"),
    ("topology", "--help"),
    ("topology", "-h"),
    ("topology", "--json", "--help"),
    ("topology", "--"),
    ("topology", "--json", "--", "x"),
    ("pairs", "--json", "-h"),
    ("bar1", "--max-used", "nan"),  # click takes it; declined all the same
    ("rules",),
    ("rules", "--json"),
    ("explain", "GDR001"),
    ("schema", "pairs"),
    ("snapshot", "-o", "x.tar.gz"),
    ("report", "-o", "x.html"),
    ("probe", "--dry-run"),
    ("fleet", "summarize", "x"),
    ("Topology",),
    ("topo",),
]


def _click_params(args):
    cmd = cli.commands[args[0]]
    return cmd.make_context(args[0], list(args[1:])).params


def _typed(kw):
    return {k: (type(v), v) for k, v in kw.items()}


@pytest.mark.parametrize("args", ACCEPTED, ids=" ".join)
def test_a_plain_line_is_read_as_click_reads_it(args):
    parsed = node_argv.parse(list(args))
    assert parsed is not None, args
    assert parsed[0] == args[0]
    assert _typed(parsed[1]) == _typed(_click_params(args))


@pytest.mark.parametrize("args", REFUSED, ids=" ".join)
def test_what_click_refuses_is_declined(args, tmp_path):
    assert node_argv.parse(list(args)) is None
    with pytest.raises(click.UsageError):  # the parse, a callback, or the command's check of a value
        cli.main(args=[*args, "--from", str(tmp_path / "absent")], prog_name="gdrcheck", standalone_mode=False)


@pytest.mark.parametrize("args", DECLINED, ids=lambda a: " ".join(a) or "nothing")
def test_the_rest_is_left_to_click(args):
    assert node_argv.parse(list(args)) is None


def test_shell_completion_is_left_to_click(monkeypatch):
    monkeypatch.setenv("_GDRCHECK_COMPLETE", "bash_source")
    assert node_argv.parse(["topology", "--json"]) is None


def test_every_option_of_every_command_is_in_the_corpus():
    for name in NODE_COMMANDS:
        for opt in options.COMMANDS[name]:
            assert any(line[0] == name and any(a.split("=")[0] in opt.names or a[:2] in opt.names
                                               for a in line[1:]) for line in ACCEPTED), (name, opt.names)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    from builders.servers import build

    root = tmp_path_factory.mktemp("node") / "node"
    build(root, gpus=2, nics=2, nvme=1, sockets=1, nested=False)
    return root


@pytest.mark.parametrize("args", [
    ("topology", "--json"), ("topology",), ("pairs", "--jsonl", "--nccl-version", "2.99"),
    ("bar1", "--json", "--min-bar1", "64MiB"), ("check", "--format", "nagios"), ("check", "--format", "npd"),
    ("check", "--format", "prometheus"), ("fingerprint", "--json"), ("pairs", "--json", "--timeout", "0"),
])
def test_both_ways_give_the_same_run(args, node, monkeypatch, capsys):
    """The same bytes, the same stderr and the same exit status whether the quick path or click read the line."""
    from gdrcheck.cli.entry import run_command_line

    def run():
        with pytest.raises(SystemExit) as e:
            run_command_line([*args, "--from", str(node)])
        out, err = capsys.readouterr()
        # prometheus: when it ran and for how long differ from run to run
        out = "".join(ln for ln in out.splitlines(True) if not ln.startswith(("gdrcheck_last_run_timestamp_seconds ",
                                                                              "gdrcheck_run_duration_seconds ")))
        return e.value.code, out, err

    quick = run()
    monkeypatch.setattr(node_argv, "parse", lambda args, reading=None: None)
    assert run() == quick
    assert quick[1]


@pytest.mark.parametrize("args,status,stdout", [
    (("check", "--format", "nagios"), 3, "GDRCHECK UNKNOWN - "),
    (("check", "--format", "npd"), 2, "gdrcheck error: "),
    (("pairs", "--json"), 2, ""),
])
def test_an_input_error_is_one_line_on_both_ways(args, status, stdout, tmp_path, monkeypatch, capsys):
    from gdrcheck.cli.entry import run_command_line

    def run():
        with pytest.raises(SystemExit) as e:
            run_command_line([*args, "--from", str(tmp_path / "absent")])
        out, err = capsys.readouterr()
        return e.value.code, out, err

    quick = run()
    monkeypatch.setattr(node_argv, "parse", lambda args, reading=None: None)
    assert run() == quick
    code, out, err = quick
    assert code == status and out.startswith(stdout) and err.startswith("gdrcheck: error: ") and err.count("\n") == 1


@pytest.mark.parametrize("raised,status,last", [
    (RuntimeError("boom\nagain"), 3,
     "gdrcheck: internal error: RuntimeError: boom again (GDRCHECK_DEBUG=1 shows where)"),
    (KeyboardInterrupt(), 130, "gdrcheck: interrupted"),
    (RecursionError(), 2, "gdrcheck: error: input nests too deeply"),
])
def test_what_a_run_raises_ends_the_same_on_both_ways(raised, status, last, monkeypatch, capsys):
    from gdrcheck.cli.entry import run_command_line

    def fails(**_):
        raise raised

    monkeypatch.delenv("GDRCHECK_DEBUG", raising=False)
    monkeypatch.setattr(node_commands, "pairs", fails)

    def run():
        with pytest.raises(SystemExit) as e:
            run_command_line(["pairs", "--json", "--from", "x"])
        out, err = capsys.readouterr()
        return e.value.code, out, err.splitlines()[-1]  # click writes a new line before its Abort

    quick = run()
    monkeypatch.setattr(node_argv, "parse", lambda args, reading=None: None)
    assert run() == quick == (status, "", last)


@pytest.mark.parametrize("args,command,plain,engine", [
    (("check", "--format", "nagios"), "check", True, "nagios"),
    (("check", "--from", "--format", "npd"), "check", False, "npd"),  # refused, but the engine still reads it
    (("fingerprint", "--format=nagios"), "fingerprint", False, "nagios"),
    (("report", "-o", "x.html"), "report", True, None),
    (("pairs", "--json", "--help"), "pairs", False, None),
    (("pairs", "--output", "--help"), "pairs", True, None),  # --help is the output's name here
    (("fleet", "summarize", "--format", "nagios"), None, False, "nagios"),
    ((), None, False, None),
])
def test_a_reading_names_the_command_and_the_engine(args, command, plain, engine):
    reading = node_argv.read(list(args))
    assert (reading.command, reading.plain, reading.engine) == (command, plain, engine)
