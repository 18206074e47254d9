"""Small inputs that used to become gigabytes in memory: each is refused in one line (exit 2), or read within
its bounds, under a 1 GiB address-space cap and in well under a second or two.

- a snapshot whose ``proc/config.gz`` inflates to gigabytes (a 40 KB archive reached 8.2 GB);
- GNU long-name / long-link and PAX headers of megabytes, which Python's ``tarfile`` reads whole before
  any member is checked (10 MB of input reached 10.3 GB, 625 KB of ``.tar.xz`` 4.2 GB);
- an outer gzip/xz stream that inflates past what an archive may hold;
- a MemoryError wherever it comes from is the one-line bad-input error, never ``internal error``.
"""

from __future__ import annotations

import gzip
import io
import lzma
import tarfile

import pytest
from support.cli_util import ROOT, assert_clean_error
from support.limits import GIB, run_limited

SNAPSHOT = ROOT / "fixtures" / "h100-x2-vm" / "snapshot.tar.gz"
MIB = 1 << 20


def _with_member(dest, name: str, data: bytes, *, mode: str = "w:gz"):
    """The fixture snapshot with member ``name`` holding ``data``, written as ``mode`` says."""
    with tarfile.open(SNAPSHOT) as src, tarfile.open(dest, mode) as out:
        for m in src:
            if m.name != name:
                out.addfile(m, src.extractfile(m) if m.isfile() else None)
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        out.addfile(ti, io.BytesIO(data))
    return dest


def test_config_gz_that_inflates_to_gigabytes_is_read_within_its_bound(tmp_path):
    """proc/config.gz of 2,048 gzip members of 1 MiB of zeros each: 2 MB that inflate to 2 GiB (the outer
    archive packs it to some 40 KB). Before: gzip.decompress held all of it (MemoryError under the cap,
    8.2 GB without one). Now: decompression stops at 16 MiB out and the fact is unknown, with the reason."""
    bomb = gzip.compress(b"\0" * MIB, 9) * 2048
    arch = _with_member(tmp_path / "bomb.tar.gz", "proc/config.gz", bomb)
    assert arch.stat().st_size < 200_000
    p = run_limited("fingerprint", "--explain", "--from", arch, mem=GIB)
    assert p.returncode == 0, p.stderr
    assert "MemoryError" not in p.stderr and "Traceback" not in p.stderr
    assert "host.p2pdma=unknown" in p.stdout  # the fixture's own config.gz says false
    assert p.cpu_seconds < 20


def test_config_gz_bound_keeps_a_real_config():
    from gdrcheck.io.bounded import TooLarge, gunzip

    text = b"CONFIG_PCI_P2PDMA=y\n" * 1000
    assert gunzip(gzip.compress(text), 1 * MIB) == text
    assert gunzip(gzip.compress(text[:10]) + gzip.compress(text[10:]), 1 * MIB) == text  # two members
    assert gunzip(b"not gzip", 1 * MIB) is None
    with pytest.raises(TooLarge):
        gunzip(gzip.compress(b"\0" * (2 * MIB)), 1 * MIB)


def _ext_header(kind: bytes, size: int, fill: bytes = b"a") -> bytes:
    """One extension header (GNU 'L'/'K', PAX 'x'/'g') claiming ``size`` bytes, with that much data."""
    ti = tarfile.TarInfo("././@LongLink")
    ti.type, ti.size = kind, size
    data = fill * size
    return ti.tobuf(tarfile.GNU_FORMAT) + data + b"\0" * (-size % 512)


def _member(name: str = "sys/x") -> bytes:
    ti = tarfile.TarInfo(name)
    ti.size = 1
    return ti.tobuf(tarfile.GNU_FORMAT) + b"x" + b"\0" * 511


@pytest.mark.parametrize("kind,what", [(b"L", "long-name"), (b"K", "long-name"), (b"x", "PAX"), (b"g", "PAX")])
def test_a_ten_megabyte_extended_header_is_refused_before_it_is_read(tmp_path, kind, what):
    """10 MB of 'a' in one long-name or PAX header (10 KB gzipped): tarfile read it whole (10.3 GB for the
    PAX records it then parsed). Refused from the size in the header, before its data is read."""
    raw = _ext_header(kind, 10 * MIB) + _member() + b"\0" * 1024
    arch = tmp_path / "evil.tar.gz"
    arch.write_bytes(gzip.compress(raw, 1))
    p = run_limited("topology", "--json", "--from", arch, mem=GIB, env={"TMPDIR": str(tmp_path)})
    assert_clean_error(p)
    assert f"archive has a {what} header of {10 * MIB} bytes" in p.stderr
    assert p.cpu_seconds < 10


def test_a_small_tar_xz_that_claims_gigabytes_is_refused(tmp_path):
    """An xz archive of a few hundred KB whose long-name header claims 4 GiB: refused from the header."""
    ti = tarfile.TarInfo("././@LongLink")
    ti.type, ti.size = tarfile.GNUTYPE_LONGNAME, 4 << 30
    arch = tmp_path / "evil.tar.xz"
    arch.write_bytes(lzma.compress(ti.tobuf(tarfile.GNU_FORMAT) + b"a" * (8 * MIB)))
    assert arch.stat().st_size < 700_000
    p = run_limited("pairs", "--json", "--from", arch, mem=GIB, env={"TMPDIR": str(tmp_path)})
    assert_clean_error(p)
    assert "long-name header of 4294967296 bytes" in p.stderr


def test_a_run_of_extended_headers_is_refused(tmp_path):
    """tarfile follows one extended header to the next by recursion: a thousand small ones in a row are
    refused at the ninth, never a RecursionError."""
    raw = _ext_header(b"L", 100) * 1000 + _member() + b"\0" * 1024
    arch = tmp_path / "chain.tar.gz"
    arch.write_bytes(gzip.compress(raw))
    p = run_limited("topology", "--from", arch, env={"TMPDIR": str(tmp_path)})
    assert_clean_error(p)
    assert "extended headers in a row" in p.stderr


def test_a_pax_size_record_is_followed_when_headers_are_scanned():
    """A PAX 'size' record says how much data the next member has: the scan skips that much, not the
    header's own field, and counts the members as tarfile does."""
    from gdrcheck.io.bounded import Decompressed, scan_tar

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i, size in enumerate((10, 3000, 0)):
            ti = tarfile.TarInfo(f"sys/f{i}" + "x" * 200)  # a long name: a PAX header each
            ti.size = size
            ti.pax_headers = {"size": str(size)}
            tar.addfile(ti, io.BytesIO(b"y" * size))
    raw = io.BytesIO(buf.getvalue())
    assert scan_tar(Decompressed(raw, 10 * MIB), "t", max_members=10, max_member_bytes=MIB,
                    max_total_bytes=MIB) == 3


def test_a_stream_is_cut_at_its_limit_of_bytes_out():
    """The outer gzip/bzip2/xz stream: no more than the limit comes out, whatever the input claims."""
    import bz2

    from gdrcheck.io.bounded import Decompressed, TooLarge

    for packed in (gzip.compress(b"\0" * (4 * MIB)), bz2.compress(b"\0" * (4 * MIB)),
                   lzma.compress(b"\0" * (4 * MIB))):
        s = Decompressed(io.BytesIO(packed), 1 * MIB)
        with pytest.raises(TooLarge):
            while s.read(65536):
                pass
        s = Decompressed(io.BytesIO(packed), 8 * MIB)
        assert sum(len(b) for b in iter(lambda: s.read(100_000), b"")) == 4 * MIB


def test_an_archive_of_two_hundred_thousand_entries_is_refused_from_its_headers(tmp_path):
    """200,002 entries in 200 KB of gzip: refused after the first 65,536 headers, with nothing unpacked
    (before: 19 s of unpacking, 60 s in the suite, before the refusal)."""
    ti = tarfile.TarInfo("d")
    ti.type = tarfile.DIRTYPE
    arch = tmp_path / "many.tar.gz"
    arch.write_bytes(gzip.compress(ti.tobuf() * 1000) * 201 + gzip.compress(b"\0" * 1024))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = run_limited("topology", "--from", arch, env={"TMPDIR": str(tmp)})
    assert_clean_error(p)
    assert "more than 65536 entries" in p.stderr
    assert p.cpu_seconds < 3 and not list(tmp.iterdir())


def test_memory_error_is_the_one_line_bad_input_error(capsys):
    """Wherever a MemoryError comes from (a parser, a renderer), it ends as bad input: one line, exit 2."""
    from gdrcheck.cli.entry import _error_status
    from gdrcheck.cli.node_argv import read

    assert _error_status(MemoryError(), read(["pairs", "--from", "x"])) == 2
    err = capsys.readouterr().err
    assert err == "gdrcheck: error: input too large for the memory available\n"
