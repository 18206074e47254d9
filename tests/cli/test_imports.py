"""What a command loads is what it needs: `topology --json` no rules and no rich, any `--json` no rich,
a plain node command line no click, and a run from a file never the NVIDIA bindings (a live run loads
them in its own thread)."""

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
    (("topology", "--json"), ("gdrcheck.rules", "gdrcheck.rules.engine", "rich", "pynvml", "tarfile", "click")),
    (("pairs", "--json"), ("rich", "pynvml", "tarfile", "click")),
    (("check", "--format", "npd"), ("rich", "pynvml", "click")),
    (("check", "--format", "nagios"), ("rich", "pynvml", "click")),
])
def test_a_command_loads_only_what_it_needs(tmp_path, args, absent):
    from builders.servers import build

    build(tmp_path / "node", gpus=2, nics=2, nvme=1, sockets=1, nested=False)  # a sysfs tree, as lstopo reads
    loaded = _modules(*args, "--from", str(tmp_path / "node"))
    assert "gdrcheck.collectors.gather" in loaded  # the run did happen
    assert not (set(absent) & loaded), sorted(set(absent) & loaded)


MAIN_PROBE = ("import sys\n"
              "from gdrcheck.cli.entry import main\n"
              "try:\n"
              "    main(sys.argv[1:])\n"
              "except SystemExit as e:\n"
              "    sys.stderr.write(f'STATUS {e.code}\\n')\n"
              "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)))\n")


@pytest.mark.parametrize("args", [("topology", "--json"), ("pairs", "--json"), ("check", "--format", "nagios")])
def test_a_plain_node_command_line_does_not_load_click(tmp_path, args):
    """main([...]) as a program calls it: click loads only for help, usage errors and the other commands."""
    from builders.servers import build

    build(tmp_path / "node", gpus=2, nics=2, nvme=1, sockets=1, nested=False)
    p = subprocess.run([sys.executable, "-c", MAIN_PROBE, *args, "--from", str(tmp_path / "node")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    loaded = set([ln for ln in p.stderr.splitlines() if ln.startswith("MODULES ")][-1].split()[1:])
    assert "gdrcheck.collectors.gather" in loaded and "STATUS " in p.stderr and p.stdout
    assert "click" not in loaded
    bad = subprocess.run([sys.executable, "-c", MAIN_PROBE, *args, "--from", str(tmp_path / "node"), "--timeout",
                          "-1"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "click" in [ln for ln in bad.stderr.splitlines() if ln.startswith("MODULES ")][-1].split()
    assert "gdrcheck: error: Invalid value for '--timeout'" in bad.stderr


@pytest.mark.parametrize("code,status,err", [(3, 3, ""), (None, 0, ""), ("stopped", 1, "stopped\n")])
def test_a_node_command_ends_with_its_output_flushed_and_its_status(code, status, err):
    """The console script ends a node command with os._exit (no interpreter teardown): what was written
    must still arrive, with the status sys.exit would have given."""
    script = ("import sys\nimport gdrcheck.cli.entry as entry\nsys.stdout.write('{\"unfinished\": true}')\n"
              f"entry._leave({code!r})\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (status, '{"unfinished": true}', err)


def test_a_node_command_never_loads_typing(tmp_path):
    """typing (some 3 ms of a run) serves annotations only: gdrcheck imports its names under TYPE_CHECKING."""
    from builders.servers import build

    build(tmp_path / "node", gpus=2, nics=2, nvme=1, sockets=1, nested=False)
    for args in (("topology", "--json"), ("pairs", "--json"), ("check", "--format", "nagios"), ("bar1", "--json")):
        p = subprocess.run([sys.executable, "-S", "-c", MAIN_PROBE, *args, "--from", str(tmp_path / "node")],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        loaded = set([ln for ln in p.stderr.splitlines() if ln.startswith("MODULES ")][-1].split()[1:])
        assert "gdrcheck.collectors.gather" in loaded and "internal error" not in p.stderr, p.stderr
        assert "typing" not in loaded, args


def test_only_the_console_scripts_node_command_turns_the_cycle_collector_off(tmp_path):
    """The console script's node command runs without the cycle collector (the process ends right after);
    main(argv), as tests and programs call it, leaves the interpreter as it found it."""
    from builders.servers import build

    build(tmp_path / "node", gpus=1, nics=1, nvme=0, sockets=1, nested=False)
    script = ("import gc, sys\nimport gdrcheck.cli.entry as entry\n"
              "entry._leave = lambda code: sys.stderr.write(f'GC {gc.isenabled()}\\n')\n"
              "sys.argv = ['gdrcheck', 'topology', '--json', '--from', sys.argv[1]]\nentry.main()\n"
              "try:\n    gc.enable()\n    entry.main(sys.argv[1:])\nexcept SystemExit:\n"
              "    sys.stderr.write(f'GC {gc.isenabled()}\\n')\n")
    p = subprocess.run([sys.executable, "-c", script, str(tmp_path / "node")], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert [ln for ln in p.stderr.splitlines() if ln.startswith("GC ")] == ["GC False", "GC True"], p.stderr


# what only a file input, an archive, a snapshot's records or another command's output needs
_NOT_FOR_A_TREE = ("gdrcheck.collectors.archive", "gdrcheck.collectors.input_kinds", "gdrcheck.collectors.nvml",
                   "gdrcheck.collectors.nvml_record", "gdrcheck.collectors.nvml_errors",
                   "gdrcheck.collectors.cuda_attrs", "gdrcheck.cuda_attr", "gdrcheck.collectors.pastes",
                   "gdrcheck.collectors.pastes.nvidia_smi")
TOPOLOGY_MODULES = 51  # gdrcheck's own modules `topology --json` of a sysfs tree loads (pair_classes among them)


def test_topology_of_a_sysfs_tree_loads_no_reader_it_does_not_use(tmp_path):
    """A sysfs tree without a snapshot's records: no archive reader, no input-kind table, no NVML, CUDA or
    nvidia-smi reader (their statuses are said without them: tests/collectors/test_sysfs_reads.py)."""
    from builders.servers import build

    build(tmp_path / "node", gpus=2, nics=2, nvme=1, sockets=2, nested=True)
    loaded = _modules("topology", "--json", "--from", str(tmp_path / "node"))
    assert "gdrcheck.collectors.gather" in loaded
    assert not (set(_NOT_FOR_A_TREE) & loaded), sorted(set(_NOT_FOR_A_TREE) & loaded)
    own = sorted(m for m in loaded if m == "gdrcheck" or m.startswith("gdrcheck."))
    assert len(own) <= TOPOLOGY_MODULES, own
    snap = tmp_path / "snap"
    (tmp_path / "node").rename(snap)
    (snap / "gdrcheck").mkdir()
    (snap / "gdrcheck" / "nvml.json").write_text("{}")
    assert "gdrcheck.collectors.nvml" in _modules("topology", "--json", "--from", str(snap))  # records: read
