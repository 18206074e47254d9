"""What a recording :class:`gdrcheck.io.source.Source` kept, laid out as a tree a replay reads (what a
snapshot archive unpacks to)."""

from __future__ import annotations

import os

from gdrcheck.io.source import Source


def replay_tree(src: Source, dest) -> Source:
    """Write ``src.recorded`` under ``dest`` (directories, links, files) and return a source rooted there."""
    for path, (kind, val) in src.recorded.items():
        p = dest / path.lstrip("/")
        if kind == "d":
            p.mkdir(parents=True, exist_ok=True)
        elif kind == "l":
            p.parent.mkdir(parents=True, exist_ok=True)
            if not p.is_symlink():
                os.symlink(str(val), p)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            if not p.exists():
                p.write_bytes(val if isinstance(val, bytes) else str(val).encode())
    return Source(str(dest), live=False)
