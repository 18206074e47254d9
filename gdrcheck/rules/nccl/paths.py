"""NCCL's path type of each pair (``ncclTopoComputePaths``, v2.30.7 ``src/graph/paths.cc``): the PCIe class of
the node's tree (or of the topology file's, :mod:`gdrcheck.rules.nccl.file_tree`), NVLink, NVB through a third
GPU, and the Broadcom switches NCCL fuses or joins by virtual links (:mod:`gdrcheck.rules.nccl.bcm`).

Pure: each function takes the topology and values it reads. What depends on the topology alone is worked out
once per topology (``functools.lru_cache`` on the function; a topology hashes by identity).
"""

from __future__ import annotations

from functools import cache, lru_cache

from gdrcheck.host_facts import host_record
from gdrcheck.reach import nccl_own_tree
from gdrcheck.rules.nccl import bcm
from gdrcheck.rules.nccl import p2p as p2p_rules
from gdrcheck.rules.nccl import pxn as pxn_rules
from gdrcheck.rules.nccl.core import nccl_type, rank_in
from gdrcheck.rules.nccl.speed import nvlink_bw, pcie_bw

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version

    PairType = tuple[Optional[str], tuple[str, ...], bool, Optional[str]]

# the topologies a run keeps answers for: one node, and the few a test or a fleet report holds at once
_TOPOLOGIES = 8


@lru_cache(maxsize=_TOPOLOGIES)
def has_bcm(topo) -> bool:
    """Whether any function of the node is a Broadcom switch part NCCL may flatten (when none is, no path is
    flattened, and a large node need not look at each path's switches)."""
    return any(bcm.is_part(bcm.function_id(topo, b)) for b in topo.by_bdf)


@lru_cache(maxsize=4 * _TOPOLOGIES)
def fusion(topo, version: Version, drives: bool = False):
    """NCCL's Broadcom switch flattening on the node's tree at ``version`` (:mod:`gdrcheck.rules.nccl.bcm`), or
    None where no function of the node is such a part. NCCL's tree holds GPUs and NICs only; ``drives``: NVMe
    drives too, placed as NCCL places a NIC (a GPU-NVMe pair's path type is what NCCL's would be, had it such
    a device)."""
    if not has_bcm(topo):
        return None
    if nccl_own_tree(topo.snap):  # its <pci> switches are NCCL's PCI nodes themselves
        def chain(b):
            return topo.ancestors(b)
    else:
        def chain(b):
            return bcm.sysfs_chain(topo, b)
    devices = topo.of_kind("gpu") + topo.gpudirect_nics() + (topo.of_kind("nvme") if drives else [])
    chains = {b: chain(b) for b in devices}  # in the order NCCL fills its XML: GPUs, then NICs
    virtual = bcm_virtual_links(topo) if version >= bcm.LINKS_FROM else {}
    return bcm.build(chains, lambda b: bcm.function_id(topo, b), virtual, version)


def flattened(topo, a: str, b: str, version: Version, drives: bool = False) -> bool:
    """NCCL fuses the Broadcom switches between ``a`` and ``b`` (a PXB path) into one: PIX."""
    fu = fusion(topo, version, drives)
    return fu is not None and fu.meet(a, b) == "PIX"


@lru_cache(maxsize=_TOPOLOGIES)
def bcm_virtual_links(topo) -> dict:
    """Virtual links between Broadcom switch ports, from the port that lists them: the host's sysfs
    (``bcm_switch_links``) or an NCCL XML's ``<pcilink target>`` (v2.30.7 ``topo.cc:873-890``: a LOC link from
    the PCI switch node that holds it to the target)."""
    links: dict = {}
    for a, peers in (host_record(topo.snap, "bcm_switch_links") or {}).items():
        links.setdefault(a, set()).update(peers)
    for bdf, d in topo.by_bdf.items():
        for b in (d.extra or {}).get("pcilinks", ()):
            if b:
                links.setdefault(bdf, set()).add(b)
    return links


@lru_cache(maxsize=_TOPOLOGIES)
def bcm_links(topo) -> dict:
    """:func:`bcm_virtual_links` both ways."""
    links: dict = {}
    for a, peers in bcm_virtual_links(topo).items():
        for b in peers:
            links.setdefault(a, set()).add(b)
            links.setdefault(b, set()).add(a)
    return links


def _bcm_linked(topo, a: str, b: str) -> bool:
    links = bcm_links(topo)
    if not links:
        return False
    above_b = set(topo.ancestors(b))
    return any(x in links and links[x] & above_b for x in topo.ancestors(a))


@cache
def class_type(version: Version, pcie: Optional[str], nvlinks: Optional[int], candidates: tuple[str, ...],
               nvlink_unseen: bool, flat: bool = False) -> tuple[Optional[str], tuple[str, ...]]:
    """(NCCL path type, candidates) from a pair's PCIe class (None: not shown, then its ``candidates`` classes),
    its NVLink count (GPU pairs) and whether NVLink may join it unseen; ``flat``: NCCL fused the Broadcom
    switches of a PXB path."""
    t = nccl_type(pcie, nvlinks, flat)
    cands = tuple(sorted({nccl_type(c, None) for c in candidates}, key=lambda x: rank_in(version).get(x, 99))) \
        if pcie is None else ()
    if nvlink_unseen:
        # NVLink parts in an input that cannot show links: NVL, or the PCIe path
        cands = tuple(dict.fromkeys(("NVL",) + ((t,) if t else cands)))
        t = None
    return t, cands


def pair_types(topo, pairs, version: Version, st, file_cls: dict[tuple[str, str], str],
               file_flat: frozenset = frozenset()) -> dict[tuple[str, str], PairType]:
    """:func:`pair_type` of every pair. Where no Broadcom switch can flatten the path (a PXB path on a node with
    such a part) or link it (a node with virtual links), and NCCL cannot route through a third GPU (NVB), the
    answer is :func:`class_type`'s, from the pair's class, file class, NVLink count and candidates."""
    linked = bool(bcm_links(topo))
    bcm_parts = has_bcm(topo)
    nvb = topo.snap.shows_nvlink  # a GPU pair without NVLink may go through a third GPU: its own answer
    out: dict[tuple[str, str], PairType] = {}
    for p in pairs:
        key = (p.a, p.b)
        fc = file_cls.get(key)
        gg = p.kind == "gpu-gpu"
        if linked or (gg and nvb) or (bcm_parts and fc is None and p.pcie_path == "PXB") or key in file_flat:
            out[key] = pair_type(topo, p, version, st, fc, key in file_flat)
            continue
        t, cands = class_type(version, p.pcie_path if fc is None else fc, p.nvlinks if gg else None, p.candidates,
                              gg and bool(p.nvlink_unknown))
        out[key] = (t, cands, False, None)
    return out


def pair_type(topo, p, version: Version, st, file_class: Optional[str] = None, file_flat: bool = False) \
        -> PairType:
    """(NCCL path type, candidates, Broadcom-flattened, NVB intermediate GPU). ``file_class``: the PCIe class
    the topology file's PCI tree gives the pair (``topo_file``), which replaces the node's; ``file_flat``: that
    class is PIX because NCCL fused the file's Broadcom switches."""
    pcie = p.pcie_path if file_class is None else file_class
    if file_class is not None:
        flat = file_flat
    else:
        flat = p.pcie_path == "PXB" and flattened(topo, p.a, p.b, version, p.kind == "gpu-nvme")
    gg = p.kind == "gpu-gpu"
    t, cands = class_type(version, pcie, p.nvlinks if gg else None, p.candidates,
                          gg and bool(getattr(p, "nvlink_unknown", "")), flat)
    if file_class is None and t in ("PHB", "SYS") and version >= bcm.LINKS_FROM and _bcm_linked(topo, p.a, p.b):
        # the two Broadcom switches are joined by a virtual link: NCCL's path stays on PCI switches, and is PIX
        # where NCCL took the far switch into the near one
        fu = fusion(topo, version)
        met = fu.meet(p.a, p.b) if fu is not None else None
        t, flat = (met, True) if met == "PIX" else ("PXB", flat)
    via = None
    if gg and not p.nvlinks and topo.snap.shows_nvlink:
        nvb_off = version >= p2p_rules.NVB_DISABLE_FROM and st.param("NCCL_NVB_DISABLE", 0)
        if not nvb_off:
            for k in topo.of_kind("gpu"):
                if k in (p.a, p.b):
                    continue
                if topo.direct_nvlink(p.a, k) and topo.direct_nvlink(k, p.b):
                    via, t = k, "NVB"
                    break
    return t, cands, flat, via


def _pcie_hops(topo, a: str, b: str, t_pcie: Optional[str], bridges) -> int:
    """NCCL's links on the PCIe path of a GPU pair: 2 under one switch (PIX) or for two GPUs on root ports of
    one CPU (PHB; NCCL's sysfs walk skips root ports, so each GPU hangs from the CPU); more otherwise."""
    if t_pcie == "PIX":
        return 2
    if t_pcie == "PHB" and not any(topo.device_kind.get(x) == "switch_upstream" for x in bridges):
        return 2
    return 3


def path_choice(version: Version, gpus, topo, pairs, types: dict[tuple[str, str], PairType]) -> None:
    """NVB against an as short PCIe path up to 2.30.4 (:func:`pxn.nvb_or_pcie`): ``types`` updated in place.
    ``gpus``: the node's GPU flags (their compute capability sets NVLink's bandwidth)."""
    if version >= pxn_rules.BEST_TYPE_FROM:
        return
    for p in pairs:
        t, cands, flat, via = types.get((p.a, p.b), (None,) * 4)
        if t != "NVB":
            continue
        per = nvlink_bw(gpus[p.a].sm)
        links = [topo.nvlink_count(p.a, via), topo.nvlink_count(via, p.b)]
        nvb_bw = min(links) * per if per and all(links) else None
        pcie = nccl_type(p.pcie_path, None, flat)
        kept, why = pxn_rules.nvb_or_pcie(version, pcie, nvb_bw, pcie_bw(topo, p.a, p.b, p.bridges),
                                          _pcie_hops(topo, p.a, p.b, pcie, p.bridges))
        if kept != "NVB":
            types[(p.a, p.b)] = (kept, (pcie, "NVB") if kept is None else cands, flat, None)
