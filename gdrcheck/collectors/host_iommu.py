"""IOMMU state, host-wide and per device (Documentation/ABI/testing/sysfs-kernel-iommu_groups, drivers/iommu/)."""

from __future__ import annotations

from collections import Counter

from gdrcheck.collectors.host_util import HostCtx, listdir_kept
from gdrcheck.model import Fact, unknown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

CLASS_IOMMU = "/sys/class/iommu"
GROUPS = "/sys/kernel/iommu_groups"

# iommu_group/type -> gdrcheck's mode
GROUP_TYPE_MODE = {"identity": "passthrough", "DMA": "translated", "DMA-FQ": "translated",
                   "unmanaged": "unmanaged", "blocked": "blocked"}
# Modes per device: off, no-group (IOMMU on, device not behind it), passthrough, translated,
# unmanaged (VFIO / VM), blocked, unknown. Host mode adds "mixed" (passthrough and translated groups).


def _unit_kind(units: list[str]) -> Optional[str]:
    kinds = set()
    for u in units:
        if u.startswith("dmar"):
            kinds.add("intel-vt-d")
        elif u.startswith("ivhd"):
            kinds.add("amd-vi")
        elif "smmu" in u:
            kinds.add("arm-smmu")
        else:
            kinds.add("other")
    return ",".join(sorted(kinds)) or None


def cmdline_iommu(tokens: list[str]) -> tuple[list[str], Optional[bool], bool]:
    """(IOMMU-related tokens, pass-through asked (last one wins; None: not said), disabled asked)."""
    hints: list[str] = []
    passthrough: Optional[bool] = None
    disabled = False
    for tok in tokens:
        if not tok.startswith(("iommu=", "iommu.", "intel_iommu=", "amd_iommu=")):
            continue
        hints.append(tok)
        name, _, val = tok.partition("=")
        vals = val.split(",")
        if name == "iommu":
            if "pt" in vals:
                passthrough = True
            if "nopt" in vals:
                passthrough = False
            if "off" in vals:
                disabled = True
        elif name == "iommu.passthrough":
            passthrough = val.lower() in ("1", "y", "on")
        elif name in ("intel_iommu", "amd_iommu") and "off" in vals:
            disabled = True
        elif name == "intel_iommu" and "on" in vals:
            disabled = False
    return hints, passthrough, disabled


def _group_mode(gtype: Optional[str], cmd_pt: Optional[bool], cmdline_known: bool = True) -> str:
    if gtype is None:  # no type file (kernel < 5.11): the command line decides, if it was read
        if not cmdline_known:
            return "unknown"
        return "passthrough" if cmd_pt else "translated"
    return GROUP_TYPE_MODE.get(gtype, "unknown")


def iommu_facts(ctx: HostCtx) -> dict[str, Fact]:
    src = ctx.src
    units = listdir_kept(src, CLASS_IOMMU)
    groups = sorted((g for g in listdir_kept(src, GROUPS) if g.isdigit()), key=int)
    hints, cmd_pt, cmd_off = cmdline_iommu(ctx.cmdline_tokens())
    value: dict[str, object] = {
        "units": units, "unit_kind": _unit_kind(units), "groups_present": bool(groups),
        "group_count": len(groups), "cmdline_hints": hints, "cmdline_passthrough": cmd_pt,
    }
    source = f"{CLASS_IOMMU}, {GROUPS}" + (", /proc/cmdline" if ctx.cmdline is not None else "")
    if not groups:
        return _no_groups(ctx, value, source, bool(units), cmd_off)
    gtypes: dict[str, Optional[str]] = {g: src.read_line(f"{GROUPS}/{g}/type") for g in groups}
    inferred = any(t is None for t in gtypes.values())
    known = ctx.cmdline is not None
    gmode = {g: _group_mode(t, cmd_pt, known) for g, t in gtypes.items()}
    counts = Counter(t if t is not None else "(no type file)" for t in gtypes.values())
    note = ""
    if inferred:
        note = ("group type not readable (kernel < 5.11?): mode inferred from the command line"
                + ("" if cmd_pt is not None else ", which does not ask for pass-through"))
    value.update(mode=_host_mode(gmode), group_types=dict(sorted(counts.items())), inferred=inferred, note=note)
    return {"iommu": Fact(value, source=source),
            "iommu_devices": Fact(_device_modes(ctx, groups, gmode, cmd_pt, known),
                                  source=f"{GROUPS}/<group>/type")}


def _no_groups(ctx: HostCtx, value: dict[str, object], source: str, units: bool, cmd_off: bool) -> dict[str, Fact]:
    """No IOMMU group: the IOMMU is off (units or not), or the input cannot say."""
    src = ctx.src
    if not units:
        denied = "permission denied" in (src.why(CLASS_IOMMU), src.why(GROUPS))
        seen = src.live or src.has_capture() or src.exists(CLASS_IOMMU) or src.exists(GROUPS) or cmd_off
        if denied or not seen:
            f = unknown("IOMMU state not readable: no /sys/class/iommu or /sys/kernel/iommu_groups in the input",
                        settle="run as root" if denied else "capture /sys/class/iommu and /sys/kernel/iommu_groups",
                        source=source)
            return {"iommu": f, "iommu_devices": f}
        value.update(mode="off", group_types={}, inferred=False,
                     note="no IOMMU units and no groups: not in use" + (" (disabled on the command line)"
                                                                       if cmd_off else ""))
    else:
        value.update(mode="off", group_types={}, inferred=False,
                     note="IOMMU units listed but no groups: no device is translated")
    return {"iommu": Fact(value, source=source),
            "iommu_devices": Fact({d.bdf: "off" for d in ctx.devices}, source=source)}


def _host_mode(gmode: dict[str, str]) -> str:
    """The host's mode from its groups': passthrough, translated, mixed (both), unmanaged or unknown."""
    relevant = {m for m in gmode.values() if m in ("passthrough", "translated")}
    if relevant == {"passthrough"}:
        return "passthrough"
    if relevant == {"translated"}:
        return "translated"
    if relevant:
        return "mixed"
    if "unmanaged" in gmode.values():
        return "unmanaged"
    return "unknown"


def _device_modes(ctx: HostCtx, groups: list[str], gmode: dict[str, str], cmd_pt, known: bool) -> dict[str, str]:
    """Each device's mode: its group's, or no-group."""
    src = ctx.src
    # device -> group: the device's own link, else the groups' member lists
    member: dict[str, str] = {d.bdf: d.iommu_group for d in ctx.devices if d.iommu_group}
    if len(member) < len(ctx.devices):
        for g in groups:
            for b in listdir_kept(src, f"{GROUPS}/{g}/devices"):
                member.setdefault(b, g)
    per_dev: dict[str, str] = {}
    for d in ctx.devices:
        g = member.get(d.bdf)
        per_dev[d.bdf] = "no-group" if g is None else gmode.get(g) or _group_mode(
            src.read_line(f"{GROUPS}/{g}/type"), cmd_pt, known)
    return per_dev
