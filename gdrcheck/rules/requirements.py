"""What ``check --require`` asks for and the node does not have: nothing to satisfy a requirement is not
a pass. These findings come from the gate (``check``), not from the facts alone, so their check is the
gate's :func:`unmet`."""

from __future__ import annotations

from gdrcheck.rules.base import Finding, Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

NO_GPU = Rule(
    "GDR010", "no-gpu", "error", "host",
    "No GPU on a node that is checked for GPUDirect",
    "The gate runs on GPU nodes; a node where no GPU shows on the PCI bus (a GPU that fell off the bus, an "
    "unseated card, a BIOS that hides it) or in the input cannot do GPUDirect at all.",
    "Check `lspci -d 10de:` and `nvidia-smi`; look for 'fallen off the bus' or Xid 79 in `dmesg`, reseat or "
    "replace the card. If the node has no GPU by design, do not run the GPU gate on it.")
NO_RDMA_NIC = Rule(
    "GDR011", "no-rdma-nic", "error", "host",
    "GPUDirect RDMA is required, but no NIC is (or may be) an RDMA device",
    "GPUDirect RDMA moves GPU memory through an RDMA NIC (InfiniBand, RoCE, EFA); without one there is no "
    "GPU-NIC pair to pass.",
    "Check that the RDMA NICs are seated and their drivers loaded (`ls /sys/class/infiniband`, `ibv_devinfo`, "
    "`modprobe mlx5_ib`); if the node has none by design, drop gdr from --require.")
TOO_FEW_GPUS = Rule(
    "GDR012", "too-few-gpus-for-p2p", "error", "host",
    "GPU peer-to-peer is required, but the node has fewer than two GPUs",
    "P2P is between two GPUs of one node; with one GPU (or none) there is no pair to pass.",
    "Check that every GPU shows (`nvidia-smi -L`, `lspci -d 10de:`); if the node has one GPU by design, drop "
    "p2p from --require.")
NO_NVME = Rule(
    "GDR013", "no-nvme", "error", "host",
    "GPUDirect Storage is required, but the node has no NVMe drive",
    "GPUDirect Storage reads NVMe (or NVMe-oF/NFS over RDMA) straight into GPU memory; with no local NVMe drive "
    "there is no GPU-NVMe pair to pass.",
    "Check that the drives show (`nvme list`, `lspci -d ::0108`); if the node has none by design, drop gds from "
    "--require.")

NOT_USED = Rule(
    "GDR014", "required-capability-not-used", "error", "host",
    "A required capability is not used on this node: its answer is no or partly",
    "check --require passes a capability only where it is used everywhere it is asked for: GPUDirect RDMA "
    "between every GPU of the job and the NIC NCCL picks for it, P2P between every pair of the job's GPUs, "
    "GPUDirect Storage between every GPU and its nearest NVMe drive. Where NCCL stages through host memory "
    "(a path beyond NCCL_NET_GDR_LEVEL, P2P disabled) or cuFile falls back to its compatibility mode, the "
    "node runs, slower, and the requirement is not met.",
    "Read the capability's line in `gdrcheck check` (or `capabilities` in `gdrcheck pairs --json`): it names "
    "the GPUs or pairs without it and why, and each cause's finding has its fix (`gdrcheck explain CODE`). "
    "If the node is built without it by design, drop the capability from --require.")
UNDECIDED_REQUIREMENT = Rule(
    "GDR015", "required-capability-undecided", "info", "host",
    "Whether a required capability is used is not known from this input",
    "The answer rests on facts the input does not show (peer memory, the IOMMU mode, the driver's P2P "
    "status, NVLink, ...); a gate is not passed on an assumption.",
    "Run gdrcheck on the node (or send a snapshot): the capability's line names each missing fact and the "
    "command that shows it.")
_TITLES = {"gdr": "GPUDirect RDMA", "p2p": "GPU P2P", "gds": "GPUDirect Storage"}


def unsatisfied(evaluation, capabilities: Iterable[str]) -> list[Finding]:
    """One finding per required capability whose answer is not ``yes``: an error where it is ``no`` or
    ``partly``, an open one (effect unknown) where it is ``unknown``. Nothing for ``not-applicable`` and
    ``not-in-input``: :func:`unmet` and GDR160 say those."""
    from gdrcheck.rules.capabilities import UNIT, WITH, answers

    got = answers(evaluation)
    out: list[Finding] = []
    for cap in sorted(set(capabilities), key=("gdr", "p2p", "gds").index):
        c = got[cap]
        used = f"{c.count(WITH)} of {len(c.units)} {UNIT[cap]} use it"
        if c.answer in ("no", "partly"):
            out.append(Finding(NOT_USED.code, "error", (cap,),
                               f"{_TITLES[cap]} is required and its answer is {c.answer}: {used}"))
        elif c.answer == "unknown":
            out.append(Finding(UNDECIDED_REQUIREMENT.code, "info", (cap,),
                               f"{_TITLES[cap]} is required and its answer is unknown on this input: {used}, "
                               f"{c.count('undecided')} undecided", effect="unknown",
                               settle="run gdrcheck on the node (the capability's line names the missing facts)"))
    return out


def unmet(topo, capabilities: Iterable[str]) -> list[Finding]:
    """One error finding per requirement nothing on the node could satisfy."""
    caps = set(capabilities)
    gpus = topo.of_kind("gpu")
    out: list[Finding] = []
    if any(c.name == "sysfs-pci" and c.status != "ok" for c in topo.snap.collectors):
        return out  # the PCI tree was not read: what the node has is unknown (GDR123), not absent
    from gdrcheck.rules.facts import blank_functions

    if blank_functions(topo):
        return out  # functions of unknown kind: what the node has is unknown (GDR124), not absent
    from gdrcheck.reach import shows

    if not gpus:
        if shows(topo.snap, "gpus"):
            out.append(Finding(NO_GPU.code, "error", ("host",), "no GPU in this input: nothing to check"))
        # else a host-wide paste alone (gdscheck -p, numactl, grub...): GPUs are not absent, only not shown;
        # the reach rule (GDR160, gdrcheck.rules.reach_rules) says so in every command
        return out

    # a device the input cannot show is not absent: GDR160 makes such a gate unknown, not failed
    if "gdr" in caps and not topo.gpudirect_nics() and shows(topo.snap, "nics"):
        others = topo.of_kind("nic")
        out.append(Finding(NO_RDMA_NIC.code, "error", ("host",),
                           "no NIC that is or may be an RDMA device" +
                           (f" (not GPUDirect NICs: {', '.join(others)})" if others else " (no NIC at all)")))
    if "p2p" in caps and len(gpus) < 2:
        out.append(Finding(TOO_FEW_GPUS.code, "error", ("host",), f"{len(gpus)} GPU: no GPU pair for P2P"))
    if "gds" in caps and not shows(topo.snap, "nvme"):
        from gdrcheck.rules.reach_rules import not_in_input

        out.append(not_in_input(topo.snap, "nvme"))
    elif "gds" in caps and not topo.of_kind("nvme"):
        out.append(Finding(NO_NVME.code, "error", ("host",), "no NVMe drive: no GPU-NVMe pair for GPUDirect Storage"))
    return out


CHECKS = (
    (NO_GPU, None),
    (NO_RDMA_NIC, None),
    (TOO_FEW_GPUS, None),
    (NO_NVME, None),
    (NOT_USED, None),
    (UNDECIDED_REQUIREMENT, None),
)
