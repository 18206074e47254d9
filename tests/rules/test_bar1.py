"""BAR1 read three ways: the Resizable BAR parser, the GDR100-GDR119 rules, the report and its table."""

import io
import json
import re
import struct
from pathlib import Path

import pytest

from gdrcheck.collectors.nvml import collect_nvml
from gdrcheck.collectors.pastes.nvidia_smi import parse_smi_text, parse_smi_xml, rows_to_gpus
from gdrcheck.documents.bar1 import bar1_doc
from gdrcheck.io.source import Source
from gdrcheck.model import Bar, CollectorStatus, PciFunction, Snapshot
from gdrcheck.pcie.caps import find_ext_cap
from gdrcheck.pcie.rebar import bar1_index, parse_rebar, parse_resize_file, sizes_from_mask, sysfs_bar1
from gdrcheck.pcie.topology import Topology
from gdrcheck.record import replace
from gdrcheck.render.bar1_text import render_bar1
from gdrcheck.rules import bar1
from gdrcheck.rules.base import Context, Options
from gdrcheck.rules.engine import build_pairs
from gdrcheck.units import human_bytes, size_range_text

ROOT = Path(__file__).resolve().parents[2]
SMI = ROOT / "fixtures" / "nvidia-smi-q"
MIB, GIB = 1 << 20, 1 << 30
PREF64, MEM32, UNSET = 0x14220C, 0x040200, 0x20000000


# ---------------------------------------------------------------------------
# config space with a Resizable BAR capability


def rebar_config(entries, other_cap_first=True) -> bytes:
    """4096-byte config space; ``entries``: (bar index, current bytes, supported bytes...)."""
    cfg = bytearray(4096)
    struct.pack_into("<HH", cfg, 0, 0x10DE, 0x26B1)
    off = 0x100
    if other_cap_first:  # an AER capability first, as on real GPUs
        struct.pack_into("<I", cfg, 0x100, 0x0001 | (2 << 16) | (0x148 << 20))
        off = 0x148
    struct.pack_into("<I", cfg, off, 0x0015 | (1 << 16))
    for i, (bar, cur, supported) in enumerate(entries):
        mask = sum(1 << ((s // MIB).bit_length() - 1) for s in supported)
        ctrl = bar | ((len(entries) << 5) if i == 0 else 0) | (((cur // MIB).bit_length() - 1) << 8)
        ctrl |= ((mask >> 28) & 0xFFFF) << 16
        struct.pack_into("<II", cfg, off + 4 + 8 * i, (mask & 0x0FFFFFFF) << 4, ctrl)
    return bytes(cfg)


ADA_SIZES = [MIB << n for n in range(6, 17)]  # 64 MiB .. 64 GiB
ADA_CFG = rebar_config([(0, 16 * MIB, [16 * MIB]), (1, 64 * GIB, ADA_SIZES), (3, 32 * MIB, [32 * MIB])])


def test_parse_rebar_like_lspci_shows_it():
    got = parse_rebar(ADA_CFG)
    assert sorted(got) == [0, 1, 3]
    assert got[1].current_bytes == 64 * GIB and got[1].supported_bytes == tuple(ADA_SIZES)
    assert got[1].max_bytes == 64 * GIB
    assert got[0].supported_bytes == (16 * MIB,) and got[3].current_bytes == 32 * MIB
    assert size_range_text(got[1].supported_bytes, human_bytes) == "64 MiB..64 GiB"
    assert parse_rebar(rebar_config([(1, 256 * MIB, ADA_SIZES)], other_cap_first=False))[1].current_bytes == 256 * MIB


def test_parse_rebar_sizes_past_128_tib():
    big = [MIB << 28, MIB << 29]  # 256 TiB, 512 TiB: control register bits 16+
    assert parse_rebar(rebar_config([(2, MIB << 28, big)]))[2].supported_bytes == tuple(big)


def test_rebar_absent_short_or_looping():
    assert parse_rebar(None) == {} and parse_rebar(ADA_CFG[:64]) == {} and parse_rebar(ADA_CFG[:256]) == {}
    loop = bytearray(4096)
    struct.pack_into("<I", loop, 0x100, 0x0001 | (1 << 16) | (0x100 << 20))  # points at itself
    assert find_ext_cap(bytes(loop), 0x15) is None
    ff = bytes([0xFF]) * 4096  # a device that fell off the bus reads all ones
    assert parse_rebar(ff) == {}


def test_resize_file():
    assert parse_resize_file("0000000000003fc0\n") == tuple(MIB << n for n in range(6, 14))
    assert parse_resize_file("") == () and parse_resize_file("garbage") == ()
    assert sizes_from_mask(0b101) == (MIB, 4 * MIB)


def _gpu(bdf, bar1_bytes=64 * GIB, *, bar0_64=False, unset=False, config=None, vendor=0x10DE, driver="nvidia"):
    bus = int(bdf.split(":")[1], 16)
    b1 = 2 if bar0_64 else 1
    bars = (Bar(0, 0xF0000000, 16 * MIB, PREF64 if bar0_64 else MEM32, bar0_64, bar0_64),
            Bar(b1, 0 if unset else 0x3F000000000, bar1_bytes, PREF64 | (UNSET if unset else 0), True, True, unset),
            Bar(b1 + 2, 0x40000000000, 32 * MIB, PREF64, True, True))
    return PciFunction(bdf=bdf, root=f"0000:{bus:02x}", class_code=0x030000, vendor=vendor, device=0x26B1,
                       driver=driver, bars=bars, config=config, numa_node=0)


def test_bar1_index_follows_bar0_width():
    assert bar1_index(_gpu("0000:17:00.0")) == 1
    assert bar1_index(_gpu("0000:17:00.0", bar0_64=True)) == 2  # Hopper: Region 0 is 64-bit, BAR1 is Region 2
    s = sysfs_bar1(_gpu("0000:17:00.0", 256 * GIB, bar0_64=True))
    assert (s["sysfs_bar1_index"], s["sysfs_bar1_bytes"], s["sysfs_bar1_unset"]) == (2, 256 * GIB, False)


def test_sysfs_bar1_views():
    s = sysfs_bar1(_gpu("0000:17:00.0", config=ADA_CFG))
    assert s["sysfs_bar1_bytes"] == 64 * GIB and s["sysfs_bar1_prefetchable"] and s["sysfs_bar1_64bit"]
    assert s["rebar_current_bytes"] == 64 * GIB and s["rebar_source"] == "config"
    assert s["rebar_supported_bytes"] == ADA_SIZES
    assert sysfs_bar1(_gpu("0000:17:00.0", unset=True))["sysfs_bar1_unset"] is True
    gone = replace(_gpu("0000:17:00.0"), bars=(Bar(0, 0xF0000000, 16 * MIB, MEM32),))
    assert sysfs_bar1(gone)["sysfs_bar1_unset"] is True  # an all-zero resource line
    nobody = sysfs_bar1(PciFunction(bdf="0000:17:00.0", root="0000:17"))
    assert nobody["sysfs_bar1_bytes"] is None and nobody["sysfs_bar1_unset"] is None
    by_file = sysfs_bar1(_gpu("0000:17:00.0", 256 * MIB), "0000000000000fc0\n")
    assert by_file["rebar_source"] == "resource1_resize" and by_file["rebar_current_bytes"] == 256 * MIB


def test_realworld_rtx6000ada_rebar(realworld):
    """The two stelline machines: lspci's ReBAR lines, encoded and decoded, give gdscheck's BAR size."""
    for d in sorted(realworld.glob("stelline-*")):
        text = (d / "lspci-vvv-selected.txt").read_text()
        m = re.search(r"BAR 1: current size: (\d+)([MG])B, supported: ([0-9MGB ]+)", text)
        unit = {"M": MIB, "G": GIB}
        cur = int(m.group(1)) * unit[m.group(2)]
        sup = [int(x[:-2]) * unit[x[-2]] for x in m.group(3).split()]
        got = parse_rebar(rebar_config([(1, cur, sup)]))[1]
        region = re.search(r"Region 1: Memory at \w+ \(64-bit, prefetchable\) \[size=(\d+)G\]", text)
        gds = re.search(r"bar size \(MiB\):(\d+)", (d / "gdscheck-p.txt").read_text())
        assert got.current_bytes == int(region.group(1)) * GIB == int(gds.group(1)) * MIB == 64 * GIB
        assert size_range_text(got.supported_bytes, human_bytes) == "64 MiB..64 GiB"


# ---------------------------------------------------------------------------
# rules


def smi_gpus(name, **change):
    text = (SMI / name).read_text()
    rows = parse_smi_xml(text) if name.endswith(".xml") else parse_smi_text(text)
    return [replace(g, **change) for g in rows_to_gpus(rows)]


def judge(devices, gpus, *, nic=True, nvme=False, collectors=None, **opts):
    devs = list(devices)
    if nic:
        devs.append(PciFunction(bdf="0000:c1:00.0", root="0000:c1", class_code=0x020000, vendor=0x15B3,
                                device=0x1021, driver="mlx5_core", rdma_devices=("mlx5_0",), numa_node=0))
    if nvme:
        devs.append(PciFunction(bdf="0000:c2:00.0", root="0000:c2", class_code=0x010802, vendor=0x144D,
                                device=0xA80A, driver="nvme", numa_node=0))
    if collectors is None:
        collectors = (CollectorStatus("nvml", "ok", f"{len(gpus)} GPUs"),)
    snap = Snapshot(input_kind="sysfs", label="test", devices=tuple(devs), gpus=tuple(gpus),
                    roots=tuple(sorted({d.root for d in devs})), root_numa={d.root: 0 for d in devs},
                    collectors=tuple(collectors))
    topo = Topology(snap)
    ctx = Context(snap=snap, topo=topo, pairs=build_pairs(topo), options=Options(**opts))
    found = []
    for _rule, check in bar1.CHECKS:
        if check is not None:
            found.extend(check(ctx))
    return found, snap, topo


def codes(found):
    return sorted(f.code for f in found)


ADA = ("0000:17:00.0", "0000:65:00.0")


def ada(bar1_bytes=64 * GIB, config=ADA_CFG, **kw):
    return [_gpu(b, bar1_bytes, config=config, **kw) for b in ADA]


def test_rules_are_in_their_range_and_complete():
    for rule, _check in bar1.CHECKS:
        assert 100 <= int(rule.code[3:]) <= 119 and rule.scope == "device"
        assert rule.origin in ("gdrcheck", "nvidia-docs")
    assert "Above 4G Decoding" in bar1.R_SMALL.remediation and "Re-Size BAR Support" in bar1.R_REBAR.remediation


def test_healthy_ada_has_no_findings():
    found, _, _ = judge(ada(), smi_gpus("rtx6000ada-rebar-64gib-575.xml"), nvme=True)
    assert found == []


def test_gdr100_unassigned_bar1_fails_every_pair_of_the_gpu():
    devs = [_gpu(ADA[0], config=ADA_CFG), _gpu(ADA[1], config=ADA_CFG, unset=True)]
    found, _, _ = judge(devs, smi_gpus("rtx6000ada-rebar-64gib-575.xml"), nvme=True)
    f = [x for x in found if x.code == "GDR100"]
    assert len(f) == 1 and f[0].severity == "error" and f[0].effect == "fail" and f[0].subject == (ADA[1],)
    assert set(f[0].pairs) == {(ADA[0], ADA[1]), (ADA[1], "0000:c1:00.0"), (ADA[1], "0000:c2:00.0")}
    assert "GDR101" not in codes(found) and "GDR104" not in codes(found)


def test_gdr101_small_bar1_degrades_nic_and_nvme_pairs():
    t4 = _gpu("0000:00:1e.0", 256 * MIB)
    found, _, _ = judge([t4], smi_gpus("a-t4-bar1-256mib-470.txt"), nvme=True)
    f = [x for x in found if x.code == "GDR101"]
    assert len(f) == 1 and f[0].effect == "degraded" and f[0].severity == "warning"
    assert set(f[0].pairs) == {("0000:00:1e.0", "0000:c1:00.0"), ("0000:00:1e.0", "0000:c2:00.0")}
    assert "256 MiB" in f[0].message and "1 GiB" in f[0].message
    assert "GDR102" not in codes(found)  # one finding for one small BAR
    h100 = _gpu("0000:18:00.0", 128 * GIB, bar0_64=True)
    assert judge([h100], smi_gpus("h100-sxm-550.txt")[:1])[0] == []


def test_gdr101_threshold_is_an_option():
    t4 = _gpu("0000:00:1e.0", 256 * MIB)
    found, _, _ = judge([t4], smi_gpus("a-t4-bar1-256mib-470.txt"), min_bar1_bytes=128 * MIB)
    assert codes(found) == ["GDR102"]


def test_gdr102_bar1_below_framebuffer_names_the_cap():
    gpus = smi_gpus("rtx6000ada-rebar-64gib-575.xml", bar1_total_bytes=32 * GIB)
    found, _, _ = judge(ada(32 * GIB, config=None), gpus)
    f = [x for x in found if x.code == "GDR102"]
    assert len(f) == 2 and all(x.effect == "degraded" for x in f)
    assert "32 GiB" in f[0].message and "48.0 GiB of memory" in f[0].message and "67%" in f[0].message
    assert f[0].pairs == ((ADA[0], "0000:c1:00.0"),)
    # no NIC, no NVMe: nothing registers BAR1 for GPUDirect here
    assert "GDR102" not in codes(judge(ada(32 * GIB, config=None), gpus, nic=False)[0])


def test_gdr103_bar1_nearly_full_names_the_holders_and_moves_no_verdict():
    t4 = _gpu("0000:3b:00.0", 256 * MIB)
    found, _, _ = judge([t4], smi_gpus("t4-bar1-busy-535.txt"), min_bar1_bytes=128 * MIB)
    f = [x for x in found if x.code == "GDR103"]
    assert len(f) == 1 and f[0].effect is None and f[0].pairs == ()
    assert "95%" in f[0].message and "tritonserver" in f[0].message and "pid 2211" in f[0].message
    idle = judge([_gpu("0000:00:1e.0", 256 * MIB)], smi_gpus("a-t4-bar1-256mib-470.txt"))[0]
    assert "GDR103" not in codes(idle)
    relaxed = judge([t4], smi_gpus("t4-bar1-busy-535.txt"), bar1_used_max_pct=99.0)[0]
    assert "GDR103" not in codes(relaxed)


def test_gdr104_driver_and_bus_disagree():
    src = Source(str(ROOT / "fixtures" / "nvml-2xh200-nvswitch-580"))
    gpus = collect_nvml(src).gpus
    devs = [_gpu("0000:00:06.0", 128 * GIB, bar0_64=True), _gpu("0000:00:07.0", 256 * GIB, bar0_64=True)]
    found, _, _ = judge(devs, gpus)
    f = [x for x in found if x.code == "GDR104"]
    assert len(f) == 1 and f[0].subject == ("0000:00:06.0",) and f[0].severity == "info"
    assert "256 GiB" in f[0].message and "128 GiB" in f[0].message and "resource2" in f[0].message


def test_gdr105_rebar_not_at_max():
    small = rebar_config([(0, 16 * MIB, [16 * MIB]), (1, 256 * MIB, ADA_SIZES), (3, 32 * MIB, [32 * MIB])])
    gpus = smi_gpus("rtx6000ada-rebar-64gib-575.xml", bar1_total_bytes=256 * MIB)
    found, _, _ = judge(ada(256 * MIB, config=small), gpus)
    f = [x for x in found if x.code == "GDR105"]
    assert len(f) == 2 and f[0].effect is None
    assert "256 MiB" in f[0].message and "64 MiB..64 GiB" in f[0].message and "64 GiB would cover" in f[0].message
    assert "GDR101" in codes(found)
    assert "GDR105" not in codes(judge(ada(), smi_gpus("rtx6000ada-rebar-64gib-575.xml"))[0])


def test_gdr106_unread_without_a_driver_view():
    gone = (CollectorStatus("nvml", "unavailable", "NVML not available: libnvidia-ml.so.1 was not found"),
            CollectorStatus("nvidia-smi", "unavailable", "nvidia-smi not found"))
    found, _, _ = judge(ada(), [], collectors=gone)
    assert codes(found) == ["GDR106"]
    f = found[0]
    assert f.severity == "info" and f.effect is None and f.pairs == () and f.subject == ADA
    assert "NVML not available" in f.message and "64 GiB" in f.message and f.settle
    assert "GDR106" not in codes(judge(ada(), smi_gpus("rtx6000ada-rebar-64gib-575.xml"))[0])


def test_gdr106_small_bar_still_judged_from_the_bus():
    gone = (CollectorStatus("nvml", "unavailable", "x"), CollectorStatus("nvidia-smi", "unavailable", "y"))
    found, _, _ = judge([_gpu("0000:00:1e.0", 256 * MIB)], [], collectors=gone)
    assert codes(found) == ["GDR101", "GDR106"]


def test_gdr107_gpu_missing_from_the_driver_view():
    gpus = smi_gpus("rtx6000ada-rebar-64gib-575.xml")[:1]
    devs = ada()
    devs[1] = replace(devs[1], driver="vfio-pci")
    found, _, _ = judge(devs, gpus)
    f = [x for x in found if x.code == "GDR107"]
    assert len(f) == 1 and f[0].subject == (ADA[1],) and "vfio-pci" in f[0].message and f[0].effect == "fail"


def test_amd_gpus_are_not_judged():
    found, _, _ = judge([_gpu("0000:17:00.0", 256 * MIB, vendor=0x1002)], [],
                        collectors=(CollectorStatus("nvml", "unavailable", "x"),))
    assert found == []


# ---------------------------------------------------------------------------
# report and table


def test_bar1_doc_and_table():
    gpus = smi_gpus("rtx6000ada-rebar-64gib-575.xml")
    devs = ada()
    devs[1] = _gpu(ADA[1], 32 * GIB, config=rebar_config([(1, 32 * GIB, ADA_SIZES)]))
    found, snap, topo = judge(devs, gpus)
    doc = bar1_doc(snap, topo, found)
    json.dumps(doc)
    assert doc["format_version"] and doc["gdrcheck_version"]
    g = doc["gpus"][0]
    for key in ("bdf", "index", "name", "bar1_total_bytes", "bar1_used_bytes", "bar1_free_bytes", "fb_total_bytes",
                "source", "sysfs_bar1_bytes", "rebar_current_bytes", "rebar_supported_bytes", "processes",
                "disagreements"):
        assert key in g
    assert (g["bdf"], g["index"], g["bar1_total_bytes"], g["fb_total_bytes"]) == (ADA[0], 0, 64 * GIB, 49140 * MIB)
    assert g["source"] == "nvidia-smi -q -x" and g["sysfs_bar1_bytes"] == 64 * GIB
    assert g["rebar_supported_bytes"] == ADA_SIZES and g["processes"][0]["pid"] == 2841
    d = doc["gpus"][1]["disagreements"]
    assert d and d[0]["field"] == "bar1_total_bytes" and d[0]["values"] == {"nvidia-smi -q -x": 64 * GIB,
                                                                           "sysfs": 32 * GIB}
    assert {f["code"] for f in doc["findings"]} == {"GDR104", "GDR105"}  # 32 GiB of 48 GiB, 64 GiB possible
    out = io.StringIO()
    from rich.console import Console

    render_bar1(doc, Console(file=out, width=80, no_color=True, force_terminal=False))
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "64G (64M..64G)" in text and "GDR104" in text and "Xorg" in text and "disagreement" in text


def test_bar1_doc_without_driver_says_so():
    gone = (CollectorStatus("nvml", "unavailable", "NVML not available: the NVIDIA driver library "
                            "libnvidia-ml.so.1 was not found", "install the NVIDIA driver"),)
    found, snap, topo = judge(ada(), [], collectors=gone)
    doc = bar1_doc(snap, topo, found)
    assert [g["source"] for g in doc["gpus"]] == ["sysfs", "sysfs"]
    assert doc["gpus"][0]["bar1_used_bytes"] is None and doc["gpus"][0]["driver_listed"] is None  # no driver view
    out = io.StringIO()
    from rich.console import Console

    render_bar1(doc, Console(file=out, width=80, no_color=True, force_terminal=False))
    assert "NVML not available" in out.getvalue() and "GDR106" in out.getvalue()


# ---------------------------------------------------------------------------
# end to end: a described node, read through the collectors


@pytest.mark.parametrize("case,expect", [("healthy-gdr-node", set()), ("bar1-256mib", {"GDR101"})])
def test_scenarios(tmp_path, case, expect):
    from builders.scenarios import scenario
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.rules.engine import evaluate

    snap = load_facts(str(scenario(tmp_path, case)))
    rep = evaluate(snap)
    got = {f.code for f in rep.findings if "GDR100" <= f.code <= "GDR119"}
    assert got == expect
    doc = bar1_doc(snap, rep.topo, rep.findings)
    assert len(doc["gpus"]) == 4
    size = 256 * MIB if expect else 256 * GIB
    assert all(g["bar1_total_bytes"] == g["sysfs_bar1_bytes"] == size for g in doc["gpus"])
    if expect:
        nic_pairs = {(p.a, p.b) for p in rep.pairs if p.kind in ("gpu-nic", "gpu-nvme")}
        hit = {pr for f in rep.findings if f.code == "GDR101" for pr in f.pairs}
        assert hit == nic_pairs


def test_cli_bar1(tmp_path):
    from support.cli_util import call

    from builders.scenarios import scenario

    root = scenario(tmp_path, "bar1-256mib")
    p = call("bar1", "--json", "--from", root)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [g["index"] for g in doc["gpus"]] == [0, 1, 2, 3]
    t = call("bar1", "--from", root, env={"COLUMNS": "80"})
    assert "GDR101" in t.stdout and "Traceback" not in t.stderr


def test_gdr100_from_the_driver_alone():
    gpus = smi_gpus("a-t4-bar1-256mib-470.txt", bar1_total_bytes=0)
    found, _, _ = judge([PciFunction(bdf="0000:00:1e.0", root="0000:00", class_code=0x030200, vendor=0x10DE)], gpus)
    assert codes(found) == ["GDR100"] and "0 bytes" in found[0].message
    # with a size on the bus, a driver's 0 is a disagreement, not an unassigned BAR
    found, _, _ = judge([_gpu("0000:00:1e.0", 256 * MIB)], gpus, min_bar1_bytes=128 * MIB)
    assert "GDR100" not in codes(found) and "GDR104" in codes(found)
