"""The console script: ``gdrcheck --version`` answers before the command line machinery loads."""

from __future__ import annotations

import sys


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from gdrcheck import __version__

        sys.stdout.write(f"gdrcheck {__version__}\n")
        from gdrcheck.status import EXIT_PASS

        sys.exit(EXIT_PASS)
    from gdrcheck.cli.commands import main as cli_main

    cli_main(argv)
