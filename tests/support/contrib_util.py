"""Shared pieces of the contrib/ tests: a gdrcheck on PATH, a fake fleet, engine discovery.

Each fake node is a name under ``nodes/`` pointing at its input, so that an engine running on this
machine picks a node's input with ``--from <nodes>/%h`` (clush/pdsh exec) or a per-host variable
(Ansible):

  node01..node12  the healthy scenario (one shape; all pass)
  node13          ACS redirect on the switch ports (fails, another shape)
  node14          no peer-memory module (fails GDR)
  node15          config space not readable (unknown)
  node16          the real 4x H200 VM snapshot (passes, another shape)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from builders.scenarios import CASES, build

ROOT = Path(__file__).resolve().parents[2]
CONTRIB = ROOT / "contrib"
H200_X4 = ROOT / "fixtures" / "h200-x4-vm" / "snapshot.tar.gz"

NODES = [f"node{i:02d}" for i in range(1, 17)]
HEALTHY = NODES[:12]
ROLES = {"node13": "acs-redirect-on-switch", "node14": "no-peer-memory-module",
         "node15": "config-space-not-root"}


def engine(name: str) -> str:
    """The engine's executable, or skip the test saying which package provides it."""
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed (.ci/run installs it)")
    return path


def gdrcheck_env(tmp_path: Path, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """An environment with this checkout's gdrcheck first on PATH and HOME under tmp_path."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / "gdrcheck"
    if not exe.exists():
        exe.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT}${{PYTHONPATH:+:$PYTHONPATH}} "
                       f"exec {sys.executable} -m gdrcheck \"$@\"\n")
        exe.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GDRCHECK"))}
    env.pop("NODE_NAME", None)
    env.update({"PATH": f"{bindir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", "HOME": str(home),
                "TMPDIR": str(tmp_path), "LC_ALL": "C.UTF-8"})
    if extra:
        env.update(extra)
    return env


def fake_fleet(tmp_path: Path) -> Path:
    """``tmp_path/nodes/<node>`` for each of the 16 fake nodes (see the module docstring)."""
    nodes = tmp_path / "nodes"
    if nodes.is_dir():
        return nodes
    trees = _scenario_trees(tmp_path.parent)
    nodes.mkdir()
    for n in HEALTHY:
        (nodes / n).symlink_to(trees / "healthy-gdr-node")
    for n, case in ROLES.items():
        (nodes / n).symlink_to(trees / case)
    (nodes / "node16").symlink_to(H200_X4)
    return nodes


def _scenario_trees(base: Path) -> Path:
    """The fake nodes' scenario trees, built once per test process in ``base`` (the folder that holds the tests'
    own temporary folders): every engine only reads them."""
    trees = base / "fleet-scenario-trees"
    done = base / "fleet-scenario-trees.done"
    if not done.exists():
        if trees.exists():
            shutil.rmtree(trees)
        build(trees / "healthy-gdr-node")
        for case in ROLES.values():
            build(trees / case, **CASES[case])
        done.touch()
    return trees


def run(argv, env, cwd=None, timeout=300, input=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, input=input)


def engine_version(argv, env=None) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    except OSError as e:
        return str(e)
    out = (p.stdout or p.stderr).strip().splitlines()
    return out[0] if out else "?"
