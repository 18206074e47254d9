"""Render ``pairs``, ``topology --all`` and ``bar1`` of one input at several widths, in one process.

Run as ``python3 render_driver.py INPUT`` with stdout a pipe or a pseudo-terminal: each
rendering is preceded by a marker line ``@@render CMD WIDTH NO_COLOR@@`` and followed by
``@@exit CODE@@``. Used by tests/render/test_text_render.py (one process per input and mode, not
one per rendering).
"""

from __future__ import annotations

import io
import os
import sys

COMMANDS = (("pairs",), ("topology", "--all"), ("bar1",))
WIDTHS = (60, 80, 200)


def main(path: str) -> None:
    from gdrcheck.cli.entry import main as gdrcheck_main
    from support.facts_once import facts_read_once

    with facts_read_once():  # the renderings are the point: the input is read once, not once per rendering
        _render_all(gdrcheck_main, path)


def _render_all(gdrcheck_main, path: str) -> None:
    tty = sys.stdout.isatty()
    for args in COMMANDS:
        for width in WIDTHS:
            for no_color in ((True, False) if tty else (False,)):
                os.environ["COLUMNS"] = str(width)
                if no_color:
                    os.environ["NO_COLOR"] = "1"
                else:
                    os.environ.pop("NO_COLOR", None)
                sys.stdout.write(f"@@render {args[0]} {width} {int(no_color)}@@\n")
                sys.stdout.flush()
                sys.stderr = io.StringIO()
                try:
                    gdrcheck_main([*args, "--from", path])
                    code = 0
                except SystemExit as e:
                    code = e.code
                sys.stdout.flush()
                sys.stdout.write(f"@@exit {code}@@\n")
                sys.stdout.flush()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the tests' support
    main(sys.argv[1])
