"""One place decides a run's exit status: gdrcheck.status.exit_status maps a status word and the engine that
reads it to the number. Nowhere else in the package is an exit status written as a number."""

import ast
from pathlib import Path

import pytest

from gdrcheck.status import exit_status

PACKAGE = Path(__file__).resolve().parents[2] / "gdrcheck"
EXIT_NUMBERS = {0, 1, 2, 3, 130, 143}
EXITS = {"exit", "_exit", "SystemExit"}  # sys.exit, os._exit, raise SystemExit(...)
STATUS_NAMES = {"code", "status", "exit_code", "exit_status", "word"}  # a variable
STATUS_ATTRIBUTES = {"code", "exit_code", "exit_status"}  # an attribute (``wc.status`` is a verbs completion's)
DECIDERS = ("status", "exit")  # a function whose name says it decides a status


def _number(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value in EXIT_NUMBERS


def _name(node) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _a_status(node) -> bool:
    return node.id in STATUS_NAMES if isinstance(node, ast.Name) else \
        isinstance(node, ast.Attribute) and node.attr in STATUS_ATTRIBUTES


def literal_exit_statuses(tree) -> list:
    """(line, what) for each exit status written as a number in a module."""
    hits = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.Call) and _name(fn.func) in EXITS and any(_number(a) for a in fn.args):
            hits.append((fn.lineno, f"{_name(fn.func)}(<number>)"))
        elif isinstance(fn, (ast.Assign, ast.AnnAssign)) and _number(fn.value):
            targets = fn.targets if isinstance(fn, ast.Assign) else [fn.target]
            if any(map(_a_status, targets)):
                hits.append((fn.lineno, "a status set to a number"))
        elif isinstance(fn, ast.Compare) and _a_status(fn.left) and any(map(_number, fn.comparators)):
            hits.append((fn.lineno, "a status compared with a number"))
        elif isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(w in fn.name for w in DECIDERS):
            for node in ast.walk(fn):
                value = getattr(node, "value", None) if isinstance(node, ast.Return) else None
                first = value.elts[0] if isinstance(value, ast.Tuple) and value.elts else value
                if _number(first):
                    hits.append((node.lineno, f"{fn.name} returns a number"))
    return hits


def test_no_literal_exit_status_outside_status_py():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "status.py" and path.parent == PACKAGE:
            continue
        for line, what in literal_exit_statuses(ast.parse(path.read_text(), str(path))):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {what}")
    assert not found, "exit statuses belong to gdrcheck.status.exit_status:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "import sys\nsys.exit(3)\n",
    "import os\nos._exit(1)\n",
    "raise SystemExit(2)\n",
    "def pairs_status(x):\n    return 3\n",
    "def bar1_exit(x):\n    return 1, ''\n",
    "code = 130\n",
    "if code == 0:\n    pass\n",
    "self.code = 1\n",
])
def test_the_scan_sees_a_literal_exit_status(source):
    assert literal_exit_statuses(ast.parse(source))


def test_the_scan_leaves_other_numbers_alone():
    source = "def bar_index(x):\n    return 2\nwidth = 16\nif n == 0 or wc.status != 0:\n    pass\n"
    assert not literal_exit_statuses(ast.parse(source))


@pytest.mark.parametrize("word, engine, code", [
    ("pass", "contract", 0), ("fail", "contract", 1), ("usage", "contract", 2), ("unknown", "contract", 3),
    ("interrupted", "contract", 130), ("terminated", "contract", 143),
    ("pass", "text", 0), ("unknown", "json", 3), ("unknown", "nhc", 3), ("fail", "prometheus", 1),
    ("pass", "npd", 0), ("fail", "npd", 1), ("unknown", "npd", 2), ("usage", "npd", 2),
    ("interrupted", "npd", 130),
    ("pass", "nagios", 0), ("warning", "nagios", 1), ("fail", "nagios", 2), ("unknown", "nagios", 3),
    ("usage", "nagios", 3), ("terminated", "nagios", 143),
])
def test_exit_status_by_word_and_engine(word, engine, code):
    assert exit_status(word, engine) == code
