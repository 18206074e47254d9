"""gdrcheck.pyz run as root with a user's environment (``sudo -E``): no module of that user's is imported.

The attack: the system ``python3`` puts ``$HOME/.local/lib/python3.X/site-packages`` and ``PYTHONPATH`` on
root's import path; a planted module there (``pyudev.py``, ``psutil.py``, a standard module's name) ran as
uid 0. The archive now starts itself again under ``-I``. Its cache is used only where every directory above
it is root's or the caller's and writable by no one else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLANT = "open({mark!r}, 'a').write(__name__ + '\\n')\n"


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    out = tmp_path_factory.mktemp("pyz") / "gdrcheck.pyz"
    subprocess.run([sys.executable, str(REPO / "packaging" / "build_pyz.py"), "--from-installed", "-o", str(out)],
                   check=True, capture_output=True)
    return out


def plant(d: Path, mark: Path, names=("json", "psutil", "pyudev", "tempfile")):
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / f"{n}.py").write_text(PLANT.format(mark=str(mark)))


def run(python, pyz, env_extra, cwd, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GDRCHECK_", "PYTHON"))}
    env.update(env_extra, COLUMNS="100", NO_COLOR="1", GDRCHECK_PYZ_NO_CACHE="1")
    return subprocess.run([python, str(pyz), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_pythonpath_modules_are_not_imported(pyz, tmp_path):
    mark = tmp_path / "ran"
    plant(tmp_path / "pp", mark)
    p = run(sys.executable, pyz, {"PYTHONPATH": str(tmp_path / "pp")}, tmp_path, "rules", "--json")
    assert p.returncode == 0, p.stderr
    assert not mark.exists(), mark.read_text()


def test_a_user_site_is_not_on_the_path(pyz, tmp_path):
    """A live run records the interpreter's site directories (snapshot's python_site_dirs.json): the user's
    ``~/.local/lib/python3.X/site-packages`` was among them, the system ``python3`` having put it on the path."""
    import json
    import tarfile

    python = shutil.which("python3", path="/usr/bin:/bin")
    if not python:
        pytest.skip("no system python3 (a virtual environment has no user site)")
    ver = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True).stdout.strip()
    user_site = tmp_path / "home" / ".local" / "lib" / f"python{ver}" / "site-packages"
    plant(user_site, tmp_path / "ran")
    out = tmp_path / "node.tar.gz"
    p = run(python, pyz, {"HOME": str(tmp_path / "home"), "GDRCHECK_TOOL_PATH": "/nonexistent"}, tmp_path,
            "snapshot", "-o", str(out))
    assert p.returncode == 0, p.stderr  # a snapshot with every answer (no tool to wait for) exits 0
    with tarfile.open(out) as t:
        name = next(n for n in t.getnames() if n.endswith("gdrcheck/python_site_dirs.json"))
        dirs = json.loads(t.extractfile(name).read())
    assert str(user_site) not in dirs, dirs


def test_the_arguments_and_exit_status_survive_the_restart(pyz, tmp_path):
    p = run(sys.executable, pyz, {}, tmp_path, "pairs", "--from", "/nonexistent/x")
    assert p.returncode == 2 and p.stderr.startswith("gdrcheck: error:"), p.stderr


def test_a_cache_under_a_directory_others_may_write_is_not_used(pyz, tmp_path):
    """A user who may write the cache's parent could swap the cache between its check and the import."""
    open_parent = tmp_path / "open"
    open_parent.mkdir()
    open_parent.chmod(0o777)
    cache = open_parent / "cache"
    env = {"GDRCHECK_PYZ_CACHE": str(cache)}
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GDRCHECK_", "PYTHON"))}
    e.update(env)
    p = subprocess.run([sys.executable, "-I", str(pyz), "--version"], capture_output=True, text=True, env=e,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("gdrcheck "), p.stderr
    assert not cache.exists() or not [c for c in cache.iterdir() if c.name.startswith("pyz-")]


def test_every_documented_pyz_line_says_minus_i():
    """A ``.pth`` file in a user site runs before the archive can restart itself: only ``-I`` keeps it out."""
    import re

    files = [p for p in (REPO / "contrib").rglob("*") if p.is_file()] + [REPO / "README.md",
                                                                          *(REPO / "docs").glob("*.md")]
    bad = re.compile(r"python3?(?:\.\d+)?(?! -I)\s+\S*gdrcheck\.pyz")
    hits = [f"{p.relative_to(REPO)}: {ln.strip()}" for p in files
            for ln in p.read_text(errors="replace").splitlines() if bad.search(ln)]
    assert hits == []
