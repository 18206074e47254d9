"""PCIe Access Control Services from config space, and the kernel's P2PDMA verdict.

Pure functions, no I/O: callers hand in the config-space bytes they could read
(64 without root, 4096 with) and the facts of the host. ``kernel.md`` §1.3-1.4
(the verdict), §2 (the capability) and §13 rules 1-2.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from gdrcheck.model import PciFunction

EXT_CAP_START = 0x100
CONFIG_SPACE_SIZE = 4096
EXT_CAP_ID_ACS = 0x000D
MAX_EXT_CAPS = (CONFIG_SPACE_SIZE - EXT_CAP_START) // 8  # the kernel's bound on the walk

# bit, kernel name, lspci label, flag name (same positions in Capability and Control)
ACS_BITS: Tuple[Tuple[int, str, str, str], ...] = (
    (0x01, "SV", "SrcValid", "source_validation"),
    (0x02, "TB", "TransBlk", "translation_blocking"),
    (0x04, "RR", "ReqRedir", "request_redirect"),
    (0x08, "CR", "CmpltRedir", "completion_redirect"),
    (0x10, "UF", "UpstreamFwd", "upstream_forwarding"),
    (0x20, "EC", "EgressCtrl", "egress_control"),
    (0x40, "DT", "DirectTrans", "direct_translated"),
)
ACS_REDIRECT_MASK = 0x04 | 0x08 | 0x20  # pci_bridge_has_acs_redir(): RR, CR, EC
ACS_GDS_MASK = 0x7F  # nvidia-fs nvfs_pcie_acs_enabled(): any of bits 0-6

NOT_ROOT_REASON = "config space past 64 bytes not readable (needs root)"


@dataclass(frozen=True)
class ExtCap:
    offset: int
    cap_id: int
    version: int


def walk_ext_caps(config: Optional[bytes]) -> Tuple[List[ExtCap], str]:
    """The extended capability list, and why the walk stopped early ("" when it ended cleanly).

    Guards against truncated buffers, loops, pointers into the compatible space
    and all-ones headers (a device that dropped off the bus).
    """
    caps: List[ExtCap] = []
    if not config or len(config) < EXT_CAP_START + 4:
        return caps, "truncated"
    off = EXT_CAP_START
    seen = set()
    while True:
        if off + 4 > len(config):
            return caps, "truncated"
        (hdr,) = struct.unpack_from("<I", config, off)
        if hdr in (0, 0xFFFFFFFF):
            return caps, "" if hdr == 0 else "device not available (reads all ones)"
        if off in seen:
            return caps, "chain looped"
        if len(caps) >= MAX_EXT_CAPS:
            return caps, "too many capabilities"
        seen.add(off)
        caps.append(ExtCap(off, hdr & 0xFFFF, (hdr >> 16) & 0xF))
        nxt = (hdr >> 20) & 0xFFC
        if nxt == 0:
            return caps, ""
        if nxt < EXT_CAP_START:
            return caps, "invalid next pointer"
        off = nxt


def has_pcie_cap(config: bytes) -> Optional[bool]:
    """Whether the standard capability list holds a PCI Express capability (ID 0x10)."""
    if len(config) < 0x40:
        return None
    if not struct.unpack_from("<H", config, 0x06)[0] & 0x10:  # Status: capabilities list
        return False
    ptr = config[0x34] & 0xFC
    seen = set()
    while ptr >= 0x40 and ptr + 2 <= len(config) and ptr not in seen:
        seen.add(ptr)
        if config[ptr] == 0x10:
            return True
        ptr = config[ptr + 1] & 0xFC
    if ptr >= 0x40 and ptr + 2 > len(config):
        return None
    return False


def _flags(bits: int) -> Dict[str, bool]:
    return {name: bool(bits & mask) for mask, _k, _l, name in ACS_BITS}


@dataclass(frozen=True)
class AcsState:
    """ACS of one function.

    ``known`` False: the registers could not be read (``reason`` says why,
    usually not root). ``present`` False with ``known``: no ACS capability.
    """

    known: bool
    present: bool = False
    offset: Optional[int] = None
    version: Optional[int] = None
    cap: int = 0
    ctrl: int = 0
    reason: str = ""
    walk_note: str = ""  # "chain looped", ... when the list ended badly after the cap was looked for
    cap_flags: Mapping[str, bool] = field(default_factory=dict)
    ctrl_flags: Mapping[str, bool] = field(default_factory=dict)

    # ACS Control flags (what is in force, not what is offered)
    source_validation = property(lambda self: bool(self.ctrl & 0x01))
    translation_blocking = property(lambda self: bool(self.ctrl & 0x02))
    request_redirect = property(lambda self: bool(self.ctrl & 0x04))
    completion_redirect = property(lambda self: bool(self.ctrl & 0x08))
    upstream_forwarding = property(lambda self: bool(self.ctrl & 0x10))
    egress_control = property(lambda self: bool(self.ctrl & 0x20))
    direct_translated = property(lambda self: bool(self.ctrl & 0x40))

    def to_doc(self) -> Dict[str, object]:
        if not self.known:
            return {"known": False, "reason": self.reason}
        doc: Dict[str, object] = {"known": True, "present": self.present}
        if self.present:
            doc.update({"offset": self.offset, "version": self.version, "cap": self.cap, "ctrl": self.ctrl,
                        "cap_flags": dict(self.cap_flags), "ctrl_flags": dict(self.ctrl_flags),
                        "acs_cap_line": format_acs(self.cap, "ACSCap"),
                        "acs_ctl_line": format_acs(self.ctrl, "ACSCtl")})
        if self.walk_note:
            doc["walk_note"] = self.walk_note
        return doc


def unknown_acs(reason: str = NOT_ROOT_REASON) -> AcsState:
    return AcsState(known=False, reason=reason)


def parse_acs(config: Optional[bytes]) -> AcsState:
    """ACS from a function's config-space bytes as read (``kernel.md`` §2.1-2.3)."""
    if config is None:
        return unknown_acs("config space not readable")
    if len(config) <= EXT_CAP_START:
        # 64 bytes: not root. 256: conventional PCI has no extended space, but a
        # PCIe function cut to 256 bytes (lspci -xxx, a trimmed capture) hides it.
        if len(config) == EXT_CAP_START and has_pcie_cap(config) is False:
            return AcsState(known=True, present=False, reason="conventional PCI: no extended config space")
        if len(config) == EXT_CAP_START:
            return unknown_acs("extended config space (past 256 bytes) not in the bytes read")
        return unknown_acs()
    caps, note = walk_ext_caps(config)
    for cap in caps:
        if cap.cap_id != EXT_CAP_ID_ACS:
            continue
        if cap.offset + 8 > len(config):
            return unknown_acs("ACS capability truncated in the config space read")
        cap_bits, ctrl_bits = struct.unpack_from("<HH", config, cap.offset + 4)
        return AcsState(known=True, present=True, offset=cap.offset, version=cap.version,
                        cap=cap_bits, ctrl=ctrl_bits, walk_note=note,
                        cap_flags=_flags(cap_bits), ctrl_flags=_flags(ctrl_bits))
    if note == "truncated" and len(config) < CONFIG_SPACE_SIZE:
        return unknown_acs(f"extended capability list runs past the {len(config)} bytes read")
    if note.startswith("device not available"):
        return unknown_acs(note)
    return AcsState(known=True, present=False, walk_note=note)


def redirects(state: Optional[AcsState]) -> Optional[bool]:
    """RR, CR or EC set in ACS Control (``pci_bridge_has_acs_redir``); None when unknown."""
    if state is None or not state.known:
        return None
    return state.present and bool(state.ctrl & ACS_REDIRECT_MASK)


def gds_acs_enabled(state: Optional[AcsState]) -> Optional[bool]:
    """nvidia-fs's stricter test: ACS present, Capability non-zero, any Control bit 0-6."""
    if state is None or not state.known:
        return None
    return state.present and state.cap != 0 and bool(state.ctrl & ACS_GDS_MASK)


def format_acs(bits: int, label: str = "ACSCtl", sep: str = " ") -> str:
    """As lspci -vvv prints it: ``ACSCtl: SrcValid- TransBlk- ...``.

    lspci itself puts a TAB after the colon (``sep="\\t"``); grep captures pasted
    into reports usually show a space, the default here.
    """
    return f"{label}:{sep}" + " ".join(f"{lsp}{'+' if bits & mask else '-'}" for mask, _k, lsp, _n in ACS_BITS)


def redirect_names(bits: int) -> List[str]:
    return [k for mask, k, _l, _n in ACS_BITS if bits & mask & ACS_REDIRECT_MASK]


# ---------------------------------------------------------------------------
# Kernel P2PDMA verdict (drivers/pci/p2pdma.c calc_map_type_and_dist)


@dataclass(frozen=True)
class WhitelistEntry:
    vendor: int
    device: Optional[int]  # None: any device (PCI_ANY_ID)
    same_host_bridge_only: bool
    what: str
    since: str  # first kernel with the entry, as far as known


_INTEL, _GOOGLE, _NVIDIA, _ZHAOXIN = 0x8086, 0x1AE0, 0x10DE, 0x1D17

# pci_p2pdma_whitelist[] in the PCI maintainer tree (kernel.md §1.4)
P2PDMA_WHITELIST: Tuple[WhitelistEntry, ...] = (
    WhitelistEntry(_INTEL, 0x3C00, True, "Xeon E5 / Core i7 (Sandy Bridge-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x3C01, True, "Xeon E5 / Core i7 (Sandy Bridge-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x2F00, True, "Xeon E7 v3 / E5 v3 (Haswell-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x2F01, True, "Xeon E7 v3 / E5 v3 (Haswell-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x2030, False, "Skylake-E root port A", "5.2"),
    WhitelistEntry(_INTEL, 0x2031, False, "Skylake-E root port B", "5.7"),
    WhitelistEntry(_INTEL, 0x2032, False, "Skylake-E root port C", "5.7"),
    WhitelistEntry(_INTEL, 0x2033, False, "Skylake-E root port D", "5.7"),
    WhitelistEntry(_INTEL, 0x2020, False, "Skylake-E DMI3 at 00.0", "5.2"),
    WhitelistEntry(_INTEL, 0x09A2, False, "Ice Lake Xeon and later (Memory Map/VT-d)", "5.18"),
    WhitelistEntry(_INTEL, 0x0B25, False, "Sapphire Rapids DSA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x0CFE, False, "Sapphire Rapids IAX root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x11FB, False, "Granite Rapids-D DSA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x1212, False, "Diamond Rapids DSA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x1216, False, "Diamond Rapids IAA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4940, False, "QAT 4xxx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4942, False, "QAT 401xx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4944, False, "QAT 402xx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4946, False, "QAT 420xx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4948, False, "QAT 6xxx root bus", "2026 tree"),
    WhitelistEntry(_GOOGLE, None, False, "Google SoCs", "5.9"),
    WhitelistEntry(_NVIDIA, 0x2F95, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_NVIDIA, 0x2F96, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_NVIDIA, 0x2F97, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_NVIDIA, 0x2F98, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1003, True, "Zhaoxin KX-6000", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1005, True, "Zhaoxin KH-40000", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1006, True, "Zhaoxin KX-6000G", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1007, True, "Zhaoxin KX-7000", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1008, False, "Zhaoxin KH-50000", "newest tree"),
)


def whitelist_match(ids: Optional[Tuple[int, int]]) -> Optional[WhitelistEntry]:
    if ids is None:
        return None
    vendor, device = ids
    for e in P2PDMA_WHITELIST:
        if e.vendor == vendor and (e.device is None or e.device == device):
            return e
    return None


def cpu_supports_p2pdma(cpu_vendor: Optional[str], cpu_family: Optional[int]) -> Optional[bool]:
    """x86 AMD family >= 0x17 (every Zen): any pair may go through the host bridge."""
    if cpu_vendor is None:
        return None
    if cpu_vendor != "AuthenticAMD":
        return False
    if cpu_family is None:
        return None
    return cpu_family >= 0x17


def host_bridge_whitelisted(root_a: str, root_b: str,
                            root_ids: Mapping[str, Optional[Tuple[int, int]]]) -> Optional[bool]:
    """``host_bridge_whitelist()``: ``root_ids`` maps a root bus to the vendor:device of its
    qualifying first device (None: none qualifies); a missing key means not known."""
    if root_a not in root_ids or root_b not in root_ids:
        return None
    ea, eb = whitelist_match(root_ids[root_a]), whitelist_match(root_ids[root_b])
    if root_a == root_b:
        return ea is not None
    return ea is not None and eb is not None and not ea.same_host_bridge_only and not eb.same_host_bridge_only


@dataclass(frozen=True)
class P2pdmaVerdict:
    """``kind``: bus_addr, thru_host_bridge, not_supported or unknown (``candidates`` then
    lists what remains possible). ``redirect``: devices with ACS RR/CR/EC in walk order."""

    kind: str
    distance: Optional[int] = None
    reason: str = ""
    redirect: Tuple[str, ...] = ()
    unknown_acs: Tuple[str, ...] = ()
    candidates: Tuple[str, ...] = ()
    common: Optional[str] = None

    @property
    def kernel_name(self) -> str:
        return {"bus_addr": "BUS_ADDR", "thru_host_bridge": "THRU_HOST_BRIDGE",
                "not_supported": "NOT_SUPPORTED"}.get(self.kind, "UNKNOWN")

    @property
    def disable_acs_redir(self) -> str:
        """The kernel parameter its warning suggests, or "" when nothing redirects."""
        return f"pci=disable_acs_redir={';'.join(self.redirect)}" if self.redirect else ""

    def as_tuple(self) -> Tuple[str, object]:
        """("bus_addr", distance) | ("thru_host_bridge", distance) | ("not_supported", reason) | ("unknown", reason)."""
        if self.kind in ("bus_addr", "thru_host_bridge"):
            return (self.kind, self.distance)
        return (self.kind, self.reason)


def _host_bridge_step(dist: int, root_a: str, root_b: str, cpu_vendor: Optional[str],
                      cpu_family: Optional[int], root_ids: Mapping[str, Optional[Tuple[int, int]]],
                      redirect: Tuple[str, ...], unknown: Tuple[str, ...], why: str) -> P2pdmaVerdict:
    amd = cpu_supports_p2pdma(cpu_vendor, cpu_family)
    wl = host_bridge_whitelisted(root_a, root_b, root_ids)
    if amd or wl:
        how = "AMD Zen CPU (family >= 0x17)" if amd else "whitelisted host bridge"
        return P2pdmaVerdict("thru_host_bridge", dist, f"{why}; allowed: {how}", redirect, unknown)
    if amd is None or wl is None:
        missing = [n for n, v in (("CPU vendor/family", amd), ("root-bus first device", wl)) if v is None]
        return P2pdmaVerdict("unknown", dist, f"{why}; not known: {', '.join(missing)}", redirect, unknown,
                             candidates=("thru_host_bridge", "not_supported"))
    return P2pdmaVerdict("not_supported", dist,
                         f"{why}; no shared upstream bridge or whitelisted host bridge", redirect, unknown)


def kernel_p2pdma_verdict(provider_chain: Sequence[str], client_chain: Sequence[str],
                          acs: Mapping[str, Optional[AcsState]], *, provider_root: str, client_root: str,
                          cpu_vendor: Optional[str], cpu_family: Optional[int],
                          root_ids: Mapping[str, Optional[Tuple[int, int]]]) -> P2pdmaVerdict:
    """The kernel's map type for a provider/client pair (``kernel.md`` §1.3, §1.10).

    Chains list the device first, then each ``pci_upstream_bridge()`` up to the
    device on the root bus (see :func:`upstream_chain`). ``acs`` maps a BDF to its
    ACS state; a device missing from it counts as unknown.
    """
    A, B = list(provider_chain), list(client_chain)
    if not A or not B:
        return P2pdmaVerdict("unknown", None, "empty bridge chain")
    common = next((a for a in A if a in B), None)
    if common is None:
        return _host_bridge_step(len(A) + len(B), provider_root, client_root, cpu_vendor, cpu_family,
                                 root_ids, (), (), "no common upstream bridge")
    ia, ib = A.index(common), B.index(common)
    redirect: List[str] = []
    unknown: List[str] = []
    for d in A[:ia + 1] + B[:ib]:
        r = redirects(acs.get(d))
        if r is None:
            unknown.append(d)
        elif r:
            redirect.append(d)
    dist = ia + ib
    red, unk = tuple(redirect), tuple(unknown)
    if redirect:
        return _host_bridge_step(dist, provider_root, client_root, cpu_vendor, cpu_family, root_ids,
                                 red, unk, f"ACS redirect set on {', '.join(red)}")
    if not unknown:
        return P2pdmaVerdict("bus_addr", dist, f"common upstream device {common}", common=common)
    fallback = _host_bridge_step(dist, provider_root, client_root, cpu_vendor, cpu_family, root_ids,
                                 red, unk, "if ACS redirects")
    alt = fallback.candidates or (fallback.kind,)
    return P2pdmaVerdict("unknown", dist,
                         f"ACS not readable on {', '.join(unk)}: BUS_ADDR if no ACS redirect there",
                         red, unk, candidates=("bus_addr",) + tuple(k for k in alt if k != "bus_addr"),
                         common=common)


def upstream_chain(bdf: str, parent: Mapping[str, Optional[str]],
                   physfn: Optional[Mapping[str, Optional[str]]] = None) -> List[str]:
    """Device first, then ``pci_upstream_bridge()`` repeatedly; a VF continues at its PF's bridge."""
    chain = [bdf]
    seen = {bdf}
    cur: Optional[str] = bdf
    while cur is not None:
        base = (physfn or {}).get(cur) or cur
        cur = parent.get(base)
        if cur is None or cur in seen:
            break
        seen.add(cur)
        chain.append(cur)
    return chain


def device_chain(dev: "PciFunction", devices: Sequence["PciFunction"]) -> List[str]:
    """:func:`upstream_chain` over a list of :class:`~gdrcheck.model.PciFunction`."""
    parent = {d.bdf: d.parent for d in devices}
    parent.setdefault(dev.bdf, dev.parent)
    physfn = {d.bdf: d.physfn for d in devices if d.physfn}
    if dev.physfn:
        physfn[dev.bdf] = dev.physfn
    return upstream_chain(dev.bdf, parent, physfn)


def _devfn(bdf: str) -> int:
    dev, fn = bdf.rsplit(":", 1)[1].split(".")
    return int(dev, 16) * 8 + int(fn)


def root_ids_from_devices(devices: Sequence["PciFunction"]) -> Dict[str, Optional[Tuple[int, int]]]:
    """Root bus -> vendor:device of ``pci_host_bridge_dev()``, emulated (``kernel.md`` §1.4).

    The lowest-devfn function on the root bus counts only if it is ``00.0`` or a
    root port (class 0x0604xx stands in for the port type, which needs root to
    read); then None. Roots whose first function's IDs are not known are left out
    (unknown to :func:`host_bridge_whitelisted`).
    """
    on_root: Dict[str, List["PciFunction"]] = {}
    for d in devices:
        if d.parent is None and d.physfn is None:
            on_root.setdefault(d.root, []).append(d)
    out: Dict[str, Optional[Tuple[int, int]]] = {}
    for root, funcs in on_root.items():
        first = min(funcs, key=lambda d: _devfn(d.bdf))
        if first.vendor is None or first.device is None:
            continue
        is_port = first.class_code is not None and first.class_code >> 8 == 0x0604
        out[root] = (first.vendor, first.device) if _devfn(first.bdf) == 0 or is_port else None
    return out


def acs_of_devices(devices: Sequence["PciFunction"]) -> Dict[str, AcsState]:
    """Parse every function's ACS from its ``config`` bytes."""
    return {d.bdf: parse_acs(d.config) for d in devices}
