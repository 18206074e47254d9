"""README's command table and its probe section say what the command line declares: every command and
option it shows exists, and where it lists an option's values (`--format text|json|...`) it lists them
all, as the options' table (gdrcheck.cli.options), the check formats and the probe's checks declare them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gdrcheck.cli import options
from gdrcheck.cli.commands import cli
from gdrcheck.probe import CHECKS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _command_rows():
    lines = README.splitlines()
    start = lines.index("| command | what it shows |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line.replace("\\|", "\0").split("|")[1].replace("\0", "|"))
    return rows


def _invocations(text):
    """Each `gdrcheck ...` in backticks: the command's path and the text after it."""
    for code in re.findall(r"`(gdrcheck [^`]*)`", text):
        words = code.split()[1:]
        group = cli
        path = []
        while words and hasattr(group, "commands") and words[0] in group.commands:
            group = group.commands[words.pop(0)]
            path.append(group.name)
        yield " ".join(path), group, " ".join(words)


def _params(command):
    return {name: p for p in command.params for name in getattr(p, "opts", ())}


def _values(param):
    return tuple(getattr(param.type, "choices", ()) or ())


INVOCATIONS = [inv for row in _command_rows() for inv in _invocations(row)]


def test_the_table_shows_every_command_but_those_with_their_own_section():
    shown = {path.split()[0] for path, _, _ in INVOCATIONS}
    assert shown == set(cli.commands) - {"probe", "schema"}  # probe: its own section; schema: the documents'
    assert {"topology", "pairs", "bar1", "check", "fingerprint", "report"} <= shown


@pytest.mark.parametrize("path,command,rest", INVOCATIONS, ids=[f"{p} {r}" for p, _, r in INVOCATIONS])
def test_every_option_shown_is_declared(path, command, rest):
    params = _params(command)
    if path in options.COMMANDS:  # click's options are made from the table: the same names
        assert set(params) == {name for opt in options.COMMANDS[path] for name in opt.names}
    for name, value in re.findall(r"(--?[a-z][\w-]*)(?:[ =]([^\s\]\[]+))?", rest):
        assert name in params, (path, name)
        listed = tuple(value.split("|")) if value else ()
        if _values(params[name]) and len(listed) > 1:  # a list of values is the whole list, in its order
            assert listed == _values(params[name]), (path, name)
        elif _values(params[name]) and listed:
            assert listed[0] in _values(params[name]), (path, name)


def test_the_check_formats_are_listed_whole():
    row = next(r for r in _command_rows() if "`gdrcheck check " in r)
    assert "--format " + "|".join(options.CHECK_FORMATS) in row
    assert _values(_params(cli.commands["check"])["--format"]) == options.CHECK_FORMATS


def test_the_probe_section_names_every_check_and_only_declared_options():
    section = README.split("## Probing", 1)[1].split("\n## ", 1)[0]
    named = [name for name in re.findall(r"`([a-z][a-z0-9-]*)`", section) if name in CHECKS]
    assert tuple(dict.fromkeys(named)) == CHECKS  # each, in the order the probe runs them
    params = _params(cli.commands["probe"])
    assert _values(params["--check"]) == CHECKS
    for line in re.findall(r"^ {4}gdrcheck probe (.*)$", section, re.M):
        for name in re.findall(r"(--[a-z][\w-]*)", line.split("#")[0]):
            assert name in params, name


def test_from_help_names_every_input_kind_the_table_has():
    from gdrcheck.cli.options import FROM_HELP
    from gdrcheck.collectors.input_kinds import ACCEPTED_KINDS

    for what, how in ACCEPTED_KINDS:
        assert f"{what}: {how}" in FROM_HELP
