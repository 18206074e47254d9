"""The archive unpacker under fuzzing: any bytes given as a snapshot archive unpack inside the directory they
were given, or are refused with the one-line InputError; never another exception, never a file outside.

Archives are made from members of every kind (names with ``..``, absolute and long names, links in and out,
devices, long-name and PAX headers), compressed or not, then cut short or with bytes changed.
``benchmarks/fuzz_campaign.py`` runs the same property with many more examples (``--only archive``).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import tarfile
import tempfile
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdrcheck.collectors.inputs import unpack_archive
from gdrcheck.errors import InputError

EXAMPLES = int(os.environ.get("GDRCHECK_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

CASES: Counter = Counter()  # property name -> examples run (read by the campaign)

NAMES = st.one_of(
    st.sampled_from(["sys", "sys/bus/pci/devices/0000:00:00.0", "proc/config.gz", "..", "../x", "/etc/x",
                     "a/../../b", "./sys", "gdrcheck/manifest.json", "a\\b", ""]),
    st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=20),
    st.integers(100, 400).map(lambda n: "d/" * (n // 2)),  # long names: GNU 'L' or PAX headers
)
KINDS = st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE,
                         tarfile.FIFOTYPE])


@st.composite
def archives(draw) -> bytes:
    fmt = draw(st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for _ in range(draw(st.integers(0, 6))):
            ti = tarfile.TarInfo(draw(NAMES))
            ti.type = draw(KINDS)
            if ti.type in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                ti.linkname = draw(NAMES)
            data = draw(st.binary(max_size=300)) if ti.type == tarfile.REGTYPE else b""
            ti.size = len(data)
            if fmt == tarfile.PAX_FORMAT and draw(st.booleans()):
                ti.pax_headers = {draw(st.sampled_from(["comment", "size", "path", "x"])): draw(
                    st.text(max_size=20))}
            try:
                tar.addfile(ti, io.BytesIO(data) if data else None)
            except (ValueError, UnicodeError):  # a name or field the format cannot hold: skip it
                continue
    raw = bytearray(buf.getvalue())
    for _ in range(draw(st.integers(0, 4))):  # bytes changed: header fields, sizes, checksums
        if raw:
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    raw = bytes(raw)
    if draw(st.booleans()):
        raw = raw[:draw(st.integers(0, len(raw)))]
    pack = draw(st.sampled_from([None, gzip.compress, bz2.compress, lzma.compress]))
    out = pack(raw) if pack else raw
    if pack and draw(st.booleans()):
        out = out[:draw(st.integers(0, len(out)))]
    return out


def expect_unpacked_inside_or_refused(data: bytes) -> None:
    CASES["archive"] += 1
    with tempfile.TemporaryDirectory(prefix="gdrcheck-fuzz-") as top:
        arch = os.path.join(top, "node.tar")
        dest = os.path.join(top, "dest")
        os.mkdir(dest)
        with open(arch, "wb") as f:
            f.write(data)
        try:
            unpack_archive(arch, dest)
        except InputError as e:
            assert str(e).startswith("node.tar") and "\n" not in str(e), str(e)
        assert sorted(os.listdir(top)) == ["dest", "node.tar"]
        real = os.path.realpath(dest)
        for base, dirs, files in os.walk(dest):
            for n in dirs + files:
                p = os.path.join(base, n)
                if os.path.islink(p):
                    target = os.path.realpath(p)
                    assert target == real or target.startswith(real + os.sep), (p, os.readlink(p))
                else:
                    assert os.path.isdir(p) or os.path.isfile(p), p


@FUZZ
@given(archives())
def test_archive_unpacker(data):
    expect_unpacked_inside_or_refused(data)


@FUZZ
@given(st.binary(max_size=2048).map(lambda b: b"\x1f\x8b" + b) | st.binary(max_size=2048))
def test_archive_unpacker_random_bytes(data):
    expect_unpacked_inside_or_refused(data)
