"""gdrcheck only reads: no write outside the output the user named, no setpci, no network.

Each run is a separate process with a ``sitecustomize.py`` on ``PYTHONPATH``
that wraps every way Python writes, removes, renames or creates a path
(``open``/``io.open``/``os.open`` with a write mode or flag, ``os.replace``,
``os.rename``, ``os.unlink``, ``os.mkdir``, ``shutil.rmtree``, ...), starts a
process (``subprocess.Popen``, ``os.system``, ``os.exec*``, ``os.posix_spawn``)
or opens a socket. A write outside the allowed directories, an exec of
``setpci`` or through a shell, and any socket is refused (``PermissionError``)
and logged; the test then asserts the log holds no violation.

Allowed: the directory of ``snapshot -o`` (its temporary file and the rename),
the temporary directory (``TMPDIR``, where ``--from`` unpacks an archive; it
must be empty again afterwards) and ``/dev/null`` (``subprocess`` opens it
read-write for a child's stdin).
"""

from __future__ import annotations

import ast
import os
import tarfile

import pytest
from support.cli_util import ROOT, run

from builders.scenarios import scenario


def test_the_guard_catches_writes_execs_and_sockets(tmp_path, guarded):
    """The guard itself: a write, a setpci, a shell and a socket are each caught."""
    import subprocess
    import sys

    gdir = tmp_path / "guard"
    env = {**os.environ, "PYTHONPATH": str(gdir), "GDRCHECK_GUARD_LOG": str(guarded.log),
           "GDRCHECK_GUARD_ALLOW": str(guarded.tmpdir)}
    probes = {
        "open": f"open({str(tmp_path / 'x')!r}, 'w')",
        "os.open": f"import os; os.open({str(tmp_path / 'y')!r}, os.O_CREAT | os.O_WRONLY)",
        "replace": f"import os; os.replace({str(tmp_path / 'guard.log')!r}, {str(tmp_path / 'z')!r})",
        "setpci": "import subprocess; subprocess.run(['setpci', '-s', '00:00.0', '04.w'])",
        "shell": "import subprocess; subprocess.run('true', shell=True)",
        "socket": "import socket; socket.socket()",
        "sys": "open('/sys/bus/pci/rescan', 'w')",
    }
    for name, code in probes.items():
        guarded.log.write_text("")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, name
        assert "VIOLATION" in guarded.log.read_text(), name
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    guarded.log.write_text("")
    ok = f"open({str(guarded.tmpdir / 'ok')!r}, 'w').close(); open('/dev/null', 'w').close()"
    p = subprocess.run([sys.executable, "-c", ok], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "VIOLATION" not in guarded.log.read_text(), p.stderr
    (guarded.tmpdir / "ok").unlink()


COMMANDS = (("topology",), ("topology", "--all", "--json"), ("pairs",), ("pairs", "--json"), ("bar1",),
            ("bar1", "--json"), ("check",), ("check", "--format", "prometheus"), ("check", "--format", "nhc"),
            ("check", "--format", "nagios"), ("fingerprint",), ("fingerprint", "--explain"),
            ("topology", "--format", "dot"), ("pairs", "--jsonl"))


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_from_a_scenario_tree_writes_nothing(tmp_path, guarded, args):
    tree = scenario(tmp_path, "healthy-gdr-node")
    proc, lines = guarded(*args, "--from", tree)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() or args[-1] == "nhc"  # NHC's format is silent on success
    execs = [ln for ln in lines if ln.startswith("EXEC")]
    assert not execs, execs  # a --from tree replays commands, it never runs them


@pytest.mark.parametrize("args", COMMANDS[::2], ids=lambda a: " ".join(a))
def test_live_run_writes_nothing(guarded, args):
    proc, _lines = guarded(*args)
    assert proc.returncode in (0, 1, 3), proc.stderr


def test_snapshot_writes_only_its_output_and_replays_from_tmp(tmp_path, guarded):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "node.tar.gz"
    proc, lines = guarded("snapshot", "-o", out, allow=(out_dir,))
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in out_dir.iterdir()] == ["node.tar.gz"]  # the temporary file was renamed away
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert any(n.endswith("gdrcheck/manifest.json") for n in names)
    for ln in lines:
        if ln.startswith("EXEC"):
            argv = ast.literal_eval(ln[5:])
            assert os.path.basename(argv[0]) != "setpci"
    # replaying the archive unpacks into TMPDIR, which the fixture checks is empty again
    for args in (("pairs",), ("topology", "--json"), ("bar1",)):
        proc, lines = guarded(*args, "--from", out)
        assert proc.returncode in (0, 1, 3), proc.stderr
        assert not [ln for ln in lines if ln.startswith("EXEC")]


def test_damaged_archive_leaves_no_temporary_files(tmp_path, guarded):
    bad = tmp_path / "bad.tar.gz"
    good = tmp_path / "good.tar"
    with tarfile.open(good, "w") as tar:
        tar.add(scenario(tmp_path, "healthy-gdr-node"), arcname="node")
    data = good.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    proc, _ = guarded("pairs", "--from", bad)
    assert proc.returncode == 2, proc.stderr
    if proc.returncode == 2:
        assert len(proc.stderr.strip().splitlines()) == 1


def test_snapshot_into_a_read_only_place_is_refused_cleanly(tmp_path, guarded):
    """Under the guard, writing the archive anywhere but the allowed directory fails without a traceback
    and leaves nothing behind. (It ends as an "internal error", exit 3, today: write_archive lets the
    OSError of mkstemp through; exit 2 with "cannot write" would match the contract.)"""
    out = tmp_path / "elsewhere" / "node.tar.gz"
    out.parent.mkdir()
    gdir = tmp_path / "guard"
    env = {"PYTHONPATH": f"{gdir}{os.pathsep}{ROOT}", "GDRCHECK_GUARD_LOG": str(guarded.log),
           "GDRCHECK_GUARD_ALLOW": str(guarded.tmpdir), "TMPDIR": str(guarded.tmpdir)}
    guarded.log.write_text("")
    proc = run("snapshot", "-o", out, env=env)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert list(out.parent.iterdir()) == []
    assert "VIOLATION" in guarded.log.read_text()


@pytest.mark.parametrize("args", [("check", "--format", "prometheus"), ("pairs", "--json"), ("report",),
                                  ("fingerprint",)], ids=lambda a: " ".join(a))
def test_output_writes_only_the_named_file(tmp_path, guarded, args):
    """--output (and report's -o): a temporary file beside the target, renamed over it; nothing else."""
    tree = scenario(tmp_path, "healthy-gdr-node")
    out_dir = tmp_path / "textfile"
    out_dir.mkdir()
    out = out_dir / "gdrcheck.out"
    proc, _lines = guarded(*args, "--from", tree, "-o", out, allow=(out_dir,))
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in out_dir.iterdir()] == ["gdrcheck.out"] and out.stat().st_size > 0
    assert proc.stdout == ""


def test_fleet_summarize_reads_reports_and_writes_nothing(tmp_path, guarded):
    tree = scenario(tmp_path, "healthy-gdr-node")
    reports = tmp_path / "reports"
    reports.mkdir()
    doc = run("pairs", "--json", "--from", tree).stdout
    for n in ("gpu01", "gpu02", "gpu03"):
        (reports / f"{n}.json").write_text(doc)
    proc, _lines = guarded("fleet", "summarize", "--expect", "gpu[01-04]", reports)
    assert proc.returncode == 3 and "gpu04" in proc.stdout, proc.stdout
