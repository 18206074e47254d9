"""NCCL's flattening of Broadcom PEX switches, step for step as NCCL takes it.

A PEX88xxx (Gen4) or PEX89xxx (Gen5) switch in base mode shows itself as two levels of switches; NCCL fuses
the second level into the first (v2.30.7 ``src/graph/topo.cc:195-268``, ``ncclTopoFlattenBcmSwitches``), once
its PCI nodes and their virtual links exist (``:981-985``: ``ncclTopoAddPciLinks``, then the flattening):

* its PCI nodes are walked in the order NCCL made them (its XML, depth first: a switch before the switches
  below it);
* the first whose id (vendor, device, subsystem vendor, subsystem device: ``ncclTopoGetIntDevice``,
  ``:521-534``) is a Broadcom part at the first level (``getBcmGen(id, 0)``, ``:199-203``) takes in every PCI
  node it has a link to (the switches below it, the one above it, the far end of a virtual link) whose id is
  the same part at the second level (``getBcmGen(id, 1)``); what those had links to is linked to it instead;
* its subsystem device becomes ``0xffff``, so it is never taken up again, and the walk starts over.

Versions: Gen4 parts are flattened from 2.9.6. Until 2.19, a switch below is taken in only when its id is
exactly its parent's, and the fused switch's id becomes ``0x1000c01010000000`` (v2.19.3 ``topo.cc:183-236``);
the levels and Gen5 parts come with ``getBcmGen`` in 2.20.3. The walk starts over at the second node before
2.27.3 (``s = 0`` before the loop's ``s++``) and at the first from it (``s = -1``).

Two devices are then PIX apart when the first PCI node above each is the same fused switch, PXB when their
chains meet higher (v2.30.7 ``src/graph/paths.cc:38-100``: a hop between two PCI nodes makes a path PXB).
"""

from __future__ import annotations

from gdrcheck.rules.nccl.core import NEWEST

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Callable, Optional

    from gdrcheck.rules.nccl.core import Version

GEN4_FROM = (2, 9, 6)
LINKS_FROM = (2, 22, 3)  # getBcmLinks: virtual links between Broadcom switches, v2.22.3 xml.cc:410-429, 730-745
LEVELS_FROM = (2, 20, 3)  # getBcmGen(id, level), Gen5 parts, the fused id's subsystem device set to 0xffff
RESTART_AT_FIRST_FROM = (2, 27, 3)
GEN4_ID = 0x1000C0101000A000
GEN5_ID = 0x1000C03010000000
FUSED_ID_BEFORE_LEVELS = 0x1000C01010000000
_MASK = 0xFFFFFFFFFFFFF000
_U64 = (1 << 64) - 1


def device_id(vendor: Optional[int], device: Optional[int], subsys_vendor: Optional[int],
              subsys_device: Optional[int]) -> int:
    """``ncclTopoGetIntDevice``: the four ids in one 64-bit number; a missing one adds nothing."""
    return (((vendor or 0) << 48) + ((device or 0) << 32) + ((subsys_vendor or 0) << 16) + (subsys_device or 0)) \
        & _U64


def function_id(topo, bdf: str) -> int:
    """:func:`device_id` of a function of the node; 0 for one the node does not have."""
    d = topo.by_bdf.get(bdf)
    return device_id(d.vendor, d.device, d.subsys_vendor, d.subsys_device) if d is not None else 0


def is_part(dev_id: int) -> bool:
    """A Broadcom switch part some NCCL version flattens, at either level (to skip what none could fuse)."""
    return bool(bcm_gen(dev_id, 0, NEWEST) or bcm_gen(dev_id, 1, NEWEST))


def bcm_gen(dev_id: int, level: int, version: Version) -> int:
    """``getBcmGen(id, level)`` at ``version``: 4 or 5 for a Broadcom part NCCL flattens, else 0."""
    top = dev_id & _MASK
    if version < LEVELS_FROM:
        return 4 if version >= GEN4_FROM and top == GEN4_ID else 0
    if top == GEN4_ID:
        return 4
    if top == (GEN5_ID | level * 0x1000):
        return 5
    return 0


def fuse(order: Sequence[str], links: Mapping[str, Iterable[str]], ids: Mapping[str, int],
         version: Version) -> dict[str, str]:
    """Which PCI node each one ends in. ``order``: the PCI nodes in the order NCCL made them; ``links``: per
    node, the PCI nodes it has a link to (a tree edge both ways, a virtual link from the node that lists it)."""
    nodes = list(order)
    adj: dict[str, list[str]] = {n: [x for x in dict.fromkeys(links.get(n, ())) if x != n] for n in nodes}
    dev = {n: ids.get(n, 0) for n in nodes}
    into = {n: n for n in nodes}
    restart = 0 if version >= RESTART_AT_FIRST_FROM else 1
    s = 0
    while s < len(nodes):
        p = nodes[s]
        gen = bcm_gen(dev[p], 0, version)
        if not gen:
            s += 1
            continue
        if version < LEVELS_FROM:
            subs = [x for x in adj[p] if x in dev and dev[x] == dev[p]]
        else:
            subs = [x for x in adj[p] if x in dev and bcm_gen(dev[x], 1, version) == gen]
        adj[p] = [x for x in adj[p] if x not in subs]
        for sub in subs:
            for r in adj.pop(sub):
                if r == p:
                    continue
                adj[p].append(r)
                back = adj.get(r)
                if back is not None and sub in back:
                    back[back.index(sub)] = p
            nodes.remove(sub)
            del dev[sub]
            for n, to in adj.items():  # ncclTopoRemoveNode drops every link left to it (``topo.cc:135-161``)
                if sub in to:
                    adj[n] = [x for x in to if x != sub]
            for n, at in into.items():
                if at == sub:
                    into[n] = p
        dev[p] = dev[p] | 0xFFFF if version >= LEVELS_FROM else FUSED_ID_BEFORE_LEVELS
        s = restart
    return into


def depth_first(chains: Iterable[tuple[str, ...]], first: Optional[Mapping[str, int]] = None) -> list[str]:
    """NCCL's order of making its PCI nodes from the chains of its devices (nearest switch first, in the order
    NCCL fills its XML): depth first, each node's children in the order a device first reached them, or in
    ``first`` order (a topology file's document order) where given."""
    parent: dict[str, Optional[str]] = {}
    seen: dict[str, int] = {}
    for chain in chains:
        for i, n in enumerate(chain):
            seen.setdefault(n, len(seen))
            if n not in parent or parent[n] is None:
                parent[n] = chain[i + 1] if i + 1 < len(chain) else parent.get(n)
    rank = first or {}

    def key(n: str) -> tuple[int, int]:
        return (0, rank[n]) if n in rank else (1, seen[n])

    below: dict[Optional[str], list[str]] = {}
    for n in sorted(parent, key=key):
        below.setdefault(parent[n], []).append(n)
    out: list[str] = []
    stack = list(reversed(below.get(None, [])))
    done: set[str] = set()
    while stack:
        n = stack.pop()
        if n in done:
            continue
        done.add(n)
        out.append(n)
        stack.extend(reversed(below.get(n, [])))
    return out


def tree_links(chains: Iterable[tuple[str, ...]], virtual: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Each PCI node's links: up and down its chains, both ways, and its own virtual links (one way)."""
    links: dict[str, list[str]] = {}
    for chain in chains:
        for a, b in zip(chain, chain[1:]):
            links.setdefault(a, []).append(b)
            links.setdefault(b, []).append(a)
    for a, peers in virtual.items():
        if a in links:
            links[a].extend(p for p in peers if p in links)
    return links


class Fusion:
    """The chains of PCI nodes above each device once NCCL has flattened its Broadcom switches."""

    def __init__(self, chains: Mapping[str, tuple[str, ...]], into: Mapping[str, str]) -> None:
        self.fused: dict[str, tuple[str, ...]] = {}
        for dev, chain in chains.items():
            out: list[str] = []
            for n in chain:
                m = into.get(n, n)
                if m not in out:
                    out.append(m)
            self.fused[dev] = tuple(out)
        self.changed = any(into.get(n, n) != n for n in into)

    def meet(self, a: str, b: str) -> Optional[str]:
        """PIX or PXB where the two devices' fused chains meet, None where they do not (through a CPU)."""
        fa, fb = self.fused.get(a), self.fused.get(b)
        if not fa or not fb:
            return None
        for i, n in enumerate(fa):
            if n in fb:
                return "PIX" if i == 0 and fb[0] == n else "PXB"
        return None


def sysfs_steps(topo, bdf: str) -> Iterator[str]:
    """The PCI nodes NCCL makes above a device from sysfs, nearest first (v2.30.7 ``src/graph/xml.cc:750-795``):
    two path components up per step (one switch: its downstream port, then its upstream port), until a root
    complex."""
    cur = bdf
    while True:
        anc = topo.ancestors(cur)
        if len(anc) < 2:
            return
        cur = anc[1]
        yield cur


def sysfs_chain(topo, bdf: str) -> tuple[str, ...]:
    """:func:`sysfs_steps`, all of them."""
    return tuple(sysfs_steps(topo, bdf))


def build(chains: Mapping[str, tuple[str, ...]], ids: Callable[[str], int], virtual: Mapping[str, Iterable[str]],
          version: Version, first: Optional[Mapping[str, int]] = None) -> Fusion:
    """The fusion of the PCI nodes on ``chains`` (device -> its PCI nodes, nearest first; in the order NCCL
    fills its XML: GPUs, then NICs)."""
    order = depth_first(chains.values(), first)
    links = tree_links(chains.values(), virtual)
    return Fusion(chains, fuse(order, links, {n: ids(n) for n in order}, version))
