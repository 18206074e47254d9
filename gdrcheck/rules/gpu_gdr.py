"""Whether the GPU itself can do GPUDirect RDMA (GeForce and TITAN parts cannot, at any distance)."""

from __future__ import annotations

from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import pair_label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

GPU_WITHOUT_GDR = Rule(
    "GDR170", "gpu-without-gdr-support", "error", "pair",
    "The GPU does not support GPUDirect RDMA (GeForce or TITAN)",
    "NCCL asks the GPU's cudaDevAttrGPUDirectRDMASupported (v2.30.7 src/plugin/net.cc:424-436) and gives a "
    "GPU that answers 0 no GPUDirect RDMA on any NIC, whatever the PCIe path or NCCL_NET_GDR_LEVEL. GeForce "
    "and TITAN parts answer 0: every inter-node transfer is staged through host memory.",
    "Use a data-centre GPU (A100, H100, H200, L40S, B200 ...) or a professional one (RTX 6000 Ada, RTX PRO "
    "6000 Blackwell) for GPUDirect RDMA. No setting enables it on this GPU: NCCL_NET_GDR_LEVEL, slot "
    "placement and peer-memory modules do not help.",
    origin="nccl", pair_kinds=("gpu-nic",))


def _check(ctx: Context) -> Iterable[Finding]:
    for p in ctx.pairs_of("gpu-nic"):
        view = ctx.nccl_view.get((p.a, p.b)) or {}
        if view.get("gpu_gdr_supported") is not False:
            continue
        said = f"the GPU has no GPUDirect RDMA at any distance: {view.get('reason', '')}"
        yield Finding(GPU_WITHOUT_GDR.code, "error", (p.a, p.b), f"{pair_label(ctx, p)}: {said}",
                      pairs=((p.a, p.b),), effect="fail", fold=said)


CHECKS = ((GPU_WITHOUT_GDR, _check),)
