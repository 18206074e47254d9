"""Files a setting names, read by root only as the user who named them could read them.

Root's run reads files that settings name: ``NCCL_CONF_FILE``, ``$HOME/.nccl.conf`` (``sudo -E`` keeps a
user's ``HOME``), and the ``NCCL_TOPO_FILE`` a settings file names. A user who writes such a setting, or
owns a link on the way to such a file, could make root read (and ``snapshot`` ship) a file only root may
read: ``NCCL_TOPO_FILE=/etc/shadow`` in ``~/.nccl.conf``, or ``~/.nccl.conf -> /etc/shadow``. On a live run
as root, such a file is read only where that user may read it (the permission bits of the file and of
each directory on the way, for that user and that user's groups; an access list is not consulted, so a
file an access list alone opens to that user is not read), and the very file that was judged is the one
read (device and inode compared). A file not read is as the run found it unreadable: the reason is in
``Source.why``, and nothing of it is copied into a snapshot.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.io.source import Source

MAX_HOPS = 40


def _walk(path: str) -> Optional[tuple[list, list, os.stat_result, str]]:
    """(owners of the links followed, the directories passed, the file's stat, its real path), or None."""
    todo = [c for c in path.split("/") if c not in ("", ".")][::-1]
    done: list = []
    links: list = []
    dirs = [os.stat("/")]
    hops = 0
    while todo:
        comp = todo.pop()
        if comp == "..":
            if done:
                done.pop()
            continue
        here = "/" + "/".join(done + [comp])
        st = os.lstat(here)
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > MAX_HOPS:
                return None
            links.append(st.st_uid)
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            todo.extend(c for c in target.split("/")[::-1] if c not in ("", "."))
            continue
        done.append(comp)
        if todo:
            dirs.append(st)
    real = "/" + "/".join(done)
    return links, dirs, os.stat(real, follow_symlinks=False), real


def _groups(uid: int) -> set:
    import pwd

    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return set()
    try:
        return set(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except OSError:
        return {pw.pw_gid}


def _allowed(uid: int, groups: set, st: os.stat_result, bit: int) -> bool:
    """``bit`` (4 read, 1 search) in the permission class ``uid`` falls in for ``st``."""
    if st.st_uid == uid:
        return bool(st.st_mode & (bit << 6))
    if st.st_gid in groups:
        return bool(st.st_mode & (bit << 3))
    return bool(st.st_mode & bit)


def setting_owner(src: Source, path: str, named_by: int = 0) -> int:
    """Whose file ``path`` is for what it names: ``named_by`` when not root, else the first user other
    than root owning a link on the way or the file itself; 0 where all are root's (or not a live root run)."""
    if not (src.live and os.geteuid() == 0) or named_by:
        return named_by
    try:
        walked = _walk(path)
    except OSError:
        return 0
    if walked is None:
        return 0
    links, _, st, _ = walked
    return next((u for u in links + [st.st_uid] if u != 0), 0)


def read_named(src: Source, path: str, limit: int, named_by: int = 0) -> Optional[str]:
    """The text of a file a setting names, or None. On a live run as root, where ``named_by`` (the user whose
    setting named it) or the owner of a link on the way is not root, only if that user could read it."""
    if not (src.live and os.geteuid() == 0) or not path.startswith("/"):
        return src.read_text(path, limit)
    try:
        walked = _walk(path)
    except OSError:
        return src.read_text(path, limit)  # missing or unreadable: the read says so, as for any file
    if walked is None:
        return src.read_text(path, limit)
    links, dirs, st, _ = walked
    uid = named_by or next((u for u in links if u != 0), 0)
    if not uid:
        return src.read_text(path, limit)
    groups = _groups(uid)
    if not (all(_allowed(uid, groups, d, 1) for d in dirs) and _allowed(uid, groups, st, 4)):
        src.refuse(path, f"not read: named by uid {uid}, who may not read it")
        return None
    return src.read_text_if_same(path, limit, (st.st_dev, st.st_ino))
