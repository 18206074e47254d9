"""NCCL read a third time: where NCCL compares path bandwidth before path type, and what NCCL's own dump
shows. Each case is an NCCL XML in fixtures/nccl-xml-cases/ (named after the case) and names NCCL's
file:line@tag in its name or docstring (docs/nccl.md lists them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import nccl_nodes as N

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-xml-cases"


@pytest.mark.parametrize("version", ["2.21.5", "2.30.7"])
def test_nic_local_gpu_is_the_widest_topo_cc_1943_1971(version):
    """topo.cc:1943-1971@v2.30.7 (ncclTopoGetLocal; topo.cc:778-795@v2.21.5): the NIC's local GPUs are those
    with the highest path bandwidth, then the best type. Under one Gen4 switch an x8 GPU (12 GB/s) and an x16
    GPU (24 GB/s) beside a 200 Gb/s CX-6: only the x16 GPU is local, so it relays for the GPU on the other
    socket NVLinked to it (PXN, paths.cc:819-841@v2.30.7): GDR on through it."""
    _, pairs = N.decide(CASES / "nic-local-gpu-by-bandwidth.xml", version)
    v = pairs[("0000:83:00.0", "0000:05:00.0")]
    assert v["gdr"] == "enabled" and v["via"] == "0000:04:00.0", v


@pytest.mark.parametrize("version,word", [
    ("2.30.7", "disabled"),  # paths.cc:794-810@v2.30.7
    ("2.29.2", "disabled"),  # paths.cc:703-720@v2.29.2
    ("2.28.9", "enabled"),  # paths.cc:699-712@v2.28.9: every NIC on the GPU's Grace is P2C
])
def test_p2c_only_for_the_faster_nic_on_one_grace_paths_cc_794_810(version, word):
    """paths.cc:794-810@v2.30.7, :703-720@v2.29.2: P2C is set for the GPU's local NICs (ncclTopoGetLocal:
    bandwidth first). Two NICs on the GPU's own Grace at 400 and 200 Gb/s: only the 400 Gb/s one is P2C; the
    other stays PHB, beyond the default P2C level."""
    _, pairs = N.decide(CASES / "grace-p2c-faster-nic.xml", version)
    assert pairs[("0009:01:00.0", "0000:01:00.0")]["gdr"] == "enabled", pairs[("0009:01:00.0", "0000:01:00.0")]
    v = pairs[("0009:01:00.0", "0002:01:00.0")]
    assert v["gdr"] == word, (version, v)


@pytest.mark.parametrize("version,path_type,word", [
    ("2.21.5", "PHB", "disabled"),  # paths.cc:71@v2.21.5
    ("2.30.4", "PHB", "disabled"),  # paths.cc:80@v2.30.4
    ("2.30.7", "NVB", "unknown"),  # paths.cc:96-99@v2.30.7: the best type; NVML's answer is not in the file
])
def test_nvb_against_an_as_short_wider_root_port_path_paths_cc_80(version, path_type, word):
    """paths.cc:71@v2.21.5, :80@v2.30.4: a path replaces the one found first only with no more hops and more
    bandwidth. Three sm80 GPUs on root ports of one Intel socket, chained by single NVLinks (20 GB/s): the far
    pair's PCIe path (GPU, CPU, GPU: as short as NVB's GPU, GPU, GPU) is Gen4 x16, 24 GB/s, so NCCL keeps PHB
    and P2P is off (PXB default); 2.30.7 keeps the better type, NVB."""
    _, pairs = N.decide(CASES / "nvb-against-root-port-pcie.xml", version)
    v = pairs[("0000:17:00.0", "0000:4b:00.0")]
    assert v["path_type"] == path_type and v["p2p"] == word, (version, v)


@pytest.mark.parametrize("version", ["2.18.6", "2.30.7"])
def test_nccl_dump_without_nvlink_decides_the_read_side_paths_cc_489_508(version):
    """paths.cc:489-508@v2.30.7 (paths.cc:360-377@v2.18.1): the send side's default needs an NVLink peer (sm <
    80, or any GPU before 2.19). NCCL's own dump lists every NVLink it found (xml.cc:930-995@v2.30.7) and the
    communicator's GPUs: two V100s without <nvlink> have no peer, so the default read side is off, not
    unknown."""
    _, pairs = N.decide(CASES / "no-nvlink-volta-read-side.xml", version)
    v = pairs[("0000:03:00.0", "0000:05:00.0")]
    assert v["gdr"] == "enabled" and v["gdr_read"] == "disabled", v


G0, G2 = "0000:03:00.0", "0000:83:00.0"
NIC0, NIC1 = "0000:05:00.0", "0000:85:00.0"
SITE = "/usr/local/lib/python3.10/dist-packages"
NEWER = "newer than the newest release gdrcheck models (2.30.7)"


def two_socket_node(tmp_path, name, files=None, cpuinfo=None, cpu="GenuineIntel", rate="200 Gb/sec (4X HDR)"):
    """Two GPUs on two sockets, each with a NIC under its own switch (a SYS GPU pair)."""
    files = dict(files or {})
    if cpuinfo:
        files["/proc/cpuinfo"] = cpuinfo
    return N.build(tmp_path / name, cpu=cpu, devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"),
                                                      ("gpu", G2, 1, "switch"), ("nic", NIC1, 1, "switch")],
                   rates={"mlx5_0": rate, "mlx5_1": rate}, files=files)


@pytest.mark.parametrize("case,files,version", [
    ("newer-by-option", {}, "2.32.3"),
    ("newer-on-the-node", {f"{SITE}/nvidia_nccl_cu12-2.32.6.dist-info/METADATA": "Name: nvidia-nccl-cu12\n"}, None),
])
def test_a_version_newer_than_modelled_is_said_however_it_arrived(tmp_path, case, files, version):
    """NCCL 2.31.2, 2.32.3 and 2.32.6 are released (NVIDIA's NCCL release notes); gdrcheck models up to 2.30.7.
    nccl.version_reason says so, whichever way the version arrived, and the document carries the newest
    modelled release for the text's rules header."""
    top, _ = N.decide(two_socket_node(tmp_path, case, files), version)
    assert top["version"] in ("2.32.3", "2.32.6") and NEWER in top["version_reason"], top["version_reason"]
    assert top["newest_modelled"] == "2.30.7"
    top, _ = N.decide(two_socket_node(tmp_path, case + "-2.30.7", {}), "2.30.7")
    assert NEWER not in top["version_reason"] and "newest_modelled" not in top


ZEN5 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nflags\t\t: fpu\n\n"


@pytest.mark.parametrize("version,word,depends", [
    ("2.30.7", "disabled", None),  # topo.h AMD_BW 16@v2.30.7: both NICs (24 GB/s) are faster than the CPU link
    # dev (2.31.0a7) topo.cc:76-80: Zen 5 32 GB/s; whether 2.32.3 ships it is not known: P2P depends on the check
    ("2.32.3", "enabled", "development branch"),
])
def test_cpu_link_of_a_newer_release_is_unknown_where_the_dev_branch_changed_it(tmp_path, version, word, depends):
    """NVIDIA/nccl's dev branch (2.31.0a7, topo.cc:76-80 and 750-771) sets AMD's CPU link by Zen generation (Zen 5:
    32 GB/s, 16 before) and classes Granite Rapids/Sierra Forest as Emerald Rapids (40 GB/s). For a release newer
    than 2.30.7 whose notes do not say, the network-faster check (ncclTopoCheckNet) it would change is not known,
    and P2P depends on it (as for any check the input cannot settle), not 2.30.7's answer."""
    root = two_socket_node(tmp_path, f"zen5-{version}", cpuinfo=ZEN5, cpu="AuthenticAMD")
    _, pairs = N.decide(root, version, {"NCCL_P2P_LEVEL": "SYS"})
    v = pairs[(G0, G2)]
    assert v["p2p"] == word, v
    assert (depends is None) == (not v.get("depends_on")), v
    assert depends is None or any(depends in d for d in v["depends_on"]), v


@pytest.mark.parametrize("version", ["2.21.5", "2.30.7"])
def test_pxn_through_a_wider_relay_paths_cc_835_836(version):
    """paths.cc:835-836@v2.30.7 (paths.cc:617-618@v2.21.5): NCCL relays through the NIC's local GPU when that
    GPU's path to the NIC is wider, not only when the GPU's own path crosses a CPU. An x8 GPU two switches from
    the NIC (PXB, 12 GB/s) NVLinked to an x16 GPU beside the NIC (PIX, 24 GB/s): under NCCL_NET_GDR_LEVEL=PIX the
    x8 GPU keeps GDR through the x16 one."""
    _, pairs = N.decide(CASES / "pxn-wider-relay.xml", version, {"NCCL_NET_GDR_LEVEL": "PIX"})
    v = pairs[("0000:03:00.0", "0000:05:00.0")]
    assert v["gdr"] == "enabled" and v["via"] == "0000:04:00.0", v
