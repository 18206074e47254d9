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

