"""Facts the input cannot show at all (``gdrcheck.reach``): a verdict that needs them is not a pass."""

from __future__ import annotations

from gdrcheck.reach import FACTS, not_shown
from gdrcheck.rules.base import Context, Finding, Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

NOT_IN_INPUT = Rule(
    "GDR160", "not-in-this-input", "info", "host",
    "The input cannot show devices GPUDirect needs",
    "Each kind of input shows some facts and not others: an `nvidia-smi -q` shows GPUs and BAR1 but no NIC, "
    "NVMe drive or PCIe bridge; a `topo -m` matrix shows no NVMe drive. A device the input cannot show is not "
    "absent: the pairs it would make are not judged, and the node cannot pass on such an input.",
    "Give gdrcheck an input that shows the whole node: run it there, or pass a snapshot "
    "(`gdrcheck snapshot -o node.tar.gz`), or `lspci -tv` beside the file given.")

_SETTLE = {"gpus": "lspci -tv, nvidia-smi topo -m or nvidia-smi -q, or run gdrcheck on the node",
           "nics": "lspci -tv, or nvidia-smi topo -m (its NIC columns), or run gdrcheck on the node",
           "nvme": "lspci -tv, or run gdrcheck on the node"}
_SETTLE_AMD = {"nics": "lspci -tv, or amd-smi topology, or run gdrcheck on the node"}  # AMD GPUs: no nvidia-smi


def _check(ctx: Context) -> Iterable[Finding]:
    if not ctx.topo.of_kind("gpu"):
        # a host-wide paste alone (gdscheck -p, numactl, grub, an NCCL graph dump): GPUs are not absent, only not
        # shown; every command says so (pairs as check does), unknown, not a pass with no pair
        yield from (not_in_input(ctx.snap, fact, ctx.topo) for fact in not_shown(ctx.snap, ("gpus",)))
        return
    # NICs: every GPU node gate judges GPUDirect RDMA; NVMe drives only where GDS is required (unmet_reach)
    for fact in not_shown(ctx.snap, ("nics",)):
        yield not_in_input(ctx.snap, fact, ctx.topo)


def not_in_input(snap, fact: str, topo=None) -> Finding:
    from gdrcheck.rules.rccl.releases import node_reason

    what = {"gpus": "no pair is judged", "nics": "GPUDirect RDMA (GPU-NIC pairs) not judged"}.get(
        fact, "GPUDirect Storage (GPU-NVMe pairs) not judged")
    amd = topo is not None and bool(node_reason(snap, topo))  # RCCL judges the node (AMD GPUs)
    settle = _SETTLE_AMD.get(fact, _SETTLE[fact]) if amd else _SETTLE[fact]
    return Finding(NOT_IN_INPUT.code, "info", (fact,),
                   f"{FACTS[fact]}: not in this input ({' + '.join(_kinds(snap))}); {what}",
                   effect="unknown", settle=settle)


def _kinds(snap):
    from gdrcheck.reach import kinds_of

    return kinds_of(snap)


CHECKS = (
    (NOT_IN_INPUT, _check),
)
