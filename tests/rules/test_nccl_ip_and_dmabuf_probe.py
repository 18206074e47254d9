"""Two conditions of NCCL's IB transport that are not about the PCIe tree.

* It needs an IP interface: ``ncclIbInitDevices`` stops with "NET/IB : No IP interface found" when
  ``ncclFindInterfaces`` finds none (v2.30.7 ``src/transport/net_ib/init.cc:305-310``; v2.18.6
  ``net_ib.cc:169-171``), and the bootstrap runs the same search (v2.30.7 ``src/bootstrap.cc:124-128``). The
  search: ``NCCL_SOCKET_IFNAME`` longer than one character, else any interface (v2.30.7 ``src/misc/socket.cc:
  190-233``); IPv4 or non-loopback IPv6, ``NCCL_SOCKET_FAMILY`` (``socket.cc:178-188``); running links only from
  2.28.3 (``IFF_RUNNING``, v2.30.7 ``src/os/linux.cc``).
* Up to 2.22.3 the DMA-BUF probe is one answer per process, the first device's (v2.22.3 ``net_ib.cc:626-651``);
  from 2.23.4 one per device (v2.23.4 ``net_ib.cc:736-748``).
"""

from __future__ import annotations

import json

import pytest
from support.cli_util import call

from builders import scenarios
from gdrcheck.collectors.host_netif import parse_addresses
from gdrcheck.rules.nccl import ib

# Source.ip_addresses() on a Debian 12 machine, verbatim
ADDRESSES = ("lo inet 127.0.0.1\neth0 inet 192.0.2.2\neth0 inet6 fd00:0000:0000:0000:0000:0000:0000:0002\n"
             "eth0 inet6 fe80:0000:0000:0000:00fc:00ff:fe00:0001\nlo inet6 0000:0000:0000:0000:0000:0000:0000:0001\n")
NEW, OLD = (2, 30, 7), (2, 27, 7)


def _ifs(ib0_running=False):
    out = parse_addresses(ADDRESSES)
    for fams in out.values():
        fams["running"] = True
    out["ib0"] = {"inet": False, "inet6": True, "running": ib0_running}
    return out


def test_addresses_are_read_per_interface_and_family_without_the_ipv6_loopback():
    got = parse_addresses(ADDRESSES)
    assert got == {"lo": {"inet": True, "inet6": False}, "eth0": {"inet": True, "inet6": True}}


@pytest.mark.parametrize("env,new,old", [
    ({}, True, True),  # no setting: any interface, lo at worst
    ({"NCCL_SOCKET_IFNAME": "e"}, True, True),  # one character: NCCL ignores it (strlen > 1)
    ({"NCCL_SOCKET_IFNAME": "eth"}, True, True),  # a prefix
    ({"NCCL_SOCKET_IFNAME": "=eth"}, False, False),  # '=': exact names only
    ({"NCCL_SOCKET_IFNAME": "ib0"}, False, True),  # ib0 is down: counted only up to 2.27
    ({"NCCL_SOCKET_IFNAME": "^eth,lo"}, False, True),  # '^' excludes
    ({"NCCL_SOCKET_IFNAME": "lo", "NCCL_SOCKET_FAMILY": "AF_INET6"}, False, False),  # ::1 is skipped
    ({"NCCL_SOCKET_IFNAME": "lo", "NCCL_SOCKET_FAMILY": "inet6"}, True, True),  # not AF_*: forces nothing
])
def test_ip_interface_search_as_socket_cc_at_2_30_7_and_2_27_7(env, new, old):
    assert ib.ip_interface_found(NEW, env, _ifs())[0] is new
    assert ib.ip_interface_found(OLD, env, _ifs())[0] is old


def test_without_the_interfaces_only_a_setting_makes_it_undecided():
    assert ib.ip_interface_found(NEW, {}, None)[0] is True
    found, why = ib.ip_interface_found(NEW, {"NCCL_SOCKET_IFNAME": "eth9"}, None)
    assert found is None and "not in this input" in why


def _nic_decisions(path, *args):
    doc = json.loads(call("pairs", "--json", "--from", path, *args).stdout)
    return {p["b"]: p["nccl"] for p in doc["pairs"] if p["kind"] == "gpu-nic" and p["a"] == "0000:03:00.0"}, doc


def test_a_socket_ifname_that_matches_nothing_stops_nccl_init_cc_303(tmp_path):
    """v2.30.7 net_ib/init.cc:305-310: no IP interface, no IB transport; the node FAILs with GDR208."""
    bad = scenarios.scenario(tmp_path, "nccl-socket-ifname-matches-nothing")
    nics, doc = _nic_decisions(bad)
    assert {n["gdr"] for n in nics.values()} == {"disabled"}
    assert all("No IP interface found" in n["reason"] for n in nics.values())
    assert doc["status"] == "fail" and [f["code"] for f in doc["findings"] if f["severity"] == "error"] == ["GDR208"]
    good = scenarios.scenario(tmp_path, "nccl-socket-ifname-matches-ipoib")
    nics, doc = _nic_decisions(good)
    assert {n["gdr"] for n in nics.values()} == {"enabled"} and doc["status"] == "pass"


def test_dmabuf_probed_once_per_process_up_to_2_22_3_net_ib_cc_626(tmp_path):
    """v2.22.3 net_ib.cc:626-651: a CX-7 (mlx5_ib registers DMA-BUF) and a FastLinQ (qedr does not), no
    peer-memory module: the first device NCCL lists answers for both, so each NIC's flag depends on the order;
    v2.23.4 net_ib.cc:736-748 asks each device."""
    node = scenarios.scenario(tmp_path, "dmabuf-mixed-rdma-drivers")
    old, _ = _nic_decisions(node, "--nccl-version", "2.22.3")
    new, _ = _nic_decisions(node, "--nccl-version", "2.23.4")
    assert {n["gdr"] for n in old.values()} == {"unknown"}
    assert all("once per process" in n["reason"] for n in old.values())
    assert new["0000:05:00.0"]["gdr"] == "enabled"
    assert new["0000:85:00.0"]["gdr"] == "disabled"


def test_one_rdma_driver_keeps_its_own_answer_at_2_22_3():
    assert ib.dmabuf_probe_answers((2, 22, 3), True, [True, True]) == []
    assert ib.dmabuf_probe_answers((2, 22, 3), True, [True, False]) == [False, True]
    assert ib.dmabuf_probe_answers((2, 23, 4), True, [True, False]) == []


@pytest.mark.parametrize("flags,state,running", [
    ("0x9", "unknown", True),  # a loopback, as every node shows it: IFF_RUNNING is never in the flags file
    ("0x1043", "up", True), ("0x1003", "down", False), ("0x1002", "down", False), ("0x1003", "dormant", False),
])
def test_running_as_the_kernels_dev_get_flags_sets_it(tmp_path, flags, state, running):
    from gdrcheck.collectors.host_netif import _running
    from gdrcheck.collectors.host_util import HostCtx
    from gdrcheck.io.source import Source

    link = tmp_path / "sys/class/net/x0"
    link.mkdir(parents=True)
    (link / "flags").write_text(flags + "\n")
    (link / "operstate").write_text(state + "\n")
    assert _running(HostCtx(Source(str(tmp_path))), "x0") is running
