"""``gdrcheck snapshot``: everything the collectors read, as an archive ``--from`` replays.

The archive is a directory tree laid out like ``/`` (only the files gdrcheck
read, links kept as links) plus ``gdrcheck/``: ``manifest.json`` (format
version, tool version, host, time, what could not be read and why),
``commands.json`` (the output of every command run) and ``nvml.json`` (the
NVML answers). It is written to a temporary file beside the output and renamed
into place, so a reader never sees half an archive.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import tarfile
import time

from gdrcheck import __version__
from gdrcheck.io.redact import redact_file, redact_path
from gdrcheck.io.source import COMMANDS_FILE, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass

SNAPSHOT_FORMAT = "1.0"

def capture(redact: bool = False, progress=None, root: str = "/", deadline=None) -> tuple[Source, dict]:
    """Read the live machine once (or a tree laid out like one at ``root``), recording every read, within
    ``deadline`` (a :class:`gdrcheck.io.deadline.Deadline`, as every command's ``--timeout``); return the
    source and the manifest."""
    from gdrcheck.collectors.gather import gather

    src = Source(root, record=True)
    src.deadline = deadline
    t0 = time.time()
    snap = gather(src, want_driver=True, progress=progress)
    manifest = {
        "format": "gdrcheck-snapshot",
        "format_version": SNAPSHOT_FORMAT,
        "gdrcheck_version": __version__,
        "host": "redacted-host" if redact else snap.hostname,
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
        "seconds": round(time.time() - t0, 3),
        "uid": os.getuid() if hasattr(os, "getuid") else None,
        "redacted": redact,
        "collectors": [{"name": c.name, "status": c.status, "detail": c.detail, "hint": c.hint}
                       for c in snap.collectors],
        "unreadable": sorted({f"{p}: {why}" for p, why in src._errors.items() if why != "missing"})[:500],
    }
    if deadline is not None and deadline.missed:
        manifest["timed_out"] = {"seconds": deadline.seconds, "missed": list(deadline.missed)}
    src.recorded["/gdrcheck/env.json"] = ("f", json.dumps(captured_env(), indent=1, sort_keys=True).encode())
    return src, (manifest, snap.hostname)


def captured_env() -> dict:
    """What a replay needs of this process's environment: the NCCL_ settings, and the two home directories
    NCCL looks in for ``.nccl.conf`` (``$HOME`` from 2.30.3, the passwd entry's before), whose files the
    snapshot holds but whose place a replay could not otherwise know."""
    env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    if os.environ.get("HOME"):
        env["HOME"] = os.environ["HOME"]
    try:
        import pwd

        env["GDRCHECK_PW_DIR"] = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, AttributeError):
        pass
    return env


def write_archive(src: Source, manifest_host, out_path: str, redact: bool = False) -> int:
    """Write the recorded reads as a ``.tar.gz``; returns the number of members."""
    manifest, host = manifest_host
    entries = dict(src.recorded)
    entries[COMMANDS_FILE] = ("f", json.dumps(src.recorded_commands, indent=1, sort_keys=True).encode())
    entries["/gdrcheck/manifest.json"] = ("f", json.dumps(manifest, indent=1, sort_keys=True).encode())
    from gdrcheck.io.output import atomic_file

    count = 0
    # a snapshot describes the machine: it keeps mkstemp's owner-only mode
    with atomic_file(out_path, binary=True, prefix=".gdrcheck-snapshot.", mode=None) as raw:
        with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            dirs, written = set(), set()
            for path in sorted(entries):
                kind, val = entries[path]
                parts = (redact_path(path) if redact else path).strip("/").split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        tar.addfile(_info(d, tarfile.DIRTYPE))
                        count += 1
                name = "/".join(parts)
                if name in written:
                    continue  # two homes made one by --redact: the first stays
                written.add(name)
                if kind == "d":
                    if name not in dirs:
                        dirs.add(name)
                        tar.addfile(_info(name, tarfile.DIRTYPE))
                        count += 1
                elif kind == "l":
                    ti = _info(name, tarfile.SYMTYPE)
                    target = redact_path(str(val)) if redact else str(val)
                    if target.startswith("/"):
                        # keep links inside the archive: absolute targets become relative to the root
                        target = posixpath.relpath(target.lstrip("/") or ".", posixpath.dirname(name) or ".")
                    ti.linkname = target
                    tar.addfile(ti)
                    count += 1
                else:
                    data = val if isinstance(val, bytes) else str(val).encode()
                    if redact:
                        data = redact_file(path, data, host)
                    ti = _info(name, tarfile.REGTYPE)
                    ti.size = len(data)
                    tar.addfile(ti, io.BytesIO(data))
                    count += 1
    return count


def _info(name: str, kind: bytes) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    ti.mtime = 0
    return ti
