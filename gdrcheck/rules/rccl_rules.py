"""Rules of an AMD node judged with RCCL's rules (:mod:`gdrcheck.rules.rccl`, ``docs/rccl.md``): peer memory as
RCCL looks for it (the ``amdkfd`` client) and the GPU flag that only the node shows (fine-grained memory).

Each check reads RCCL's decisions (``ctx.nccl_view``, made in :mod:`gdrcheck.rules.rccl.node`) and decides
nothing of its own.
"""

from __future__ import annotations

from gdrcheck.rules.base import Context, Finding, Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

NO_AMDKFD_PEER = Rule(
    "GDR210", "rccl-no-peer-memory", "error", "pair",
    "No peer-memory path: RCCL will not use GPUDirect RDMA on any NIC",
    "RCCL gives a NIC GPUDirect RDMA only when the amdkfd peer-memory client is registered with the RDMA core "
    "(it tests /sys/kernel/mm/memory_peers/amdkfd/version; 2.20 also the kernel's ib_umem_get_peer, 2.21 two "
    "more places and the ib_register_peer_memory_client symbol) or DMA-BUF is on (NCCL_DMABUF_ENABLE=1, off "
    "by default). Without either, every inter-node transfer is staged through host memory.",
    "Use the RDMA stack with peer-memory support (MLNX_OFED/DOCA-OFED's ib_core registers "
    "/sys/kernel/mm/memory_peers/amdkfd when amdgpu loads after it: `modprobe -r amdgpu; modprobe amdgpu`), or "
    "turn DMA-BUF on: NCCL_DMABUF_ENABLE=1 with a kernel built with CONFIG_DMABUF_MOVE_NOTIFY=y and "
    "CONFIG_PCI_P2PDMA=y.",
    origin="rccl", pair_kinds=("gpu-nic",))
GPU_FLAG_UNKNOWN = Rule(
    "GDR211", "rccl-gpu-gdr-unknown", "info", "pair",
    "Whether RCCL gives the GPU GPUDirect RDMA is not known",
    "RCCL sets a GPU's GPUDirect RDMA flag only when fine-grained device memory allocates on it "
    "(hipExtMallocWithFlags with hipDeviceMallocFinegrained), which only the node itself answers; an RCCL "
    "topology dump records the answer as <gpu gdr>.",
    "Run `rocminfo` on the node (the GPU agent lists a 'FINE GRAINED' global pool), or give gdrcheck the job's "
    "NCCL_TOPO_DUMP_FILE (its <gpu gdr=\"1\">).",
    origin="rccl", pair_kinds=("gpu-nic",))
PEER_UNKNOWN = Rule(
    "GDR212", "rccl-peer-memory-unknown", "info", "pair",
    "Whether RCCL finds a peer-memory path is not known",
    "The input does not show the amdkfd peer-memory client where RCCL looks for it, or RCCL's next test is one "
    "gdrcheck does not make (RCCL 2.21 reads /proc/kallsyms, which holds the kernel's addresses and is never "
    "read or kept in a snapshot).",
    "Run the command the finding names on the node, or give gdrcheck the job's RCCL log (its 'GPU Direct RDMA "
    "Enabled for HCA' lines).",
    origin="rccl", pair_kinds=("gpu-nic",))


def _check(ctx: Context) -> Iterable[Finding]:
    found = _by_cause(ctx)
    no_peer, unknown_gpu, unknown_peer = (found.get(c, []) for c in ("no-peer-memory", "gpu-flag-unknown",
                                                                      "peer-memory-unknown"))
    if no_peer:
        why = ctx.nccl_view[no_peer[0]].get("reason", "")
        yield Finding(NO_AMDKFD_PEER.code, "error", ("peer-memory",), f"no peer-memory path for RCCL: {why}",
                      pairs=tuple(no_peer), effect="fail")
    if unknown_gpu:
        yield Finding(GPU_FLAG_UNKNOWN.code, "info", ("fine-grained-memory",),
                      "RCCL's GPUDirect RDMA flag of the GPUs rests on fine-grained device memory, which only the "
                      "node shows", pairs=tuple(unknown_gpu), effect="unknown",
                      settle="rocminfo on the node (a 'FINE GRAINED' pool of the GPU agent), or the job's "
                             "NCCL_TOPO_DUMP_FILE")
    if unknown_peer:
        yield Finding(PEER_UNKNOWN.code, "info", ("peer-memory",), "peer-memory path for RCCL not known: "
                      + str((ctx.nccl_view[unknown_peer[0]].get("depends_on") or [""])[0]),
                      pairs=tuple(unknown_peer), effect="unknown", settle=_settle(ctx))


def _by_cause(ctx: Context) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for p in ctx.pairs_of("gpu-nic"):
        cause = (ctx.nccl_view.get((p.a, p.b)) or {}).get("rccl_cause")
        if cause:
            out.setdefault(cause, []).append((p.a, p.b))
    return out


def _settle(ctx: Context) -> str:
    from gdrcheck.rules.rccl.flags import AMDKFD_221

    return f"ls {' '.join(AMDKFD_221)}; grep -w ib_register_peer_memory_client /proc/kallsyms"


CHECKS = (
    (NO_AMDKFD_PEER, _check),
    (GPU_FLAG_UNKNOWN, None),
    (PEER_UNKNOWN, None),
)
