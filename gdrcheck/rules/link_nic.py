"""PCIe link state on the path, and whether a NIC can do RDMA at all."""

from __future__ import annotations

from gdrcheck.host_facts import host_fact
from gdrcheck.reach import kernel_view
from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

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


_DOWN_FACING = ("root_port", "switch_downstream")  # their own link state is the link below them


def _partner(ctx: Context, bdf: str):
    """The port at the upper end of ``bdf``'s link, or None where the input does not list it (a function on a
    root bus, or bridges between it and its listed parent that the input names but does not list)."""
    topo = ctx.topo
    d = topo.by_bdf[bdf]
    if d.unlisted_upstream:
        return None
    parent = topo.parent(bdf)
    return topo.by_bdf[parent] if parent is not None else None


def _expected(own: Optional[float], other: Optional[float]):
    """What a link trains to at best: the lower of the two ends' maximum (``None`` when one is not shown)."""
    if own is None or other is None:
        return None
    return min(own, other)


def _check_links(ctx: Context) -> Iterable[Finding]:
    """Each link once, from its lower end: the width and speed to expect are the lower of the two ends' maximum
    (a x16 card in a x8 slot trains x8 as it should); where the upper end's maximum is not in the input, the
    finding says so instead of calling the link downtrained."""
    topo = ctx.topo
    narrow: dict[str, tuple[int, int, Optional[int]]] = {}  # bdf -> (current, own max, expected or None)
    slow: dict[str, tuple[float, float, Optional[float]]] = {}
    for bdf, d in topo.by_bdf.items():
        if topo.device_kind.get(bdf) in _DOWN_FACING:
            continue  # the same link as its child's, judged from the child
        up = _partner(ctx, bdf)
        lk, ulk = d.link, (up.link if up is not None else None)
        cur_w = lk.cur_width or (ulk.cur_width if ulk is not None else None)
        if cur_w and lk.max_width and cur_w < lk.max_width:
            want = _expected(lk.max_width, ulk.max_width if ulk is not None else None)
            if want is None or cur_w < want:
                narrow[bdf] = (cur_w, lk.max_width, want)
        cur_s = lk.cur_speed or (ulk.cur_speed if ulk is not None else None)
        if cur_s and lk.max_speed and cur_s < lk.max_speed:
            want_s = _expected(lk.max_speed, ulk.max_speed if ulk is not None else None)
            if want_s is None or cur_s < want_s:
                slow[bdf] = (cur_s, lk.max_speed, want_s)
    for bdf in sorted(narrow):
        affected = tuple((p.a, p.b) for p in (ctx.pairs_with(bdf) if topo.device_kind.get(bdf) in ("gpu", "nic", "nvme")
                                               else ctx.pairs) if not p.nvlinks and bdf in (p.a, p.b, *p.bridges))
        if not affected and topo.device_kind.get(bdf) not in ("gpu", "nic", "nvme"):
            continue
        cur, own, want = narrow[bdf]
        if want is None:
            yield Finding(LINK_WIDTH.code, "info", (bdf,),
                          f"{label(ctx, bdf)} link x{cur}, the device capable of x{own}; the upstream port's "
                          f"maximum is not in this input, so whether the slot allows more is "
                          f"unknown (`lspci -vv -s <port> | grep LnkCap` on the node shows it)",
                          evidence=f"/sys/bus/pci/devices/{bdf}/current_link_width")
            continue
        yield Finding(LINK_WIDTH.code, "warning", (bdf,),
                      f"{label(ctx, bdf)} link x{cur}, both ends capable of x{want}",
                      pairs=affected, effect="degraded" if affected else None,
                      evidence=f"/sys/bus/pci/devices/{bdf}/current_link_width")
    for bdf in sorted(slow):
        if topo.device_kind.get(bdf) not in ("gpu", "nic", "nvme"):
            continue
        cur_s, own_s, want_s = slow[bdf]
        if want_s is None:
            yield Finding(LINK_SPEED.code, "info", (bdf,),
                          f"{label(ctx, bdf)} link at {cur_s:g} GT/s, the device capable of {own_s:g} GT/s (normal "
                          f"when idle); the upstream port's maximum is not in this input")
            continue
        yield Finding(LINK_SPEED.code, "info", (bdf,),
                      f"{label(ctx, bdf)} link at {cur_s:g} GT/s, both ends capable of {want_s:g} GT/s "
                      "(normal when idle)")


def _check_rdma(ctx: Context) -> Iterable[Finding]:
    for nic in ctx.topo.of_kind("nic"):
        pairs = tuple((p.a, p.b) for p in ctx.pairs_with(nic) if p.kind == "gpu-nic" and p.b == nic)
        if not pairs:
            continue
        cap = rdma_capable(ctx, nic)
        if cap and not ctx.topo.by_bdf[nic].rdma_devices and kernel_view(ctx.snap) \
                and host_fact(ctx.snap, "modules_loaded"):
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
