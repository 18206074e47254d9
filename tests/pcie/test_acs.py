"""ACS parsing from config space, the lspci-style formatter, and the kernel P2PDMA verdict."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from gdrcheck.model import PciFunction
from gdrcheck.pcie.acs import NOT_ROOT_REASON, AcsState, format_acs, gds_acs_enabled, parse_acs, redirects, unknown_acs
from gdrcheck.pcie.caps import walk_ext_caps
from gdrcheck.pcie.p2pdma import (
    P2PDMA_WHITELIST,
    device_chain,
    kernel_p2pdma_verdict,
    root_ids_from_devices,
    upstream_chain,
)

REALWORLD = Path(__file__).resolve().parents[2].parent / "shared" / "realworld"


def ext_header(cap_id: int, version: int, nxt: int) -> bytes:
    return struct.pack("<I", cap_id | (version << 16) | (nxt << 20))


def config_with(caps, size: int = 4096, pcie: bool = True) -> bytes:
    """Config space with a standard header, a PCIe capability, and extended caps
    given as (offset, id, version, next, payload bytes)."""
    buf = bytearray(size)
    struct.pack_into("<HH", buf, 0, 0x10B5, 0x8749)
    if pcie and size >= 0x42:
        struct.pack_into("<H", buf, 0x06, 0x0010)  # capabilities list
        buf[0x34] = 0x40
        buf[0x40], buf[0x41] = 0x10, 0x00  # PCI Express, end of list
    for off, cid, ver, nxt, payload in caps:
        buf[off:off + 4] = ext_header(cid, ver, nxt)
        buf[off + 4:off + 4 + len(payload)] = payload
    return bytes(buf)


def acs_payload(cap: int, ctrl: int) -> bytes:
    return struct.pack("<HH", cap, ctrl)


AER_THEN_ACS = [(0x100, 0x0001, 2, 0x148, b""), (0x148, 0x000D, 1, 0x000, acs_payload(0x5F, 0x1D))]


def test_acs_found_after_aer():
    st = parse_acs(config_with(AER_THEN_ACS))
    assert st.known and st.present
    assert st.offset == 0x148 and st.version == 1
    assert st.cap == 0x5F and st.ctrl == 0x1D
    assert st.source_validation and st.request_redirect and st.completion_redirect and st.upstream_forwarding
    assert not st.translation_blocking and not st.egress_control and not st.direct_translated
    assert st.ctrl_flags["request_redirect"] is True and st.cap_flags["direct_translated"] is True
    assert redirects(st) is True
    assert gds_acs_enabled(st) is True
    assert format_acs(st.ctrl) == ("ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ "
                                   "EgressCtrl- DirectTrans-")
    assert format_acs(st.cap, "ACSCap", sep="\t").startswith("ACSCap:\tSrcValid+ TransBlk+ ReqRedir+")
    doc = st.to_doc()
    assert doc["offset"] == 0x148 and doc["ctrl_flags"]["source_validation"] is True


def test_walk_lists_every_capability():
    caps, note = walk_ext_caps(config_with(AER_THEN_ACS))
    assert [(c.offset, c.cap_id) for c in caps] == [(0x100, 1), (0x148, 0x0D)]
    assert note == ""


def test_acs_control_zero_does_not_redirect():
    st = parse_acs(config_with([(0x100, 0x000D, 1, 0, acs_payload(0x5F, 0))]))
    assert st.present and st.ctrl == 0
    assert redirects(st) is False
    assert gds_acs_enabled(st) is False


def test_egress_control_alone_redirects_and_source_validation_alone_does_not():
    ec = parse_acs(config_with([(0x100, 0x000D, 1, 0, acs_payload(0x7F, 0x20))]))
    sv = parse_acs(config_with([(0x100, 0x000D, 1, 0, acs_payload(0x7F, 0x01))]))
    assert redirects(ec) is True
    assert redirects(sv) is False
    assert gds_acs_enabled(sv) is True  # nvidia-fs counts any bit 0-6


def test_no_acs_in_chain_is_known_absent():
    st = parse_acs(config_with([(0x100, 0x0001, 2, 0x150, b""), (0x150, 0x0003, 1, 0, b"")]))
    assert st.known and not st.present
    assert redirects(st) is False


def test_no_extended_caps_at_all():
    st = parse_acs(config_with([]))
    assert st.known and not st.present


def test_64_bytes_without_root_is_unknown():
    st = parse_acs(config_with([], size=64))
    assert not st.known
    assert st.reason == NOT_ROOT_REASON
    assert "needs root" in st.reason
    assert redirects(st) is None and gds_acs_enabled(st) is None
    assert parse_acs(None).known is False
    assert parse_acs(b"").known is False
    assert redirects(None) is None


def test_256_bytes_conventional_pci_has_no_acs_but_pcie_is_unknown():
    conv = parse_acs(config_with([], size=256, pcie=False))
    assert conv.known and not conv.present
    pcie = parse_acs(config_with([], size=256, pcie=True))
    assert not pcie.known


def test_truncated_capability_is_unknown():
    cfg = config_with(AER_THEN_ACS)[:0x14A]
    st = parse_acs(cfg)
    assert not st.known


def test_self_loop_and_two_cap_loop_do_not_hang():
    st = parse_acs(config_with([(0x100, 0x0001, 1, 0x100, b"")]))
    assert st.known and not st.present and st.walk_note == "chain looped"
    caps, note = walk_ext_caps(config_with([(0x100, 0x0001, 1, 0x200, b""), (0x200, 0x0002, 1, 0x100, b"")]))
    assert len(caps) == 2 and note == "chain looped"
    # ACS found before the loop closes is still reported
    st = parse_acs(config_with([(0x100, 0x000D, 1, 0x200, acs_payload(1, 4)), (0x200, 1, 1, 0x100, b"")]))
    assert st.present and redirects(st) is True


def test_bad_pointer_and_all_ones():
    caps, note = walk_ext_caps(config_with([(0x100, 0x0001, 1, 0x040, b"")]))
    assert len(caps) == 1 and note == "invalid next pointer"
    gone = b"\xff" * 4096
    st = parse_acs(gone)
    assert not st.known


def test_pointer_past_the_end():
    caps, note = walk_ext_caps(config_with([(0x100, 0x0001, 1, 0xFFC, b"")], size=0x400))
    assert note == "truncated"
    assert not parse_acs(config_with([(0x100, 0x0001, 1, 0xFFC, b"")], size=0x400)).known


def test_garbage_never_raises():
    rng = random.Random(1234)
    for n in range(300):
        size = rng.choice([0, 1, 63, 64, 255, 256, 257, 300, 1024, 4096])
        cfg = bytes(rng.getrandbits(8) for _ in range(size))
        st = parse_acs(cfg)
        assert isinstance(st, AcsState)
        redirects(st)
        st.to_doc()


def test_formatter_matches_real_lspci_capture():
    files = sorted(REALWORLD.glob("stelline-*/lspci-vvv-grep-ACSCtl.txt")) if REALWORLD.is_dir() else []
    if not files:
        pytest.skip("../shared/realworld not present")
    lines = [ln.strip() for f in files for ln in f.read_text().splitlines() if ln.strip()]
    assert lines
    for ln in lines:
        assert format_acs(0) == ln
    assert format_acs(0) == "ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"


# ---------------------------------------------------------------------------
# kernel P2PDMA verdict

NO_ACS = AcsState(known=True, present=False)
RR_CR = parse_acs(config_with([(0x100, 0x000D, 1, 0, acs_payload(0x1F, 0x1D))]))
NOT_WHITELISTED = {"0000:00": None, "0000:80": None}
INTEL_ICX = {"0000:00": (0x8086, 0x09A2), "0000:80": (0x8086, 0x09A2)}


def _switch():
    gpu = ["0000:04:00.0", "0000:03:00.0", "0000:02:00.0", "0000:01:00.0"]
    nic = ["0000:05:00.0", "0000:03:08.0", "0000:02:00.0", "0000:01:00.0"]
    return gpu, nic


def _verdict(a, b, acs, vendor="GenuineIntel", family=6, roots=None, ra="0000:00", rb="0000:00"):
    return kernel_p2pdma_verdict(a, b, acs, provider_root=ra, client_root=rb, cpu_vendor=vendor,
                                 cpu_family=family, root_ids=roots if roots is not None else NOT_WHITELISTED)


def test_same_switch_no_acs_is_bus_addr_distance_4():
    gpu, nic = _switch()
    acs = {d: NO_ACS for d in set(gpu + nic)}
    v = _verdict(gpu, nic, acs)
    assert v.map_type == "bus_addr" and v.distance == 4
    assert v.kernel_name == "BUS_ADDR"
    assert v.as_tuple() == ("bus_addr", 4)
    assert v.common == "0000:02:00.0"


def test_acs_redirect_on_downstream_port_falls_to_host_bridge_rules():
    gpu, nic = _switch()
    acs = {d: NO_ACS for d in set(gpu + nic)}
    acs["0000:03:08.0"] = RR_CR
    v = _verdict(gpu, nic, acs)
    assert v.map_type == "not_supported" and v.distance == 4
    assert v.redirect == ("0000:03:08.0",)
    assert v.disable_acs_redir == "pci=disable_acs_redir=0000:03:08.0"
    assert v.as_tuple()[0] == "not_supported"
    amd = _verdict(gpu, nic, acs, vendor="AuthenticAMD", family=0x19)
    assert amd.map_type == "thru_host_bridge" and amd.distance == 4
    wl = _verdict(gpu, nic, acs, roots=INTEL_ICX)
    assert wl.map_type == "thru_host_bridge"


def test_acs_on_the_common_upstream_port_counts():
    gpu, nic = _switch()
    acs = {d: NO_ACS for d in set(gpu + nic)}
    acs["0000:02:00.0"] = RR_CR
    assert _verdict(gpu, nic, acs).redirect == ("0000:02:00.0",)
    # devices above the common one are not on the path
    acs = {d: NO_ACS for d in set(gpu + nic)}
    acs["0000:01:00.0"] = RR_CR
    assert _verdict(gpu, nic, acs).map_type == "bus_addr"


def test_unreadable_acs_gives_unknown_with_candidates():
    gpu, nic = _switch()
    acs = {d: unknown_acs() for d in set(gpu + nic)}
    v = _verdict(gpu, nic, acs)
    assert v.map_type == "unknown"
    assert v.candidates == ("bus_addr", "not_supported")
    assert "0000:03:00.0" in v.unknown_acs and "0000:01:00.0" not in v.unknown_acs
    amd = _verdict(gpu, nic, acs, vendor="AuthenticAMD", family=0x17)
    assert amd.candidates == ("bus_addr", "thru_host_bridge")
    # a device missing from the map counts as unknown
    assert _verdict(gpu, nic, {}).map_type == "unknown"
    # and so does the host-bridge step when nothing is known about the roots
    assert _verdict(gpu, nic, acs, roots={}).candidates == ("bus_addr", "thru_host_bridge", "not_supported")


def test_different_root_ports_share_no_bridge():
    a = ["0000:41:00.0", "0000:40:01.1"]
    b = ["0000:42:00.0", "0000:40:03.1"]
    amd = _verdict(a, b, {}, vendor="AuthenticAMD", family=0x19)
    assert amd.map_type == "thru_host_bridge" and amd.distance == 4
    old_amd = _verdict(a, b, {}, vendor="AuthenticAMD", family=0x15, roots={"0000:00": (0x1022, 0x1450)})
    assert old_amd.map_type == "not_supported"
    icx = _verdict(a, b, {}, roots=INTEL_ICX)
    assert icx.map_type == "thru_host_bridge"
    bdw = _verdict(a, b, {}, roots={"0000:00": (0x8086, 0x6F00)})
    assert bdw.map_type == "not_supported" and bdw.as_tuple()[1] == bdw.reason
    unknown_roots = _verdict(a, b, {}, roots={})
    assert unknown_roots.map_type == "unknown"
    assert unknown_roots.candidates == ("thru_host_bridge", "not_supported")
    hygon = _verdict(a, b, {}, vendor="HygonGenuine", family=0x18, roots={"0000:00": None})
    assert hygon.map_type == "not_supported"


def test_same_host_bridge_only_entries():
    a, b = ["0000:03:00.0", "0000:00:02.0"], ["0000:83:00.0", "0000:80:02.0"]
    hsw = {"0000:00": (0x8086, 0x2F00), "0000:80": (0x8086, 0x2F00)}
    assert _verdict(a, b, {}, roots=hsw, rb="0000:80").map_type == "not_supported"
    a2, b2 = ["0000:03:00.0", "0000:00:02.0"], ["0000:04:00.0", "0000:00:03.0"]
    assert _verdict(a2, b2, {}, roots=hsw).map_type == "thru_host_bridge"
    assert _verdict(a, b, {}, roots=INTEL_ICX, rb="0000:80").map_type == "thru_host_bridge"


def test_same_device_and_pf_vf():
    assert _verdict(["0000:03:00.0", "0000:02:00.0"], ["0000:03:00.0", "0000:02:00.0"],
                    {"0000:03:00.0": NO_ACS}).as_tuple() == ("bus_addr", 0)
    parent = {"0000:03:00.0": "0000:02:00.0", "0000:02:00.0": None, "0000:03:00.2": "0000:02:00.0"}
    pf = upstream_chain("0000:03:00.0", parent)
    vf = upstream_chain("0000:03:00.2", parent, {"0000:03:00.2": "0000:03:00.0"})
    assert vf == ["0000:03:00.2", "0000:02:00.0"]
    v = _verdict(pf, vf, {d: NO_ACS for d in pf + vf})
    assert v.as_tuple() == ("bus_addr", 2)


def test_chain_and_root_ids_from_devices():
    devs = [
        PciFunction("0000:00:00.0", "0000:00", None, class_code=0x060000, vendor=0x8086, device=0x09A2),
        PciFunction("0000:00:02.0", "0000:00", None, class_code=0x060400, vendor=0x8086, device=0x347A),
        PciFunction("0000:03:00.0", "0000:00", "0000:00:02.0", class_code=0x030200, vendor=0x10DE,
                    device=0x2330),
        PciFunction("0000:40:01.0", "0000:40", None, class_code=0x088000, vendor=0x1234, device=0x1),
        PciFunction("0000:80:02.0", "0000:80", None, class_code=0x060400, vendor=0x8086, device=0x2030),
        PciFunction("0000:c0:00.0", "0000:c0", None, class_code=None, vendor=None, device=None),
    ]
    assert device_chain(devs[2], devs) == ["0000:03:00.0", "0000:00:02.0"]
    ids = root_ids_from_devices(devs)
    assert ids["0000:00"] == (0x8086, 0x09A2)
    assert ids["0000:40"] is None  # first device neither 00.0 nor a root port
    assert ids["0000:80"] == (0x8086, 0x2030)  # a root port at any devfn
    assert "0000:c0" not in ids  # not known


def test_whitelist_is_data():
    assert any(e.vendor == 0x8086 and e.device == 0x09A2 for e in P2PDMA_WHITELIST)
    assert all(isinstance(e.since, str) and e.what for e in P2PDMA_WHITELIST)
    assert not any(e.device == 0x6F00 for e in P2PDMA_WHITELIST)


def test_empty_chain_is_unknown():
    assert _verdict([], ["0000:01:00.0"], {}).map_type == "unknown"
