"""``check``'s text on a terminal wraps each line to its width (a finding's under its message); in a log (a pipe
or a file) each finding keeps one line, for grep."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from support.cli_util import ROOT, call, drain_pty

# four A100 PCIe on two sockets (a DGX-1's -mp shows no NVLink, which may join its SYS pairs: no GDR003 there)
ADROIT = "princeton-adroit-h11g2-4xa100/nvidia-smi-topo-m.txt"


def _on_a_terminal(*args, columns: int) -> str:
    main, sub = pty.openpty()
    env = dict(os.environ, COLUMNS=str(columns), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "gdrcheck", *map(str, args)], stdout=sub, stderr=subprocess.PIPE,
                   env=env, cwd=ROOT, timeout=120)
    os.close(sub)
    return drain_pty(main).decode().replace("\r\n", "\n")


def test_check_on_a_narrow_terminal_wraps_every_line(realworld):
    out = _on_a_terminal("check", "--from", realworld / ADROIT, columns=70)
    lines = out.splitlines()
    assert lines and all(len(line) <= 70 for line in lines), out
    assert "  GDR003 warning GPU0 and GPU2 are on different NUMA nodes (SYS," in lines
    assert any(line.startswith(" " * 17 + "inter-NUMA;") for line in lines)


def test_check_in_a_log_keeps_each_finding_on_one_line(realworld):
    out = call("check", "--from", realworld / ADROIT, env={"COLUMNS": "70"}).stdout
    assert any(len(line) > 70 and line.startswith("  GDR003 warning") for line in out.splitlines())
