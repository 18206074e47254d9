"""The one walker of a PCI function's capability lists, from config-space bytes as read.

Two lists live in config space (PCI Local Bus spec 3.0 §6.7; PCIe Base spec §7.6,
"PCI Express Extended Capabilities"): the standard list, from the pointer at 0x34
(only when Status bit 4 says there is one), 2-byte headers at offsets >= 0x40; and the
extended list from 0x100, 4-byte headers (ID 15:0, version 19:16, next 31:20).
Both walks guard against truncated buffers, loops, pointers into the header and
all-ones headers (a device that dropped off the bus), as the kernel's
``pci_find_next_capability``/``pci_find_next_ext_capability`` do.
"""

from __future__ import annotations

import struct

from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

HEADER_SIZE = 0x40
EXT_CAP_START = 0x100
CONFIG_SPACE_SIZE = 4096
MAX_EXT_CAPS = (CONFIG_SPACE_SIZE - EXT_CAP_START) // 8  # the kernel's bound on the walk

CAP_ID_PCIE = 0x10
EXT_CAP_ID_ACS = 0x000D
EXT_CAP_ID_REBAR = 0x0015


@record(frozen=True)
class ExtCap:
    offset: int
    cap_id: int
    version: int


def walk_caps(config: Optional[bytes]) -> tuple[list[tuple[int, int]], str]:
    """The standard capability list as (offset, id), and why the walk stopped early ("" when it ended cleanly)."""
    if not config or len(config) < HEADER_SIZE:
        return [], "truncated"
    if not struct.unpack_from("<H", config, 0x06)[0] & 0x10:  # Status: capabilities list
        return [], ""
    out: list[tuple[int, int]] = []
    seen = set()
    ptr = config[0x34] & 0xFC
    while ptr:
        if ptr < HEADER_SIZE:
            return out, "invalid next pointer"
        if ptr + 2 > len(config):
            return out, "truncated"
        if ptr in seen:
            return out, "chain looped"
        seen.add(ptr)
        out.append((ptr, config[ptr]))
        ptr = config[ptr + 1] & 0xFC
    return out, ""


def find_cap(config: Optional[bytes], cap_id: int) -> Optional[int]:
    """Offset of a standard capability, or ``None``."""
    return next((off for off, cid in walk_caps(config)[0] if cid == cap_id), None)


def has_pcie_cap(config: Optional[bytes]) -> Optional[bool]:
    """Whether the standard list holds a PCI Express capability; None when the bytes read cannot say."""
    caps, note = walk_caps(config)
    if any(cid == CAP_ID_PCIE for _off, cid in caps):
        return True
    return None if note == "truncated" else False


def pcie_port_type(config: Optional[bytes]) -> Optional[int]:
    """PCIe capability's Device/Port Type (4 root port, 5 upstream, 6 downstream, ...), if readable."""
    off = find_cap(config, CAP_ID_PCIE)
    if off is None or config is None or off + 4 > len(config):
        return None
    return (config[off + 2] >> 4) & 0xF


def walk_ext_caps(config: Optional[bytes]) -> tuple[list[ExtCap], str]:
    """The extended capability list, and why the walk stopped early ("" when it ended cleanly)."""
    caps: list[ExtCap] = []
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


def find_ext_cap(config: Optional[bytes], cap_id: int) -> Optional[ExtCap]:
    """An extended capability, or ``None`` (also when config space is short)."""
    return next((c for c in walk_ext_caps(config)[0] if c.cap_id == cap_id), None)
