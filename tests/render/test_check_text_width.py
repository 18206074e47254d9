"""``check``'s text on a terminal wraps each line to its width (a finding's under its message); in a log (a pipe
or a file) each finding keeps one line, for grep."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from support.cli_util import ROOT, call, drain_pty

DGX1 = "gengwg-dgx1/nvidia-smi-topo-mp.txt"


def _on_a_terminal(*args, columns: int) -> str:
    main, sub = pty.openpty()
    env = dict(os.environ, COLUMNS=str(columns), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "gdrcheck", *map(str, args)], stdout=sub, stderr=subprocess.PIPE,
                   env=env, cwd=ROOT, timeout=120)
    os.close(sub)
    return drain_pty(main).decode().replace("\r\n", "\n")


def test_dgx1_check_on_a_narrow_terminal_wraps_every_line(realworld):
    out = _on_a_terminal("check", "--from", realworld / DGX1, columns=70)
    lines = out.splitlines()
    assert lines and all(len(line) <= 70 for line in lines), out
    assert "  GDR003 warning GPU0 and GPU4 are on different NUMA nodes (SYS," in lines
    assert any(line.startswith(" " * 17 + "inter-NUMA;") for line in lines)


def test_dgx1_check_in_a_log_keeps_each_finding_on_one_line(realworld):
    out = call("check", "--from", realworld / DGX1, env={"COLUMNS": "70"}).stdout
    assert any(len(line) > 70 and line.startswith("  GDR003 warning") for line in out.splitlines())
