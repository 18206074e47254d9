"""NCCL's view of one node at one version: the version judged and its settings, the GPU and NIC flags, and each
pair's path type and GDR or P2P decision. Each question is answered in its own module, as NCCL's own files
split them: :mod:`versions` (version and settings), :mod:`flags` (GPUs, NICs; :mod:`cpu` for the CPU),
:mod:`paths` (path types), :mod:`file_tree` (NCCL_TOPO_FILE), :mod:`gdr_pairs` (GDR), :mod:`p2p_pairs` (P2P and
``ncclTopoCheckNet``), :mod:`speed` (bandwidths); this module puts them together.

Pure: reads the snapshot and topology only. :func:`build` is called once per report (and once per other NCCL
version found, to say which pairs would be decided differently under it).
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.record import field, record, replace
from gdrcheck.rules.nccl.cpu import node_cpu
from gdrcheck.rules.nccl.file_tree import say_file_tree, topo_file_attrs, topo_file_classes
from gdrcheck.rules.nccl.flags import GpuInfo, NicInfo, data_direct_functions, gpu_info, nic_info
from gdrcheck.rules.nccl.gdr_pairs import decide_gdr
from gdrcheck.rules.nccl.p2p_pairs import decide_p2p
from gdrcheck.rules.nccl.paths import pair_types, path_choice
from gdrcheck.rules.nccl.pxn import Relays
from gdrcheck.rules.nccl.settings import NcclSettings
from gdrcheck.rules.nccl.versions import settings_for, with_beyond_modelled

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version


@record
class NodeNccl:
    version: Version
    version_reason: str
    versions_found: list[dict[str, object]]
    st: NcclSettings
    cpu: Optional[str]
    cpu_source: str
    gpus: dict[str, GpuInfo]
    nics: dict[str, NicInfo]
    plugins: tuple[str, ...]
    topo_files: dict[str, str] = field(default_factory=dict)  # path -> what was applied from it
    data_direct: list[str] = field(default_factory=list)  # the node's mlx5 data-direct DMA functions
    file_classes: dict[tuple[str, str], str] = field(default_factory=dict)  # pairs the topology file decides
    file_flat: frozenset = frozenset()  # of those, the pairs that are PIX because NCCL fused Broadcom switches
    rdma: dict[str, Optional[bool]] = field(default_factory=dict)  # NIC -> an RDMA device NCCL's IB lists
    gdr_view: dict[tuple[str, str], dict] = field(default_factory=dict)
    p2p_view: dict[tuple[str, str], dict] = field(default_factory=dict)
    types: dict[tuple[str, str], tuple] = field(default_factory=dict)  # pair -> pair_type(): asked once
    job_gpus: Optional[int] = None  # the node's GPUs in the job's communicator, where known
    job: Optional[object] = None  # cuda_visible.JobGpus: which GPUs, where the job sets CUDA_VISIBLE_DEVICES
    relays: Optional[object] = None  # pxn.Relays the GPU-NIC decisions asked: each GPU's local NICs, asked once


def build(snap, topo, pairs, options, version: Version, version_reason: str,
          found: list[dict[str, object]]) -> NodeNccl:
    """NCCL's view of the node at ``version`` (``version_reason``: why that one; ``found``: the versions found)."""
    gpus_bdf = topo.of_kind("gpu")
    version_reason = with_beyond_modelled(version, version_reason)
    cpu, cpu_src = node_cpu(snap)
    job = None
    if "CUDA_VISIBLE_DEVICES" in options.env:  # the job's GPUs (the module is loaded only for a job that says)
        from gdrcheck.rules import cuda_visible

        job = cuda_visible.select(options.env, cuda_visible.gpu_ids(snap, topo))
    job_gpus = job.count if job is not None and job.count is not None else getattr(options, "job_gpus", None)
    st = settings_for(snap, version, dict(options.env), cpu, len(gpus_bdf), version_reason, job_gpus)
    if job is not None and not st.user_p2p_level:
        st = replace(st, p2p_level_source=f"{st.p2p_level_source}; {cuda_visible.numbering(job)}")
    topo_gpu, topo_net, topo_applied, topo_file = topo_file_attrs(snap, st)
    from gdrcheck.rules.nccl.job_log import hca_evidence

    for name, gdr in hca_evidence(snap).items():  # a job's NCCL log: each HCA's flag as NCCL set it
        topo_net.setdefault(name, gdr)
    pf = host_record(snap, "nccl_versions")
    plugins = tuple(pf.get("net_plugins", ())) if pf is not None else ()
    rates = host_record(snap, "rdma_port_rates") or {}
    gpus = {b: gpu_info(snap, topo, b, cpu, topo_gpu) for b in gpus_bdf}
    nics = {b: nic_info(snap, topo, b, rates, topo_net) for b in topo.of_kind("nic")}
    node = NodeNccl(version, version_reason, found, st, cpu, cpu_src, gpus, nics, plugins, topo_applied,
                    job_gpus=job_gpus, job=job)
    node.data_direct = data_direct_functions(snap)
    from gdrcheck.rules.base import Context
    from gdrcheck.rules.link_nic import rdma_capable

    ctx = Context(snap=snap, topo=topo, pairs=())
    node.rdma = {b: rdma_capable(ctx, b) for b in nics}
    file_cls, file_flat = topo_file_classes(topo_file, topo, pairs, node.topo_files, version) if topo_file \
        else ({}, frozenset())
    types = pair_types(topo, pairs, version, st, file_cls, file_flat)
    path_choice(version, gpus, topo, pairs, types)
    node.types = types
    node.file_classes = file_cls
    node.file_flat = file_flat
    node.relays = Relays(node, snap, topo, pairs, types)
    node.gdr_view = decide_gdr(node, snap, topo, pairs, types, node.relays)
    node.p2p_view = decide_p2p(node, snap, topo, pairs, types)
    if file_cls:
        say_file_tree(node, topo_file.path, types, file_cls, pairs)
    return node
