"""NCCL's GPU-GPU P2P decision per version (``gdrcheck.rules.nccl.p2p``; docs/nccl.md, "P2P").

Each case is named after what it holds and sits beside the neighbour NCCL decides the other way.
"""

from __future__ import annotations

import pytest
from support import nccl_nodes as N

G0, G1, G2, G3 = "0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0"
NIC0, NIC1 = "0000:05:00.0", "0000:85:00.0"


def two_sockets(tmp_path, name, **kw):
    """One GPU per socket, each on a root port: the pair is SYS."""
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "root"), ("gpu", G2, 1, "root")], **kw)


def four_gpus(tmp_path, name, **kw):
    """Two GPUs per socket under one switch each: pairs inside a socket PIX, across SYS."""
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "switch"), ("gpu", G1, 0, "switch"),
                                             ("gpu", G2, 1, "switch"), ("gpu", G3, 1, "switch")], **kw)


@pytest.mark.parametrize("case,cpu,version,word", [
    ("amd-two-gpus-2.23", "AuthenticAMD", "2.23.4", "enabled"),
    ("intel-two-gpus-2.23", "GenuineIntel", "2.23.4", "disabled"),
    ("amd-two-gpus-2.22", "AuthenticAMD", "2.22.3", "enabled"),
    ("intel-two-gpus-2.22", "GenuineIntel", "2.22.3", "disabled"),
    ("zhaoxin-two-gpus-2.22", "  Shanghai  ", "2.22.3", "disabled"),
    ("arm-two-gpus-2.22", "ARM", "2.22.3", "disabled"),
    ("amd-two-gpus-2.30", "AuthenticAMD", "2.30.7", "enabled"),
])
def test_default_level_per_cpu_and_version(tmp_path, case, cpu, version, word):
    _, pairs = N.decide(two_sockets(tmp_path, case, cpu=cpu), version)
    assert pairs[(G0, G2)]["p2p"] == word, (case, pairs[(G0, G2)])


def test_amd_four_gpus_2_23_depends_on_the_communicator(tmp_path):
    _, pairs = N.decide(four_gpus(tmp_path, "amd-four-gpus-2.23", cpu="AuthenticAMD"), "2.23.4")
    v = pairs[(G0, G2)]
    assert v["p2p"] == "unknown" and any("at most 2 GPUs" in d for d in v["depends_on"])
    assert pairs[(G0, G1)]["p2p"] == "enabled"  # PIX: within PXB and SYS alike
    # before 2.23 the GPU count did not matter: SYS on AMD
    _, pairs = N.decide(four_gpus(tmp_path, "amd-four-gpus-2.22", cpu="AuthenticAMD"), "2.22.3")
    assert pairs[(G0, G2)]["p2p"] == "enabled"


@pytest.mark.parametrize("case,vendor,word", [
    ("cpu-from-root-port-amd", 0x1022, "enabled"),
    ("cpu-from-root-port-intel", 0x8086, "disabled"),
])
def test_cpu_vendor_from_the_pci_tree(tmp_path, case, vendor, word):
    top, pairs = N.decide(two_sockets(tmp_path, case, cpu=None, port_vendor=vendor), "2.23.4")
    assert pairs[(G0, G2)]["p2p"] == word and "root port vendor" in top["cpu"]["source"]


def test_cpu_vendor_not_shown_depends_on_it(tmp_path):
    _, pairs = N.decide(two_sockets(tmp_path, "cpu-unknown", cpu=None, port_vendor=0x1B36), "2.23.4")
    v = pairs[(G0, G2)]
    assert v["p2p"] == "unknown" and any("AMD" in d for d in v["depends_on"])


@pytest.mark.parametrize("case,line,word", [
    ("p2p-level-upper", "NCCL_P2P_LEVEL=SYS", "enabled"),
    ("p2p-level-lowercase", "NCCL_P2P_LEVEL=sys", "disabled"),
    ("p2p-level-leading-space", "NCCL_P2P_LEVEL= SYS", "disabled"),
    ("p2p-level-hex", "NCCL_P2P_LEVEL=0x4", "enabled"),
    ("p2p-level-hex-phb", "NCCL_P2P_LEVEL=0x3", "disabled"),
    ("p2p-disable-01", "NCCL_P2P_DISABLE=01\nNCCL_P2P_LEVEL=SYS", "disabled"),
])
def test_p2p_level_from_etc_nccl_conf(tmp_path, case, line, word):
    root = two_sockets(tmp_path, case, cpu="GenuineIntel", files={"/etc/nccl.conf": line + "\n"})
    top, pairs = N.decide(root, "2.30.7")
    assert pairs[(G0, G2)]["p2p"] == word, (case, pairs[(G0, G2)])
    assert top["settings_files_read"] == ["/etc/nccl.conf"]
    if case == "p2p-level-lowercase":
        assert any("'sys'" in s for s in top["ignored_settings"])


def test_environment_wins_over_etc_nccl_conf(tmp_path):
    root = two_sockets(tmp_path, "env-wins", cpu="GenuineIntel", files={"/etc/nccl.conf": "NCCL_P2P_LEVEL=SYS\n"})
    _, pairs = N.decide(root, "2.30.7", env={"NCCL_P2P_LEVEL": "PXB"})
    assert pairs[(G0, G2)]["p2p"] == "disabled"


@pytest.mark.parametrize("case,version,env,word,init_fails", [
    ("nvml-cns-pcie-2.19", "2.19.3", {}, "disabled", False),
    ("nvml-cns-pcie-2.18", "2.18.6", {}, "unknown", False),
    ("nvml-cns-pcie-ignore-2", "2.30.7", {"NCCL_IGNORE_DISABLED_P2P": "2"}, "enabled", False),
])
def test_nvml_status_on_pcie(tmp_path, case, version, env, word, init_fails):
    _, pairs = N.decide(four_gpus(tmp_path, case, p2p_status=1), version, env)
    v = pairs[(G0, G1)]
    assert v["p2p"] == word and bool(v.get("init_fails")) is init_fails, (case, v)


@pytest.mark.parametrize("case,env,word,init_fails", [
    ("nvml-cns-nvlink-aborts", {}, "disabled", True),
    ("nvml-cns-nvlink-ignore-1", {"NCCL_IGNORE_DISABLED_P2P": "1"}, "disabled", False),
])
def test_nvml_status_on_nvlink(tmp_path, case, env, word, init_fails):
    _, pairs = N.decide(four_gpus(tmp_path, case, p2p_status=1, nvswitch=True), "2.30.7", env)
    v = pairs[(G0, G2)]
    assert v["p2p"] == word and bool(v.get("init_fails")) is init_fails, (case, v)


def test_nvml_status_read_only_after_the_level_check(tmp_path):
    """nvml-after-level: a SYS pair beyond PXB is refused by the level; NVML's answer is never read."""
    _, pairs = N.decide(four_gpus(tmp_path, "nvml-after-level", p2p_status=1, cpu="GenuineIntel"), "2.30.7")
    v = pairs[(G0, G2)]
    assert v["p2p"] == "disabled" and "NCCL_P2P_LEVEL" in v["reason"] and "NVML" not in v["reason"]


RING = ((G0, G1, 2), (G1, G2, 2), (G2, G3, 2), (G3, G0, 2))  # a cube-mesh face: no G0-G2 link


@pytest.mark.parametrize("case,env,word", [
    ("nvb-cube-mesh", {}, "enabled"),
    ("nvb-disabled", {"NCCL_NVB_DISABLE": "1"}, "disabled"),
    ("nvb-cuda-memcpy", {"NCCL_P2P_USE_CUDA_MEMCPY": "1"}, "disabled"),
])
def test_nvb(tmp_path, case, env, word):
    _, pairs = N.decide(four_gpus(tmp_path, case, nvlinks=RING, cpu="GenuineIntel"), "2.30.7", env)
    v = pairs[(G0, G2)]
    assert v["p2p"] == word, (case, v)
    if word == "enabled":
        assert v["nvb_via"] in (G1, G3) and v["path_type"] == "NVB" and v["depends_on"]


def net_node(tmp_path, name, rate, **kw):
    """AMD, two GPUs on two sockets, each with a ConnectX under its own switch."""
    return N.build(tmp_path / name, cpu="AuthenticAMD",
                   devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"),
                            ("gpu", G2, 1, "switch"), ("nic", NIC1, 1, "switch")],
                   rates={"mlx5_0": rate, "mlx5_1": rate}, **kw)


@pytest.mark.parametrize("case,rate,env,word", [
    ("net-faster-than-sys", "400 Gb/sec (4X NDR)", {}, "disabled"),
    ("net-faster-disable-intra", "400 Gb/sec (4X NDR)", {"NCCL_NET_DISABLE_INTRA": "1"}, "enabled"),
    ("net-slower-than-sys", "100 Gb/sec (4X EDR)", {}, "enabled"),
])
def test_network_preferred_over_p2p(tmp_path, case, rate, env, word):
    _, pairs = N.decide(net_node(tmp_path, case, rate), "2.30.7", env)
    v = pairs[(G0, G2)]
    assert v["p2p"] == word, (case, v)
    if word == "disabled":
        assert "ncclTopoCheckNet" in v["reason"]
