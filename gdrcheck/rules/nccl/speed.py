"""Bandwidths as NCCL computes them: a PCIe hop's from its speed and width, an NVLink's per link and
architecture, a NIC's from its port rate (v2.30.7 ``src/graph/topo.cc:545-556``, ``topo.h:274-282``).

Pure: each function takes the devices or values it reads.
"""

from __future__ import annotations

import re

from gdrcheck.reach import nccl_own_tree

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


def _hop_bws(topo) -> dict[str, Optional[float]]:
    """The topology's table of device -> its hop's bandwidth (:func:`_device_hop_bw`), filled as devices are asked:
    a device's hop is fixed for a tree and its links, and NCCL's model asks it for every path that crosses the
    device (each GPU-NIC pair, several times)."""
    tables = topo.link_tables
    memo = tables.get("hop_bw")
    if memo is None:
        memo = tables["hop_bw"] = {}
    return memo


_UNSEEN = object()


def _device_hop_bw(topo, x: str) -> Optional[float]:
    """One device's hop as NCCL reads it: in NCCL's own XML the ``<pci link_speed link_width>`` already is the
    hop (v2.30.7 ``xml.cc:663-725`` took the lower of device and port); from sysfs the device and the port
    above it (``max_link_speed``, ``../max_link_speed``)."""
    d = topo.by_bdf.get(x)
    if nccl_own_tree(topo.snap):
        return link_bw(d)
    parent = topo.by_bdf.get(topo.parent(x)) if d is not None and topo.parent(x) else None
    return link_bw(d, parent)


def pcie_hops(topo, a: str, b: str, bridges, skip: tuple[str, ...] = ()) -> list[Optional[float]]:
    """The bandwidth of each PCIe hop NCCL's path from ``a`` to ``b`` crosses: the two devices' own links and
    the uplink of each switch between them, but not of the switch where the two meet (NCCL's path turns there,
    ``topo.cc:637-701@v2.30.7``: a switch is one PCI node, its uplink one link). ``skip``: devices whose own
    link the path does not take. The hops of a pair's own path (``bridges`` is the tree's path) are worked out
    once per tree and links."""
    meet, path = topo.pair_path(a, b)
    own = bridges is path
    if own:
        hops = topo.link_tables.get("hops")
        if hops is None:
            hops = topo.link_tables["hops"] = {}
        got = hops.get((a, b, skip))
        if got is not None:
            return list(got)
    kind = topo.device_kind
    parts = [x for x in (a, b) if x not in skip]
    parts += [x for x in bridges if x != meet and kind.get(x) == "switch_upstream"]
    memo = _hop_bws(topo)
    out: list[Optional[float]] = []
    for x in parts:
        bw = memo.get(x, _UNSEEN)
        if bw is _UNSEEN:
            bw = memo[x] = _device_hop_bw(topo, x)
        out.append(bw)
    if own:
        hops[(a, b, skip)] = tuple(out)
    return out


def pcie_bw(topo, a: str, b: str, bridges) -> Optional[float]:
    """The narrowest PCIe hop between ``a`` and ``b`` (:func:`pcie_hops`); None where one is not shown."""
    bws = pcie_hops(topo, a, b, bridges)
    return None if not bws or any(bw is None for bw in bws) else min(bws)


def gpu_nic_bw(topo, g: str, n: str, nic_rate: Optional[float], c2c: Optional[bool], t: Optional[str],
               cpu_bws: tuple[float, ...] = ()) -> Optional[float]:
    """The bandwidth of NCCL's path between GPU ``g`` and NIC ``n`` (a path's ``bw`` is its narrowest link,
    ``paths.cc:71, 115@v2.30.7``): the PCIe hops, the NIC's port rate (its NET link), and across CPUs the CPU link
    (``cpu_bws``: :func:`gdrcheck.rules.nccl.cpu.inter_cpu_bw`'s values; more than one is not known). A GPU
    on C2C reaches its CPU over C2C, wider than any NIC: its own PCIe link is not on the path. None where a
    figure is not shown. Kept in the topology's link tables by every argument (a topology of the same tree and
    links shares them)."""
    if t is None or nic_rate is None:
        return None
    table = topo.link_tables.get("gpu_nic_bw")
    if table is None:
        table = topo.link_tables["gpu_nic_bw"] = {}
    key = (g, n, nic_rate, c2c, t, cpu_bws)
    got = table.get(key, _UNSEEN)
    if got is _UNSEEN:
        got = table[key] = _gpu_nic_bw(topo, g, n, nic_rate, c2c, t, cpu_bws)
    return got


def _gpu_nic_bw(topo, g: str, n: str, nic_rate: float, c2c: Optional[bool], t: str,
                cpu_bws: tuple[float, ...]) -> Optional[float]:
    via_cpu = t in ("PHB", "SYS", "P2C", "C2C")
    bws = pcie_hops(topo, g, n, topo.path_bridges(g, n), (g,) if c2c and via_cpu else ())
    if t == "SYS":
        if len(cpu_bws) != 1:
            return None
        bws.append(cpu_bws[0])
    if any(bw is None for bw in bws):
        return None
    return min(bws + [nic_rate])
