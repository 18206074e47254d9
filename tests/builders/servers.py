"""Realistic server topologies as sysfs trees: root ports with switches, GPUs, NICs and NVMe spread
over them, nested switch levels and a composable chassis (``benchmarks/gen_tree.py`` writes one)."""

from __future__ import annotations

from pathlib import Path

from .sysfs_tree import SysfsTree


class Buses:
    def __init__(self):
        self.next = {}

    def take(self, root) -> int:
        n = self.next.get(root, root[1] + 1)
        self.next[root] = n + 1
        if n > 0xFF:
            raise SystemExit("too many buses for one root bus; use more sockets")
        return n


def build(out: Path, gpus: int, nics: int, nvme: int, sockets: int, nested: bool, chassis: int = 0) -> SysfsTree:
    t = SysfsTree(out)
    buses = Buses()
    devices = [("gpu", i) for i in range(gpus)] + [("nic", i) for i in range(nics)] + [("nvme", i) for i in range(nvme)]
    per_socket = [[] for _ in range(sockets)]
    for n, d in enumerate(sorted(devices, key=lambda d: (d[1], d[0]))):
        per_socket[n % sockets].append(d)
    roots_per_socket = 2
    many = sockets * roots_per_socket > 4  # then one PCI domain per root bus, as large servers do
    for s in range(sockets):
        for r in range(roots_per_socket):
            rootbus = (s * roots_per_socket + r) * (256 // (sockets * roots_per_socket))
            dom, rootbus = (s * roots_per_socket + r, 0) if many else (0, rootbus)
            t.add_root(dom, rootbus, numa=s)
        mine = per_socket[s]
        groups = [mine[i::roots_per_socket] for i in range(roots_per_socket)]
        for r, group in enumerate(groups):
            rootbus = (s * roots_per_socket + r) * (256 // (sockets * roots_per_socket))
            dom, rootbus = (s * roots_per_socket + r, 0) if many else (0, rootbus)
            rp = t.add(f"{dom:04x}:{rootbus:02x}:01.0", root=(dom, rootbus), cls=0x060400, vendor=0x8086, device=0x352A)
            usp_bus = buses.take((dom, rootbus))
            usp = f"{dom:04x}:{usp_bus:02x}:00.0"
            dsp_bus = buses.take((dom, rootbus))
            leaves = list(group)

            def place(slot, item):
                kind, i = item
                bus = buses.take((dom, rootbus))
                bdf = f"{dom:04x}:{bus:02x}:00.0"
                if kind == "gpu":
                    t.add(bdf, slot, driver="nvidia", link=("32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16))
                elif kind == "nic":
                    t.add(bdf, slot, cls=0x020700, vendor=0x15B3, device=0x1021, driver="mlx5_core",
                          netdevs=[f"ibp{bus}s0"], rdma=[f"mlx5_{i}"])
                else:
                    t.add(bdf, slot, cls=0x010802, vendor=0x144D, device=0xA80A, driver="nvme", nvme=[f"nvme{i}"])

            if nested:
                n_inner = max(1, (len(leaves) + 3) // 4)
                dsps = [f"{dom:04x}:{dsp_bus:02x}:{i:02x}.0" for i in range(n_inner)]
                t.add_switch(usp, dsps, parent=rp, subsystem=(0x1000, 0x0000))
                for k, d in enumerate(dsps):
                    iusp = f"{dom:04x}:{buses.take((dom, rootbus)):02x}:00.0"
                    ibus = buses.take((dom, rootbus))
                    mine4 = leaves[4 * k:4 * k + 4]
                    idsps = [f"{dom:04x}:{ibus:02x}:{i:02x}.0" for i in range(max(1, len(mine4)))]
                    t.add_switch(iusp, idsps, parent=d, subsystem=(0x1000, 0x1000))
                    for slot, item in zip(idsps, mine4):
                        place(slot, item)
            else:
                slots = [f"{dom:04x}:{dsp_bus:02x}:{i:02x}.0" for i in range(max(1, len(leaves)))]
                t.add_switch(usp, slots, parent=rp, subsystem=(0x1000, 0x0000))
                for slot, item in zip(slots, leaves):
                    place(slot, item)
    if chassis:
        _chassis(t, chassis, sockets)
    t.write()
    return t


def _chassis(t: SysfsTree, count: int, sockets: int) -> None:
    """A composable-PCIe chassis: many devices behind two switch levels, one PCI domain per 120."""
    made = 0
    dom = 0x100
    while made < count:
        t.add_root(dom, 0, numa=dom % sockets)
        rp = t.add(f"{dom:04x}:00:01.0", root=(dom, 0), cls=0x060400, vendor=0x8086, device=0x352A)
        top_dsps = [f"{dom:04x}:02:{i:02x}.0" for i in range(4)]
        t.add_switch(f"{dom:04x}:01:00.0", top_dsps, parent=rp, vendor=0x11F8, device=0x4000)
        bus = 3
        for d in top_dsps:
            n = min(30, count - made)
            if n <= 0:
                break
            usp, dsp_bus = f"{dom:04x}:{bus:02x}:00.0", bus + 1
            dsps = [f"{dom:04x}:{dsp_bus:02x}:{i:02x}.0" for i in range(n)]
            t.add_switch(usp, dsps, parent=d, vendor=0x11F8, device=0x4000)
            bus += 2
            for k, dsp in enumerate(dsps):
                leaf = f"{dom:04x}:{bus:02x}:00.0"
                bus += 1
                kind = (made + k) % 3
                if kind == 0:
                    t.add(leaf, dsp, driver="nvidia")
                elif kind == 1:
                    t.add(leaf, dsp, cls=0x020700, vendor=0x15B3, device=0x1021, driver="mlx5_core",
                          rdma=[f"mlx5_c{made + k}"])
                else:
                    t.add(leaf, dsp, cls=0x010802, vendor=0x144D, device=0xA80A, driver="nvme")
            made += n
        dom += 1
