"""``--redact`` drops IP addresses and the user names in home directories' paths too.

A link-local IPv6 address is made from its interface's MAC (EUI-64: ``fe80::a00:27ff:fe4e:66a1`` is
``08:00:27:4e:66:a1``), so keeping it gave back the MAC that --redact drops; a user's home in a path
(``/home/alice/.nccl.conf``, ``HOME`` in env.json) named the user. The snapshot here is written from what a
live run records (a file, a link, ``getifaddrs``' lines, ``/proc/net/if_inet6``), then read back.
"""

from __future__ import annotations

import json
import tarfile

from gdrcheck.collectors.capture import write_archive
from gdrcheck.io.redact import redact_text
from gdrcheck.io.source import Source

MAC_PARTS = ("a00:27ff:fe4e:66a1", "0a0027fffe4e66a1", "0a00:27ff:fe4e:66a1")
IF_INET6 = ("fe800000000000000a0027fffe4e66a1 02 40 20 80 ens1f0\n"
            "00000000000000000000000000000001 01 80 10 80 lo\n"
            "2001067c2564a1700a0027fffe4e66a1 02 40 00 00 ens1f0\n")
GETIFADDRS = ("lo inet 127.0.0.1\nens1f0 inet 10.12.0.7\n"
              "ens1f0 inet6 fe80:0000:0000:0000:0a00:27ff:fe4e:66a1\n"
              "lo inet6 0000:0000:0000:0000:0000:0000:0000:0001\n")


def test_text_keeps_loopback_masks_and_versions_and_drops_the_rest():
    text = ("inet 10.1.2.3/24 brd 10.1.2.255 mask 255.255.255.0 lo 127.0.0.1 any 0.0.0.0\n"
            "inet6 fe80::a00:27ff:fe4e:66a1/64 2001:db8:85a3::8a2e:370:7334 ::1\n"
            "driver 535.104.05 VBIOS 96.00.74.00.01 bus 0000:3b:00.0 at 12:34:56 std::vector\n"
            "NCCL_CONF_FILE=/home/alice/nccl.conf /Users/bob/x\n")
    got = redact_text(text, None)
    for gone in ("10.1.2.3", "10.1.2.255", "85a3", "alice", "bob", *MAC_PARTS):
        assert gone not in got, (gone, got)
    for kept in ("255.255.255.0", "127.0.0.1", "0.0.0.0", " ::1", "535.104.05", "96.00.74.00.01",
                 "0000:3b:00.0", "12:34:56", "std::vector", "/home/user/nccl.conf", "/Users/user/x"):
        assert kept in got, (kept, got)


def test_a_redacted_snapshot_names_no_address_and_no_user(tmp_path):
    src = Source("/", live=True, record=True)
    src.recorded.update({
        "/home/alice/.nccl.conf": ("f", b"NCCL_SOCKET_IFNAME=ens1f0\nNCCL_TOPO_FILE=/home/alice/topo.xml\n"),
        "/home/alice/topo.xml": ("l", "/home/alice/real-topo.xml"),
        "/gdrcheck/env.json": ("f", json.dumps({"HOME": "/home/alice", "NCCL_SOCKET_IFNAME": "ens1f0"}).encode()),
        "/proc/net/if_inet6": ("f", IF_INET6.encode()),
    })
    src.recorded_commands["getifaddrs"] = {"rc": 0, "stdout": GETIFADDRS, "stderr": "", "error": None}
    out = tmp_path / "s.tar.gz"
    write_archive(src, ({"host": "redacted-host"}, "node7"), str(out), redact=True)
    with tarfile.open(out) as t:
        names = t.getnames()
        links = [m.linkname for m in t.getmembers() if m.issym()]
        blob = b"".join(t.extractfile(m).read() for m in t.getmembers() if m.isfile()).decode()
    everything = "\n".join(names + links) + blob
    for gone in ("alice", "10.12.0.7", "2001067c", *MAC_PARTS):
        assert gone not in everything, gone
    assert "home/user/.nccl.conf" in names and "127.0.0.1" in blob
