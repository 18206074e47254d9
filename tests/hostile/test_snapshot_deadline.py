"""``snapshot`` on a wedged driver: under the same ``--timeout`` as every command, never waiting forever.

The driver is played by a ``pynvml`` whose ``nvmlInit`` never returns and, where a C compiler is at hand, a
``libcuda.so.1`` whose ``cuInit`` never returns (the call a wedged GPU hangs in). The snapshot is written
without their answers, its manifest says what did not answer, and the run ends in about the timeout (exit 3).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile

import pytest
from support.cli_util import ROOT, run

HUNG_PYNVML = '''
import time
def _nvmlGetFunctionPointer(name):
    raise AttributeError(name)
def nvmlInit(*a):
    time.sleep(600)
nvmlInitWithFlags = nvmlInit
def nvmlDeviceGetBAR1MemoryInfo(*a):
    raise RuntimeError
def nvmlDeviceGetP2PStatus(*a):
    raise RuntimeError
'''
HUNG_CUDA = "#include <unistd.h>\nint cuInit(unsigned int f) { for (;;) sleep(600); return 0; }\n"


@pytest.fixture
def wedged(tmp_path):
    (tmp_path / "pynvml.py").write_text(HUNG_PYNVML)
    env = {"PYTHONPATH": f"{ROOT}:{tmp_path}", "GDRCHECK_TOOL_PATH": "/nonexistent"}
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        (tmp_path / "cuda.c").write_text(HUNG_CUDA)
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "cuda.c")],
                       check=True, capture_output=True)
        # in front of the interpreter's own (Debian 11's Python 3.9 in CI finds its libffi and libssl through it)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("LD_LIBRARY_PATH")) if p)
    return env, bool(cc)


def test_snapshot_on_a_wedged_driver_ends_at_its_timeout(tmp_path, wedged):
    env, with_cuda = wedged
    out = tmp_path / "node.tar.gz"
    # the wedged calls never return: a snapshot that waits for them meets run's bound, a hang guard only
    p = run("snapshot", "-o", out, "--timeout", "2", env=env, timeout=300)
    assert p.returncode == 3, (p.returncode, p.stderr)
    with tarfile.open(out) as t:
        manifest = json.loads(t.extractfile("gdrcheck/manifest.json").read())
    assert "nvml" in manifest["timed_out"]["missed"], manifest.get("timed_out")
    if with_cuda:
        assert "cuda" in manifest["timed_out"]["missed"], manifest.get("timed_out")
    assert "nvml" in p.stderr
