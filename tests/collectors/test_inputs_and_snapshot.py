"""Inputs: snapshot round trip, hostile archives, bad files; one line and exit 2, never a traceback."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import threading

import pytest
from support.cli_util import ROOT, assert_clean_error, call

FIXTURES = ROOT / "fixtures"


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for m, data in members:
            if data is not None:
                m.size = len(data)
                tar.addfile(m, io.BytesIO(data))
            else:
                tar.addfile(m)
    return path


def _file(name, data=b"x"):
    return tarfile.TarInfo(name), data


def test_snapshot_replays_live_verdicts_byte_for_byte(tmp_path):
    out = tmp_path / "node.tar.gz"
    p = call("snapshot", "-o", out)
    assert p.returncode == 0, p.stderr
    assert out.exists() and not [f for f in os.listdir(tmp_path) if f.startswith(".gdrcheck")]
    for cmd in ("topology", "pairs"):
        live = call(cmd, "--json")
        replay = call(cmd, "--json", "--from", out)
        assert live.returncode == replay.returncode
        assert live.stdout == replay.stdout, cmd
        json.loads(live.stdout)
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "gdrcheck/manifest.json" in names and "gdrcheck/commands.json" in names


def test_snapshot_redact_removes_host_name(tmp_path):
    out = tmp_path / "r.tar.gz"
    assert call("snapshot", "--redact", "-o", out).returncode == 0
    host = open("/proc/sys/kernel/hostname").read().strip()
    with tarfile.open(out) as tar:
        manifest = json.load(tar.extractfile("gdrcheck/manifest.json"))
        assert manifest["host"] == "redacted-host" and manifest["redacted"] is True
        for m in tar.getmembers():
            if m.isfile():
                data = tar.extractfile(m).read().decode("utf-8", "replace")
                assert not (len(host) > 3 and host in data.split()), m.name


def test_snapshot_into_missing_directory_is_a_clean_error(tmp_path):
    assert_clean_error(call("snapshot", "-o", tmp_path / "nope" / "x.tar.gz"))


def test_redact_text_patterns():
    from gdrcheck.io.redact import redact_text

    text = ("GPU UUID : GPU-c66a5296-ef11-ea3d-1c75-8f681a34b89f\n    Serial Number : 1654923004123\n"
            "<serial>1654923004123</serial> ether 0c:42:a1:11:22:33 node17")
    out = redact_text(text, "node17")
    assert "c66a5296" not in out and "1654923004123" not in out and "0c:42:a1" not in out
    assert "node17" not in out and "GPU-00000000-0000" in out


@pytest.mark.parametrize("case", ["dotdot", "absolute", "link-out", "link-absolute", "device", "hardlink",
                                  "too-big", "too-many", "not-gzip", "truncated"])
def test_hostile_archive_is_refused(tmp_path, case, monkeypatch):
    arch = tmp_path / "evil.tar.gz"
    if case == "dotdot":
        _tar(arch, [_file("../escape", b"x")])
    elif case == "absolute":
        _tar(arch, [_file("/tmp/escape-gdrcheck", b"x")])
    elif case == "link-out":
        ti = tarfile.TarInfo("sys/x")
        ti.type, ti.linkname = tarfile.SYMTYPE, "../../etc/passwd"
        _tar(arch, [(ti, None)])
    elif case == "link-absolute":
        ti = tarfile.TarInfo("sys/x")
        ti.type, ti.linkname = tarfile.SYMTYPE, "/etc/passwd"
        _tar(arch, [(ti, None)])
    elif case == "device":
        ti = tarfile.TarInfo("sys/null")
        ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
        _tar(arch, [(ti, None)])
    elif case == "hardlink":
        ti = tarfile.TarInfo("sys/h")
        ti.type, ti.linkname = tarfile.LNKTYPE, "sys/a"
        _tar(arch, [_file("sys/a"), (ti, None)])
    elif case == "too-big":
        _tar(arch, [_file("sys/big", b"\0" * (65 << 20))])
    elif case == "too-many":  # 200,000 entries, refused from its headers before any is made
        ti = tarfile.TarInfo("d")
        ti.type = tarfile.DIRTYPE
        arch.write_bytes(gzip.compress(ti.tobuf() * 1000) * 201 + gzip.compress(b"\0" * 1024))  # gzip members
    elif case == "not-gzip":
        arch.write_bytes(b"\x1f\x8b" + os.urandom(200))
    elif case == "truncated":
        _tar(arch, [_file("sys/a", os.urandom(100_000))])
        arch.write_bytes(arch.read_bytes()[:5000])
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    p = call("topology", "--json", "--from", arch, env={"TMPDIR": str(tmp)})
    assert_clean_error(p)
    assert not os.path.exists("/tmp/escape-gdrcheck")
    assert not os.listdir(tmp)  # the unpack directory is always removed


def _link(name, target):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = tarfile.SYMTYPE, target
    return ti, None


def _dir(name):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    return ti, None


@pytest.mark.parametrize("case,members", [
    # each link looks harmless by its own text; through the ones before it, the last climbs out
    ("links-to-dot-climb-out", [_link("d", "."), _link("d/d2", "."), _link("d/d2/up2", "../.."),
                                _dir("up2/escaped-dir")]),
    ("link-through-link-to-parent", [_link("d", "."), _link("d/esc", ".."), _dir("esc/escaped-dir"),
                                     _link("esc/escaped-link", "sys")]),
])
def test_archive_links_cannot_climb_out_through_each_other(tmp_path, case, members):
    """Nothing of a crafted archive is made outside the temporary directory gdrcheck unpacks it into."""
    work = tmp_path / "a" / "b"
    tmp = work / "tmpdir"
    tmp.mkdir(parents=True)
    arch = _tar(tmp_path / f"{case}.tar.gz", members)
    p = call("topology", "--json", "--from", arch, env={"TMPDIR": str(tmp)})
    assert_clean_error(p)
    assert "outside the archive" in p.stderr
    assert sorted(os.listdir(work)) == ["tmpdir"] and not os.listdir(tmp)
    assert sorted(os.listdir(tmp_path / "a")) == ["b"] and sorted(os.listdir(tmp_path)) == ["a", f"{case}.tar.gz"]


def test_a_tmpdir_reached_through_a_link_unpacks_snapshots(tmp_path):
    """Cluster nodes often have /tmp or a scratch TMPDIR that is a link: the unpack directory is compared with
    its members once both are resolved."""
    (tmp_path / "real").mkdir()
    (tmp_path / "tmp").symlink_to(tmp_path / "real")
    snap = FIXTURES / "h100-x1-vm" / "snapshot.tar.gz"
    p = call("topology", "--json", "--from", snap, env={"TMPDIR": str(tmp_path / "tmp")})
    assert p.returncode == 0 and json.loads(p.stdout)["devices"], p.stderr
    assert not os.listdir(tmp_path / "real")


@pytest.mark.parametrize("content", [b"", b"   \n\n", b"\x00\x01\x02binary", b"hello world\n",
                                     b"{\"json\": true}", b"<html><body/></html>"])
def test_bad_single_file_is_refused(tmp_path, content):
    f = tmp_path / "input.txt"
    f.write_bytes(content)
    assert_clean_error(call("pairs", "--from", f))


def test_missing_path_and_bad_option():
    assert_clean_error(call("pairs", "--from", "/nonexistent/x"))
    p = call("pairs", "--no-such-option")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert_clean_error(call("pairs", "--nccl-version", "banana"))
    assert_clean_error(call("explain", "GDR999"))


def test_a_paste_on_stdin_reads_as_the_file_does(realworld):
    """`ssh node lspci -tv | gdrcheck pairs --from -`: stdin is read once, as the file would be."""
    paste = realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-tv.txt"
    whole = call("pairs", "--json", "--from", paste)
    piped = call("pairs", "--json", "--from", "-", stdin=paste.read_text())
    assert piped.returncode == whole.returncode and piped.stdout == whole.stdout, piped.stderr
    assert_clean_error(call("pairs", "--from", "-", stdin=""))


def test_a_snapshot_through_a_fifo_reads_as_the_archive_does(tmp_path):
    """`--from <(ssh node cat snap.tar.gz)`: a pipe is read once (the archive test and the unpacking each
    opened it, and the second open found the first's bytes gone)."""
    snap = FIXTURES / "h200-x4-vm" / "snapshot.tar.gz"
    fifo = tmp_path / "snap"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(snap.read_bytes())

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    piped = call("pairs", "--json", "--from", fifo)
    writer.join(30)
    whole = call("pairs", "--json", "--from", snap)
    assert piped.returncode == whole.returncode and piped.stdout == whole.stdout, piped.stderr
    assert os.listdir(tmp_path) == ["snap"]


def test_usage_errors_are_one_line_and_a_bare_group_shows_its_help():
    """click lists a missing choice's values one a line; the error is one line all the same. A bare `gdrcheck`
    or `gdrcheck fleet` prints its help (not a 15-line "error: Usage: ...")."""
    for args in (("schema",), ("schema", "bogus"), ("pairs", "--format", "xml")):
        p = call(*args)
        assert_clean_error(p)
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("gdrcheck: error: "), p.stderr
    for args in ((), ("fleet",)):
        p = call(*args)
        assert p.returncode == 2 and p.stdout.startswith("Usage: gdrcheck") and p.stderr == "", p.stderr


def test_a_link_that_leads_nowhere_is_named_so(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone").symlink_to(tmp_path / "never-made")
    for p in ("a", "gone"):
        r = call("pairs", "--from", tmp_path / p)
        assert_clean_error(r)
        assert "leads nowhere" in r.stderr, r.stderr


@pytest.mark.parametrize("mode", ["w:xz", "w:bz2"])
def test_a_snapshot_repacked_with_xz_or_bzip2_reads_as_the_gzip_one(tmp_path, mode):
    """`tar cJf` / `tar cjf` of an unpacked snapshot (a ticket's attachment) is an archive like the .tar.gz
    (it was refused as a binary file)."""
    snap = FIXTURES / "h100-x1-vm" / "snapshot.tar.gz"
    repacked = tmp_path / f"node.tar.{mode[2:]}"
    with tarfile.open(snap) as src, tarfile.open(repacked, mode) as out:
        for m in src:
            out.addfile(m, src.extractfile(m) if m.isfile() else None)
    assert call("pairs", "--json", "--from", repacked).stdout == call("pairs", "--json", "--from", snap).stdout


def test_a_utf16_paste_reads_as_the_utf8_one(realworld, tmp_path):
    """PowerShell's `>` writes UTF-16 with a BOM and CRLF: the paste is the same paste (it was "binary")."""
    paste = realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-tv.txt"
    u16 = tmp_path / "lspci-tv.txt"
    u16.write_bytes(paste.read_text().replace("\n", "\r\n").encode("utf-16"))
    got = call("pairs", "--json", "--from", u16)
    assert got.stdout == call("pairs", "--json", "--from", paste).stdout and "Traceback" not in got.stderr


def test_graph_xml_reads_as_the_channels_nccl_built_and_a_topo_matrix_as_its_classes(realworld):
    # issue 40: NCCL_GRAPH_DUMP_FILE's XML is what NCCL decided, read as such (no tree drawn from it)
    g = call("pairs", "--from", realworld / "azure-ncv4" / "nccl-graph.xml")
    said = " ".join(g.stdout.split())
    assert g.returncode == 3 and "the channels NCCL built" in said and "ring: 2 channel(s)" in said, g.stderr
    # issue 17: a topo -m matrix alone gives its classes, everything else unknown (exit 3, or 1 on findings)
    p = call("pairs", "--from", realworld / "gengwg-dgx-a100-ash6" / "nvidia-smi-topo-m.txt")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr


def test_live_commands_on_a_machine_without_gpu():
    p = call("pairs")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    t = call("topology")
    assert t.returncode == 0 and t.stdout.strip()
    assert "\x1b[" not in t.stdout  # no colour codes in a pipe


def test_version_and_help():
    from gdrcheck import __version__

    p = call("--version")
    assert p.returncode == 0 and __version__ in p.stdout
    assert call("--help").returncode == 0


def test_redact_on_reports(tmp_path):
    from builders import scenarios

    path = scenarios.scenario(tmp_path, "healthy-gdr-node")
    for cmd in ("topology", "pairs", "bar1"):
        for fmt in ("--json", "--format=text"):
            p = call(cmd, fmt, "--redact", "--from", path)
            assert p.returncode == 0, p.stderr
            assert "gpu-node-01" not in p.stdout and "GPU-00000001" not in p.stdout
