"""ACS on the bridges of a path, and the IOMMU mode of its two ends (gdrcheck's checks, not NCCL's)."""

from __future__ import annotations

from functools import lru_cache

from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.model import address_on_node
from gdrcheck.pcie.acs import AcsState, format_acs, redirects
from gdrcheck.reach import no_config_space
from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import label, value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

ACS_REDIRECT = Rule(
    "GDR040", "acs-redirect-on-path", "error", "pair",
    "ACS redirect is on for a bridge between the two devices",
    "With ACS Request/Completion Redirect or Egress Control set on a switch or root port, peer-to-peer "
    "requests are sent up to the root complex instead of across the switch: bandwidth collapses, and with "
    "a translating IOMMU GPUDirect RDMA fails (NCCL: 'this error occurs when ACS is enabled'). The kernel "
    "turns ACS on whenever an IOMMU driver is active, including iommu=pt. NCCL does not check this.",
    "Disable ACS for the path: in the BIOS (PCIe ACS / 'ACS Control' off), or with the kernel parameter "
    "`pci=disable_acs_redir=<bdf>;<bdf>` (Linux 5.x+) or `pci=config_acs=` (6.11+); for a test, "
    "`setpci -s <bdf> ECAP_ACS+0x6.w=0000` (until reboot). Bare metal only: in a VM host ACS isolates guests.",
    pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"),
    vm_remediation="In a virtual machine the bridges the guest sees are emulated: ACS and ATS must be set on the "
                   "host (ACS redirect off or ATS with ACS direct translation on the physical switch ports) by its "
                   "administrator or the cloud provider; setpci inside the guest changes nothing that matters.")
ACS_UNKNOWN = Rule(
    "GDR041", "acs-state-unknown", "info", "pair",
    "ACS on the path's bridges could not be read",
    "ACS Control lives in extended config space (past byte 256), which Linux shows only to root; without "
    "it gdrcheck cannot tell whether peer traffic stays in the switch.",
    "Run gdrcheck as root (or `sudo gdrcheck snapshot -o node.tar.gz`), or check by hand: "
    "`sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'`.",
    pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"))
IOMMU_TRANSLATING = Rule(
    "GDR042", "iommu-translating", "error", "pair",
    "The IOMMU translates DMA for a device of the pair",
    "GPUDirect RDMA relies on every PCI device seeing the same physical addresses; NVIDIA documents it as "
    "incompatible with an IOMMU doing anything but 1:1 (off or pass-through). GDS is 'not guaranteed' "
    "with it, and translation also routes peer traffic through the root complex.",
    "Boot with the IOMMU off or in pass-through: add `iommu=pt` (and `intel_iommu=on` only if you need "
    "VFIO) or `amd_iommu=off`/`intel_iommu=off` to GRUB_CMDLINE_LINUX in /etc/default/grub, run "
    "`update-grub` (or `grub2-mkconfig -o /boot/grub2/grub.cfg`) and reboot; check `cat /proc/cmdline` and "
    "`cat /sys/kernel/iommu_groups/*/type` (identity = pass-through).",
    origin="nvidia-docs", pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"),
    vm_remediation="In a virtual machine: remove the virtual IOMMU from the VM definition (or boot the guest with "
                   "iommu=pt); the host's IOMMU is the provider's to set up for peer traffic.")
IOMMU_UNKNOWN = Rule(
    "GDR043", "iommu-state-unknown", "info", "pair",
    "The IOMMU mode of the pair's devices is not known",
    "Whether the IOMMU translates DMA decides whether GPUDirect RDMA can work; the input does not show "
    "/sys/class/iommu or /sys/kernel/iommu_groups.",
    "Run gdrcheck on the node, or send a snapshot (`gdrcheck snapshot -o node.tar.gz`).",
    pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"))


DECLARED_SETTLE = ("ask the provider or the host's administrator whether ACS redirect is off (or ATS on) on the "
                   "host's switch ports; a guest can neither read nor change them (no setpci: the switch has no "
                   "address here)")


@lru_cache(maxsize=8)
def _acs_map(topo) -> dict[str, AcsState]:
    """The ACS state of each bridge of the topology (worked out once per topology)."""
    return {b: topo.acs(b) for b, d in topo.by_bdf.items() if topo.device_kind[b] != "gpu" and d.is_bridge}


def _check_acs(ctx: Context) -> Iterable[Finding]:
    acs = _acs_map(ctx.topo)
    redirect: dict[str, list[tuple[str, str]]] = {}
    unknown: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for p in ctx.pairs:
        if p.nvlinks or p.pcie_path not in ("PIX", "PXB"):
            continue  # NVLink, or the path already goes through the root complex
        unread = []
        for b in p.bridges:
            state = acs.get(b)
            r = redirects(state)
            if r:
                redirect.setdefault(b, []).append((p.a, p.b))
            elif r is None:
                unread.append(b)
        if unread:
            unknown.setdefault(tuple(unread), []).append((p.a, p.b))
    iommu_dev = value(ctx, "iommu_devices") or {}
    for b, pairs in sorted(redirect.items()):
        st = acs[b]
        translated = any(iommu_dev.get(x) == "translated" for pr in pairs for x in pr)
        yield Finding(ACS_REDIRECT.code, "error", (b,),
                      f"{label(ctx, b)} has ACS redirect on ({format_acs(st.ctrl)}); it sits on the path of "
                      f"{len(pairs)} pair{'s' if len(pairs) != 1 else ''}"
                      + ("; the IOMMU also translates for them" if translated else ""),
                      pairs=tuple(pairs), effect="fail",
                      evidence=f"config space offset 0x{(st.offset or 0) + 6:x} (ACS Control)")
    for bridges, pairs in sorted(unknown.items()):
        if not any(address_on_node(ctx.topo.by_bdf[b]) for b in bridges):  # no device of the node: nothing to set
            n = len(pairs)
            yield Finding(ACS_UNKNOWN.code, "info", bridges,
                          f"ACS of {', '.join(bridges)} unknown: {'a switch' if len(bridges) == 1 else 'switches'} "
                          f"the input declares, with no address on the node (a guest's view of the host's PCIe "
                          f"switch); {n} pair{'s' if n != 1 else ''} cross{'es' if n == 1 else ''} "
                          f"{'it' if len(bridges) == 1 else 'them'}", pairs=tuple(pairs), effect="unknown",
                          settle=DECLARED_SETTLE)
            continue
        if no_config_space(ctx.snap):
            why = f"the {ctx.snap.input_kind} input carries no config space"
        else:
            why = acs[bridges[0]].reason if bridges[0] in acs else "no config space in this input"
        yield Finding(ACS_UNKNOWN.code, "info", bridges,
                      f"ACS of {', '.join(bridges)} unknown ({why or 'not in this input'}); "
                      f"{len(pairs)} pair{'s' if len(pairs) != 1 else ''} cross{'es' if len(pairs) == 1 else ''} "
                      "them", pairs=tuple(pairs), effect="unknown",
                      settle="run gdrcheck as root (ACS Control is in extended config space)")


def _check_iommu(ctx: Context) -> Iterable[Finding]:
    f = host_fact(ctx.snap, "iommu_devices")
    per_dev = host_record(ctx.snap, "iommu_devices")
    pairs = [p for p in ctx.pairs if not p.nvlinks]
    if not pairs:
        return
    if per_dev is None:
        why = f.reason if f is not None and f.reason else f"not shown by the {ctx.snap.input_kind} input"
        yield Finding(IOMMU_UNKNOWN.code, "info", ("iommu",), f"IOMMU mode unknown: {why}",
                      pairs=tuple([(p.a, p.b) for p in pairs]), effect="unknown",
                      settle=(f.settle if f is not None and f.settle else "run gdrcheck on the node"))
        return
    bad: dict[str, list[tuple[str, str]]] = {}
    unknown: list[tuple[str, str]] = []
    for p in pairs:
        modes = {x: per_dev.get(x, "unknown") for x in (p.a, p.b)}
        for x, m in modes.items():
            if m == "translated":
                bad.setdefault(x, []).append((p.a, p.b))
        if any(m == "unknown" for m in modes.values()):
            unknown.append((p.a, p.b))
    for dev, prs in sorted(bad.items()):
        yield Finding(IOMMU_TRANSLATING.code, "error", (dev,),
                      f"the IOMMU translates DMA for {label(ctx, dev)} (group type DMA/DMA-FQ)",
                      pairs=tuple(prs), effect="fail",
                      evidence=f"/sys/bus/pci/devices/{dev}/iommu_group/type")
    if unknown:
        yield Finding(IOMMU_UNKNOWN.code, "info", ("iommu",),
                      f"IOMMU mode unknown for {len(unknown)} pair{'s' if len(unknown) != 1 else ''}",
                      pairs=tuple(unknown), effect="unknown", settle="run gdrcheck as root on the node")


CHECKS = (
    (ACS_REDIRECT, _check_acs),
    (ACS_UNKNOWN, None),
    (IOMMU_TRANSLATING, _check_iommu),
    (IOMMU_UNKNOWN, None),
)
