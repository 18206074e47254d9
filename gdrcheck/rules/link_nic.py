"""PCIe link state on the path, and whether a NIC can do RDMA at all."""

from __future__ import annotations

from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Optional, Set

LINK_WIDTH = Rule(
    "GDR080", "link-width-downtrained", "warning", "device",
    "A PCIe link on a GPUDirect path trained narrower than it can",
    "A link running at fewer lanes than both ends support (x8 instead of x16) halves the bandwidth of "
    "every transfer through it. Unlike speed, width does not drop for power saving: it points at a "
    "seating, riser, cable or signal-integrity fault.",
    "Reseat the card or riser, check the slot's lane wiring in the server manual, then compare "
    "`lspci -vv -s <bdf> | grep -E 'LnkCap|LnkSta'`; the BIOS may also cap slot width (bifurcation).",
    pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"))
LINK_SPEED = Rule(
    "GDR081", "link-speed-below-max", "info", "device",
    "A PCIe link runs below its maximum speed right now",
    "Idle GPUs and NICs lower their link speed to save power (ASPM), so a low speed on an idle device is "
    "normal; the same reading under load means the link trained at a lower generation.",
    "Read it again under load (`nvidia-smi -q -d PCIE` shows 'Link Gen Current/Max' for GPUs); if it "
    "stays low, check the BIOS PCIe generation setting and the riser.")
NIC_NOT_RDMA = Rule(
    "GDR082", "nic-not-rdma", "error", "pair",
    "An RDMA-capable NIC has no RDMA device: its RDMA driver is not bound",
    "GPUDirect RDMA needs an RDMA-capable NIC (InfiniBand or RoCE, e.g. ConnectX) with its RDMA driver "
    "bound; a plain Ethernet or virtual NIC moves GPU data through host memory.",
    "If the NIC is RDMA-capable, load its RDMA driver (`modprobe mlx5_ib`) and check `ls "
    "/sys/class/infiniband` and `ibv_devinfo`; otherwise this pair is not a GPUDirect path.",
    pair_kinds=("gpu-nic",))
NIC_RDMA_UNKNOWN = Rule(
    "GDR083", "nic-rdma-unknown", "info", "pair",
    "Whether the NIC is an RDMA device is not known from this input",
    "RDMA capability shows in /sys/class/infiniband on the node; an lspci tree or hwloc XML may not "
    "carry it.",
    "Run gdrcheck on the node, or send a snapshot (`gdrcheck snapshot -o node.tar.gz`).",
    pair_kinds=("gpu-nic",))


def rdma_capable(ctx: Context, nic: str) -> Optional[bool]:
    """True/False/None: whether the NIC is (or may be) an RDMA device (see :meth:`Topology.rdma`)."""
    return ctx.topo.rdma(nic)[0]


def _check_links(ctx: Context) -> Iterable[Finding]:
    topo = ctx.topo
    narrow: Set[str] = set()
    slow: Set[str] = set()
    for bdf, d in topo.by_bdf.items():
        lk = d.link
        if lk.cur_width and lk.max_width and lk.cur_width < lk.max_width:
            narrow.add(bdf)
        if lk.cur_speed and lk.max_speed and lk.cur_speed < lk.max_speed:
            slow.add(bdf)
    for bdf in sorted(narrow):
        affected = tuple((p.a, p.b) for p in (ctx.pairs_with(bdf) if topo.device_kind.get(bdf) in ("gpu", "nic", "nvme")
                                               else ctx.pairs) if not p.nvlinks and bdf in (p.a, p.b, *p.bridges))
        if not affected and topo.device_kind.get(bdf) not in ("gpu", "nic", "nvme"):
            continue
        lk = topo.by_bdf[bdf].link
        yield Finding(LINK_WIDTH.code, "warning", (bdf,),
                      f"{label(ctx, bdf)} link x{lk.cur_width}, capable of x{lk.max_width}",
                      pairs=affected, effect="degraded" if affected else None,
                      evidence=f"/sys/bus/pci/devices/{bdf}/current_link_width")
    for bdf in sorted(slow):
        if topo.device_kind.get(bdf) not in ("gpu", "nic", "nvme"):
            continue
        lk = topo.by_bdf[bdf].link
        yield Finding(LINK_SPEED.code, "info", (bdf,),
                      f"{label(ctx, bdf)} link at {lk.cur_speed:g} GT/s, capable of {lk.max_speed:g} GT/s "
                      "(normal when idle)")


def _check_rdma(ctx: Context) -> Iterable[Finding]:
    for nic in ctx.topo.of_kind("nic"):
        pairs = tuple((p.a, p.b) for p in ctx.pairs_with(nic) if p.kind == "gpu-nic" and p.b == nic)
        if not pairs:
            continue
        cap = rdma_capable(ctx, nic)
        if cap and not ctx.topo.by_bdf[nic].rdma_devices and ctx.snap.input_kind in ("live", "sysfs", "snapshot") \
                and ctx.snap.host.get("modules_loaded"):
            _capable, what = ctx.topo.rdma(nic)
            yield Finding(NIC_NOT_RDMA.code, "error", (nic,),
                          f"{label(ctx, nic)} ({what}) has no RDMA device in /sys/class/infiniband: its RDMA "
                          "driver is not bound, so GPUDirect RDMA cannot use it",
                          pairs=pairs, effect="fail")
        elif cap is None:
            yield Finding(NIC_RDMA_UNKNOWN.code, "info", (nic,),
                          f"RDMA capability of {label(ctx, nic)} not shown by the {ctx.snap.input_kind} input",
                          pairs=pairs, effect="unknown", settle="run gdrcheck on the node or send a snapshot")


CHECKS = (
    (LINK_WIDTH, _check_links),
    (LINK_SPEED, None),
    (NIC_NOT_RDMA, _check_rdma),
    (NIC_RDMA_UNKNOWN, None),
)
