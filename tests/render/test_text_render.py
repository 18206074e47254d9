"""Text that survives terminals and logs (issue 14): ``pairs``, ``topology --all`` and ``bar1`` at
60, 80 and 200 columns, piped and on a pseudo-terminal, on real inputs and on the scenario
``bus-ab-cd-addresses``; then the plain-error cases (closed pipe, ``report -o -``, a gzip that is
not a tar, conflicting formats, ``--nccl-version``) and names a megabyte long.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from support.cli_util import ROOT, assert_clean_error, call, run
from support.facts_once import facts_read_once

from builders.sysfs_tree import SysfsTree
from gdrcheck.status import exit_status

FIXTURES = ROOT / "fixtures"
DRIVER = Path(__file__).resolve().parents[1] / "support" / "render_driver.py"
REAL = {
    "stelline-asus": "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt",
    "stelline-puget": "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt",
    "azure-ndv5": "azure-ndv5/nccl-topo.xml",
    "rccl-mi300x": "rccl-mi300x-8p-8nic/nccl-topo.xml",
    "hwloc-dgx2h": "hwloc-nvidia-dgx2h/hwloc.xml",
}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F]")
MARKED_NAME = "NVIDIA Corporation GH100 [bold red]H100[/] :ok: :cd:"
# "*": the expected class of an undecided pair; "-": a pair NCCL (cuFile) would not use
CELL = re.compile(r"X|[A-Z0-9]+(?:/[A-Z0-9]+)*(?:\*?[~!?]?|-)|\?|\d+")
MATRIX_HEAD = re.compile(r"^ +(?:(?:GPU|NIC|NVMe)\d+ +)+NUMA$")
BAR1_HEAD = re.compile(r"^GPU +address +BAR1")
BAR1_ROW = re.compile(r"^GPU\S* +[0-9a-f]{4}:[0-9a-f]{2}:")


def bus_ab_cd_addresses(root: Path) -> Path:
    """A node whose devices sit on buses ab and cd (rich once read ':ab:' and ':cd:' as emoji codes),
    with a host name and a device name that look like rich markup."""
    t = SysfsTree(root)
    t.add_root(0, 0xAB, numa=0)
    t.add_root(0, 0xCD, numa=1)
    t.add("0000:ab:00.0", root=(0, 0xAB), driver="nvidia")
    t.add("0000:ab:00.1", root=(0, 0xAB), cls=0x020700, vendor=0x15B3, device=0x1021, driver="mlx5_core",
          netdevs=["ibp171s0f1"], rdma=["mlx5_0"])
    t.add("0000:cd:00.0", root=(0, 0xCD), driver="nvidia")
    t.add("0000:cd:00.1", root=(0, 0xCD), cls=0x010802, vendor=0x144D, device=0xA80A, driver="nvme",
          nvme=["nvme0"])
    t.write()
    (root / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/kernel/hostname").write_text("node:ab:cd[bold]\n")
    (root / "gdrcheck").mkdir(exist_ok=True)
    (root / "gdrcheck/names.json").write_text(json.dumps({"0000:ab:00.0": MARKED_NAME}))
    return root


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    out = {"h200-x4-vm": FIXTURES / "h200-x4-vm" / "snapshot.tar.gz",
           "bus-ab-cd-addresses": bus_ab_cd_addresses(tmp_path_factory.mktemp("scenario") / "bus-ab-cd-addresses")}
    shared = ROOT.parent / "shared" / "realworld"
    if shared.is_dir():
        out.update({k: shared / v for k, v in REAL.items()})
    return out


def _pty_run(args, env) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
    p = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the child has closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    p.wait(timeout=120)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def _renderings(path: Path, tty: bool):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_") and k not in ("COLUMNS", "NO_COLOR")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    args = [sys.executable, str(DRIVER), str(path)]
    if tty:
        text = _pty_run(args, env)
    else:
        text = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, check=False).stdout
    out = {}
    for m in re.finditer(r"@@render (\S+) (\d+) (\d)@@\n(.*?)@@exit (\S+)@@\n", text, re.DOTALL):
        out[(m.group(1), int(m.group(2)), m.group(3) == "1")] = m.group(4)
    assert len(out) == (18 if tty else 9), text[-2000:]
    return out


def _facts(path: Path):
    docs = {}
    with facts_read_once():
        for cmd in ("pairs", "topology", "bar1"):
            p = call(cmd, "--json", "--from", path)
            docs[cmd] = json.loads(p.stdout)
            # pairs and bar1: the status their document says; topology: pass
            want = 0 if cmd == "topology" else exit_status(docs[cmd]["status"])
            assert p.returncode == want, (cmd, p.returncode, p.stderr)
    return docs


def _matrices(lines):
    """(header, rows) of every matrix block in a ``pairs`` text."""
    blocks = []
    for i, line in enumerate(lines):
        if MATRIX_HEAD.match(line):
            rows = []
            for row in lines[i + 1:]:
                if not row.strip():
                    break
                rows.append(row)
            blocks.append((line, rows))
    return blocks


def _flat(text: str) -> str:
    return " ".join(text.split())


def _check(name, cmd, width, text, docs):
    lines = text.split("\n")
    flat = _flat(text)
    where = f"{name} {cmd} COLUMNS={width}"
    assert not EMOJI.search(text), (where, EMOJI.search(text).group(0))
    assert "\u2026" not in text, where  # nothing cut with an ellipsis
    for line in lines:
        longest = max((len(w) for w in line.split()), default=0)
        assert len(line) <= width or longest > width // 2, (where, line)
    if cmd == "pairs":
        doc = docs["pairs"]
        for d in doc["devices"]:
            if d["kind"] in ("gpu", "nic", "nvme"):
                assert re.search(rf"(?<![0-9a-f:]){re.escape(d['bdf'])}(?![0-9a-f.])", flat), (where, d["bdf"])
        blocks = _matrices(lines)
        kinds = {d["kind"] for d in doc["devices"]}
        gpus = sum(1 for d in doc["devices"] if d["kind"] == "gpu")
        if gpus >= 2 or (gpus and kinds & {"nic", "nvme"}):
            assert blocks, where
        for head, rows in blocks:
            assert len(head) <= width, (where, head)
            cols = head.split()
            assert len(rows) == gpus, (where, head, rows)
            for row in rows:
                assert len(row) <= width, (where, row)
                cells = row.split()
                assert len(cells) == len(cols) + 1, (where, head, row)  # no two cells glued
                assert all(CELL.fullmatch(c) for c in cells[1:]), (where, row)
    elif cmd == "topology":
        for d in docs["topology"]["devices"]:
            if not d["bdf"].startswith("ffff:"):
                assert d["bdf"] in flat, (where, d["bdf"])
    else:
        gpus = docs["bar1"].get("gpus") or []
        rows = [ln for ln in lines if BAR1_ROW.match(ln)]
        if gpus:
            assert any(BAR1_HEAD.match(ln) for ln in lines), where
        for g in gpus:
            row = [r for r in rows if g["bdf"] in r.split()]
            assert row, (where, g["bdf"])
            if g.get("bar1_total_bytes"):
                from gdrcheck.units import human_bytes

                assert any(human_bytes(g["bar1_total_bytes"]) in r for r in row), (where, row)
            if g.get("name"):
                from gdrcheck.render.tree_model import short_name

                assert _flat(short_name(g["name"])) in flat, (where, g["name"])
        for r in rows:
            assert len(r) <= width, (where, r)
        assert not any(ln.lstrip().startswith("Corporation") for ln in lines), where


@pytest.mark.parametrize("name", ["stelline-asus", "stelline-puget", "azure-ndv5", "rccl-mi300x", "hwloc-dgx2h",
                                  "h200-x4-vm", "bus-ab-cd-addresses"])
def test_text_fits_and_keeps_data(inputs, name):
    if name not in inputs:
        pytest.skip("../shared/realworld is not present")
    path = inputs[name]
    docs = _facts(path)
    for tty in (False, True):
        for (cmd, width, no_color), text in _renderings(path, tty).items():
            if not tty or no_color:
                assert "\x1b" not in text, (name, cmd, width, tty, repr(text[:300]))
            elif cmd == "pairs":
                assert "\x1b[" in text, (name, width)  # a terminal gets colour: the pty is one
            _check(name, cmd, width, ANSI.sub("", text), docs)


def test_input_data_is_never_markup(inputs):
    path = inputs["bus-ab-cd-addresses"]
    for cmd in (["pairs"], ["topology", "--all"], ["bar1"]):
        p = call(*cmd, "--from", path, env={"COLUMNS": "200"})
        assert "Traceback" not in p.stderr
        for bdf in ("0000:ab:00.0", "0000:cd:00.0") + (() if cmd[0] == "bar1" else ("0000:ab:00.1", "0000:cd:00.1")):
            assert bdf in p.stdout, (cmd, bdf, p.stdout)
        assert not EMOJI.search(p.stdout), cmd
        if cmd[0] != "bar1":
            assert "GH100 [bold red]H100[/] :ok: :cd:" in p.stdout, (cmd, p.stdout)
        assert "node:ab:cd[bold]" in p.stdout, (cmd, p.stdout)


def test_findings_wrap_in_a_log_with_their_indent(inputs):
    if "stelline-asus" not in inputs:
        pytest.skip("../shared/realworld is not present")
    p = call("pairs", "--from", inputs["stelline-asus"], env={"COLUMNS": ""})
    lines = p.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 100
    fix = [i for i, ln in enumerate(lines) if ln.startswith("    fix: ")]
    assert fix and lines[fix[0] + 1].startswith(" " * 9) and lines[fix[0] + 1][9] != " "
    item = [i for i, ln in enumerate(lines) if ln.startswith("    - ") and len(ln) > 90]
    assert item and lines[item[0] + 1].startswith(" " * 6)


def test_wrap_keeps_words_and_indent():
    from gdrcheck.render.layout import wrap

    pieces = [t.plain for t in wrap("    - " + "word " * 30 + "0000:ab:00.0 " + "x" * 80, 40, 6)]
    assert all(len(p) <= 40 for p in pieces[:-1])
    assert pieces[-1] == " " * 6 + "x" * 80  # a word longer than the room is kept whole
    assert all(p.startswith(" " * 6) for p in pieces[1:])
    assert "0000:ab:00.0" in " ".join(pieces)


def test_bar1_keeps_the_vendor_word():
    from gdrcheck.render.tree_model import short_name

    assert short_name("NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]") == \
        "NVIDIA AD102GL [RTX 6000 Ada Generation]"


# ---------------------------------------------------------------------------------------------
# plain errors


def _closed_pipe(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-m", "gdrcheck", *map(str, args)], stdout=w, stderr=subprocess.PIPE,
                         env=env, cwd=ROOT)
    os.close(w)
    os.close(r)  # the reader is gone before gdrcheck writes its first line
    _, err = p.communicate(timeout=120)
    return p.returncode, err.decode()


@pytest.mark.parametrize("args", [["pairs"], ["pairs", "--json"], ["topology", "--all"], ["bar1"], ["check"]])
def test_closed_pipe_ends_quietly_with_the_runs_status(args):
    path = FIXTURES / "h200-x4-vm" / "snapshot.tar.gz"
    whole = call(*args, "--from", path)
    code, err = _closed_pipe(*args, "--from", path)
    assert code == whole.returncode, (code, whole.returncode, err)
    assert "Traceback" not in err and "Exception" not in err and "BrokenPipe" not in err, err
    assert err == whole.stderr


def test_closed_pipe_rules():
    code, err = _closed_pipe("rules")
    assert code == 0 and err == "", err


def test_report_to_stdout(tmp_path):
    p = call("report", "--from", FIXTURES / "h200-x4-vm" / "snapshot.tar.gz", "-o", "-", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("<!DOCTYPE html>") and p.stdout.rstrip().endswith("</html>")
    assert list(tmp_path.iterdir()) == []


def test_gzip_that_is_not_a_tar(tmp_path):
    import gzip

    f = tmp_path / "notes.gz"
    f.write_bytes(gzip.compress(b"some notes, not a snapshot\n"))
    p = call("pairs", "--from", f)
    assert_clean_error(p)
    assert "gzip file that does not hold a tar archive" in p.stderr
    assert "method" not in p.stderr  # not tarfile's list of what it tried
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes((FIXTURES / "h200-x4-vm" / "snapshot.tar.gz").read_bytes()[:3000])
    assert_clean_error(call("pairs", "--from", cut))


@pytest.mark.parametrize("args", [["topology", "--format", "dot", "--json"], ["pairs", "--json", "--jsonl"],
                                  ["pairs", "--nccl-version", "banana"], ["pairs", "--nccl-version", "2.21.5junk"]])
def test_usage_errors(args):
    p = call(*args, "--from", FIXTURES / "h200-x4-vm" / "snapshot.tar.gz")
    assert_clean_error(p)


def test_nccl_version_newer_than_known():
    from gdrcheck.rules.nccl import NEWEST

    p = call("pairs", "--nccl-version", "99.1.0", "--from", FIXTURES / "h200-x4-vm" / "snapshot.tar.gz")
    assert p.returncode == 0, p.stderr
    notes = [ln for ln in p.stderr.splitlines() if "newer than the newest" in ln]
    assert len(notes) == 1 and ".".join(map(str, NEWEST)) in notes[0], p.stderr


# ---------------------------------------------------------------------------------------------
# names a megabyte long


def test_megabyte_name_is_cut_with_a_note(tmp_path, inputs):
    if "stelline-asus" not in inputs:
        pytest.skip("../shared/realworld is not present")
    text = inputs["stelline-asus"].read_text()
    big = tmp_path / "lspci-tv.txt"
    big.write_text(text.replace("AD102GL", "AD102GL " + "X" * (1 << 20), 1))
    p = call("pairs", "--json", "--from", big)
    assert p.returncode == 3, p.stderr
    assert len(p.stdout) < 200_000
    names = [d["name"] for d in json.loads(p.stdout)["devices"] if d.get("name")]
    assert max(len(n) for n in names) < 300
    assert any("name cut: 1048" in n for n in names)
    t = call("topology", "--from", big)
    assert "name cut" in t.stdout and len(t.stdout) < 20_000


def test_clip_name_control_characters():
    from gdrcheck.collectors.clip import clip_name

    assert clip_name("GPU\x1b[2J\x07 name") == "GPU?[2J? name"
    assert clip_name(None) is None
    assert clip_name("short") == "short"


def test_report_gpu_names_keep_the_vendor_word(inputs):
    if "stelline-puget" not in inputs:
        pytest.skip("../shared/realworld is not present")
    p = call("report", "--from", inputs["stelline-puget"], "-o", "-")
    assert 'class="gname">NVIDIA AD102GL [RTX 6000 Ada Generation]<' in p.stdout
    assert ">Corporation" not in p.stdout


# the H200 guest's snapshot has each GPU's BAR1: pass; an lspci -tv paste has no BAR1 size: unknown
@pytest.mark.parametrize("name,status", [("h200-x4-vm", 0), ("stelline-asus", 3)])
def test_bar1_at_72_columns(inputs, name, status):
    if name not in inputs:
        pytest.skip("../shared/realworld is not present")
    p = call("bar1", "--from", inputs[name], env={"COLUMNS": "72"})
    assert p.returncode == status, p.stderr
    _check(name, "bar1", 72, p.stdout, {"bar1": json.loads(call("bar1", "--json", "--from", inputs[name]).stdout)})


def _closed_stream(fd, *args):
    """gdrcheck started with ``fd`` closed (``>&-``, ``2>&-``): (exit status, stdout, stderr) of what stays."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GDRCHECK_DEBUG", None)
    p = subprocess.run([sys.executable, "-m", "gdrcheck", *map(str, args)], capture_output=True, env=env, cwd=ROOT,
                       preexec_fn=lambda: os.close(fd), timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.mark.parametrize("fd", [1, 2])
@pytest.mark.parametrize("args", [["pairs", "--json"], ["check", "--format", "nagios"],
                                  ["pairs", "--from", "/nonexistent"], ["--version"], ["rules"]])
def test_a_closed_stream_is_a_quiet_one(fd, args):
    """stdout or stderr closed by the caller: what would go there goes nowhere, the other stream says what it
    would have said, and the run keeps its exit status (it was an internal error, or 1, with a traceback)."""
    if "--from" not in args and args[0] in ("pairs", "check"):
        args = args + ["--from", FIXTURES / "h200-x4-vm" / "snapshot.tar.gz"]
    whole = call(*args)
    code, out, err = _closed_stream(fd, *args)
    assert code == whole.returncode, (code, whole.returncode, out, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert (out, err) == (("", whole.stderr) if fd == 1 else (whole.stdout, "")), (out, err)


@pytest.mark.parametrize("args", [["topology"], ["pairs"], ["check"], ["bar1"]])
def test_a_latin1_terminal_gets_ascii_and_question_marks_never_an_error(args):
    """A locale whose encoding has no box drawing (Latin-1, ASCII): the tree is drawn as lspci -t draws it and
    any other character it cannot hold is '?' (it was an internal error, UnicodeEncodeError)."""
    path = FIXTURES / "h200-x4-vm" / "snapshot.tar.gz"
    whole = call(*args, "--from", path)
    p = run(*args, "--from", path, env={"PYTHONIOENCODING": "iso8859-1"})  # the interpreter's streams: its own
    assert p.returncode == whole.returncode and "internal error" not in p.stderr, p.stderr
    if args == ["topology"]:
        assert "`-- " in p.stdout and "\u2514" not in p.stdout


@pytest.mark.parametrize("width", [40, 60, 100])
def test_rules_and_explain_fit_the_window(width):
    """`rules` and `explain` wrap to COLUMNS (or the terminal, or 100 in a log) as the node commands do; only a
    word longer than the line (a path) may stand out."""
    for args in (["rules"], ["explain", "GDR020"], ["explain", "GDR042"]):
        p = call(*args, env={"COLUMNS": str(width)})
        assert p.returncode == 0, p.stderr
        for line in p.stdout.splitlines():
            assert len(line) <= width or len(line.split()) == 1, (args, width, line)
