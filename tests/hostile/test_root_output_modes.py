"""What root's ``--output`` leaves behind where a user prepared the name (issue: local root through --output).

The attack: in a sticky, world-writable directory (``/tmp``), a user creates the output's name with mode
4777 and waits; root's run replaced it with a root-owned file that kept the mode (``-rwsrwxrwx root``), which
the user then filled through ``mmap`` and ran as euid 0. A file root makes is root's own now: no set-id bit,
no write by group or others, whatever was there before; every writing command alike.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import tempfile

import pytest
from support.cli_util import run

from gdrcheck.io.output import write_atomic

if os.geteuid() != 0:
    pytest.skip("a file of another user is made as root (CI runs as root)", allow_module_level=True)
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def shared():
    base = tempfile.mkdtemp(prefix="gdrcheck-modes-")
    os.chmod(base, 0o755)
    d = os.path.join(base, "tmp")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(base, ignore_errors=True)


def planted(d, name="g.prom", mode=0o4777, who=NOBODY):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\n")
    os.chown(p, who.pw_uid, who.pw_gid)
    os.chmod(p, mode)
    return p


def assert_roots_own(p, allowed=(0o644, 0o600)):
    st = os.lstat(p)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, (st.st_uid, oct(st.st_mode))
    assert stat.S_IMODE(st.st_mode) in allowed, oct(st.st_mode)


@pytest.mark.parametrize("mode", [0o4777, 0o2777, 0o6755, 0o777, 0o666])
def test_a_users_file_in_a_sticky_directory_becomes_roots_own_0644(shared, mode):
    p = planted(shared, mode=mode)
    write_atomic(p, "new\n")
    assert_roots_own(p)
    assert open(p).read() == "new\n"


def test_roots_own_file_loses_set_id_and_shared_write_bits(shared):
    p = planted(shared, mode=0o4777, who=pwd.getpwuid(0))
    write_atomic(p, "new\n")
    assert_roots_own(p, allowed=(0o755,))


def test_a_new_file_under_umask_zero_is_not_world_writable(shared):
    old = os.umask(0)
    try:
        p = os.path.join(shared, "fresh.prom")
        write_atomic(p, "new\n")
    finally:
        os.umask(old)
    assert_roots_own(p, allowed=(0o644,))


def test_a_users_own_file_in_their_own_directory_is_given_back_without_set_id(tmp_path):
    d = tmp_path / "home"
    d.mkdir()
    os.chown(d, NOBODY.pw_uid, NOBODY.pw_gid)
    p = planted(str(d), mode=0o4750)
    write_atomic(p, "new\n")
    st = os.lstat(p)
    assert st.st_uid == NOBODY.pw_uid and stat.S_IMODE(st.st_mode) == 0o750


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    from builders.scenarios import scenario

    return scenario(tmp_path_factory.mktemp("tree"), "healthy-gdr-node")


@pytest.fixture(scope="module")
def report(tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "node.json"
    p = run("check", "--format", "json", "--from", tree, "-o", out, env={"GDRCHECK_TOOL_PATH": "/nonexistent"})
    assert p.returncode == 0, p.stderr  # the healthy node passes
    json.loads(out.read_text())
    return out


WRITERS = [("pairs", "--json", "--output"), ("topology", "--json", "--output"), ("bar1", "--output"),
           ("fingerprint", "--output"), ("check", "--format", "prometheus", "--output"), ("report", "-o"),
           ("fleet", "summarize", "-o"), ("snapshot", "-o")]


@pytest.mark.parametrize("args", WRITERS, ids=lambda a: " ".join(a[:2]))
def test_every_writer_gives_root_a_file_of_its_own(shared, tree, report, args):
    p = planted(shared)
    if args[0] == "fleet":
        argv = [*args, p, str(report)]
    elif args[0] == "snapshot":
        argv = [*args, p]
    else:
        argv = [*args, p, "--from", tree]
    r = run(*argv, env={"GDRCHECK_TOOL_PATH": "/nonexistent"}, timeout=300)
    # the healthy node passes, so does a fleet of its one report; the live snapshot's tools are absent, none hangs
    assert r.returncode == 0, r.stderr
    assert_roots_own(p)
