"""An archive unpacked, or a tree built, once for the whole test run, every pytest-xdist worker included, for
tests that only read the tree: the first worker to ask makes it under a lock, the others wait for it and read the
same tree."""

from __future__ import annotations

import fcntl
import os
import re
import tarfile
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def _run_dir(tmp_path_factory) -> Path:
    """The run's own temporary folder: the workers' common parent under pytest-xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(name: str, make: Callable[[Path], object], tmp_path_factory) -> Path:
    """The folder ``make(folder)`` fills, made once for the run under the name ``name``."""
    key = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    shared = _run_dir(tmp_path_factory) / "made-once"
    shared.mkdir(exist_ok=True)
    dest, done = shared / key, shared / f"{key}.done"
    with open(shared / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            make(dest)
            done.touch()
    return dest


def _extract(archive: Path, dest: Path) -> None:
    dest.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))


def unpacked_once(archive: Path, tmp_path_factory) -> Path:
    """``archive`` unpacked (the ``data`` filter where Python has it), once for the run: its root, the folder
    holding ``sys`` (the archive's one top folder where ``sys`` is not at its top). Read it, never change it."""
    archive = Path(archive)
    dest = made_once(f"{archive.parent.name}-{archive.name}", lambda d: _extract(archive, d), tmp_path_factory)
    if (dest / "sys").is_dir():
        return dest
    (top,) = [p for p in dest.iterdir() if p.is_dir()]
    return top
