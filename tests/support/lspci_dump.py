"""Made-up PCI trees written as ``lspci -x``-style dumps, for ``lspci -F DUMP -t`` round trips.

A dump is, per function, a line ``dddd:bb:dd.f name`` followed by hex lines of
config space (``00: 86 80 ...``) and a blank line. Only the first 64 bytes are
written: vendor, device, class, header type, and for a bridge (header type 1)
its primary, secondary and subordinate bus numbers, which is all lspci needs to
draw the tree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

GPU = (0x10DE, 0x2330, 0x030200)
NIC = (0x15B3, 0x1021, 0x020000)
NVME = (0x144D, 0xA808, 0x010802)
OTHER = (0x8086, 0x0998, 0x088000)
SWITCH = (0x1000, 0xC030, 0x060400)
ROOT_PORT = (0x8086, 0x347A, 0x060400)
ENDPOINTS = (GPU, NIC, NVME, OTHER)


@dataclass
class Fn:
    dom: int
    bus: int
    dev: int
    fn: int
    ids: tuple
    parent: Optional[str]
    root: str
    sec: Optional[int] = None
    sub: Optional[int] = None
    primary: int = 0

    @property
    def bdf(self) -> str:
        return f"{self.dom:04x}:{self.bus:02x}:{self.dev:02x}.{self.fn}"

    @property
    def is_bridge(self) -> bool:
        return self.sec is not None


class Tree:
    """Functions with their true parent and root; ``bridge()`` and ``leaf()`` add them."""

    def __init__(self) -> None:
        self.fns: list[Fn] = []

    def leaf(self, dom, bus, dev, fn, ids, parent=None, root=None) -> Fn:
        f = Fn(dom, bus, dev, fn, ids, parent, root or f"{dom:04x}:{bus:02x}", primary=bus)
        self.fns.append(f)
        return f

    def bridge(self, dom, bus, dev, sec, sub, parent=None, root=None, ids=SWITCH, fn=0) -> Fn:
        f = self.leaf(dom, bus, dev, fn, ids, parent, root)
        f.sec, f.sub = sec, sub
        return f

    def truth(self) -> dict[str, tuple]:
        return {f.bdf: (f.parent, f.root) for f in self.fns}

    def dump(self, links: Optional[dict] = None) -> str:
        """``lspci -x``-style dump: 64 bytes a function, or with ``links`` 256 bytes and a PCIe capability where
        ``links`` gives one: bdf -> (port type, max GT/s code, max width, current GT/s code, current width);
        speed codes as in LnkCap (1 = 2.5, 2 = 5, 3 = 8, 4 = 16, 5 = 32 GT/s), port type 0 endpoint, 4 root
        port."""
        size = 64 if links is None else 256
        out = []
        for f in sorted(self.fns, key=lambda f: (f.dom, f.bus, f.dev, f.fn)):
            cfg = bytearray(size)
            vendor, device, cls = f.ids
            cfg[0:2] = vendor.to_bytes(2, "little")
            cfg[2:4] = device.to_bytes(2, "little")
            cfg[9:12] = cls.to_bytes(3, "little")
            if f.is_bridge:
                cfg[0x0E] = 1
                cfg[0x18], cfg[0x19], cfg[0x1A] = f.primary, f.sec, f.sub
            if links and f.bdf in links:
                ptype, max_s, max_w, cur_s, cur_w = links[f.bdf]
                cfg[0x06] = 0x10  # status: capabilities list
                cfg[0x34] = 0x40
                cfg[0x40], cfg[0x41] = 0x10, 0x00  # PCI Express, last capability
                cfg[0x42:0x44] = (2 | (ptype << 4)).to_bytes(2, "little")
                cfg[0x4C:0x50] = (max_s | (max_w << 4)).to_bytes(4, "little")  # LnkCap
                cfg[0x52:0x54] = (cur_s | (cur_w << 4)).to_bytes(2, "little")  # LnkSta
            out.append(f"{f.bdf} made-up")
            for i in range(0, size, 16):
                out.append(f"{i:02x}: " + " ".join(f"{b:02x}" for b in cfg[i:i + 16]))
            out.append("")
        return "\n".join(out) + "\n"


def random_tree(seed: int) -> Tree:
    """A random forest: 1-3 domains, 1-3 root buses each, nested bridges, multi-function endpoints."""
    rng = random.Random(seed)
    t = Tree()
    domains = sorted(rng.sample([0x0000, 0x0001, 0x10000, 0x12345], rng.randint(1, 3)))
    for dom in domains:
        starts = sorted(rng.sample([0x00, 0x40, 0x80, 0xC0], rng.randint(1, 3)))
        for k, rb in enumerate(starts):
            limit = (starts[k + 1] if k + 1 < len(starts) else 0x100) - 1
            root = f"{dom:04x}:{rb:02x}"
            state = {"next": rb + 1}
            _fill(rng, t, dom, rb, None, root, 0, state, limit)
    return t


def _fill(rng, t: Tree, dom, bus, parent, root, depth, state, limit) -> None:
    count = rng.randint(1 if parent is None else 0, 4)
    for dev in sorted(rng.sample(range(32), count)):
        if depth < 4 and state["next"] <= limit and rng.random() < 0.45:
            sec = state["next"]
            state["next"] += 1
            b = t.bridge(dom, bus, dev, sec, sec, parent, root, ids=ROOT_PORT if parent is None else SWITCH)
            _fill(rng, t, dom, sec, b.bdf, root, depth + 1, state, limit)
            b.sub = state["next"] - 1
        else:
            ids = rng.choice(ENDPOINTS)
            for fn in range(rng.choice((1, 1, 2, 4))):
                t.leaf(dom, bus, dev, fn, ids, parent, root)
