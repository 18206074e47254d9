"""A snapshot archive holding one name twice: refused, not the last copy silently winning.

``tar`` keeps both members; which one a reader sees depends on the reader. An archive edited to add a
second ``/proc/cmdline`` (``iommu=off`` after the real one) made gdrcheck judge the second.
"""

from __future__ import annotations

import io
import tarfile

import pytest
from support.cli_util import assert_clean_error, run

from gdrcheck.collectors.archive import unpack_archive
from gdrcheck.errors import InputError


def _archive(path, members):
    with tarfile.open(path, "w:gz") as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))


def test_a_file_twice_is_refused(tmp_path):
    a = tmp_path / "twice.tar.gz"
    _archive(a, [("proc/cmdline", b"quiet\n"), ("proc/cmdline", b"quiet iommu=off\n")])
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(InputError, match="appears twice"):
        unpack_archive(str(a), str(dest))


def test_the_command_says_so_in_one_line(tmp_path):
    a = tmp_path / "twice.tar.gz"
    _archive(a, [("sys/bus/pci/devices/0000:00:00.0/vendor", b"0x8086\n"), ("proc/cmdline", b"quiet\n"),
                 ("./proc/cmdline", b"quiet iommu=off\n")])
    p = run("pairs", "--from", a)
    assert_clean_error(p)
    assert "appears twice" in p.stderr
