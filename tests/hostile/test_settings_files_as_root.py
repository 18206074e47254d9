"""Files a user's NCCL settings name, when root runs with that user's ``HOME`` (``sudo -E``).

The attack: ``~/.nccl.conf`` says ``NCCL_TOPO_FILE=/etc/shadow`` (or is itself a link to it, or the
user's environment says ``NCCL_CONF_FILE=/etc/shadow``); root's ``snapshot --redact`` read the file and
shipped it in the archive. Such a file is now read only where that user could read it. ``secret`` plays
``/etc/shadow`` (root's, 0600), ``public`` a file anyone may read.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from support.cli_util import run

if os.geteuid() != 0:
    pytest.skip("a user's home and root's secret are made as root (CI runs as root)", allow_module_level=True)
NOBODY = pwd.getpwnam("nobody")
SECRET = "root:$6$verysecrethash:19000:0:99999:7:::\n"


@pytest.fixture
def place():
    """base (0755, in /tmp: a user can reach it) holding home (the user's), secret and public (root's)."""
    base = Path(tempfile.mkdtemp(prefix="gdrcheck-settings-"))
    os.chmod(base, 0o755)
    yield _made(base)
    shutil.rmtree(base, ignore_errors=True)


def _made(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, NOBODY.pw_uid, NOBODY.pw_gid)
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    public = tmp_path / "public.xml"
    public.write_text("<system version='1'></system>\n")
    public.chmod(0o644)
    return home, secret, public


def users_file(path, text=None, link_to=None):
    if link_to:
        os.symlink(link_to, path)
    else:
        path.write_text(text)
    os.lchown(path, NOBODY.pw_uid, NOBODY.pw_gid)


def snapshot(tmp_path, home, **env):
    out = tmp_path / "node.tar.gz"
    p = run("snapshot", "--redact", "-o", out, env={"HOME": str(home), "GDRCHECK_TOOL_PATH": "/nonexistent", **env},
            timeout=300)
    assert p.returncode == 0, p.stderr  # a snapshot with every answer (no tool to wait for) exits 0
    with tarfile.open(out) as t:
        names = t.getnames()
        text = b"".join(t.extractfile(m).read() for m in t.getmembers() if m.isfile())
    return names, text


def test_a_topo_file_the_users_conf_names_is_not_copied(tmp_path, place):
    home, secret, public = place
    users_file(home / ".nccl.conf", f"NCCL_TOPO_FILE={secret}\n")
    names, text = snapshot(tmp_path, home)
    assert b"verysecrethash" not in text
    assert not [n for n in names if n.endswith(str(secret).lstrip("/"))]


def test_a_users_conf_that_is_a_link_to_a_root_file_is_not_copied(tmp_path, place):
    home, secret, _ = place
    users_file(home / ".nccl.conf", link_to=str(secret))
    _, text = snapshot(tmp_path, home)
    assert b"verysecrethash" not in text


def test_nccl_conf_file_in_a_users_environment_is_not_copied(tmp_path, place):
    home, secret, _ = place
    _, text = snapshot(tmp_path, home, NCCL_CONF_FILE=str(secret))
    assert b"verysecrethash" not in text


def test_a_file_the_user_may_read_is_still_read(tmp_path, place):
    home, _, public = place
    users_file(home / ".nccl.conf", f"NCCL_TOPO_FILE={public}\n")
    names, _ = snapshot(tmp_path, home)
    assert [n for n in names if n.endswith(str(public).lstrip("/"))], names
