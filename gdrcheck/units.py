"""Sizes and link speeds as people write them: ``human_bytes`` for output, ``parse_size`` for options."""

from __future__ import annotations

import re

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_SIZE = lazy_pattern(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.I)
_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def human_bytes(n) -> str:
    """1073741824 -> "1 GiB"; None -> "?"."""
    if n is None:
        return "?"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.1f} {unit}"
    return f"{n} B"


def parse_size(text: str) -> Optional[int]:
    """"1GiB", "256M", "4096" -> bytes (binary units: K, KiB and KB are all 1024); None when not a size."""
    m = _SIZE.match(text)
    if not m:
        return None
    unit = (m.group(2) or "B").upper().rstrip("B").rstrip("I")
    return int(float(m.group(1)) * (1 << _SHIFT[unit]))


def speed_text(gts: Optional[float]) -> str:
    """A PCIe link rate in GT/s: 16.0 -> "16GT/s"; None -> "?"."""
    return "?" if gts is None else f"{gts:g}GT/s"


def size_range_text(sizes, human) -> str:
    """``64 MiB..64 GiB`` (or the single size) with a byte formatter."""
    sizes = list(sizes or ())
    if not sizes:
        return "?"
    if len(sizes) == 1:
        return human(sizes[0])
    return f"{human(sizes[0])}..{human(sizes[-1])}"


def natural_key(text: str) -> tuple:
    """Sort key that orders embedded numbers by value: mlx5_2 before mlx5_10, gpu9 before gpu10."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))
