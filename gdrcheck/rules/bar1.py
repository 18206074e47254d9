"""BAR1 rules (GDR100-GDR119): the aperture through which NICs, NVMe and peers reach GPU memory.

BAR1 is read three ways: the driver (NVML, else ``nvidia-smi -q``: total, used,
free), the bus (sysfs ``resource`` line 1) and the Resizable BAR capability
(current and supported sizes). :func:`gpu_views` joins them per GPU; the
checks and the ``bar1`` report both read that join.
"""

from __future__ import annotations

import re

from gdrcheck.model import DriverGpu, PciFunction, bdf_key
from gdrcheck.pcie.kinds import NVIDIA
from gdrcheck.pcie.rebar import sysfs_bar1
from gdrcheck.record import field, record
from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.units import human_bytes, size_range_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Optional

BIOS = ("in the system BIOS/UEFI set 'Above 4G Decoding' to Enabled and 'Re-Size BAR Support' (also called "
        "'Resizable BAR' or 'Smart Access Memory') to Enabled, boot in UEFI mode (CSM off), and on servers give "
        "64-bit MMIO enough room ('MMIO High Size'/'MMIOH' 256G or more per GPU slot); then reboot")
CHECK_SIZES = ("check: sudo lspci -vvv -s <gpu> | grep -e 'Region 1' -A0 -e 'Resizable BAR' -A3; "
               "nvidia-smi -q -d MEMORY")


def _rule(code: str, name: str, severity: str, title: str, rationale: str, remediation: str,
          origin: str = "gdrcheck") -> Rule:
    return Rule(code=code, name=name, severity=severity, scope="device", title=title, rationale=rationale,
                remediation=remediation, origin=origin)


R_UNASSIGNED = _rule(
    "GDR100", "bar1-unassigned", "error", "GPU BAR1 has no address",
    "The firmware or kernel could not place the GPU's BAR1 (IORESOURCE_UNSET or size 0, typically a large BAR "
    "without 'Above 4G Decoding'). The driver cannot use the GPU (NVRM: 'BAR1 is 0M'); nothing can reach its "
    "memory over PCIe: no GPUDirect RDMA, no GPUDirect Storage, no PCIe peer-to-peer.",
    f"{BIOS}. On Linux, 'pci=realloc' on the kernel command line lets the kernel re-place BARs the firmware "
    "left unassigned. Verify with: sudo lspci -vvv -s <gpu> | grep 'Region 1'.")
R_SMALL = _rule(
    "GDR101", "bar1-small", "warning", "GPU BAR1 smaller than the minimum",
    "Every GPUDirect RDMA or Storage registration and every PCIe peer mapping of GPU memory takes BAR1 space. "
    "A small BAR1 (256 MiB on older and consumer parts) caps how much GPU memory NICs and NVMe can reach at "
    "once: NCCL falls back to staging copies and GDS to bounce buffers when it fills.",
    f"Enable large/resizable BAR: {BIOS}. GPUs whose BAR1 is fixed at 256 MiB cannot be enlarged; use a "
    f"datacenter GPU for GPUDirect workloads. {CHECK_SIZES}.", "nvidia-docs")
R_BELOW_FB = _rule(
    "GDR102", "bar1-below-framebuffer", "warning", "GPU BAR1 smaller than GPU memory",
    "With BAR1 smaller than the framebuffer, only part of the GPU's memory can be registered for GPUDirect RDMA "
    "or Storage at the same time; GDS in P2PDMA mode with a static BAR1 expects BAR1 to cover the framebuffer.",
    f"Raise BAR1 to at least the framebuffer size where the GPU supports it: {BIOS}. {CHECK_SIZES}.",
    "nvidia-docs")
R_BUSY = _rule(
    "GDR103", "bar1-nearly-full", "warning", "GPU BAR1 nearly full",
    "BAR1 in use is a fact of the moment: registrations (GPUDirect RDMA memory regions, GDRCopy pins, GDS "
    "buffers, peer mappings) of the processes now running. Near full, new registrations fail "
    "(ibv_reg_mr ENOMEM, cuFileBufRegister errors) until something is released.",
    "Find the holders (nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; "
    "nvidia-smi -q -d MEMORY,PIDS); release registrations or restart the job that leaks them; "
    "for good, enlarge BAR1 (Above 4G Decoding and Re-Size BAR Support in the BIOS).")
R_DISAGREE = _rule(
    "GDR104", "bar1-size-disagreement", "info", "Driver and bus disagree on BAR1 size",
    "The driver's BAR1 total normally equals the size of the BAR on the bus (sysfs resource1, or resource2 "
    "where BAR0 is 64-bit). A difference "
    "means a hypervisor, a confidential-computing mode or the driver limits the usable aperture; the driver's "
    "figure is the one GPUDirect can use.",
    "Compare: stat -c %s /sys/bus/pci/devices/<gpu>/resource1 (resource2 on GPUs with a 64-bit BAR0) and "
    "nvidia-smi -q -d MEMORY (BAR1 Memory Usage). "
    "In a VM, size the BAR in the hypervisor's passthrough settings; otherwise upgrade the driver.")
R_REBAR = _rule(
    "GDR105", "rebar-not-at-max", "warning", "Resizable BAR not at its largest size",
    "The GPU's Resizable BAR capability supports a larger BAR1 than the one assigned, and the assigned one is "
    "smaller than the GPU's memory: the firmware did not enlarge it.",
    f"{BIOS}. On Linux 6.1+ with no driver bound, root can resize through "
    "/sys/bus/pci/devices/<gpu>/resource1_resize (resource2_resize behind a 64-bit BAR0) when the bridge "
    "window has room (gdrcheck never writes it). "
    "Verify: sudo lspci -vvv -s <gpu> | grep -A3 'Resizable BAR'.")
R_UNREAD = _rule(
    "GDR106", "bar1-unread", "info", "GPU BAR1 use could not be read",
    "BAR1 total, use and the framebuffer size come from the NVIDIA driver (NVML or nvidia-smi). Without them "
    "only the bus's BAR size is known, so small-BAR and usage checks cannot run.",
    "Run gdrcheck on the node with the NVIDIA driver loaded (nvidia-ml-py installed), or from a "
    "'gdrcheck snapshot' made there.")
R_NOT_LISTED = _rule(
    "GDR107", "gpu-not-in-driver-view", "error", "GPU on the bus but not listed by the driver",
    "The NVIDIA driver answered for other GPUs but not this one: it is bound to another driver (vfio-pci, "
    "nouveau), failed to initialise (often an unassigned BAR) or fell off the bus. Its BAR1 cannot be read.",
    "Check 'sudo dmesg | grep -i -e nvrm -e xid' and 'lspci -k -s <gpu>'; bind it to nvidia if it should be "
    "used for compute; reseat or power-cycle a GPU that fell off the bus.")


@record(frozen=True)
class GpuBar1:
    """One GPU's BAR1 as the driver and the bus see it."""

    bdf: str
    dev: Optional[PciFunction]
    drv: Optional[DriverGpu]
    bus: dict[str, Any] = field(default_factory=dict)  # keys of gdrcheck.pcie.rebar.sysfs_bar1

    @property
    def index(self) -> Optional[int]:
        if self.drv is not None and self.drv.index is not None:
            return self.drv.index
        return self.dev.gpu_index if self.dev is not None else None

    @property
    def name(self) -> Optional[str]:
        return (self.drv.name if self.drv is not None else None) or (self.dev.name if self.dev else None)

    @property
    def total(self) -> Optional[int]:
        """BAR1 size: the driver's figure, else the bus's."""
        if self.drv is not None and self.drv.bar1_total_bytes is not None:
            return self.drv.bar1_total_bytes
        if self.bus.get("sysfs_bar1_unset"):
            return 0
        return self.bus.get("sysfs_bar1_bytes")

    @property
    def fb(self) -> Optional[int]:
        return self.drv.fb_total_bytes if self.drv is not None else None

    @property
    def unset(self) -> bool:
        """No BAR1: the bus says so, or the driver says 0 bytes and the bus does not show a size."""
        if self.bus.get("sysfs_bar1_unset"):
            return True
        return self.drv is not None and self.drv.bar1_total_bytes == 0 and not self.bus.get("sysfs_bar1_bytes")

    def res_name(self) -> str:
        return f"resource{self.bus.get('sysfs_bar1_index') or 1}"

    def label(self) -> str:
        idx = f"GPU{self.index} " if self.index is not None else "GPU "
        return f"{idx}{self.bdf}" + (f" ({self.name})" if self.name else "")


def _is_nvidia(topo, bdf: str) -> bool:
    d = topo.by_bdf.get(bdf)
    if d is None or topo.device_kind.get(bdf) != "gpu":
        return False
    if d.vendor is None:
        if d.extra and (d.extra.get("nccl_gpu") or {}).get("gcn"):  # RCCL's dump: <gpu gcn> names an AMD GPU
            return False
        return not re.search(r"\b(AMD|ATI|Advanced Micro Devices|Instinct)\b", d.name or "")
    return d.vendor == NVIDIA


def gpu_views(snap, topo) -> list[GpuBar1]:
    """Every NVIDIA GPU the driver lists or the bus shows, in GPU index order."""
    drv = {g.bdf: g for g in snap.gpus}
    bdfs = set(drv) | {b for b in topo.by_bdf if _is_nvidia(topo, b)}
    out = []
    for b in bdfs:
        g = drv.get(b)
        dev = topo.by_bdf.get(b)
        # the bus view, joined here only: the function's BARs and ReBAR, and the resize file the driver
        # collector read beside the driver's answer
        resize = g.extra.get("bar1_resize") if g is not None else None
        bus = sysfs_bar1(dev if dev is not None else PciFunction(bdf=b, root=""), resize)
        out.append(GpuBar1(bdf=b, dev=dev, drv=g, bus=bus))
    out.sort(key=lambda v: (v.index if v.index is not None else 1 << 30, bdf_key(v.bdf)))
    return out


def driver_answered(snap) -> bool:
    return any(c.name in ("nvml", "nvidia-smi") and c.status == "ok" for c in snap.collectors) or bool(snap.gpus)


def _pairs(ctx: Context, bdf: str, kinds: tuple[str, ...], either_end: bool = False) -> tuple[tuple[str, str], ...]:
    return tuple((p.a, p.b) for p in ctx.pairs_with(bdf) if p.kind in kinds
                 and (p.a == bdf or (either_end and p.kind == "gpu-gpu" and p.b == bdf)))


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.0f}%"


def check_unassigned(ctx: Context) -> Iterator[Finding]:
    for v in gpu_views(ctx.snap, ctx.topo):
        if not v.unset:
            continue
        why = ("the bus shows BAR1 unassigned (IORESOURCE_UNSET or size 0)" if v.bus.get("sysfs_bar1_unset")
               else "the driver reports a BAR1 of 0 bytes")
        yield Finding(R_UNASSIGNED.code, R_UNASSIGNED.severity, (v.bdf,),
                      f"{v.label()}: {why}; nothing can reach its memory over PCIe",
                      pairs=_pairs(ctx, v.bdf, ("gpu-gpu", "gpu-nic", "gpu-nvme"), either_end=True), effect="fail",
                      evidence=f"sysfs {v.res_name()}: {v.bus.get('sysfs_bar1_bytes')} bytes, unset="
                               f"{v.bus.get('sysfs_bar1_unset')}; driver total: "
                               f"{v.drv.bar1_total_bytes if v.drv else None}")


def check_small(ctx: Context) -> Iterator[Finding]:
    limit = ctx.options.min_bar1_bytes
    for v in gpu_views(ctx.snap, ctx.topo):
        total = v.total
        io_pairs = _pairs(ctx, v.bdf, ("gpu-nic", "gpu-nvme"))
        if v.unset or not total:
            continue
        if total < limit:
            yield Finding(R_SMALL.code, R_SMALL.severity, (v.bdf,),
                          f"{v.label()}: BAR1 is {human_bytes(total)}, below {human_bytes(limit)}: NICs and NVMe "
                          f"can reach at most {human_bytes(total)} of its memory at once"
                          + (f" (of {human_bytes(v.fb)})" if v.fb else ""),
                          pairs=io_pairs, effect="degraded" if io_pairs else None,
                          evidence=_size_evidence(v))
        elif v.fb and total < v.fb and io_pairs:
            yield Finding(R_BELOW_FB.code, R_BELOW_FB.severity, (v.bdf,),
                          f"{v.label()}: BAR1 {human_bytes(total)} is smaller than its {human_bytes(v.fb)} of "
                          f"memory: GPUDirect RDMA/Storage can register at most {human_bytes(total)} "
                          f"({_pct(total, v.fb)}) of it at once", pairs=io_pairs, effect="degraded",
                          evidence=_size_evidence(v))


def _size_evidence(v: GpuBar1) -> str:
    src = v.drv.source if v.drv is not None and v.drv.bar1_total_bytes is not None else f"sysfs {v.res_name()}"
    return f"BAR1 total {v.total} bytes ({src}); framebuffer {v.fb} bytes"


def _holders(v: GpuBar1) -> str:
    procs = v.drv.processes if v.drv is not None else ()
    if not procs:
        return "no process visible to the driver query (another container or PID namespace may hold it)"
    parts = []
    for p in sorted(procs, key=lambda p: -(p.used_memory_bytes or 0))[:6]:
        who = ", ".join(x for x in (f"pid {p.pid}", f"user {p.user}" if p.user else "",
                                    human_bytes(p.used_memory_bytes) if p.used_memory_bytes is not None else "") if x)
        parts.append(f"{p.name or '?'} ({who})")
    more = f" and {len(procs) - 6} more" if len(procs) > 6 else ""
    return "held by " + ", ".join(parts) + more


def check_busy(ctx: Context) -> Iterator[Finding]:
    top = ctx.options.bar1_used_max_pct
    for v in gpu_views(ctx.snap, ctx.topo):
        d = v.drv
        if d is None or not d.bar1_total_bytes or d.bar1_used_bytes is None:
            continue
        pct = 100.0 * d.bar1_used_bytes / d.bar1_total_bytes
        if pct > top:
            yield Finding(R_BUSY.code, R_BUSY.severity, (v.bdf,),
                          f"{v.label()}: BAR1 {pct:.0f}% in use ({human_bytes(d.bar1_used_bytes)} of "
                          f"{human_bytes(d.bar1_total_bytes)}, above {top:g}%); {_holders(v)}",
                          evidence=f"{d.source}: used {d.bar1_used_bytes} of {d.bar1_total_bytes} bytes")


def check_disagree(ctx: Context) -> Iterator[Finding]:
    for v in gpu_views(ctx.snap, ctx.topo):
        d = v.drv
        bus = v.bus.get("sysfs_bar1_bytes")
        if d is None or d.bar1_total_bytes is None or not bus or v.unset or d.bar1_total_bytes == bus:
            continue
        yield Finding(R_DISAGREE.code, R_DISAGREE.severity, (v.bdf,),
                      f"{v.label()}: {d.source} reports BAR1 {human_bytes(d.bar1_total_bytes)}, the bus shows "
                      f"{human_bytes(bus)} (sysfs {v.res_name()})",
                      evidence=f"{d.source} {d.bar1_total_bytes} bytes; sysfs {bus} bytes")


def check_rebar(ctx: Context) -> Iterator[Finding]:
    for v in gpu_views(ctx.snap, ctx.topo):
        sizes = v.bus.get("rebar_supported_bytes") or []
        cur = v.bus.get("rebar_current_bytes")
        if not sizes or cur is None or v.unset or cur >= sizes[-1] or (v.fb and cur >= v.fb):
            continue
        want = next((s for s in sizes if v.fb and s >= v.fb), sizes[-1])
        yield Finding(R_REBAR.code, R_REBAR.severity, (v.bdf,),
                      f"{v.label()}: Resizable BAR1 is {human_bytes(cur)} but the GPU supports "
                      f"{size_range_text(sizes, human_bytes)}; {human_bytes(want)} would cover "
                      + ("its memory" if v.fb else "more of its memory"),
                      evidence=f"ReBAR ({v.bus.get('rebar_source')}): current {cur} bytes, supported {sizes}")


def check_unread(ctx: Context) -> Iterator[Finding]:
    views = gpu_views(ctx.snap, ctx.topo)
    answered = driver_answered(ctx.snap)
    why = "; ".join(f"{c.name}: {c.detail}" for c in ctx.snap.collectors
                    if c.name in ("nvml", "nvidia-smi") and c.status != "ok") or "no driver view in this input"
    unread: list[GpuBar1] = []
    for v in views:
        if v.drv is None and answered:
            bound = v.dev.driver if v.dev is not None else None
            yield Finding(R_NOT_LISTED.code, R_NOT_LISTED.severity, (v.bdf,),
                          f"{v.label()} is on the PCI bus (driver: {bound or 'none'}) but the NVIDIA driver does "
                          "not list it: it can take part in no GPUDirect transfer",
                          pairs=tuple((p.a, p.b) for p in ctx.pairs_with(v.bdf)), effect="fail",
                          settle="'nvidia-smi -L' and 'sudo dmesg | grep -i -e nvrm -e xid' on the node")
        elif v.drv is None or v.drv.bar1_total_bytes is None:
            unread.append(v)
    if not unread:
        return
    known = [v for v in unread if v.bus.get("sysfs_bar1_bytes")]
    bus_part = (f"; the bus shows BAR1 sizes ({', '.join(f'{v.bdf}: {human_bytes(v.total)}' for v in known)}) "
                "but not their use or the GPUs' memory" if known else "")
    if any(v.drv is not None for v in unread):
        why = "the driver did not report BAR1 for " + ", ".join(v.bdf for v in unread if v.drv is not None) + \
              ("; " + why if any(v.drv is None for v in unread) else "")
    yield Finding(R_UNREAD.code, R_UNREAD.severity, tuple(v.bdf for v in unread),
                  f"BAR1 of {len(unread)} GPU{'s' if len(unread) != 1 else ''} could not be read from the NVIDIA "
                  f"driver ({why}){bus_part}",
                  settle="run gdrcheck on the node with the NVIDIA driver loaded and nvidia-ml-py installed, or "
                         "from a 'gdrcheck snapshot' made there; 'nvidia-smi -q -d MEMORY' shows BAR1 by hand")


CHECKS = (
    (R_UNASSIGNED, check_unassigned),
    (R_SMALL, check_small),
    (R_BELOW_FB, None),  # found by check_small
    (R_BUSY, check_busy),
    (R_DISAGREE, check_disagree),
    (R_REBAR, check_rebar),
    (R_UNREAD, check_unread),
    (R_NOT_LISTED, None),  # found by check_unread
)
