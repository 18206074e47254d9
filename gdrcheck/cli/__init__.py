"""The command line: options.py declares the node commands' options, commands.py registers the commands,
run.py is the run they share, entry.py the console script. Nothing here may import click at package import:
``gdrcheck --version`` answers before it loads."""
