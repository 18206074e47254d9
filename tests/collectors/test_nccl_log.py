"""The NCCL log reader on real logs: the 4-GPU H200 runs (fixtures/nccl-runs-4gpu-vm), the 2-GPU excerpt, and
logs from public issue threads (fixtures/nccl-logs-public, SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrcheck.collectors.inputs import sniff
from gdrcheck.collectors.pastes.nccl_log import bdf_of_busid, merge_logs, parse_nccl_log
from gdrcheck.errors import InputError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUNS = FIXTURES / "nccl-runs-4gpu-vm"
PUBLIC = FIXTURES / "nccl-logs-public"


def _log(path):
    return parse_nccl_log(path.read_text(), path.name)


def test_bus_ids_as_nccl_prints_them():
    assert bdf_of_busid("60") == "0000:00:06.0"
    assert bdf_of_busid("1b000") == "0000:1b:00.0"
    assert bdf_of_busid("c7000") == "0000:c7:00.0"
    assert bdf_of_busid("119000") == "0001:19:00.0"
    assert bdf_of_busid("zz") is None


def test_default_run_four_ranks_one_host():
    lg = _log(RUNS / "default" / "nccl.log")
    assert (lg.version, lg.cuda) == ("2.28.9", "13.0")
    assert lg.hosts == ("vm",) and lg.network == "Socket" and lg.plugin is None
    assert sorted((r.rank, r.bdf, r.cuda_dev, r.nvml_dev) for r in lg.ranks) == [
        (0, "0000:00:06.0", 0, 0), (1, "0000:00:07.0", 1, 1), (2, "0000:00:08.0", 2, 2), (3, "0000:00:09.0", 3, 3)]
    assert {c.transport for c in lg.connections} == {"P2P/CUMEM"}
    assert lg.nics[0][1:4] == ("Socket", 0, "eth0:192.0.2.2<0>")
    assert lg.setting("NCCL_NVLS_ENABLE") == "0"  # '... set by environment to 0.': the number, not the dot


@pytest.mark.parametrize("run, name, value", [
    ("p2p-level-0x0-hex", "NCCL_P2P_LEVEL", "LOC"),  # NCCL reports the level it parsed, not what was written
    ("conf-file-p2p-loc", "NCCL_P2P_LEVEL", "LOC"),  # a settings file's value reads as the environment's
    ("p2p-disable-shm-disable", "NCCL_SHM_DISABLE", "1"),
    ("p2p-level-loc-lower", "NCCL_P2P_LEVEL", None),  # ignored by NCCL: not reported
])
def test_settings_as_nccl_reported_them(run, name, value):
    assert _log(RUNS / run / "nccl.log").setting(name) == value


def test_two_gpus_of_four():
    lg = _log(RUNS / "two-gpus-cuda-visible" / "nccl.log")
    assert sorted(r.bdf for r in lg.ranks) == ["0000:00:06.0", "0000:00:07.0"]


def test_excerpt_without_host_prefix():
    lg = _log(FIXTURES / "nccl-dump-h100-x2-vm" / "nccl-debug-excerpt.log")
    assert lg.hosts == () and lg.version == "2.28.9"
    assert [(c.src, c.dst, c.src_dev, c.transport) for c in lg.connections] == [(0, 1, "0", "P2P/CUMEM"),
                                                                                (1, 0, "1", "P2P/CUMEM")]
    assert lg.hca_gdr[0].name == "eth0" and not lg.hca_gdr[0].enabled


def test_public_busid_brackets_and_net_between_local_gpus():
    lg = _log(PUBLIC / "nccl-707-a100-busid-ib.log")
    c = lg.connections[0]
    assert (c.src, c.src_dev, c.dst, c.dst_dev, c.side, c.transport) == (2, "c7000", 0, "87000", "receive",
                                                                         "NET/IB/5/GDRDMA")
    assert c.local == 0 and c.host == "10-90-43-152"


def test_public_plugin_bare_version_and_other_output():
    lg = _log(PUBLIC / "nccl-1737-two-nodes-sharp-plugin.log")
    assert lg.version == "2.21.5" and lg.cuda_driver == "12.4"
    assert lg.plugin == "IBext_v8" and lg.network == "IBext_v8"
    assert [n[3] for n in lg.nics] == ["mlx5_0:1/IB/SHARP", "mlx5_1:1/IB/SHARP", "mlx5_4:1/IB/SHARP",
                                       "mlx5_5:1/IB/SHARP", "mlx5_2:1/RoCE"]
    assert lg.nnodes == 2 and lg.ranks[0].bdf == "0000:19:00.0"
    assert lg.other_lines == 1  # the torchrun command line


def test_public_two_hosts_old_ring_lines():
    lg = _log(PUBLIC / "nccl-246-two-hosts-ring.log")
    assert lg.hosts == ("gpu1", "gpu0")
    net = [c for c in lg.connections if c.transport.startswith("NET")]
    assert [(c.host, c.side, c.transport) for c in net] == [("gpu0", "receive", "NET/IB/0/GDRDMA"),
                                                            ("gpu1", "send", "NET/IB/0"), ("gpu0", "send", "NET/IB/0")]
    assert net[0].src_dev is None  # 'Ring 00 : 7 -> 8': no bracket


def test_public_host_in_angle_brackets_is_a_log():
    text = (PUBLIC / "nccl-952-socket-two-nodes.log").read_text()
    assert sniff(text) == "nccl-log"
    lg = parse_nccl_log(text, "x")
    assert lg.hosts == ("<cluster_name>",) and {c.transport for c in lg.connections} == {"P2P/IPC/read",
                                                                                         "NET/Socket/3"}


def test_public_two_hosts_setting_and_old_version():
    lg = _log(PUBLIC / "nv-peer-memory-56-two-hosts.log")
    assert lg.version == "2.4.7" and lg.setting("NCCL_IB_DISABLE") == "0"
    assert lg.hosts == ("master_node", "secondary_node")


def test_several_ranks_files_are_one_log():
    text = (RUNS / "default" / "nccl.log").read_text().splitlines()
    a = parse_nccl_log("\n".join(x for x in text if x.startswith("vm:999:")), "rank0.log")
    b = parse_nccl_log("\n".join(x for x in text if x.startswith("vm:1000:")), "rank1.log")
    lg = merge_logs([a, b])
    assert sorted(r.rank for r in lg.ranks) == [0, 1] and lg.label == "rank0.log + rank1.log"


def test_not_a_log():
    assert sniff("hello\nworld\n") is None
    with pytest.raises(InputError):
        parse_nccl_log("nothing of NCCL here\n", "x.log")


def _cut_tag(text: str, prefix: bool) -> str:
    """The real default run's log as pasted with ``NCCL INFO`` cut off (and NCCL's ``host:pid:tid [n]`` too)."""
    import re

    out = []
    for line in text.splitlines():
        line = line.replace("NCCL INFO ", "", 1)
        out.append(re.sub(r"^\S+:\d+:\d+ \[\d+\] ", "", line) if not prefix else line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("prefix", [True, False])
def test_the_default_run_without_its_nccl_info_tag(prefix):
    """default-run-tag-cut: the 4-GPU run's log with 'NCCL INFO' cut from every line (and the prefix too)."""
    text = _cut_tag((RUNS / "default" / "nccl.log").read_text(), prefix)
    assert "NCCL INFO" not in text and sniff(text) == "nccl-log"
    lg = parse_nccl_log(text, "cut.log")
    whole = _log(RUNS / "default" / "nccl.log")
    assert lg.version == "2.28.9" and len(lg.connections) == len(whole.connections)
    assert sorted((r.rank, r.bdf, r.nvml_dev) for r in lg.ranks) == sorted((r.rank, r.bdf, r.nvml_dev)
                                                                             for r in whole.ranks)
    assert lg.hosts == (("vm",) if prefix else ())


def test_two_plain_connection_lines_are_a_log():
    text = "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\nChannel 00/0 : 1[1] -> 0[0] via P2P/CUMEM\n"
    assert sniff(text) == "nccl-log"
    assert [c.transport for c in parse_nccl_log(text, "x").connections] == ["P2P/CUMEM", "P2P/CUMEM"]
    assert sniff("Channel 5 is on\nthe news at nine\n") is None


@pytest.mark.parametrize("line, version, hip", [
    ("RCCL version 2.20.5+hip6.2 f9a9e8a", "2.20.5", "6.2"),  # ROCm 6.2 (rocm-6.2.0 src/init.cc:686), stdout
    ("mi300:12:12 [0] NCCL INFO RCCL version 2.20.5+hip6.2 f9a9e8a", "2.20.5", "6.2"),  # the debug file's copy
    ("RCCL version : 2.21.5-0cbce2a7", "2.21.5", None),  # later RCCL (src/init.cc:719)
])
def test_rccl_log_gives_rccls_version_not_nccls(line, version, hip):
    """rccl-log: RCCL's version line before a rank's Init line and a connection, as RCCL prints them."""
    text = (line + "\nmi300:12:12 [0] NCCL INFO comm 0x55d1 rank 0 nranks 8 cudaDev 0 busId 5000 commId 0x1 - "
            "Init START\nmi300:12:12 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    assert sniff(text) == "nccl-log"
    lg = parse_nccl_log(text, "rccl.log")
    assert (lg.rccl_version, lg.rccl_hip, lg.version) == (version, hip, None)
