"""NVSwitch fabric state and NVLink link state, as NVML reports them per GPU (``DriverGpu.extra``: ``fabric``,
``nvlink``; see gdrcheck.collectors.nvml_fabric)."""

from __future__ import annotations

from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import label, pair_label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Optional

FM_CHECK = (
    "On the node: `systemctl status nvidia-fabricmanager` (it must be active), `nv-fabricmanager --version` "
    "against the driver's `cat /proc/driver/nvidia/version` (they must be the same version, to the last "
    "digit), and its log `/var/log/fabricmanager.log` (or `journalctl -u nvidia-fabricmanager`); "
    "`nvidia-smi -q | grep -A6 Fabric` shows each GPU's state. Install the Fabric Manager package of exactly "
    "the driver's version, `systemctl enable --now nvidia-fabricmanager`, and restart the jobs.")
FABRIC_NOT_READY = Rule(
    "GDR200", "nvswitch-fabric-not-ready", "error", "pair",
    "A GPU's NVSwitch fabric is not set up: NVLink peer access between the GPUs fails",
    "On an NVSwitch system (HGX/DGX) the GPUs reach each other only after Fabric Manager has programmed the "
    "NVSwitches and the GPU's fabric state is Completed with status Success. Before that, or when it "
    "failed (Fabric Manager not running, or at another version than the driver), CUDA refuses peer access "
    "(cudaErrorSystemNotReady: 'system not yet initialized'), and NCCL jobs fail at start or fall back to "
    "host memory.",
    FM_CHECK, origin="nvidia-docs", pair_kinds=("gpu-gpu",),
    vm_remediation="In a virtual machine the NVSwitches belong to the host: ask the host's administrator (or "
    "the cloud provider) to check Fabric Manager there (service active, same version as the host driver, its "
    "log), and to give the GPUs to the guest only once their fabric state is Completed.")
NVLINK_DOWN = Rule(
    "GDR201", "nvlink-links-down", "warning", "pair",
    "Fewer NVLinks are active than the GPU has: the pair's NVLink bandwidth is cut",
    "Each NVLink carries a fixed share of a GPU's peer bandwidth (18 links of 26.6 GB/s each way on "
    "H100/H200): a link that is down (a cable, a connector, a switch port, or a link the driver gave up on "
    "after errors) cuts every transfer through that GPU by its share, silently, since the rest still work.",
    "`nvidia-smi nvlink -s -i <gpu>` shows each link's speed (`<inactive>` for a down one) and "
    "`nvidia-smi nvlink -e -i <gpu>` its error counters; `dmesg | grep -i -e xid -e nvlink` says why it "
    "went down. A reset (`nvidia-smi -r -i <gpu>` with no process on it) or a reboot retrains the links; a link "
    "that stays down is a hardware fault for the vendor.", origin="gdrcheck", pair_kinds=("gpu-gpu",),
    vm_remediation="In a virtual machine the links are the host's: report the GPU and its down links to the "
    "host's administrator (or the cloud provider).")
FABRIC_UNKNOWN = Rule(
    "GDR202", "nvswitch-fabric-state-unknown", "info", "device",
    "The NVSwitch fabric state of a GPU is not known",
    "The GPUs are joined through NVSwitches, but the input does not say whether each GPU's fabric is "
    "Completed (an older snapshot, or NVML did not answer): the GPU-GPU verdicts rest on the links alone.",
    "Run gdrcheck on the node, or make the snapshot again with this version; `nvidia-smi -q | grep -A6 Fabric` "
    "shows it by hand.")


def _gpu_extra(ctx: Context) -> dict[str, dict[str, Any]]:
    return {g.bdf: dict(g.extra or {}) for g in ctx.snap.gpus}


def _switched(ctx: Context, bdf: str, extra: dict[str, Any]) -> bool:
    """Whether the GPU has links into NVSwitches (NVML's remote type, or the connected-link field)."""
    nvl = extra.get("nvlink") or {}
    if nvl.get("to_nvswitch"):
        return True
    for link in ctx.snap.nvlinks:
        if link.a == bdf and (link.b == "nvswitch" or ctx.topo.device_kind.get(link.b) == "nvswitch"):
            return True
    return False


def _fabric_text(f: dict[str, Any]) -> str:
    return f"state {f.get('state')}, status {f.get('status')}"


def _check_fabric(ctx: Context) -> Iterable[Finding]:
    gg = ctx.pairs_of("gpu-gpu")
    extras = _gpu_extra(ctx)
    bad: dict[str, str] = {}
    for bdf, ex in extras.items():
        f = ex.get("fabric")
        if not isinstance(f, dict):
            if _switched(ctx, bdf, ex):
                yield Finding(FABRIC_UNKNOWN.code, "info", (bdf,),
                              f"{label(ctx, bdf)}: joined through NVSwitches, fabric state not recorded")
            continue
        if f.get("error"):
            if f["error"] not in ("NotSupported", "FunctionNotFound") and _switched(ctx, bdf, ex):
                yield Finding(FABRIC_UNKNOWN.code, "info", (bdf,),
                              f"{label(ctx, bdf)}: NVML did not give the fabric state ({f['error']})")
            continue
        if f.get("supported") is False or f.get("ok"):
            continue
        bad[bdf] = _fabric_text(f)
    if not bad:
        return
    for bdf, why in sorted(bad.items()):
        pairs = tuple((p.a, p.b) for p in gg if bdf in (p.a, p.b) and not (p.a in bad and p.a < bdf)
                      and not (p.b in bad and p.b < bdf))
        if not pairs:
            continue
        state = extras[bdf]["fabric"].get("state")
        what = ("still being set up by Fabric Manager" if state == "In Progress" else
                "not started: Fabric Manager has not set it up" if state == "Not Started" else "not usable")
        yield Finding(FABRIC_NOT_READY.code, "error", (bdf,),
                      f"{label(ctx, bdf)}: NVSwitch fabric {what} ({why}); check nvidia-fabricmanager (service, "
                      "its version against the driver's, its log)",
                      pairs=pairs, effect="fail", evidence=f"NVML nvmlDeviceGetGpuFabricInfo: {why}")


def _down_text(ex: dict[str, Any]) -> Optional[str]:
    nvl = ex.get("nvlink") or {}
    total, active = nvl.get("links"), nvl.get("active")
    if not isinstance(total, int) or not isinstance(active, int) or active >= total:
        return None
    down = list(nvl.get("down") or ())
    named = ", ".join(str(x) for x in down[:18]) + (" ..." if len(down) > 18 else "")
    return f"{active} of {total} NVLinks active" + (f" (link{'s' if len(down) > 1 else ''} {named} down)" if down
                                                     else "")


def _check_links(ctx: Context) -> Iterable[Finding]:
    extras = _gpu_extra(ctx)
    short = {b: t for b, ex in extras.items() if (t := _down_text(ex))}
    if not short:
        return
    for p in ctx.pairs_of("gpu-gpu"):
        which = [b for b in (p.a, p.b) if b in short]
        if not which:
            continue
        n = ctx.topo.nvlink_count(p.a, p.b) if ctx.snap.shows_nvlink else None
        parts: list[str] = [f"{label(ctx, b)}: {short[b]}" for b in which]
        nv = f"NV{n}" if n else "no NVLink"
        full = max((extras[b].get("nvlink") or {}).get("links") or 0 for b in (p.a, p.b))
        msg = f"{pair_label(ctx, p)} joined by {nv}" + (f" where the GPUs have {full} links" if full else "") \
            + "; " + "; ".join(parts)
        yield Finding(NVLINK_DOWN.code, "warning", (p.a, p.b), msg, pairs=((p.a, p.b),), effect="degraded",
                      evidence="NVML nvmlDeviceGetNvLinkState per link, NVML_FI_DEV_NVLINK_LINK_COUNT")


CHECKS = (
    (FABRIC_NOT_READY, _check_fabric),
    (NVLINK_DOWN, _check_links),
    (FABRIC_UNKNOWN, None),
)
