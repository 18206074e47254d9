"""RCCL's view of one AMD node at one RCCL release, in the shape the documents read (NCCL's
:class:`~gdrcheck.rules.nccl.node.NodeNccl`, with the library, the release and its words added).

Pure: reads the snapshot and topology only. :func:`build` is called once per report.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.record import record, replace
from gdrcheck.rules.nccl.cpu import cpu_model, node_cpu
from gdrcheck.rules.nccl.decision import Decision, cause, need
from gdrcheck.rules.nccl.flags import GpuInfo, nic_info
from gdrcheck.rules.nccl.node import NodeNccl
from gdrcheck.rules.nccl.paths import pair_types
from gdrcheck.rules.nccl.versions import settings_for
from gdrcheck.rules.rccl import decide, flags
from gdrcheck.rules.rccl.releases import Release, choose, label, newer_than_modelled
from gdrcheck.rules.rccl.settings import rccl_settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


@record
class NodeRccl(NodeNccl):
    library: str = "rccl"
    label: str = ""  # "RCCL 2.20.5 (NCCL 2.20.5 base)"
    release: Optional[Release] = None
    why_rccl: str = ""  # why the node is judged with RCCL's rules
    gcn: Optional[str] = None  # the GPUs' gfx target, where the input names it
    newer: bool = False  # the release asked for is newer than the newest modelled (releases.newer_than_modelled)
    peer_memory: tuple = (None, "", "")  # flags.peer_memory's answer


def _gcn(snap, topo, gpus) -> Optional[str]:
    """The first GPU's gfx target (RCCL asks ``nodes[GPU].nodes[0].gpu.gcn``): the dump's ``<gpu gcn>``, else
    the KFD topology's ``gfx_target_version``."""
    kfd = {n.get("bdf"): n.get("gfx") for n in flags.amd_facts(snap).get("kfd_nodes") or ()}
    for b in gpus:
        d = topo.by_bdf[b]
        attrs = d.extra.get("nccl_gpu") if d.extra else None
        if attrs and attrs.get("gcn"):
            g = attrs["gcn"]
            return g if g.startswith("gfx") else f"gfx{g}"
        if kfd.get(b):
            return kfd[b]
    return None


def build(snap, topo, pairs, options, requested: Optional[str], requested_why: str, found, why_rccl: str) \
        -> NodeRccl:
    release, release_why = choose(requested)
    if requested and requested_why:
        release_why = f"{requested_why}; {release_why}"
    gpus_bdf = topo.of_kind("gpu")
    cpu, cpu_src = node_cpu(snap, "RCCL")
    base = settings_for(snap, release.nccl_base, dict(options.env), cpu, len(gpus_bdf), release_why)
    env = {**base.env, **_rccl_env(snap, options)}
    st = rccl_settings(replace(base, env=env), release, env, cpu)
    from gdrcheck.rules.base import Context
    from gdrcheck.rules.link_nic import rdma_capable

    ctx = Context(snap=snap, topo=topo, pairs=())
    rates = host_record(snap, "rdma_port_rates") or {}
    nics = {b: nic_info(snap, topo, b, rates, {}) for b in topo.of_kind("nic")}
    peer = flags.peer_memory(release, st, snap)
    dma = flags.dmabuf(st, snap)
    gpus = {}
    for b in gpus_bdf:
        d = topo.by_bdf[b]
        xml_gpu = d.extra.get("nccl_gpu") if d.extra else None
        ok, why = flags.gpu_flag(xml_gpu, peer[0], dma[0], release)
        gpus[b] = GpuInfo(b, d.name, None, "", ok, why, False)
    job = _job(snap, topo, options)
    if job is not None:
        from gdrcheck.rules.cuda_visible import numbering

        st = replace(st, p2p_level_source=f"{st.p2p_level_source}; {numbering(job)}")
    node = NodeRccl(release.nccl_base, release_why, list(found), st, cpu, cpu_src, gpus, nics, (),
                    label=label(release), release=release, why_rccl=why_rccl, gcn=_gcn(snap, topo, gpus_bdf),
                    peer_memory=peer, newer=newer_than_modelled(requested), job=job,
                    job_gpus=job.count if job is not None else None)
    node.rdma = {b: rdma_capable(ctx, b) for b in nics}
    types = pair_types(topo, pairs, release.nccl_base, st, {}, frozenset())
    node.types = {k: (("NVL",) + v[1:] if v[0] == "NVB" else v) for k, v in types.items()}
    node.p2p_view = {(p.a, p.b): decide.p2p_view(st, *_gg(node.types[(p.a, p.b)])) for p in pairs
                     if p.kind == "gpu-gpu"}
    if job is not None:  # the job's ROCR_/HIP_VISIBLE_DEVICES: whether the pair is the job's, as hip:N
        from gdrcheck.rules.cuda_visible import pair_in_job

        node.p2p_view = {(a, b): pair_in_job(job, a, b, view) for (a, b), view in node.p2p_view.items()}
    node.gdr_view = _gdr(node, snap, topo, pairs, peer, dma)
    return node


def _job(snap, topo, options):
    """The job's GPUs where it sets ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES."""
    from gdrcheck.rules.rccl import visible

    if not any(n in options.env for n in visible.NAMES):
        return None
    from gdrcheck.rules.cuda_visible import gpu_ids

    return visible.select(options.env, gpu_ids(snap, topo))


def _rccl_env(snap, options) -> dict[str, str]:
    """``RCCL_*`` settings (NCCL's settings reader keeps ``NCCL_*`` only): the recorded environment, then the
    options'."""
    recorded = (host_record(snap, "nccl_conf", known_only=True) or {}).get("env")
    out = {k: str(v) for k, v in (recorded or {}).items() if k.startswith("RCCL_")}
    out.update({k: v for k, v in options.env.items() if k.startswith("RCCL_")})
    return out


def _gg(t) -> tuple:
    return t[0], t[1], t[3]


def _gdr(node: NodeRccl, snap, topo, pairs, peer, dma) -> dict:
    st = node.st
    mine = [p for p in pairs if p.kind == "gpu-nic" and p.b in node.nics]
    rome = decide.rome_cpu(node.cpu, *cpu_model(snap)) if not st.user_gdr_level else False
    override, hyperv_unseen = _hyperv(node, snap, sorted(node.gpus), sorted({p.b for p in mine}))
    pxn_on = st.param("NCCL_PXN_DISABLE", 1) == 0
    # a release newer than modelled on gfx942/gfx950 (or GPUs of no gfx shown): its PXN rule (rccl.gdr.pxn_later)
    later_pxn = node.newer and "NCCL_PXN_DISABLE" not in st.env \
        and (node.gcn is None or node.gcn.startswith(("gfx942", "gfx950")))
    out = {}
    for p in mine:
        t = node.types[(p.a, p.b)][0]
        if (p.a, p.b) in override:
            t = "PXB" if not hyperv_unseen else t
        unseen = (p.a, p.b) in override and hyperv_unseen
        nic = flags.nic_flag(node.nics[p.b], node.rdma.get(p.b), peer[0], peer[1], dma[0], dma[1])
        g = node.gpus[p.a]
        level = _level(st, topo, p, rome, t)
        relay = _relay(node, p, mine) if pxn_on else None
        view = decide.gdr_view(st, t, nic, (g.gdr, g.gdr_source), level, relay, unseen)
        if later_pxn and view.value == "disabled" and view.distance is not None \
                and _relay(node, p, mine) is not None:  # a later release's PXN could relay it: not modelled
            view = view.plus(cause("rccl.gdr.pxn_later"), need("rccl.gdr.pxn_later"), value="unknown")
        if unseen and view.value == "disabled" and view.distance is not None:  # PXB on Hyper-V would be within
            view = view.plus(need("rccl.gdr.hyperv_unseen"), value="unknown")
        found = _cause(view, nic, node.nics[p.b].xml_gdr, peer[0])
        out[(p.a, p.b)] = view.with_facts(rccl_cause=found) if found else view
    return out


def _cause(view: Decision, nic, xml_gdr, peer: Optional[bool]) -> Optional[str]:
    """What a finding names (rules.rccl_rules): no peer memory for a NIC, or a GPU flag only the node shows; read
    off the decision's typed causes and needs, never its words."""
    if view.value == "disabled" and nic[0] is False and xml_gdr is None and peer is False:
        return "no-peer-memory"
    needs = {n.code for n in view.needs} if view.value == "unknown" else set()
    if "rccl.nic_flag" in needs:
        return "peer-memory-unknown"
    if "rccl.gpu_flag" in needs:
        return "gpu-flag-unknown"
    return None


def _level(st, topo, p, rome: Optional[bool], t: Optional[str]) -> tuple[Optional[str], dict[str, str]]:
    """The pair's GDR level and why, by a code (:data:`gdrcheck.documents.rccl_words.LEVEL_WHY`, or ``user``)."""
    if st.user_gdr_level:
        return st.gdr_level, {"why": "user", "source": st.gdr_level_source}
    if rome is False:
        return st.gdr_level, {"why": "default"}
    phb = decide.rome_phb(topo, p.a, p.b, t)
    if rome and phb:
        return "PHB", {"why": "rome_phb"}
    if rome is None and phb is not False:
        return None, {"why": "cpu_model_unseen"}
    if rome and phb is None:
        return None, {"why": "bridge_unseen"}
    return "PXB", {"why": "default"}


def _relay(node: NodeRccl, p, mine) -> Optional[tuple[str, str]]:
    """With NCCL_PXN_DISABLE=0: the NIC's nearest GPU at PXB or closer, joined to this GPU by xGMI."""
    from gdrcheck.rules.nccl.core import rank_in

    order = rank_in(node.st.version)
    best = None
    for q in mine:
        if q.b != p.b or q.a == p.a:
            continue
        qt = node.types[(q.a, q.b)][0]
        link = node.types.get((p.a, q.a)) or node.types.get((q.a, p.a))
        if qt is None or order.get(qt, 99) > order["PXB"] or not link or link[0] != "NVL":
            continue
        if best is None or order[qt] < order[best[1]]:
            best = (q.a, qt)
    return best


def _hyperv(node: NodeRccl, snap, gpus, nics) -> tuple[set, bool]:
    """The gfx94x path override (paths.cc:653-671@rocm-6.2.2): the pairs it would make PXB, and whether it
    applies is not shown (the BIOS version is not in the input; False: it applies)."""
    if node.cpu != "intel" or not (node.gcn or "").startswith("gfx94"):
        return set(), False
    if not (len(gpus) == 8 and len(nics) == 8):
        return set(), False
    hits = decide.hyperv_override(gpus, nics)
    if not hits:
        return set(), False
    bios = flags.amd_facts(snap).get("bios_version")
    if bios is None:
        return hits, True
    if str(bios).startswith(flags.HYPERV):
        return hits, False
    return set(), False
