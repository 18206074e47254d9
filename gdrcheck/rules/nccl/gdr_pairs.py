"""NCCL's GPUDirect RDMA decision for every GPU-NIC pair of the node (``ncclTopoCheckGdr``, v2.30.7
``src/graph/paths.cc``): the NIC's flag seen from the GPU (:mod:`gdrcheck.rules.nccl.flags`), the PXN relay
NCCL would take (:mod:`gdrcheck.rules.nccl.pxn`), the decision (:func:`gdrcheck.rules.nccl.gdr.decide`), what
an unseen NVLink or a Data Direct function leaves open, and the send side.

Pure: each function takes the node's flags, the snapshot, topology and path types it reads. The pairs of a large
node ask a few distinct questions thousands of times: each is asked through ``functools.lru_cache`` on the pure
function, the version and settings of the node bound (:class:`Asked`).
"""

from __future__ import annotations

from functools import lru_cache, partial

from gdrcheck.rules.nccl import gdr as gdr_rules
from gdrcheck.rules.nccl import pxn as pxn_rules
from gdrcheck.rules.nccl.core import rank_in, within
from gdrcheck.rules.nccl.decision import Decision, cause, need
from gdrcheck.rules.nccl.flags import nic_dmabuf, nic_flag

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


class Asked:
    """The questions the node's pairs ask, each answered once per distinct argument."""

    def __init__(self, node, snap, relays: pxn_rules.Relays) -> None:
        v, st = node.version, node.st
        nics = node.nics

        # up to 2.22.3 one DMA-BUF probe answers for every NIC NCCL's IB lists (ib.dmabuf_probe_answers)
        listed = tuple(nic_dmabuf(nic, snap) for b, nic in nics.items() if node.rdma.get(b) is not False)

        def nic_flag_of(n: str, rdma, gpu_dmabuf, cuda_driver):  # the NIC by its bus id: cheap to hash
            return nic_flag(v, st, node.plugins, snap, nics[n], rdma, gpu_dmabuf, cuda_driver, listed)

        self.nic_flag = lru_cache(maxsize=None)(nic_flag_of)
        self.decide = lru_cache(maxsize=None)(partial(gdr_rules.decide, v, st))
        read = partial(gdr_rules.read_side, v, st)
        dump = pxn_rules.nccl_own_dump(relays.topo)  # NCCL's own view: its GPUs and NVLinks are NCCL's
        self.read_side = lru_cache(maxsize=None)(lambda sm, peer, single: read(sm, peer, single, dump))
        self.distance = lru_cache(maxsize=None)(partial(gdr_rules.distance, v, st))
        # NVLink after NCCL's P2P decision (paths.cc:497-503, 762-773)
        self.nvlink_peer = lru_cache(maxsize=None)(relays.nvlink_peer)


def decide_gdr(node, snap, topo, pairs, types,
               rl: Optional[pxn_rules.Relays] = None) -> dict[tuple[str, str], Decision]:
    """Each GPU-NIC pair's view, by pair, for the GPUs and NICs NCCL decides (``rl``: the node's relay choice, made
    here where not given)."""
    mine = [p for p in pairs if p.kind == "gpu-nic" and p.b in node.nics]
    rl = rl or pxn_rules.Relays(node, snap, topo, pairs, types)
    ask = Asked(node, snap, rl)
    flags = {(p.a, p.b): _nic_flag(ask, node, p.a, p.b) for p in mine}
    relay = relays(node, rl, ask, flags, types, dict.fromkeys(p.b for p in mine))
    return {(p.a, p.b): pair_view(node, snap, rl, ask, p, types[(p.a, p.b)], flags[(p.a, p.b)], relay.get(p.b))
            for p in mine}


def _nic_flag(ask: Asked, node, g: str, n: str):
    gpu = node.gpus[g]
    return ask.nic_flag(n, node.rdma.get(n), gpu.dmabuf, gpu.cuda_driver)


def relays(node, rl: pxn_rules.Relays, ask: Asked, flags, types, nics) -> dict[str, tuple[str, str]]:
    """PXN: NCCL's one relay GPU per NIC (pxn.Relays.local_gpu, v2.30.7 paths.cc:812-843), if close enough to
    the NIC and able to do GDR with it, with the relay's path type; whether its path to the GPU that wants the
    NIC is NVLink after NCCL's P2P decision (paths.cc:762-773, 832) is asked per pair."""
    st, v = node.st, node.version
    order = rank_in(v)
    single = len(node.gpus) == 1
    # NCCL_PXN_C2C: default 0 in 2.27.x (v2.27.3 paths.cc:609), 1 from 2.28.3 (paths.cc:620)
    pxn_type = "P2C" if v >= (2, 27, 0) and st.param("NCCL_PXN_C2C", int(v >= (2, 28, 0))) else "PXB"
    out: dict[str, tuple[str, str]] = {}
    for n in nics:
        q = rl.local_gpu(n)
        if q is None or (q, n) not in flags:
            continue
        qt = ask.distance(types[(q, n)][0], node.gpus[q].c2c)[0]
        raw = "P2C" if qt == "C2C" and types[(q, n)][0] == "PHB" else qt  # NCCL compares the path's own type
        if raw is None or order.get(raw, 99) > order.get(pxn_type, order["PXB"]):
            continue
        if node.gpus[q].gdr is False or flags[(q, n)][0] is False:
            continue
        # 2.30 asks ncclTopoCheckGdr(peer, read=1) too (paths.cc:825-830): its level and send side
        usable = not (v >= (2, 30, 0) and (ask.read_side(node.gpus[q].sm, rl.nvlink_peer(q), single)["gdr_read"]
                                           == "disabled" or not within(qt, st.gdr_level, v)))
        if usable:
            out[n] = (q, qt)
    return out


def pair_view(node, snap, rl: pxn_rules.Relays, ask: Asked, p, pair_type, flag, relay: Optional[tuple[str, str]]) \
        -> Decision:
    """One GPU-NIC pair: NCCL's decision, then what an unseen NVLink to the NIC's relay or a Data Direct function
    leaves open, then the send side where GDR is on."""
    st, v = node.st, node.version
    g = node.gpus[p.a]
    t, cands, _flat, _ = pair_type
    c2c = g.c2c and rl.p2c_local(p.a, p.b)  # from 2.29.2 P2C only for the GPU's local NICs
    d_own = ask.distance(t, c2c)[0]
    pxn, maybe_pxn = _pxn(node, rl, p, d_own, relay)
    view = ask.decide(t=t, candidates=cands, nic_flag=flag, gpu_flag=(g.gdr, g.gdr_source, g.gdr_from_input),
                      gpu_c2c=c2c, pxn=pxn, mlopart=g.mlopart, mlopart_why=g.mlopart_source)
    if maybe_pxn and pxn is None and view.value == "disabled" and d_own is not None \
            and not within(d_own, st.gdr_level, v):
        view = view.plus(cause("gdr.pxn_unseen", relay=maybe_pxn), need("gdr.pxn_nvlink", gpu=p.a, relay=maybe_pxn),
                         value="unknown")
    view = _unless_data_direct(node, snap, p, g, flag, view)
    if view.value == "enabled":
        view = view.with_facts(**ask.read_side(g.sm, ask.nvlink_peer(p.a), len(node.gpus) == 1))
    return view


def _pxn(node, rl: pxn_rules.Relays, p, d_own: Optional[str], relay: Optional[tuple[str, str]]) \
        -> tuple[Optional[tuple[str, str]], Optional[str]]:
    """(the relay NCCL takes for this pair, a relay it would take if NVLink joins them in an input that cannot
    show NVLink)."""
    st, v = node.st, node.version
    order = rank_in(v)
    pxn_off = v < gdr_rules.PXN_FROM or st.param("NCCL_PXN_DISABLE", 0) == 1
    if pxn_off or relay is None or relay[0] == p.a:
        return None, None
    far = d_own is None or order.get(d_own, 99) > order["PXB"]
    if not far and not _relay_wider(rl, relay[0], p.a, p.b):
        return None, None
    linked = rl.nvlinked(p.a, relay[0])
    return (relay if linked else None), (relay[0] if linked is None else None)


def _relay_wider(rl: pxn_rules.Relays, q: str, g: str, n: str) -> bool:
    """The relay's path to the NIC is wider than the GPU's own, which is close (PXB or nearer): NCCL relays
    then too (``peerNode->paths[NET][n].bw > gpu->paths[NET][n].bw``, v2.30.7 ``paths.cc:835-836``, v2.21.5
    ``paths.cc:617``). False where a bandwidth is not shown (the close path assumed as wide)."""
    mine, theirs = rl.path_bw(g, n), rl.path_bw(q, n)
    return mine is not None and theirs is not None and theirs > mine


def _unless_data_direct(node, snap, p, g, flag, view: Decision) -> Decision:
    """A Data Direct DMA function NCCL may judge the NIC on leaves the decision open (:mod:`data_direct`)."""
    if not node.data_direct:
        return view
    from gdrcheck.rules.nccl.data_direct import data_direct  # a node with a Data Direct function only

    st, v = node.st, node.version
    nic = node.nics[p.b]
    dd = data_direct(v, st, node.data_direct, snap, nic)
    mlo_block = g.mlopart and v >= gdr_rules.MLOPART_FROM and not st.param("NCCL_NET_GDR_MLOPART", 0)
    if not dd or flag[0] is False or g.gdr is False or mlo_block:
        return view
    said = () if view.value == "unknown" else (cause("data_direct", text=dd),)
    return view.plus(*said, need("data_direct", names='/'.join(nic.rdma) or p.b,
                                 device=(nic.rdma or ('<dev>',))[0]), value="unknown")
