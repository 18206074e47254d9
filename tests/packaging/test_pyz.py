"""gdrcheck.pyz, the one file to copy onto nodes: built by packaging/build_pyz.py, it gives the installed package's
answers under ``python3 -I`` (nothing from the environment), from its private cache or from the archive itself."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "fixtures" / "h200-x4-vm" / "snapshot.tar.gz"
ARGS = [["pairs", "--json", "--from", str(SNAPSHOT)], ["check", "--from", str(SNAPSHOT)],
        ["topology", "--from", str(SNAPSHOT)], ["rules"]]


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    """CI's own build (pip, for Python 3.9) where it made one; else one made here from what is installed."""
    built = REPO / "dist" / "gdrcheck.pyz"
    if built.is_file():
        return built
    out = tmp_path_factory.mktemp("pyz") / "gdrcheck.pyz"
    subprocess.run([sys.executable, str(REPO / "packaging" / "build_pyz.py"), "--from-installed", "-o", str(out)],
                   check=True, capture_output=True)
    return out


def run(argv, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GDRCHECK_", "PYTHON"))}
    env.update(env_extra, COLUMNS="100", NO_COLOR="1")
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


@pytest.mark.parametrize("args", ARGS, ids=lambda a: a[0])
def test_pyz_answers_as_the_installed_package(pyz, tmp_path, args):
    want = run([sys.executable, "-m", "gdrcheck", *args], {}, REPO)
    cache = tmp_path / "cache"
    for extra in ({"GDRCHECK_PYZ_CACHE": str(cache)}, {"GDRCHECK_PYZ_CACHE": str(cache)},
                  {"GDRCHECK_PYZ_NO_CACHE": "1"}):
        got = run([sys.executable, "-I", str(pyz), *args], extra, tmp_path)  # not the checkout: nothing from it
        assert (got.returncode, got.stdout) == (want.returncode, want.stdout), got.stderr
    unpacked = [p for p in cache.iterdir() if p.name.startswith("pyz-")]
    assert len(unpacked) == 1 and stat.S_IMODE(unpacked[0].stat().st_mode) == 0o700


def test_pyz_refuses_a_cache_others_can_write_and_runs_from_the_archive(pyz, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    planted = shared / "pyz-planted"
    got = run([sys.executable, "-I", str(pyz), "--version"], {"GDRCHECK_PYZ_CACHE": str(shared)}, tmp_path)
    assert got.returncode == 0 and got.stdout.startswith("gdrcheck ")
    assert sorted(p.name for p in shared.iterdir()) == [] and not planted.exists()


def test_pyz_holds_no_compiled_code_and_no_psutil(pyz):
    import zipfile

    names = zipfile.ZipFile(pyz).namelist()
    assert "__main__.py" in names and "gdrcheck/cli/entry.py" in names and "pynvml.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyc")) or n.startswith("psutil/")]


def test_ci_runs_the_readme_lines():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    lines = [ln.strip() for ln in readme.splitlines() if ln.startswith("    ") and ".venv" in ln]
    assert len(lines) == 2
    for line in lines:
        assert line in ci.splitlines(), line


def test_containerfile_builds_what_the_daemonset_runs():
    """The DaemonSet's image is built from contrib/k8s/Containerfile (no registry image is reachable from CI, so
    the file is held to the manifest instead of built): gdrcheck and bash on the PATH, a non-root default user,
    and the DaemonSet running it as root, at the package's version."""
    import gdrcheck

    cf = (REPO / "contrib" / "k8s" / "Containerfile").read_text()
    ds = (REPO / "contrib" / "k8s" / "gdrcheck-daemonset.yaml").read_text()
    stages = [ln for ln in cf.splitlines() if ln.startswith("FROM ")]
    assert len(stages) == 2 and all("python:3" in s and "slim" in s for s in stages)
    assert "COPY gdrcheck /src/gdrcheck" in cf
    assert "pip install --no-cache-dir --no-index --find-links /wheels gdrcheck" in cf
    assert "gdrcheck --version" in cf and "USER 65534:65534" in cf
    assert f"image: registry.example.com/gdrcheck:{gdrcheck.__version__}" in ds
    assert f"-t registry.example.com/gdrcheck:{gdrcheck.__version__} ." in cf
    assert 'command: ["/bin/bash", "-c"]' in ds and "runAsUser: 0" in ds
