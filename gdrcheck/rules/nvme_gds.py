"""GPUDirect Storage between a GPU and a local NVMe drive: nvidia-fs mode or kernel P2PDMA mode."""

from __future__ import annotations

from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.pcie.p2pdma import device_chain, kernel_p2pdma_verdict, root_ids_from_devices
from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import pair_label, value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

NVFS_MISSING = Rule(
    "GDR060", "nvidia-fs-missing", "warning", "pair",
    "No GPUDirect Storage path to NVMe: nvidia-fs is not loaded and P2PDMA mode is not usable",
    "GDS moves data between NVMe and GPU memory directly either through the nvidia-fs module (with a "
    "GDS-enabled NVMe driver) or through the kernel's PCI P2PDMA (open driver R565+, Linux 6.2+). With "
    "neither, cuFile falls back to compatibility mode: every read is bounced through host memory.",
    "Install and load nvidia-fs (`modprobe nvidia-fs`, package nvidia-fs/nvidia-gds; check "
    "`cat /proc/driver/nvidia-fs/version` and `/usr/local/cuda/gds/tools/gdscheck -p`), or set up P2PDMA "
    "mode: open NVIDIA kernel modules, CONFIG_PCI_P2PDMA=y, `\"use_pci_p2pdma\": true` in /etc/cufile.json.",
    origin="nvidia-docs", pair_kinds=("gpu-nvme",))
P2PDMA_NOT_BUILT = Rule(
    "GDR061", "p2pdma-not-built", "info", "host",
    "The kernel is built without PCI P2PDMA",
    "GDS's P2PDMA mode (and DMA-BUF peer access on some kernels) needs CONFIG_PCI_P2PDMA=y; it is "
    "built-in only, so a kernel without it cannot gain it by loading a module.",
    "Use a distribution kernel with CONFIG_PCI_P2PDMA=y (`grep P2PDMA /boot/config-$(uname -r)`), or use "
    "nvidia-fs mode for GDS.", origin="kernel")
P2PDMA_PAIR = Rule(
    "GDR062", "p2pdma-not-supported-for-pair", "warning", "pair",
    "The kernel will refuse P2PDMA between this GPU and NVMe drive",
    "Linux allows P2PDMA between two devices only under a common upstream bridge without ACS redirect, "
    "or through the host bridge on AMD Zen CPUs and whitelisted Intel root complexes "
    "(drivers/pci/p2pdma.c); otherwise GDS in P2PDMA mode falls back to host memory.",
    "Put the NVMe drive under the same PCIe switch as the GPU, disable ACS redirect on the path "
    "(`pci=disable_acs_redir=<bdf>`), or use nvidia-fs mode.", origin="kernel", pair_kinds=("gpu-nvme",))
GDS_UNKNOWN = Rule(
    "GDR063", "gds-state-unknown", "info", "pair",
    "Whether a direct GPUDirect Storage path exists is not known",
    "nvidia-fs's state and the kernel's P2PDMA support are read from /sys/module, /proc/driver/nvidia-fs "
    "and the kernel config; the input does not show them.",
    "Run gdrcheck on the node, or send a snapshot.", pair_kinds=("gpu-nvme",))


def _verdicts(ctx: Context, pairs) -> list[tuple[object, object]]:
    devices = ctx.snap.devices
    acs = {d.bdf: ctx.topo.acs(d.bdf) for d in devices}
    roots = root_ids_from_devices(devices)
    out = []
    for p in pairs:
        a, b = ctx.topo.by_bdf[p.a], ctx.topo.by_bdf[p.b]
        v = kernel_p2pdma_verdict(device_chain(b, devices), device_chain(a, devices), acs,
                                  provider_root=b.root, client_root=a.root,
                                  cpu_vendor=value(ctx, "cpu_vendor"), cpu_family=value(ctx, "cpu_family"),
                                  root_ids=roots)
        out.append((p, v))
    return out


def _check(ctx: Context) -> Iterable[Finding]:
    pairs = ctx.pairs_of("gpu-nvme")
    if not pairs:
        return
    keys = tuple((p.a, p.b) for p in pairs)
    nvfs = host_fact(ctx.snap, "nvidia_fs")
    p2pdma = value(ctx, "p2pdma_config")
    flavor = value(ctx, "nvidia_driver_flavor")
    if p2pdma is False:
        yield Finding(P2PDMA_NOT_BUILT.code, "info", ("kernel",), "CONFIG_PCI_P2PDMA is not set in this kernel")
    if nvfs is None or nvfs.value is None:
        yield Finding(GDS_UNKNOWN.code, "info", ("nvidia-fs",), "nvidia-fs state unknown"
                      + (f": {nvfs.reason}" if nvfs is not None and nvfs.reason else ""),
                      pairs=keys, effect="unknown", settle="run gdrcheck on the node")
        return
    record = host_record(ctx.snap, "nvidia_fs")  # a record, or the bare answer an input gave
    loaded = bool(record.get("loaded")) if record is not None else bool(nvfs.value)
    if loaded:
        return
    if p2pdma is True and flavor == "open":
        for p, v in _verdicts(ctx, pairs):
            if v.map_type == "not_supported":
                yield Finding(P2PDMA_PAIR.code, "warning", (p.a, p.b),
                              f"kernel P2PDMA between {pair_label(ctx, p)}: NOT_SUPPORTED ({v.reason})",
                              pairs=((p.a, p.b),), effect="degraded", fold=f"kernel P2PDMA: NOT_SUPPORTED ({v.reason})")
            elif v.map_type == "unknown":
                yield Finding(GDS_UNKNOWN.code, "info", (p.a, p.b),
                              f"kernel P2PDMA between {pair_label(ctx, p)} undecided: {v.reason}",
                              pairs=((p.a, p.b),), effect="unknown", settle="run gdrcheck as root",
                              fold=f"kernel P2PDMA undecided: {v.reason}")
        return
    why = "nvidia-fs is not loaded" + ("" if p2pdma is True and flavor == "open" else
                                        f" and P2PDMA mode is not usable (CONFIG_PCI_P2PDMA: {p2pdma}, "
                                        f"driver: {flavor or 'unknown'})")
    yield Finding(NVFS_MISSING.code, "warning", ("nvidia-fs",), why, pairs=keys, effect="degraded")


CHECKS = (
    (NVFS_MISSING, _check),
    (P2PDMA_NOT_BUILT, None),
    (P2PDMA_PAIR, None),
    (GDS_UNKNOWN, None),
)
