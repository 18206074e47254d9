"""An archive unpacked once for the whole test run, every pytest-xdist worker included, for tests that only
read the tree: the first worker to ask unpacks it under a lock, the others wait for it and read the same tree."""

from __future__ import annotations

import fcntl
import os
import re
import tarfile
from pathlib import Path


def _run_dir(tmp_path_factory) -> Path:
    """The run's own temporary folder: the workers' common parent under pytest-xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def unpacked_once(archive: Path, tmp_path_factory) -> Path:
    """``archive`` unpacked (the ``data`` filter where Python has it), once for the run: its root, the folder
    holding ``sys`` (the archive's one top folder where ``sys`` is not at its top). Read it, never change it."""
    archive = Path(archive)
    key = re.sub(r"[^A-Za-z0-9._-]", "_", f"{archive.parent.name}-{archive.name}")
    shared = _run_dir(tmp_path_factory) / "unpacked-once"
    shared.mkdir(exist_ok=True)
    dest, done = shared / key, shared / f"{key}.done"
    with open(shared / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            dest.mkdir()
            with tarfile.open(archive) as tar:
                tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
            done.touch()
    if (dest / "sys").is_dir():
        return dest
    (top,) = [p for p in dest.iterdir() if p.is_dir()]
    return top
