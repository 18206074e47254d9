"""Bandwidths as NCCL computes them: a PCIe hop's from its speed and width, an NVLink's per link and
architecture, a NIC's from its port rate (v2.30.7 ``src/graph/topo.cc:545-556``, ``topo.h:274-282``).

Pure: each function takes the devices or values it reads.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

SPEED_CODES = ((2.5, 15), (5.0, 30), (8.0, 60), (16.0, 120), (32.0, 240), (64.0, 480))  # topo.cc:545-556
NVLINK_BW = ((100, 40.1), (90, 20.6), (87, 20.0), (86, 12.0), (80, 20.0), (70, 20.0), (60, 18.0))  # topo.h:274-282


def _speed_code(gt: Optional[float]) -> int:
    if gt is None:
        return 60  # topo.cc: an unknown speed string counts as 60 (Gen3)
    for s, code in SPEED_CODES:
        if abs(gt - s) < 0.01:
            return code
    return 60


def link_bw(dev, parent=None) -> Optional[float]:
    """GB/s of one PCIe hop as NCCL computes it: min(device, upstream port) max speed x width / 80."""
    if dev is None or dev.link.max_speed is None:
        return None
    speeds = [dev.link.max_speed] + ([parent.link.max_speed] if parent is not None and parent.link.max_speed else [])
    widths = [dev.link.max_width or 16] + ([parent.link.max_width] if parent is not None and parent.link.max_width
                                           else [])
    return min(widths) * _speed_code(min(speeds)) / 80.0


def rate_gbytes(text: Optional[str]) -> Optional[float]:
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec", text or "")
    return float(m.group(1)) / 8.0 if m else None


def nvlink_bw(sm: Optional[int]) -> Optional[float]:
    """GB/s of one NVLink for a GPU of compute capability ``sm`` (topo.h:274-282); None where it is not shown."""
    return next((bw for s, bw in NVLINK_BW if sm is not None and sm >= s), None)


def pcie_bw(topo, a: str, b: str, bridges) -> Optional[float]:
    """The narrowest PCIe hop between ``a`` and ``b``: the two devices and the switch upstream ports between."""
    parts = [a, b] + [x for x in bridges if topo.device_kind.get(x) == "switch_upstream"]
    bws = []
    for x in parts:
        d = topo.by_bdf.get(x)
        parent = topo.by_bdf.get(topo.parent(x)) if topo.parent(x) else None
        bw = link_bw(d, parent)
        if bw is None:
            return None
        bws.append(bw)
    return min(bws) if bws else None
