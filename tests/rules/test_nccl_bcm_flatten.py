"""NCCL's flattening of Broadcom PEX switches (``gdrcheck.rules.nccl.bcm``; v2.30.7 ``src/graph/topo.cc:195-268``).

A PEX89xxx (Gen5) or PEX88xxx (Gen4) in base mode shows two levels of switches; NCCL takes the second level
into the first, so two devices below one chip are PIX to NCCL where nvidia-smi says PXB. Each case is named
after the layout it holds: one chip, two chips one below the other (NCCL fuses each chip, never the two), and a
Gen4 chip under NCCL versions whose test differs.
"""

from __future__ import annotations

import pytest
from support import nccl_nodes as N

from gdrcheck.rules.nccl import bcm

LEVEL0, LEVEL1 = (0x1000, 0x0000), (0x1000, 0x1000)
GEN5, GEN4 = 0xC030, 0xC010


def one_gen5_chip(tmp_path):
    """pex89-base-mode: the socket's switch (level 0) with two level-1 switches below it; two GPUs under one,
    a ConnectX under the other."""
    below = [(0, "0000:10:00.0", ["0000:11:00.0", "0000:11:01.0"], "0000:02:06.0", LEVEL1, GEN5),
             (0, "0000:20:00.0", ["0000:21:00.0"], "0000:02:07.0", LEVEL1, GEN5)]
    devices = [("gpu", "0000:12:00.0", 0, "0000:11:00.0"), ("gpu", "0000:13:00.0", 0, "0000:11:01.0"),
               ("nic", "0000:22:00.0", 0, "0000:21:00.0")]
    return N.build(tmp_path / "pex89-base-mode", devices=devices, below=below)


def two_gen5_chips(tmp_path):
    """pex89-cascade: chip A (the socket's switch and its level-1 switch, a ConnectX below) and below it chip B
    (its own level 0 and level 1), GPUs below chip B."""
    below = [(0, "0000:10:00.0", ["0000:11:00.0", "0000:11:01.0"], "0000:02:06.0", LEVEL1, GEN5),
             (0, "0000:20:00.0", ["0000:21:00.0", "0000:21:01.0"], "0000:11:01.0", LEVEL0, GEN5),
             (0, "0000:30:00.0", ["0000:31:00.0", "0000:31:01.0"], "0000:21:00.0", LEVEL1, GEN5)]
    devices = [("nic", "0000:12:00.0", 0, "0000:11:00.0"), ("gpu", "0000:32:00.0", 0, "0000:31:00.0"),
               ("gpu", "0000:33:00.0", 0, "0000:31:01.0"), ("gpu", "0000:22:00.0", 0, "0000:21:01.0")]
    return N.build(tmp_path / "pex89-cascade", devices=devices, below=below)


def gen4_chip(tmp_path, name, sub_subsystem):
    """A PEX88xxx (subsystem 0xa000 at the top) under the socket's switch, a GPU and a ConnectX below its two
    second-level switches (subsystem ``sub_subsystem``)."""
    below = [(0, "0000:10:00.0", ["0000:11:00.0", "0000:11:01.0"], "0000:02:06.0", (0x1000, 0xA000), GEN4),
             (0, "0000:20:00.0", ["0000:21:00.0"], "0000:11:00.0", (0x1000, sub_subsystem), GEN4),
             (0, "0000:30:00.0", ["0000:31:00.0"], "0000:11:01.0", (0x1000, sub_subsystem), GEN4)]
    devices = [("gpu", "0000:22:00.0", 0, "0000:21:00.0"), ("nic", "0000:32:00.0", 0, "0000:31:00.0")]
    return N.build(tmp_path / name, devices=devices, below=below)


def test_one_gen5_chip_is_one_switch_to_nccl(tmp_path):
    root = one_gen5_chip(tmp_path)
    _top, pairs = N.decide(root, "2.30.7")
    p = pairs[("0000:12:00.0", "0000:22:00.0")]
    assert p["path_type"] == "PIX" and p.get("broadcom_flattened") is True, p
    same_sub = pairs[("0000:12:00.0", "0000:13:00.0")]
    assert same_sub["path_type"] == "PIX" and "broadcom_flattened" not in same_sub, same_sub


def test_gen5_chips_are_not_flattened_before_2_20_3(tmp_path):
    """pex89-base-mode-2.19: getBcmGen and Gen5 parts came in 2.20.3; 2.19 knows only Gen4."""
    _top, pairs = N.decide(one_gen5_chip(tmp_path), "2.19.3")
    p = pairs[("0000:12:00.0", "0000:22:00.0")]
    assert p["path_type"] == "PXB" and "broadcom_flattened" not in p, p


def test_two_chips_one_below_the_other_stay_two_switches(tmp_path):
    """pex89-cascade: chip B's top is a first-level part, so chip A never takes it in: the ConnectX below chip A
    and the GPUs below chip B are PXB apart; GPUs below chip B's two levels are PIX."""
    _top, pairs = N.decide(two_gen5_chips(tmp_path), "2.30.7")
    across = pairs[("0000:32:00.0", "0000:12:00.0")]
    assert across["path_type"] == "PXB" and "broadcom_flattened" not in across, across
    within = pairs[("0000:22:00.0", "0000:32:00.0")]
    assert within["path_type"] == "PIX" and within.get("broadcom_flattened") is True, within
    same_sub = pairs[("0000:32:00.0", "0000:33:00.0")]
    assert same_sub["path_type"] == "PIX" and "broadcom_flattened" not in same_sub, same_sub


@pytest.mark.parametrize("case,sub,version,path_type", [
    ("pex88-same-id-2.19", 0xA000, "2.19.3", "PIX"),
    ("pex88-other-subsystem-2.19", 0xA001, "2.19.3", "PXB"),   # until 2.19 a sub switch must have the same id
    ("pex88-other-subsystem-2.20", 0xA001, "2.20.3", "PIX"),   # getBcmGen masks the low 12 bits
    ("pex88-same-id-2.9.5", 0xA000, "2.9.5", "PXB"),           # flattening came in 2.9.6
])
def test_gen4_chip_by_version(tmp_path, case, sub, version, path_type):
    _top, pairs = N.decide(gen4_chip(tmp_path, case, sub), version)
    p = pairs[("0000:22:00.0", "0000:32:00.0")]
    assert p["path_type"] == path_type and bool(p.get("broadcom_flattened")) == (path_type == "PIX"), (case, p)


def test_a_first_level_part_takes_in_the_second_level_part_above_it():
    """NCCL looks at every link of the switch it flattens, its parent's too (topo.cc:215-227): a level-0 part
    below a level-1 part takes that parent in. Literal case, no machine gives it."""
    ids = {"up": bcm.device_id(0x1000, GEN5, *LEVEL1), "down": bcm.device_id(0x1000, GEN5, *LEVEL0),
           "leaf": bcm.device_id(0x1000, GEN5, *LEVEL1)}
    links = {"up": ["down"], "down": ["up", "leaf"], "leaf": ["down"]}
    into = bcm.fuse(["up", "down", "leaf"], links, ids, (2, 30, 7))
    assert into == {"up": "down", "down": "down", "leaf": "down"}


def test_restart_index_does_not_change_the_result():
    """Before 2.27.3 the walk restarts at the second node, from it at the first: index 0 has always been
    looked at already, so both give the same fusion."""
    ids = {n: bcm.device_id(0x1000, GEN4, 0x1000, 0xA000) for n in ("a", "b", "c", "d")}
    links = {"a": ["b", "c"], "b": ["a"], "c": ["a", "d"], "d": ["c"]}
    for v in ((2, 26, 6), (2, 27, 3)):
        assert bcm.fuse(["a", "b", "c", "d"], links, ids, v) == {"a": "a", "b": "a", "c": "a", "d": "d"}


NCCL_XML = """<system version="1">
  <cpu host_hash="0x1" numaid="0" affinity="ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:01:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000"
         subsystem_device="{top}" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:03:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000"
           subsystem_device="0x1000" link_speed="32.0 GT/s PCIe" link_width="16">
        <pci busid="0000:05:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe"
             link_width="16"><gpu dev="0" sm="90" rank="0" gdr="1"/></pci>
      </pci>
      <pci busid="0000:07:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000"
           subsystem_device="0x1000" link_speed="32.0 GT/s PCIe" link_width="16">
        <pci busid="0000:09:00.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe"
             link_width="16"><nic><net name="mlx5_0" dev="0" speed="400000" port="1" gdr="1"/></nic></pci>
      </pci>
    </pci>
  </cpu>
</system>
"""


@pytest.mark.parametrize("case,top,path_type", [
    ("nccl-xml-pex89-base-mode", "0x0000", "PIX"),
    ("nccl-xml-pex89-two-level-1-parts", "0x1000", "PXB"),
])
def test_an_nccl_dump_is_flattened_on_its_own_switches(tmp_path, case, top, path_type):
    """An NCCL topology dump holds NCCL's own PCI nodes (one <pci> per switch): NCCL flattens them when it
    loads the file. A level-0 part above two level-1 parts is one switch; two level-1 parts stay apart."""
    path = tmp_path / f"{case}.xml"
    path.write_text(NCCL_XML.format(top=top))
    _top, pairs = N.decide(path, "2.30.7")
    p = pairs[("0000:05:00.0", "0000:09:00.0")]
    assert p["path_type"] == path_type and bool(p.get("broadcom_flattened")) == (path_type == "PIX"), (case, p)
