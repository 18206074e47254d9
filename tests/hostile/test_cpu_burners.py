"""Small inputs that burned CPU until the watchdog (and for hours with ``--timeout 0``): each reader is linear.

Each case is what a few hundred kilobytes to a few megabytes made of a reader that was quadratic or worse;
the bounds are many times what the linear reader takes here and a fraction of what the old one took.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time

from gdrcheck.collectors.archive import MAX_MEMBER_DEPTH, unpack_archive
from gdrcheck.io.bounded import gunzip


def test_a_config_gz_of_many_empty_members_is_read_in_linear_time():
    """Each empty member re-copied the rest of the file: 4 MB of them took about half a minute."""
    data = gzip.compress(b"") * 200_000 + gzip.compress(b"CONFIG_PCI_P2PDMA=y\n")
    t0 = time.process_time()
    assert gunzip(data, 1 << 20) == b"CONFIG_PCI_P2PDMA=y\n"
    assert time.process_time() - t0 < 8


def _chain_archive(path, links=20, files=3000):
    """A 60-name directory, then links each leading 60 names further: the real tree 1,200 names deep
    through member names of at most 22; then ``files`` members at the bottom of the chain."""
    deep = "/".join(["d"] * 60)
    with tarfile.open(path, "w:gz") as t:
        t.addfile(_info(deep, tarfile.DIRTYPE))
        at = ""
        for k in range(links):
            at = f"{at}l{k}" if not at else f"{at}/l{k}"
            ti = _info(at, tarfile.SYMTYPE)
            ti.linkname = deep
            t.addfile(ti)
        for i in range(files):
            ti = _info(f"{at}/f{i}", tarfile.REGTYPE)
            ti.size = 1
            t.addfile(ti, io.BytesIO(b"x"))


def _info(name, kind):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = 0o755
    return ti


def test_link_chains_deeper_than_the_depth_limit_are_not_unpacked(tmp_path):
    archive = tmp_path / "chain.tar.gz"
    _chain_archive(archive)
    dest = tmp_path / "out"
    dest.mkdir()
    t0 = time.process_time()
    unpack_archive(str(archive), str(dest))
    took = time.process_time() - t0
    deepest = max(len(os.path.relpath(d, dest).split(os.sep)) for d, _, _ in os.walk(dest))
    assert deepest <= MAX_MEMBER_DEPTH + 1, deepest
    assert took < 8, took


def test_a_long_interface_list_times_many_interfaces_is_linear():
    """NCCL_SOCKET_IFNAME and NCCL_IB_HCA were matched entry by entry against every interface, port and pair:
    50,000 entries times 2,000 interfaces were 10^8 comparisons."""
    from gdrcheck.rules.nccl import ib

    names = [f"ens{i}f{j}" for i in range(1000) for j in range(2)]
    interfaces = {n: {"inet": True, "inet6": None, "running": True} for n in names}
    spec = "^" + ",".join(f"eth{i}" for i in range(50_000))
    t0 = time.process_time()
    found, _ = ib.ip_interface_found((2, 30, 7), {"NCCL_SOCKET_IFNAME": spec}, interfaces)
    used = ib.hca_match("^=" + spec[1:].replace("eth", "mlx5_"), tuple(f"mlx5_{i}" for i in range(50_000, 52_000)),
                        {f"mlx5_{i}": {"1": "ACTIVE", "2": "ACTIVE"} for i in range(50_000, 52_000)})
    assert found is True and used is True
    assert time.process_time() - t0 < 5


def test_wrapping_one_long_line_is_linear():
    """Each wrapped piece was a slice of the whole rich Text (a copy of all of it): 800 KB took 10 s."""
    from rich.text import Text

    from gdrcheck.render.layout import wrap

    line = " ".join(["word"] * 160_000)
    styled = Text(line)
    styled.stylize("bold", 0, 10)
    styled.stylize("red", 50, len(line) - 5)
    t0 = time.process_time()
    pieces = wrap(styled, 100, 4)
    assert time.process_time() - t0 < 3
    assert "".join(p.plain.strip() + " " for p in pieces).strip() == line
    assert all(len(p.plain) <= 100 for p in pieces)
