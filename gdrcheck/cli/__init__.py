"""The command line: commands.py registers the commands, run.py is the run they share, entry.py the console
script. Nothing here may import click at package import: ``gdrcheck --version`` answers before it loads."""
