"""NCCL's P2P decision for every GPU pair of the node (``ncclTopoCheckP2p``, :func:`gdrcheck.rules.nccl.p2p.decide`),
with ``ncclTopoCheckNet``: both GPUs reach a NIC faster than they reach each other (v2.30.7
``src/graph/paths.cc``, ``src/transport/p2p.cc``).

Pure: each function takes the node's flags and decisions, the snapshot, topology and path types it reads. A
GPU's best NIC is asked once per GPU (``functools.lru_cache`` on :func:`best_net`, the node bound).
"""

from __future__ import annotations

from functools import lru_cache, partial

from gdrcheck.rules.nccl import cpu as cpu_rules
from gdrcheck.rules.nccl import p2p as p2p_rules
from gdrcheck.rules.nccl import pxn as pxn_rules
from gdrcheck.rules.nccl.core import nccl_type, rank_in
from gdrcheck.rules.nccl.cpu import cpu_kind
from gdrcheck.rules.nccl.decision import Decision, cause, need
from gdrcheck.rules.nccl.paths import flattened
from gdrcheck.rules.nccl.speed import nvlink_bw, pcie_bw

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional


def decide_p2p(node, snap, topo, pairs, types) -> dict[tuple[str, str], Decision]:
    """Each GPU pair's view, by pair."""
    st, v = node.st, node.version
    default = p2p_rules.default_p2p_level(v, cpu_kind(node.cpu), len(node.gpus), node.job_gpus)
    best = lru_cache(maxsize=None)(partial(best_net, node, topo))
    out: dict[tuple[str, str], Decision] = {}
    for p in pairs:
        if p.kind != "gpu-gpu":
            continue
        t, cands, _flat, via = types[(p.a, p.b)]
        faster, detail = net_faster(node, topo, p, t, best)
        link = "xGMI" if (p.path or "").startswith("XGMI") else "NVLink"
        facts = p2p_rules.PairFacts(t, cands, via, pxn_rules.nvml_hops(snap, p.a, p.b, via), faster, detail, link)
        view = p2p_rules.decide(v, st, default, facts)
        if t is None and getattr(p, "nvlink_unknown", "") and view.value == "unknown":
            view = view.restated((cause("p2p.nvlink_unseen", text=p.nvlink_unknown, candidates=tuple(cands)),),
                                 (need("p2p.nvlink"),))
        if node.job is not None:  # the job's CUDA_VISIBLE_DEVICES: whether the pair is the job's, as cuda:N
            from gdrcheck.rules.cuda_visible import pair_in_job

            view = pair_in_job(node.job, p.a, p.b, view)
        out[(p.a, p.b)] = view
    return out


def best_net(node, topo, g: str) -> tuple[float, bool]:
    """The best bandwidth from GPU ``g`` to a NIC NCCL would reach at PXB or closer with GDR, and whether a
    close NIC's bandwidth or GDR is not known."""
    order = rank_in(node.version)
    best, undecided = 0.0, False
    for n, nic in node.nics.items():
        view = node.gdr_view.get((g, n))
        from_file = node.file_classes.get((g, n))
        cls = from_file or topo.pcie_class(g, n)[0]
        if view is None or cls is None:
            continue
        nt = nccl_type(cls, None, (g, n) in node.file_flat if from_file
                       else cls == "PXB" and flattened(topo, g, n, node.version))
        if order.get(nt, 99) > order["PXB"]:
            continue
        if view["gdr"] == "disabled":
            continue
        bw = pcie_bw(topo, g, n, topo.path_bridges(g, n))
        if view["gdr"] == "unknown" or bw is None or nic.rate is None:
            undecided = True
            continue
        best = max(best, min(bw, nic.rate))
    return best, undecided


def net_faster(node, topo, p, t: Optional[str], best: Optional[Callable[[str], tuple[float, bool]]] = None) \
        -> tuple[Optional[bool], str]:
    """``ncclTopoCheckNet``: both GPUs reach a NIC at PXB or closer (with GDR, else NCCL's path to it goes
    through the CPU) faster than they reach each other. ``best``: :func:`best_net` of a GPU, as the caller keeps
    it across pairs (it depends on the GPU alone)."""
    if t is None or not node.nics:
        return False, ""
    best = best or partial(best_net, node, topo)
    if t in ("NVL", "NVB"):
        per = nvlink_bw(node.gpus[p.a].sm)
        speed = (p.nvlinks or 1) * per if per else None
    else:
        speed = pcie_bw(topo, p.a, p.b, p.bridges)
        if speed is not None and t == "SYS":  # the CPU link caps it (cpu.inter_cpu_bw: per CPU model and version)
            bws, why = cpu_rules.inter_cpu_bw(node.version, cpu_kind(node.cpu), *cpu_rules.cpu_model(topo.snap))
            if len({min(best(p.a)[0], best(p.b)[0]) > min(speed, b) for b in bws}) > 1:
                return None, f"NCCL's CPU-to-CPU bandwidth decides: {why}"
            speed = min(speed, bws[0])
    n1, u1 = best(p.a)
    n2, u2 = best(p.b)
    if speed is not None and n1 > speed and n2 > speed:
        return True, f"NIC paths {n1:g} and {n2:g} GB/s against {speed:g} GB/s between the GPUs"
    if speed is None and (n1 or n2 or u1 or u2):
        return None, "the GPU-GPU path bandwidth is not shown"
    if (u1 or u2) and speed is not None:
        if (n1 > speed or u1) and (n2 > speed or u2):
            return None, "a close NIC's bandwidth or GDR is not known"
    return False, ""
