"""What a command loads is what it needs: `topology --json` no rules and no rich, any `--json` no rich,
and a run from a file never the NVIDIA bindings (a live run loads them in its own thread)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.cli_util import ROOT

PROBE = ("import sys, runpy\n"
         "import gdrcheck.cli.entry as entry\n"
         "entry._leave = lambda code: None  # the console script ends the process; this probe must go on\n"
         "sys.argv = ['gdrcheck'] + sys.argv[1:]\n"
         "try:\n"
         "    runpy.run_module('gdrcheck', run_name='__main__')\n"
         "except SystemExit:\n"
         "    pass\n"
         "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)))\n")


def _modules(*args):
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("MODULES ")][-1]
    return set(line.split()[1:])


@pytest.mark.parametrize("args,absent", [
    (("topology", "--json"), ("gdrcheck.rules", "gdrcheck.rules.engine", "rich", "pynvml", "tarfile")),
    (("pairs", "--json"), ("rich", "pynvml", "tarfile")),
    (("check", "--format", "npd"), ("rich", "pynvml")),
])
def test_a_command_loads_only_what_it_needs(tmp_path, args, absent):
    from benchmarks.trees.servers import build

    build(tmp_path / "node", gpus=2, nics=2, nvme=1, sockets=1, nested=False)  # a sysfs tree, as lstopo reads
    loaded = _modules(*args, "--from", str(tmp_path / "node"))
    assert "gdrcheck.collectors.gather" in loaded  # the run did happen
    assert not (set(absent) & loaded), sorted(set(absent) & loaded)


@pytest.mark.parametrize("code,status,err", [(3, 3, ""), (None, 0, ""), ("stopped", 1, "stopped\n")])
def test_a_node_command_ends_with_its_output_flushed_and_its_status(code, status, err):
    """The console script ends a node command with os._exit (no interpreter teardown): what was written
    must still arrive, with the status sys.exit would have given."""
    script = ("import sys\nimport gdrcheck.cli.entry as entry\nsys.stdout.write('{\"unfinished\": true}')\n"
              f"entry._leave({code!r})\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (status, '{"unfinished": true}', err)
