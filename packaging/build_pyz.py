"""Build ``gdrcheck.pyz``: one file that runs with a node's own ``python3`` (3.9 or newer) and nothing installed.

    python3 packaging/build_pyz.py [-o dist/gdrcheck.pyz] [--wheels DIR]

It holds gdrcheck and its pure-Python dependencies (click, rich and what rich needs, nvidia-ml-py, defusedxml),
fetched by pip for Python 3.9 (the oldest gdrcheck supports), so one file serves every node. ``psutil`` is compiled
and stays out: without it ``bar1`` names no processes, and nothing else changes. NVML is the node driver's
``libnvidia-ml.so.1``, as for the installed package. Made with the standard ``zipapp`` module; the archive's
members are in name order with a fixed time stamp, so the same sources and wheels give the same bytes.

``--wheels DIR`` installs from wheels already downloaded there (no index), for a machine with no route to one;
``--from-installed`` copies the dependencies this interpreter has installed instead (the tests build it so, offline).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# gdrcheck's dependencies less psutil, at versions that still install on Python 3.9 (pip resolves them for 3.9:
# click 8.1, markdown-it-py 3, typing_extensions for rich below 3.11).
# pip is asked for Python 3.9, but an index that does not publish Requires-Python lets newer releases through:
# the releases that dropped 3.9 are ruled out here too (click 8.2 and markdown-it-py 4 use `match`), and
# check_grammar() refuses the build if anything inside still needs a newer Python.
DEPENDENCIES = ["click>=8.1,<8.2", "rich>=13", "markdown-it-py<4", "nvidia-ml-py>=12.535.108", "defusedxml>=0.7"]
# the import names those install, for --from-installed
IMPORTS = ["click", "rich", "markdown_it", "mdurl", "pygments", "pynvml", "defusedxml"]
STAMP = (2020, 1, 1, 0, 0, 0)
MAIN = '''\
\"\"\"gdrcheck as one file: python3 -I gdrcheck.pyz COMMAND ... (see gdrcheck --help).

It runs isolated: started without ``-I``, it starts itself again with it (the same interpreter, the same
arguments), so no user site directory (``~/.local/lib/python3.X/site-packages``, which ``sudo -E`` keeps for
root) and no ``PYTHONPATH`` can put a module of the caller's before gdrcheck's own imports. A ``.pth`` file
there runs before this file does: ``-I`` on the command line is what keeps that out.

The first run unpacks the archive into a private cache directory (the caller's own ~/.cache/gdrcheck, mode 0700,
checked to be the caller's, and every directory above it root's or the caller's and writable by no one else), so
later runs import compiled modules from there, as an installed package does; where no such directory can be had,
the modules are imported from the archive itself (slower, the same answers).\"\"\"
import os
import sys

BUILD = "@BUILD@"


def _isolated(archive):
    \"\"\"This interpreter again with ``-I`` when it was started without; where it cannot be (no executable
    known), the user site and PYTHONPATH directories are taken off the import path here.\"\"\"
    if sys.flags.isolated:
        return
    if sys.executable:
        try:
            os.execv(sys.executable, [sys.executable, "-I", archive] + sys.argv[1:])
        except OSError:
            pass
    import site

    drop = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    drop.add(os.path.abspath(site.getusersitepackages()))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p) not in drop]


def _private_dir(path):
    st = os.lstat(path)
    return os.path.isdir(path) and not os.path.islink(path) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _trusted_above(path):
    \"\"\"Every directory above ``path`` up to / is root's or the caller's, and no one else may rename what is
    in it (not writable by group or others, or sticky): nothing can swap the cache between check and import.\"\"\"
    cur = os.path.dirname(path)
    while True:
        st = os.stat(cur)
        if st.st_uid not in (0, os.geteuid()) or (st.st_mode & 0o022 and not st.st_mode & 0o1000):
            return False
        if cur == os.path.dirname(cur):
            return True
        cur = os.path.dirname(cur)


def _unpacked(archive):
    import pwd
    import shutil
    import tempfile
    import zipfile

    home = pwd.getpwuid(os.geteuid()).pw_dir  # the caller's own home, never $HOME (sudo may keep another user's)
    base = os.environ.get("GDRCHECK_PYZ_CACHE") or os.path.join(home, ".cache", "gdrcheck")
    base = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(base))), os.path.basename(base))
    final = os.path.join(base, "pyz-" + BUILD)
    if os.path.isdir(final) and _private_dir(final) and _private_dir(base) and _trusted_above(base):
        return final
    os.makedirs(base, mode=0o700, exist_ok=True)
    if not _private_dir(base) or not _trusted_above(base):
        return None
    tmp = tempfile.mkdtemp(dir=base)
    try:
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp)
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return final if os.path.isdir(final) and _private_dir(final) else None
    return final


if sys.version_info < (3, 9):
    sys.stderr.write("gdrcheck: error: needs Python 3.9 or newer, this is %d.%d\\n" % sys.version_info[:2])
    sys.exit(2)
_archive = os.path.dirname(os.path.abspath(__file__))
_isolated(_archive)
try:
    _dir = _unpacked(_archive) if os.environ.get("GDRCHECK_PYZ_NO_CACHE") != "1" else None
except (OSError, KeyError, ValueError):
    _dir = None
if _dir is not None:
    sys.path[:] = [_dir] + [p for p in sys.path if os.path.abspath(p) != _archive]
from gdrcheck.cli.entry import main  # noqa: E402

main()
'''


def copy_installed(dest: Path) -> None:
    import importlib

    dest.mkdir(parents=True)
    for name in IMPORTS:
        mod = importlib.import_module(name)
        src = Path(mod.__file__)
        if src.name == "__init__.py":
            shutil.copytree(src.parent, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copyfile(src, dest / src.name)


def stage(dest: Path, wheels: str | None, installed: bool = False) -> None:
    if installed:
        copy_installed(dest)
    else:
        pip_install(dest, wheels)
    for junk in [*dest.glob("*.dist-info"), dest / "bin", *dest.glob("**/__pycache__"), dest / "example.py"]:
        if junk.is_dir():
            shutil.rmtree(junk)
        elif junk.is_file():
            junk.unlink()
    src = REPO / "gdrcheck"
    for f in sorted(src.rglob("*")):
        if f.is_file() and (f.suffix in (".py", ".json") or f.name == "py.typed") and "__pycache__" not in f.parts:
            out = dest / "gdrcheck" / f.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, out)
    digest = hashlib.sha256()
    for f in sorted(p for p in dest.rglob("*") if p.is_file()):
        digest.update(f.relative_to(dest).as_posix().encode() + b"\0" + f.read_bytes())
    (dest / "__main__.py").write_text(MAIN.replace("@BUILD@", digest.hexdigest()[:16]))


def check_grammar(dest: Path) -> None:
    """Every module parses as Python 3.9 (``match`` and other newer syntax would fail on a node's 3.9)."""
    import ast

    bad = []
    for f in sorted(dest.rglob("*.py")):
        try:
            ast.parse(f.read_bytes(), str(f), feature_version=(3, 9))
        except SyntaxError as e:
            bad.append(f"{f.relative_to(dest)}:{e.lineno}: {e.msg}")
    if bad:
        raise SystemExit("build_pyz: not Python 3.9 syntax:\n  " + "\n  ".join(bad))


def pip_install(dest: Path, wheels: str | None) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
           "--target", str(dest), "--python-version", "3.9", "--implementation", "py", "--only-binary=:all:",
           *DEPENDENCIES]
    if wheels:
        cmd[4:4] = ["--no-index", "--find-links", wheels]
    subprocess.run(cmd, check=True)


def pack(src: Path, target: Path) -> None:
    part = target.with_name(target.name + ".part")
    with open(part, "wb") as out:
        out.write(b"#!/usr/bin/env python3\n")  # as zipapp writes it: the archive's offsets count it
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(p for p in src.rglob("*") if p.is_file()):
                info = zipfile.ZipInfo(f.relative_to(src).as_posix(), STAMP)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                z.writestr(info, f.read_bytes())
    os.chmod(part, 0o755)
    os.replace(part, target)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(REPO / "dist" / "gdrcheck.pyz"))
    ap.add_argument("--wheels", help="install the dependencies from the wheels in this directory (no index)")
    ap.add_argument("--from-installed", action="store_true", help="copy the dependencies this Python has installed")
    a = ap.parse_args()
    target = Path(a.output).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        stage(Path(d) / "app", a.wheels, a.from_installed)
        if not a.from_installed:  # what this Python has installed may be newer than 3.9: a test build only
            check_grammar(Path(d) / "app")
        pack(Path(d) / "app", target)
    print(f"{target}: {target.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
