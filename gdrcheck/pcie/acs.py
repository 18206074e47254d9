"""PCIe Access Control Services from config space.

Pure functions, no I/O: callers hand in the config-space bytes they could read
(64 without root, 4096 with). The capability's layout is the PCIe Base spec's
"ACS Extended Capability"; what counts as redirecting follows the kernel's
``pci_bridge_has_acs_redir()`` (drivers/pci/pci.c), the stricter GDS test
nvidia-fs's ``nvfs_pcie_acs_enabled()``. The P2PDMA verdict that uses them is
:mod:`gdrcheck.pcie.p2pdma`.
"""

from __future__ import annotations

import struct

from gdrcheck.pcie.caps import CONFIG_SPACE_SIZE, EXT_CAP_ID_ACS, EXT_CAP_START, has_pcie_cap, walk_ext_caps
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

# bit, kernel name, lspci label, flag name (same positions in Capability and Control)
ACS_BITS: tuple[tuple[int, str, str, str], ...] = (
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


def _flags(bits: int) -> dict[str, bool]:
    return {name: bool(bits & mask) for mask, _k, _l, name in ACS_BITS}


@record(frozen=True)
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

    def to_doc(self) -> dict[str, object]:
        if not self.known:
            return {"known": False, "reason": self.reason}
        doc: dict[str, object] = {"known": True, "present": self.present}
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
    """ACS from a function's config-space bytes as read."""
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


def redirect_names(bits: int) -> list[str]:
    return [k for mask, k, _l, _n in ACS_BITS if bits & mask & ACS_REDIRECT_MASK]
