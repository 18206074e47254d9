"""Facts about the node as a whole that change how every verdict reads."""

from __future__ import annotations

from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

NCCL_OVERRIDES = Rule(
    "GDR120", "nccl-overrides-in-effect", "info", "host",
    "NCCL settings that change GPUDirect decisions are set",
    "NCCL_NET_GDR_LEVEL, NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_NET_GDR_READ, NCCL_TOPO_FILE and friends "
    "override NCCL's own topology decisions; a forgotten one in /etc/nccl.conf or a job script silently "
    "turns GPUDirect off (or forces it where it is slow). gdrcheck applies them as NCCL does.",
    "Check each one is intended: `env | grep ^NCCL_`, `cat /etc/nccl.conf ~/.nccl.conf`.",
    origin="nccl", rccl_title="NCCL_* settings that change RCCL's GPUDirect decisions are set")
VIRTUAL_MACHINE = Rule(
    "GDR121", "virtual-machine", "info", "host",
    "Running in a virtual machine: the PCIe tree is the one the guest sees",
    "Hypervisors present a flattened or emulated PCIe tree; where GPUs and NICs really meet is hidden, "
    "so path classes describe the guest's view. P2P and GPUDirect RDMA also need the hypervisor's "
    "support (ATS/ACS settings on the host, P2P approval in the VM configuration).",
    "Check the host with gdrcheck as well, or ask the provider for the physical topology (an NCCL "
    "topology file such as the ones cloud images ship, passed with NCCL_TOPO_FILE).")
RUN_TIMED_OUT = Rule(
    "GDR122", "run-timed-out", "warning", "host",
    "The run's --timeout ran out before every fact was read",
    "gdrcheck keeps its own deadline (--timeout, default 20 s) so that a stuck driver call or tool cannot "
    "hold a health check past the limit of whatever runs it (NHC, Slurm, Node Problem Detector). What was "
    "not read in time is not guessed: every verdict that was not already failing becomes unknown and the "
    "exit status is 3.",
    "Run `nvidia-smi` by hand: if it hangs, look for Xid errors in `sudo dmesg` and drain the node; if the "
    "node is only slow, raise --timeout (a full run usually takes well under a second).")


PCI_NOT_READ = Rule(
    "GDR123", "pci-tree-not-read", "warning", "host",
    "The PCI device list could not be read from this input",
    "Every path class, ACS and BAR verdict comes from the PCI tree (/sys/bus/pci/devices). An input that is a "
    "machine (a snapshot with the driver's answers, say) but lacks it cannot show the GPUs' pairs, so nothing "
    "about them can be passed.",
    "Take the snapshot again on the node (`gdrcheck snapshot -o node.tar.gz`) as a user who can read /sys, or "
    "run gdrcheck there directly.")


def _check_pci(ctx: Context) -> Iterable[Finding]:
    for c in ctx.snap.collectors:
        if c.name == "sysfs-pci" and c.status != "ok":
            yield Finding(PCI_NOT_READ.code, "warning", ("sysfs-pci",), f"PCI devices not read: {c.detail}",
                          pairs=tuple((p.a, p.b) for p in ctx.pairs), effect="unknown",
                          settle="a snapshot or directory that holds sys/bus/pci/devices")


KINDS_UNKNOWN = Rule(
    "GDR124", "functions-of-unknown-kind", "info", "host",
    "The input lists PCI functions without saying what they are",
    "A hand-written NCCL topology file may name devices by bus id alone (no class, no vendor, no <gpu> or "
    "<nic>), and a trimmed tree may do the same. Such a function could be a GPU, a NIC or an NVMe drive: an "
    "input where none is recognised is not a node without GPUs.",
    "Give gdrcheck what the node itself shows: run it there, or a snapshot (`gdrcheck snapshot -o node.tar.gz`), "
    "an NCCL topology dump made there (NCCL_TOPO_DUMP_FILE) or `lspci -tv`.")


def blank_functions(topo) -> list:
    """Functions the input names by address only: no class, ids, name or declared kind."""
    return [b for b, d in topo.by_bdf.items() if topo.device_kind.get(b) == "other" and d.class_code is None
            and d.vendor is None and not d.name and not d.kind_hint]


def _check_kinds(ctx: Context) -> Iterable[Finding]:
    blank = blank_functions(ctx.topo)
    if blank:
        yield Finding(KINDS_UNKNOWN.code, "info", tuple(sorted(blank)[:8]),
                      f"{len(blank)} PCI function{'s' if len(blank) != 1 else ''} named by address only "
                      f"({', '.join(sorted(blank)[:4])}{', ...' if len(blank) > 4 else ''}): GPUs, NICs or NVMe "
                      "drives among them cannot be recognised", effect="unknown",
                      settle="an input that shows each function's class (a snapshot, an NCCL dump made on the node)")


def _check_deadline(ctx: Context) -> Iterable[Finding]:
    v = value(ctx, "run_deadline")
    if not isinstance(v, dict) or not v.get("missed"):
        return
    missed = ", ".join(str(m) for m in v["missed"])
    yield Finding(RUN_TIMED_OUT.code, "warning", tuple(str(m) for m in v["missed"]),
                  f"the --timeout of {v.get('seconds', 0):g} s ran out before {missed} answered; verdicts not "
                  "already failing are unknown",
                  pairs=tuple((p.a, p.b) for p in ctx.pairs), effect="unknown",
                  settle="run again with a longer --timeout once the driver answers")


def _check_overrides(ctx: Context) -> Iterable[Finding]:
    st = ctx.nccl
    if st is None or not st.overrides:
        return
    where = value(ctx, "nccl_env") or {}
    parts = []
    for k, v in sorted(st.overrides.items()):
        src = where.get(k, {}).get("source") if isinstance(where.get(k), dict) else None
        parts.append(f"{k}={v}" + (f" ({src})" if src else ""))
    yield Finding(NCCL_OVERRIDES.code, "info", ("nccl",), "NCCL settings in effect: " + ", ".join(parts))


def _check_vm(ctx: Context) -> Iterable[Finding]:
    how = ctx.topo.virtual()
    if how:
        yield Finding(VIRTUAL_MACHINE.code, "info", ("host",),
                      f"virtual machine ({how}): paths are as the guest sees them; the physical PCIe tree "
                      "is not visible")


CHECKS = (
    (NCCL_OVERRIDES, _check_overrides),
    (VIRTUAL_MACHINE, _check_vm),
    (RUN_TIMED_OUT, _check_deadline),
    (PCI_NOT_READ, _check_pci),
    (KINDS_UNKNOWN, _check_kinds),
)
