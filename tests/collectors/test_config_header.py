"""Facts from config space agree with the sysfs attribute files the kernel fills from it.

On real captures (the ``fixtures/*/snapshot.tar.gz`` of lent H100/H200 VMs, with 256 and 4096 bytes of
config space, and hwloc's Linux captures in ``../shared/hwloc-linux``, 64 bytes): every fact
:mod:`gdrcheck.collectors.config_header` takes from ``config`` equals what the attribute file says,
wherever the capture holds that file. Then the cases no capture shows, named after the case, and what
the collector reads.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Optional

import pytest
from support.replay import replay_tree
from support.shared_unpack import unpacked_once

from builders.sysfs_tree import SysfsTree
from gdrcheck.collectors.config_header import header_facts, link_facts
from gdrcheck.collectors.sysfs_pci import DEVICES, collect_sysfs_pci, parse_int, parse_speed
from gdrcheck.io.source import Source
from gdrcheck.record import replace

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = sorted((ROOT / "fixtures").glob("*/snapshot.tar.gz"))
HWLOC_LINUX = ROOT.parent / "shared" / "hwloc-linux"
HWLOC_CAPTURES = sorted(HWLOC_LINUX.glob("*.tar.bz2")) if HWLOC_LINUX.is_dir() else []

# fact -> (attribute file, how the collector parses it)
ATTRIBUTE = {
    "vendor": ("vendor", lambda t: parse_int(t, 16)),
    "device": ("device", lambda t: parse_int(t, 16)),
    "revision": ("revision", lambda t: parse_int(t, 16)),
    "subsys_vendor": ("subsystem_vendor", lambda t: parse_int(t, 16)),
    "subsys_device": ("subsystem_device", lambda t: parse_int(t, 16)),
    "secondary_bus": ("secondary_bus_number", parse_int),
    "subordinate_bus": ("subordinate_bus_number", parse_int),
    "cur_speed": ("current_link_speed", parse_speed),
    "max_speed": ("max_link_speed", parse_speed),
    "cur_width": ("current_link_width", lambda t: parse_int(t) or None),
    "max_width": ("max_link_width", lambda t: parse_int(t) or None),
}


def _compare(root: Path) -> dict[str, int]:
    """Every fact config decides against its attribute file; returns how many were compared, per fact."""
    compared: dict[str, int] = {}
    devices = root / DEVICES.lstrip("/")
    for d in sorted(devices.iterdir()):
        cfg_file = d / "config"
        if not cfg_file.is_file() or (d / "physfn").exists():
            continue
        config = cfg_file.read_bytes()
        cls = parse_int((d / "class").read_text(), 16) if (d / "class").is_file() else None
        facts = {**header_facts(config, cls), **link_facts(config)}
        for key, value in facts.items():
            name, parse = ATTRIBUTE[key]
            f = d / name
            if f.is_file():
                assert value == parse(f.read_text().split("\n", 1)[0].strip()), (root.name, d.name, key)
                compared[key] = compared.get(key, 0) + 1
            elif key in ("secondary_bus", "subordinate_bus", "cur_speed", "cur_width", "max_speed", "max_width"):
                # the kernel shows these only for bridges / PCI Express functions: none decided, no file
                # -- or a kernel older than the attribute (hwloc's captures of bridges)
                assert value is None or key.endswith("_bus"), (root.name, d.name, key)
    return compared


@pytest.mark.parametrize("archive", SNAPSHOTS, ids=lambda p: p.parent.name)
def test_config_agrees_with_attribute_files_on_vm_snapshots(archive, tmp_path_factory):
    got = _compare(unpacked_once(archive, tmp_path_factory))
    # every function's ids, and the passed-through GPUs' links (4096 bytes, a PCI Express capability)
    for key in ("vendor", "device", "revision", "subsys_vendor", "subsys_device",
                "cur_speed", "cur_width", "max_speed", "max_width"):
        assert got.get(key), (archive.parent.name, key, got)


@pytest.mark.skipif(not HWLOC_CAPTURES, reason="../shared/hwloc-linux is not present")
@pytest.mark.parametrize("archive", HWLOC_CAPTURES, ids=lambda p: p.name[: -len(".tar.bz2")])
def test_config_agrees_with_attribute_files_on_hwloc_captures(archive, tmp_path_factory):
    root = unpacked_once(archive, tmp_path_factory)
    got = _compare(root)
    if any(root.rglob("config")):
        assert got.get("vendor") and got.get("device")


class ConfigHidden(Source):
    """The same capture with no config space readable: every fact from the attribute files."""

    def read_bytes(self, path, limit=1 << 20):
        if path.endswith("/config"):
            return None
        return super().read_bytes(path, limit)


@pytest.mark.parametrize("archive", SNAPSHOTS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("endpoint_config", [True, False])
def test_collector_facts_same_from_config_and_from_files(archive, endpoint_config, tmp_path_factory):
    root = str(unpacked_once(archive, tmp_path_factory))
    from_config = collect_sysfs_pci(Source(root), endpoint_config=endpoint_config)[0]
    from_files = collect_sysfs_pci(ConfigHidden(root), endpoint_config=endpoint_config)[0]
    assert _without_config(from_config) == _without_config(from_files)


def _without_config(devices):
    return [replace(d, config=None) for d in devices]


# ---------------------------------------------------------------------------
# cases no capture shows


def _config(*, vendor=0x10DE, device=0x2335, cls=0x030200, rev=0xA1, hdr=0, subsys=(0x10DE, 0x18BE),
            port_type: Optional[int] = 0, cap_version=2, lnksta=(4, 16), lnkcap=(4, 16), lnkcap2=0x1E,
            ssvid: Optional[tuple] = None, size=4096, buses=(0x02, 0x03, 0x05)) -> bytes:
    cfg = bytearray(4096)  # built whole, then cut to what was read (64 bytes without root)
    struct.pack_into("<HHHH", cfg, 0, vendor, device, 0x0006, 0x0010)
    struct.pack_into("<I", cfg, 8, cls << 8 | rev)
    cfg[0x0E] = hdr
    if hdr == 1:
        cfg[0x18], cfg[0x19], cfg[0x1A] = buses
    else:
        struct.pack_into("<HH", cfg, 0x2C, *subsys)
    caps: list[int] = []
    if port_type is not None:
        caps.append(0x40)
        cfg[0x40] = 0x10
        struct.pack_into("<H", cfg, 0x42, cap_version | port_type << 4)
        struct.pack_into("<I", cfg, 0x4C, lnkcap[0] | lnkcap[1] << 4)
        struct.pack_into("<H", cfg, 0x52, lnksta[0] | lnksta[1] << 4)
        struct.pack_into("<I", cfg, 0x6C, lnkcap2)
    if ssvid is not None:
        caps.append(0x80)
        cfg[0x80] = 0x0D
        struct.pack_into("<HH", cfg, 0x84, *ssvid)
    cfg[0x34] = caps[0] if caps else 0
    for a, b in zip(caps, caps[1:]):
        cfg[a + 1] = b
    return bytes(cfg[:size])


def test_endpoint_ids_and_gen4_link():
    cfg = _config()
    assert header_facts(cfg, 0x030200) == {"vendor": 0x10DE, "device": 0x2335, "revision": 0xA1,
                                           "subsys_vendor": 0x10DE, "subsys_device": 0x18BE,
                                           "secondary_bus": None, "subordinate_bus": None}
    assert link_facts(cfg) == {"cur_speed": 16.0, "cur_width": 16, "max_speed": 16.0, "max_width": 16}


def test_sriov_vf_reads_all_ones_vendor_and_is_left_to_the_files():
    assert header_facts(_config(vendor=0xFFFF, device=0xFFFF), 0x020000) == {}


def test_class_rewritten_by_a_kernel_fixup_leaves_everything_to_the_files():
    # e.g. a root port a host driver makes a PCI bridge (tegra_pcie_fixup_class), or probe.c's class 0
    # for a header type that does not match the class
    assert header_facts(_config(cls=0x060000, hdr=1), 0x060400) == {}
    assert header_facts(_config(cls=0x060400, hdr=0), 0x000000) == {}


def test_bridge_subsystem_from_ssvid_capability_or_zero():
    with_cap = header_facts(_config(cls=0x060400, hdr=1, port_type=6, ssvid=(0x1000, 0xA064)), 0x060400)
    assert (with_cap["subsys_vendor"], with_cap["subsys_device"]) == (0x1000, 0xA064)
    assert (with_cap["secondary_bus"], with_cap["subordinate_bus"]) == (0x03, 0x05)
    without = header_facts(_config(cls=0x060400, hdr=1, port_type=6), 0x060400)
    assert (without["subsys_vendor"], without["subsys_device"]) == (0, 0)


def test_bridge_read_without_root_leaves_subsystem_to_the_files():
    got = header_facts(_config(cls=0x060400, hdr=1, port_type=6, ssvid=(0x1000, 0xA064), size=64), 0x060400)
    assert "subsys_vendor" not in got and "subsys_device" not in got
    assert got["secondary_bus"] == 0x03 and got["vendor"] == 0x10DE
    assert link_facts(_config(size=64)) == {}


def test_link_down_reads_unknown_speed_and_no_width():
    # a downstream port with nothing behind it: Link Status speed 0, width 0 (sysfs: "Unknown", "0")
    got = link_facts(_config(cls=0x060400, hdr=1, port_type=6, lnksta=(0, 0)))
    assert got["cur_speed"] is None and got["cur_width"] is None and got["max_speed"] == 16.0


def test_conventional_pci_function_has_no_link():
    assert link_facts(_config(port_type=None, size=256)) == dict.fromkeys(
        ("cur_speed", "cur_width", "max_speed", "max_width"))


def test_gen6_and_kernel_dependent_speeds_are_left_to_the_files():
    assert "cur_speed" not in link_facts(_config(lnksta=(6, 16)))
    assert "max_speed" not in link_facts(_config(lnkcap=(6, 16), lnkcap2=0x7E))
    # LNKCAP2 lists 32 GT/s, LNKCAP's Max Link Speed says 16: 6.13 and later show 16, earlier kernels 32
    assert "max_speed" not in link_facts(_config(lnkcap=(4, 16), lnkcap2=0x3E))
    # an all-zero LNKCAP: width 255 on newer kernels, 0 before
    assert "max_width" not in link_facts(_config(lnkcap=(0, 0), lnkcap2=0))


def test_pcie_capability_version_1_has_no_link_capabilities_2():
    # past a version 1 capability the bytes are not LNKCAP2 (pcie_capability_reg_implemented)
    assert link_facts(_config(cap_version=1, lnkcap=(2, 8), lnkcap2=0x3E))["max_speed"] == 5.0
    assert link_facts(_config(cap_version=2, lnkcap=(1, 8), lnkcap2=0))["max_speed"] == 2.5


def test_root_complex_integrated_endpoint_link_is_left_to_the_files():
    assert link_facts(_config(port_type=9)) == {}


def test_switch_port_with_version_1_capability_is_left_to_the_files():
    # kernels before pcie_cap_has_lnkctl() listed switch ports read no link registers of a version 1 capability
    assert link_facts(_config(port_type=6, cap_version=1)) == {}
    assert link_facts(_config(port_type=0, cap_version=1))["cur_speed"] == 16.0


# ---------------------------------------------------------------------------
# what the collector reads


def _tree(tmp_path: Path) -> Path:
    t = SysfsTree(tmp_path / "t")
    t.add_root(0, 0, numa=0)
    t.add("0000:00:01.0", root=(0, 0), cls=0x060400, vendor=0x8086, device=0x2030)
    t.add("0000:01:00.0", parent="0000:00:01.0", cls=0x060400, vendor=0x1000, device=0xC030,
          subsystem=(0x1000, 0xA064))
    t.add("0000:02:00.0", parent="0000:01:00.0", cls=0x060400, vendor=0x1000, device=0xC030,
          subsystem=(0x1000, 0xA064))
    t.add("0000:03:00.0", parent="0000:02:00.0", driver="nvidia")
    t.write()
    return t.root_dir


class Counting(Source):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.paths: list[str] = []

    def read_bytes(self, path, limit=1 << 20):
        self.paths.append(path)
        return super().read_bytes(path, limit)


ATTRIBUTE_FILES = {name for name, _p in ATTRIBUTE.values()}


def test_full_config_space_stands_in_for_the_attribute_files(tmp_path):
    root = str(_tree(tmp_path))
    src = Counting(root)
    devices = {d.bdf: d for d in collect_sysfs_pci(src)[0]}
    assert not [p for p in src.paths if p.rsplit("/", 1)[-1] in ATTRIBUTE_FILES]
    usp = devices["0000:01:00.0"]
    assert (usp.subsys_vendor, usp.subsys_device, usp.secondary_bus, usp.subordinate_bus) == (0x1000, 0xA064, 2, 3)
    assert devices["0000:03:00.0"].link.max_speed == 16.0
    assert _without_config(devices.values()) == _without_config(collect_sysfs_pci(ConfigHidden(root))[0])


def test_recording_source_keeps_the_files_for_other_reading_policies(tmp_path):
    """A snapshot is taken with endpoint config; ``topology --from`` replays it without: the attribute
    files the replay needs are in the archive."""
    root = str(_tree(tmp_path))
    rec = Counting(root, record=True)
    collect_sysfs_pci(rec, endpoint_config=True)
    assert {p.rsplit("/", 1)[-1] for p in rec.paths} >= {"vendor", "device", "subsystem_vendor",
                                                         "max_link_speed"}
    replay = replay_tree(rec, tmp_path / "replay")
    for ep in (True, False):
        assert collect_sysfs_pci(replay, endpoint_config=ep)[0] == \
            collect_sysfs_pci(Source(root), endpoint_config=ep)[0]
