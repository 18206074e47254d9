"""``--output``, ``report -o`` and ``snapshot -o`` where another user can plant a link (``/tmp``, ``/var/tmp``).

The attack: a user plants ``/tmp/gdrcheck.json -> /etc/...`` (or a dangling link, a chain of links, a link
to a device or a directory) and waits for root's run. gdrcheck writes through a link only when the caller
owns it and it is not in a sticky or world-writable directory; everything else is refused in one line,
exit 2, and nothing is created or renamed outside the named file's own directory. Each case runs as root
and as ``nobody`` (a forked child that drops to that user), with the links owned by the other one. The
directory named ``shared`` plays ``/tmp`` (mode 1777), ``outside`` plays ``/etc`` (a place the caller may
write, so only gdrcheck's own rules stand between the link and the file); a FIFO stands for a device.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import tempfile

import pytest
from support.cli_util import assert_clean_error, call

from gdrcheck.errors import InputError
from gdrcheck.io.output import atomic_file, write_atomic

if os.geteuid() != 0:
    pytest.skip("links owned by another user are made as root (CI runs as root)", allow_module_level=True)
NOBODY = pwd.getpwnam("nobody")
CALLERS = {"root": (0, 0), "nobody": (NOBODY.pw_uid, NOBODY.pw_gid)}
OTHER = {"root": CALLERS["nobody"], "nobody": CALLERS["root"]}


@pytest.fixture
def place():
    """base/shared (1777), base/outside and base/mine (owned by the caller, set in each test)."""
    base = tempfile.mkdtemp(prefix="gdrcheck-links-")
    os.chmod(base, 0o755)
    dirs = {n: os.path.join(base, n) for n in ("shared", "outside", "mine")}
    for d in dirs.values():
        os.mkdir(d)
    os.chmod(dirs["shared"], 0o1777)
    yield dirs
    shutil.rmtree(base, ignore_errors=True)


def own(path, who):
    os.lchown(path, *who)


def link(target, path, who):
    os.symlink(target, path)
    own(path, who)


def as_caller(caller, fn):
    """``fn()`` in a child running as ``caller``: ("ok" | the InputError's message | "crash: ...")."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        try:
            os.close(r)
            uid, gid = CALLERS[caller]
            if uid:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
            try:
                fn()
                msg = "ok"
            except InputError as e:
                msg = str(e)
            os.write(w, msg.encode())
        except BaseException as e:  # noqa: BLE001 - report it to the parent
            os.write(w, f"crash: {e!r}".encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    os.waitpid(pid, 0)
    return msg


def write(path):
    return lambda: write_atomic(path, "new report\n")


def listing(d):
    return sorted(os.listdir(d))


@pytest.fixture(params=list(CALLERS))
def caller(request, place):
    os.chown(place["mine"], *CALLERS[request.param])
    os.chown(place["outside"], *CALLERS[request.param])
    return request.param


def victim(place, caller, name="passwd", text="root:x:0:0\n"):
    p = os.path.join(place["outside"], name)
    with open(p, "w") as f:
        f.write(text)
    own(p, CALLERS[caller])
    return p


# -- planted links: refused, nothing written anywhere ---------------------------------------------------------


def test_a_planted_link_to_a_file_outside_is_refused(place, caller):
    target = victim(place, caller)
    planted = os.path.join(place["shared"], "gdrcheck.json")
    link(target, planted, OTHER[caller])
    msg = as_caller(caller, write(planted))
    assert "symbolic link owned by uid" in msg and "name the file itself" in msg, msg
    assert open(target).read() == "root:x:0:0\n" and os.path.islink(planted)
    assert listing(place["outside"]) == ["passwd"] and listing(place["shared"]) == ["gdrcheck.json"]


def test_a_planted_dangling_link_creates_nothing(place, caller):
    planted = os.path.join(place["shared"], "gdrcheck.json")
    link(os.path.join(place["outside"], "cron.d-job"), planted, OTHER[caller])
    msg = as_caller(caller, write(planted))
    assert "symbolic link owned by uid" in msg, msg
    assert listing(place["outside"]) == [] and listing(place["shared"]) == ["gdrcheck.json"]


def test_a_planted_link_to_a_device_writes_nothing_into_it(place, caller):
    fifo = os.path.join(place["outside"], "loop0")
    os.mkfifo(fifo)
    own(fifo, CALLERS[caller])
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer would not block: the test cannot hang
    try:
        planted = os.path.join(place["shared"], "gdrcheck.prom")
        link(fifo, planted, OTHER[caller])
        msg = as_caller(caller, write(planted))
        assert "symbolic link owned by uid" in msg, msg
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_chain_of_planted_links_is_refused(place, caller):
    target = victim(place, caller)
    middle = os.path.join(place["shared"], "middle")
    link(target, middle, OTHER[caller])
    planted = os.path.join(place["shared"], "gdrcheck.json")
    link(middle, planted, OTHER[caller])
    assert "symbolic link owned by uid" in as_caller(caller, write(planted))
    assert open(target).read() == "root:x:0:0\n"


def test_the_callers_own_link_leading_into_a_planted_one_is_refused(place, caller):
    """Each link of a chain is judged: the caller's own link, then another user's in the shared directory."""
    target = victim(place, caller)
    planted = os.path.join(place["shared"], "planted")
    link(target, planted, OTHER[caller])
    mine = os.path.join(place["mine"], "gdrcheck.json")
    link(planted, mine, CALLERS[caller])
    msg = as_caller(caller, write(mine))
    assert f"leads through {planted}" in msg, msg
    assert open(target).read() == "root:x:0:0\n"


def test_a_planted_link_to_a_directory_is_refused(place, caller):
    planted = os.path.join(place["shared"], "gdrcheck.json")
    link(place["outside"], planted, OTHER[caller])
    assert "symbolic link owned by uid" in as_caller(caller, write(planted))
    assert listing(place["outside"]) == []


def test_the_callers_own_link_in_the_shared_directory_is_refused(place, caller):
    target = victim(place, caller)
    mine = os.path.join(place["shared"], "gdrcheck.json")
    link(target, mine, CALLERS[caller])
    msg = as_caller(caller, write(mine))
    assert "a directory others may write in" in msg, msg
    assert open(target).read() == "root:x:0:0\n"


def test_a_link_planted_after_the_check_is_replaced_not_followed(place, caller):
    """Between the look at the name and the rename, a link appears there: the rename replaces the link
    itself (the temporary file was made in the named directory), and the file it names is untouched."""
    target = victim(place, caller)
    name = os.path.join(place["shared"], "gdrcheck.json")

    def racing():
        with atomic_file(name) as f:
            f.write("new report\n")
            pid = os.fork()
            if pid == 0:
                try:
                    os.setuid(OTHER[caller][0])
                    os.symlink(target, name)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            assert os.path.islink(name)

    if caller == "nobody":
        pytest.skip("nobody cannot fork a process that becomes root")
    assert as_caller(caller, racing) == "ok"
    assert not os.path.islink(name) and open(name).read() == "new report\n"
    assert open(target).read() == "root:x:0:0\n"


# -- what stays as it was ---------------------------------------------------------------------------------------


def test_the_callers_own_link_elsewhere_replaces_the_file_it_names(place, caller):
    target = victim(place, caller)
    os.chmod(target, 0o600)
    mine = os.path.join(place["mine"], "gdrcheck.json")
    link(target, mine, CALLERS[caller])
    assert as_caller(caller, write(mine)) == "ok"
    assert os.path.islink(mine) and open(target).read() == "new report\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and os.stat(target).st_uid == CALLERS[caller][0]
    assert listing(place["outside"]) == ["passwd"] and listing(place["mine"]) == ["gdrcheck.json"]


def test_the_callers_own_link_to_a_fifo_is_refused(place, caller):
    """A device or FIFO is written in place only when it is the named path itself."""
    fifo = os.path.join(place["outside"], "fifo")
    os.mkfifo(fifo)
    mine = os.path.join(place["mine"], "out")
    link(fifo, mine, CALLERS[caller])
    assert "not a regular file" in as_caller(caller, write(mine))


def test_a_fifo_named_itself_is_written_in_place(place, caller):
    fifo = os.path.join(place["mine"], "fifo")
    os.mkfifo(fifo)
    own(fifo, CALLERS[caller])
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert as_caller(caller, write(fifo)) == "ok"
        assert os.read(reader, 100) == b"new report\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_new_file_in_the_shared_directory_is_a_regular_file_of_the_caller(place, caller):
    name = os.path.join(place["shared"], "gdrcheck.json")
    assert as_caller(caller, write(name)) == "ok"
    st = os.lstat(name)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == CALLERS[caller][0]
    assert listing(place["shared"]) == ["gdrcheck.json"]


def test_another_users_file_in_the_shared_directory(place, caller):
    """Root replaces it (a rename, nothing written into that user's file) and does not give the new one to
    that user; anyone else cannot (the sticky bit), and says so in one line."""
    name = os.path.join(place["shared"], "gdrcheck.json")
    with open(name, "w") as f:
        f.write("theirs\n")
    own(name, OTHER[caller])
    msg = as_caller(caller, write(name))
    if caller == "root":
        assert msg == "ok" and os.stat(name).st_uid == 0 and open(name).read() == "new report\n"
    else:
        assert msg.startswith(f"{name}: cannot write") and open(name).read() == "theirs\n"
    assert listing(place["shared"]) == ["gdrcheck.json"]


def test_a_directory_is_refused(place, caller):
    assert "is a directory" in as_caller(caller, write(place["mine"]))


# -- the commands: one line, exit 2 ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    from builders.scenarios import scenario

    return scenario(tmp_path_factory.mktemp("tree"), "healthy-gdr-node")


@pytest.mark.parametrize("args", [("pairs", "--json", "--output"), ("check", "--format", "prometheus", "-o"),
                                  ("report", "-o"), ("snapshot", "-o")])
def test_each_writing_command_refuses_a_planted_link(place, tree, args):
    target = victim(place, "root")
    planted = os.path.join(place["shared"], "gdrcheck.out")
    link(target, planted, CALLERS["nobody"])
    argv = [*args, planted] + ([] if args[0] == "snapshot" else ["--from", tree])
    p = call(*argv, env={"GDRCHECK_TOOL_PATH": "/nonexistent"})
    assert_clean_error(p)
    assert "symbolic link owned by uid" in p.stderr
    assert open(target).read() == "root:x:0:0\n"
    with contextlib.suppress(FileNotFoundError):
        assert listing(place["outside"]) == ["passwd"]


def test_docs_and_contrib_never_write_into_a_world_writable_directory():
    """The playbooks, units, scripts and docs name a root-owned place for gdrcheck's output."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [p for p in (root / "contrib").rglob("*") if p.is_file()] + [root / "README.md",
                                                                         *(root / "docs").glob("*.md")]
    bad = re.compile(r"(?:--output[ =]|-o ?|gdrcheck_remote_report.*default\(')['\"]?(?:/tmp/|/var/tmp/|/dev/shm/)")
    hits = [f"{p.relative_to(root)}: {line.strip()}" for p in files
            for line in p.read_text(errors="replace").splitlines() if bad.search(line)]
    assert hits == []


# -- a link among the directories of the path: judged as a final link is -------------------------------------


def test_another_users_link_among_the_directories_is_refused(place, caller):
    """A user's ``pub/d -> /etc/cron.d``: root's ``--output pub/d/job`` wrote into /etc/cron.d."""
    pub = os.path.join(place["mine"], "pub")
    os.mkdir(pub)
    os.chown(pub, *OTHER[caller])
    link(place["outside"], os.path.join(pub, "d"), OTHER[caller])
    msg = as_caller(caller, write(os.path.join(pub, "d", "job")))
    if caller == "nobody":  # root's link is followed for any caller (/var/run -> /run)
        assert msg == "ok" and listing(place["outside"]) == ["job"]
        return
    assert f"leads through {pub}/d, a symbolic link owned by uid" in msg, msg
    assert listing(place["outside"]) == []


def test_a_planted_link_among_the_directories_in_the_shared_directory_is_refused(place, caller):
    link(place["outside"], os.path.join(place["shared"], "d"), CALLERS[caller])
    msg = as_caller(caller, write(os.path.join(place["shared"], "d", "job")))
    assert "a directory others may write in" in msg, msg
    assert listing(place["outside"]) == []


def test_the_callers_own_link_among_the_directories_is_followed(place, caller):
    link(place["outside"], os.path.join(place["mine"], "d"), CALLERS[caller])
    assert as_caller(caller, write(os.path.join(place["mine"], "d", "..", "d", "job"))) == "ok"
    assert listing(place["outside"]) == ["job"] and os.path.islink(os.path.join(place["mine"], "d"))


def test_a_final_links_target_through_another_users_directory_link_is_refused(place, caller):
    """The caller's own final link names a file behind another user's directory link: refused too."""
    pub = os.path.join(place["mine"], "pub")
    os.mkdir(pub)
    link(place["outside"], os.path.join(pub, "d"), OTHER[caller])
    mine = os.path.join(place["mine"], "out")
    link(os.path.join(pub, "d", "job"), mine, CALLERS[caller])
    msg = as_caller(caller, write(mine))
    if caller == "nobody":
        assert msg == "ok"
        return
    assert "a symbolic link owned by uid" in msg, msg
    assert listing(place["outside"]) == []
