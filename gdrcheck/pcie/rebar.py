"""BAR1 as the PCI bus sees it: the sysfs ``resource`` line and the Resizable BAR capability.

Pure functions of :class:`~gdrcheck.model.PciFunction` facts and config-space
bytes; nothing here reads the machine.

Resizable BAR (PCIe extended capability 0x0015, the kernel's ``pci_rebar_*`` in drivers/pci/,
PCIe Base spec "Resizable BAR Extended Capability"):

* header (4 bytes), then one 8-byte entry per resizable BAR:
  capability register (bits 31:4: supported sizes, bit n = 1 MiB << (n - 4)),
  control register (bits 2:0 BAR index, 7:5 number of resizable BARs in the
  first entry, 13:8 current size as log2(MiB), 31:16 further supported sizes
  from 256 TiB up);
* ``resourceN_resize`` (Linux 6.1+) prints the same supported-size bitmask,
  bit n = 1 MiB << n.

NVIDIA's "BAR1" is the GPU's second memory BAR: register 1 on most GPUs,
register 2 where BAR0 is 64-bit (see :func:`bar1_index`).
"""

from __future__ import annotations

from gdrcheck.model import Bar, PciFunction
from gdrcheck.pcie.caps import EXT_CAP_ID_REBAR, find_ext_cap
from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

MIB = 1 << 20
BAR1_INDEX = 1


@record(frozen=True)
class RebarEntry:
    """One resizable BAR: its index, current size and the sizes it supports (bytes, ascending)."""

    bar: int
    current_bytes: Optional[int]
    supported_bytes: tuple[int, ...]

    @property
    def max_bytes(self) -> Optional[int]:
        return self.supported_bytes[-1] if self.supported_bytes else None


def _u32(cfg: bytes, off: int) -> Optional[int]:
    if off < 0 or off + 4 > len(cfg):
        return None
    return int.from_bytes(cfg[off:off + 4], "little")


def sizes_from_mask(mask: int) -> tuple[int, ...]:
    """Bitmask with bit n = 1 MiB << n -> sizes in bytes, ascending."""
    return tuple(MIB << n for n in range(64) if mask >> n & 1)


def parse_rebar(cfg: Optional[bytes]) -> dict[int, RebarEntry]:
    """Resizable BAR entries by BAR index; empty when the capability is absent or unreadable."""
    found = find_ext_cap(cfg, EXT_CAP_ID_REBAR)
    if found is None or cfg is None:
        return {}
    off = found.offset
    first_ctrl = _u32(cfg, off + 8)
    if first_ctrl is None:
        return {}
    nbars = (first_ctrl >> 5) & 0x7
    nbars = nbars if 1 <= nbars <= 6 else 1
    out: dict[int, RebarEntry] = {}
    for i in range(nbars):
        cap = _u32(cfg, off + 4 + 8 * i)
        ctrl = _u32(cfg, off + 8 + 8 * i)
        if cap is None or ctrl is None:
            break
        mask = ((cap >> 4) & 0x0FFFFFFF) | (((ctrl >> 16) & 0xFFFF) << 28)
        bar = ctrl & 0x7
        current = MIB << ((ctrl >> 8) & 0x3F)
        out[bar] = RebarEntry(bar=bar, current_bytes=current, supported_bytes=sizes_from_mask(mask))
    return out


def parse_resize_file(text: Optional[str]) -> tuple[int, ...]:
    """``resourceN_resize`` content (``%016llx``) -> supported sizes in bytes; () when absent or odd."""
    if not text:
        return ()
    try:
        mask = int(text.strip().split()[0], 16)
    except (ValueError, IndexError):
        return ()
    return sizes_from_mask(mask)


def bar1_index(dev: PciFunction) -> int:
    """Register index of the GPU's BAR1 aperture.

    NVIDIA's "BAR1" is the second memory BAR, not register 1: behind a 32-bit
    BAR0 it is register 1 (``Region 1``), behind a 64-bit BAR0 (Hopper and
    later: ``Region 0 ... 64-bit``) register 0-1 are BAR0 and the aperture is
    register 2 (``Region 2``).
    """
    bar0 = next((b for b in dev.bars if b.index == 0), None)
    return 2 if bar0 is not None and bar0.is_64bit else BAR1_INDEX


def bar1_of(dev: PciFunction) -> Optional[Bar]:
    """The function's BAR1 region, if the input shows it."""
    idx = bar1_index(dev)
    for b in dev.bars:
        if b.index == idx:
            return b
    return None


def sysfs_bar1(dev: PciFunction, resize_text: Optional[str] = None) -> dict[str, Any]:
    """What the bus says of a GPU's BAR1, as plain JSON-able values.

    Keys: ``sysfs_bar1_index`` (the ``resourceN`` register of the aperture),
    ``sysfs_bar1_bytes`` (None when the input has no ``resource``),
    ``sysfs_bar1_unset`` (IORESOURCE_UNSET or size 0), ``sysfs_bar1_prefetchable``,
    ``sysfs_bar1_64bit``, ``rebar_current_bytes``, ``rebar_supported_bytes``
    (list, ascending; empty when unknown) and ``rebar_source``
    (``config``, ``resourceN_resize`` or None).
    """
    idx = bar1_index(dev)
    out: dict[str, Any] = {
        "sysfs_bar1_index": idx if dev.bars else None,
        "sysfs_bar1_bytes": None, "sysfs_bar1_unset": None, "sysfs_bar1_prefetchable": None,
        "sysfs_bar1_64bit": None, "rebar_current_bytes": None, "rebar_supported_bytes": [],
        "rebar_source": None,
    }
    if dev.bars:
        b = bar1_of(dev)
        if b is None:
            # an all-zero resource line: the BAR could not even be sized and has no space
            out.update(sysfs_bar1_bytes=0, sysfs_bar1_unset=True)
        else:
            out.update(sysfs_bar1_bytes=b.size, sysfs_bar1_unset=bool(b.unset or b.size == 0),
                       sysfs_bar1_prefetchable=b.prefetchable, sysfs_bar1_64bit=b.is_64bit)
    entry = parse_rebar(dev.config).get(idx)
    if entry is not None:
        out.update(rebar_current_bytes=entry.current_bytes, rebar_supported_bytes=list(entry.supported_bytes),
                   rebar_source="config")
    else:
        sizes = parse_resize_file(resize_text)
        if sizes:
            cur = out["sysfs_bar1_bytes"] if not out["sysfs_bar1_unset"] else None
            out.update(rebar_current_bytes=cur, rebar_supported_bytes=list(sizes),
                       rebar_source=f"resource{idx}_resize")
    return out
