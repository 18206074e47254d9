"""Where the two ends of a pair meet in the PCIe tree, and what NCCL makes of it."""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.pair_classes import PCIE_RANK
from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.nccl.decision import Decision
from gdrcheck.rules.util import label, pair_label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

# in a guest, placement is the host's to change
VM_PLACEMENT_FIX = (
    "In a virtual machine the guest cannot move cards: ask the host's administrator (or the cloud provider) to "
    "pass through each GPU together with its NIC or NVMe drive from under one PCIe switch (the whole switch), "
    "with ATS on and ACS redirect off on the host's bridges, and to give the guest the physical topology "
    "(an NCCL topology file, NCCL_TOPO_FILE).")

GDR_BEYOND_LEVEL = Rule(
    "GDR001", "gdr-beyond-nccl-level", "warning", "pair",
    "GPU and NIC are further apart than NCCL's GPUDirect RDMA level",
    "NCCL uses GPUDirect RDMA only when the GPU-NIC path type is at most NCCL_NET_GDR_LEVEL (PXB by "
    "default: both under common PCIe switches). Past it, NCCL stages every transfer through host memory: "
    "the job runs, slower, and nothing says why.",
    "Use the NIC closest to each GPU (NCCL picks it when the topology is right), move the NIC or GPU to a "
    "slot under the same PCIe switch, or, only if you measured that the root complex forwards peer traffic "
    "well, set NCCL_NET_GDR_LEVEL=PHB (same NUMA node) in the job environment or /etc/nccl.conf.",
    origin="nccl", pair_kinds=("gpu-nic",),
    vm_remediation=VM_PLACEMENT_FIX,
    rccl_title="GPU and NIC are further apart than RCCL's GPUDirect RDMA level",
    rccl_rationale="RCCL uses GPUDirect RDMA only when the GPU-NIC path type is at most NCCL_NET_GDR_LEVEL (PXB "
    "by default, PHB for a GPU and NIC one bridge below the same AMD Rome/Milan CPU; docs/rccl.md). Past it, "
    "RCCL stages every transfer through host memory: the job runs, slower, and nothing says why.",
    rccl_remediation="Use the NIC closest to each GPU (RCCL picks it when the topology is right), move the NIC "
    "or GPU to a slot under the same PCIe switch, or, only if you measured that the root complex forwards peer "
    "traffic well, set NCCL_NET_GDR_LEVEL=PHB (same NUMA node) in the job environment or /etc/nccl.conf.")
THROUGH_ROOT = Rule(
    "GDR002", "through-root-complex", "warning", "pair",
    "Peer traffic between the two devices crosses a CPU root complex",
    "GPUDirect is best when both ends sit under one PCIe switch. Through a root complex it works on most "
    "platforms but P2P read bandwidth can be severely limited (NVIDIA GPUDirect RDMA docs, 'Supported "
    "systems'). Where NCCL itself would not use the path, GDR001 or GDR006 says so instead; this finding "
    "is for paths that will be used (a raised NCCL level, NCCL's SYS default for two GPUs on AMD, GPUDirect "
    "Storage).",
    "Place the two devices under the same PCIe switch; check the slot map in the server manual. "
    "`gdrcheck topology` shows where each device sits.",
    origin="nvidia-docs", pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"),
    vm_remediation=VM_PLACEMENT_FIX)
CROSS_SOCKET = Rule(
    "GDR003", "inter-numa", "warning", "pair",
    "The path crosses the interconnect between NUMA nodes",
    "Two NUMA nodes are two sockets, or two parts of one socket (AMD NPS2/NPS4, Intel SNC); a PCIe peer path "
    "between them crosses the CPUs' interconnect. Across sockets, per NVIDIA, it 'may be extremely slow or "
    "unreliable'. The finding says cross-socket only where the input shows the sockets (a node's sysfs), and "
    "inter-NUMA otherwise. Where NCCL itself would not use the path, GDR001 or GDR006 says so instead; this "
    "finding is for paths that will be used (a raised NCCL level, NCCL's SYS default for two GPUs on AMD, "
    "GPUDirect Storage).",
    "Pair each GPU with a NIC or NVMe drive on its own NUMA node (`gdrcheck topology` shows NUMA per "
    "device); for jobs, bind ranks to the GPU's NUMA node (`numactl --cpunodebind`).",
    origin="nvidia-docs", pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"),
    vm_remediation=VM_PLACEMENT_FIX)
PATH_UNDECIDED = Rule(
    "GDR004", "path-class-undecided", "info", "pair",
    "The input does not say enough to classify the path",
    "Two devices on different root buses are NODE when both are on one NUMA node and SYS otherwise; an "
    "lspci paste carries no NUMA information, so the class (and with it the verdict) stays open.",
    "Run gdrcheck on the node itself, or send a snapshot: `gdrcheck snapshot -o node.tar.gz`.",
    pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"))
NO_CLOSE_NIC = Rule(
    "GDR005", "gpu-without-close-nic", "warning", "device",
    "A GPU has no RDMA NIC under a common PCIe switch",
    "On a GPUDirect RDMA node every GPU should have a NIC within PIX/PXB; a GPU without one sends its "
    "inter-node traffic through host memory or borrows another GPU's NIC over NVLink (PXN).",
    "Check that every NIC is seated and enumerated (`gdrcheck topology`); compare with a healthy node of "
    "the same model (`gdrcheck fingerprint` on both).",
    vm_remediation=VM_PLACEMENT_FIX)
NO_SWITCH_FOR_NIC = Rule(
    "GDR017", "gpu-on-root-port-no-switch", "warning", "device",
    "A GPU sits on a root port with no PCIe switch above it: no NIC can share a switch with it",
    "The server has no PCIe switch between this GPU and the CPU, so every GPU-NIC path crosses the root "
    "complex (PHB, NODE or SYS). Nothing is mis-seated; NCCL uses GPUDirect RDMA on such a path only where "
    "NCCL_NET_GDR_LEVEL allows it, and the root complex's peer-to-peer forwarding sets its speed.",
    "Nothing to reseat: the platform puts this GPU on a root port. Measure GPUDirect RDMA through the "
    "root complex (ib_write_bw --use_cuda, or nccl-tests with NCCL_NET_GDR_LEVEL=PHB) before allowing it; "
    "for GPU-NIC pairs under one switch, the platform needs a PCIe switch board or a server model that has one.",
    vm_remediation=VM_PLACEMENT_FIX)
P2P_BEYOND_LEVEL = Rule(
    "GDR006", "p2p-beyond-nccl-level", "warning", "pair",
    "NCCL will not use PCIe P2P between these GPUs",
    "Without NVLink, NCCL uses P2P only when the GPU-GPU path type is at most NCCL_P2P_LEVEL (PXB by "
    "default since 2.23; SYS on AMD CPUs with at most two GPUs). Past it, traffic goes through shared host "
    "memory.",
    "Place the GPUs under a common PCIe switch, or set NCCL_P2P_LEVEL=PHB/SYS only after measuring that "
    "P2P through the root complex is faster than host memory on this platform.",
    origin="nccl", pair_kinds=("gpu-gpu",),
    vm_remediation=VM_PLACEMENT_FIX,
    rccl_title="RCCL will not use PCIe P2P between these GPUs",
    rccl_rationale="Without xGMI, RCCL uses P2P only when the GPU-GPU path type is at most NCCL_P2P_LEVEL (SYS "
    "on AMD CPUs, PXB on Intel, ARM and Zhaoxin CPUs; docs/rccl.md). Past it, traffic goes through shared host "
    "memory.")
P2P_DISABLED = Rule(
    "GDR007", "p2p-disabled-by-driver", "error", "pair",
    "The NVIDIA driver reports P2P as not supported between these NVLink-connected GPUs",
    "NCCL asks NVML for P2P read and write status (`nvidia-smi topo -p2p r` / `w`); anything but OK "
    "disables P2P, and between NVLink-connected GPUs NCCL fails at init ('P2P is disabled between NVLINK "
    "connected GPUs') unless NCCL_IGNORE_DISABLED_P2P is set. Between GPUs joined by PCIe only, GDR016 says it.",
    "Read `nvidia-smi topo -p2p r` and `-p2p w`: CNS = chipset not supported (BIOS/platform), TNS = "
    "topology not supported, GNS = GPU not supported, DR = disabled by regkey. In a VM the hypervisor "
    "must expose P2P. Check `nvidia-smi nvlink -s` for NVLink pairs.",
    origin="nccl", pair_kinds=("gpu-gpu",))
P2P_REFUSED_ON_PCIE = Rule(
    "GDR016", "p2p-refused-on-pcie", "warning", "pair",
    "The NVIDIA driver refuses P2P between these PCIe-connected GPUs: NCCL carries them through host memory",
    "NCCL asks NVML for P2P read and write status (`nvidia-smi topo -p2p r` / `w`); anything but OK makes "
    "NCCL set P2P off for a pair joined by PCIe only, and the pair's traffic goes through shared host memory: "
    "slower, not broken (v2.30.7 src/graph/paths.cc:373-410).",
    "Read `nvidia-smi topo -p2p r` and `-p2p w`: CNS = chipset not supported (BIOS/platform), TNS = "
    "topology not supported, GNS = GPU not supported (consumer GPUs), DR = disabled by regkey. In a VM "
    "the hypervisor must expose P2P.",
    origin="nccl", pair_kinds=("gpu-gpu",))
NVLINK_UNSEEN = Rule(
    "GDR009", "nvlink-not-in-input", "info", "pair",
    "NVLink may join these GPUs, but the input cannot show it",
    "SXM/OAM GPUs (V100/A100/H100/H200/B200 SXM, MI250/MI300) talk over NVLink, NVSwitch or xGMI, and NCCL "
    "then uses P2P over those links whatever the PCIe path. An lspci tree, an hwloc XML made without the "
    "NVML backend or an NCCL topology file without <nvlink> elements does not show them, so the PCIe path "
    "alone cannot say whether P2P will be used.",
    "Run gdrcheck on the node (NVML reports NVLink), or give it an NCCL topology dump made there "
    "(NCCL_TOPO_DUMP_FILE=/tmp/topo.xml with any NCCL job) or `nvidia-smi topo -m`.",
    pair_kinds=("gpu-gpu", "gpu-nic"))
P2P_UNKNOWN = Rule(
    "GDR008", "p2p-status-unknown", "info", "pair",
    "The driver's P2P status for these GPUs is not known",
    "Whether the driver allows P2P between two GPUs is only known from NVML (or `nvidia-smi topo -p2p`); "
    "NCCL checks it before using P2P.",
    "Run gdrcheck on the node with the NVIDIA driver loaded (NVML), or take a snapshot there.",
    pair_kinds=("gpu-gpu",))




def _closest(ctx: Context) -> dict:
    """Per (GPU, pair kind): the best path class the GPU has to any peer of that kind, and to which."""
    best: dict = {}
    rdma: dict[str, object] = {}  # NIC -> _rdma_capable(), asked once per NIC
    for p in ctx.pairs:
        if p.kind == "gpu-gpu" or p.pcie_path is None:
            continue
        if p.kind == "gpu-nic":
            ok = rdma[p.b] if p.b in rdma else rdma.setdefault(p.b, _rdma_capable(ctx, p.b))
            if ok is False:
                continue
        key = (p.a, p.kind)
        if key not in best or PCIE_RANK[p.pcie_path] < PCIE_RANK[best[key][0]]:
            best[key] = (p.pcie_path, p.b)
    return best


def _far(ctx: Context, p, best: dict) -> bool:
    """A GPU-NIC or GPU-NVMe pair worse than the GPU's closest peer of that kind: not the one to use."""
    got = best.get((p.a, p.kind))
    return got is not None and p.pcie_path in PCIE_RANK and PCIE_RANK[got[0]] < PCIE_RANK[p.pcie_path]


def _distance_code(p, view: dict) -> Optional[str]:
    """The one finding a pair's distance gives, if any, by its code: NCCL's own level decision first (GDR001,
    GDR006), else what NVIDIA documents for the class (GDR002 root complex, GDR003 across NUMA nodes). Its words
    are :func:`_distance_words` (a pair that is not the one to use needs none)."""
    if p.kind == "gpu-nic" and view.get("gpu_gdr_supported") is False:
        return None  # no GPUDirect RDMA at any distance (GDR170 says so): no level or placement can help
    # NCCL's own decision first: a far NIC reached through an NVLinked peer (PXN) is not "beyond the level"
    if p.kind == "gpu-nic" and view.get("within_gdr_level") is False and view.get("gdr") != "enabled":
        return GDR_BEYOND_LEVEL.code
    if p.kind == "gpu-gpu" and view.get("within_p2p_level") is False and view.get("p2p") != "enabled":
        return P2P_BEYOND_LEVEL.code
    if p.kind == "gpu-nic" and view.get("via"):
        return None  # NCCL reaches this NIC through an NVLinked peer (PXN): the PCIe path is not used
    if p.pcie_path in ("PHB", "NODE"):
        return THROUGH_ROOT.code
    if p.pcie_path == "SYS":
        return CROSS_SOCKET.code
    return None


_WHERE = {"PHB": "meet only at the root complex (PHB)", "NODE": "meet only between root complexes of one NUMA "
          "node (NODE)", "SYS": "are on different NUMA nodes (SYS)"}


def _sys_where(ctx: Context, p) -> str:
    """SYS in words: cross-socket only where the input shows both NUMA nodes' sockets (sysfs package ids)."""
    packages = host_record(ctx.snap, "numa_packages") or {}
    na, nb = ctx.topo.numa(p.a), ctx.topo.numa(p.b)
    sa, sb = packages.get(str(na)), packages.get(str(nb))
    if na is not None and nb is not None and sa is not None and sb is not None:
        if sa != sb:
            return f"are on NUMA nodes {na} and {nb} of different sockets (SYS, cross-socket)"
        return f"are on NUMA nodes {na} and {nb} of one socket (SYS, inter-NUMA)"
    return (f"are on different NUMA nodes (SYS, inter-NUMA; the {ctx.snap.input_kind} input does not show "
            "whether they are different sockets)")


def _distance_words(ctx: Context, p, code: str, view: dict) -> tuple[str, str]:
    """(message, the message without the pair) of a distance finding with ``code``."""
    st = ctx.nccl
    where = _sys_where(ctx, p) if p.pcie_path == "SYS" else _WHERE.get(p.pcie_path, f"are {p.pcie_path} apart")
    lib = _library(ctx)
    if code == GDR_BEYOND_LEVEL.code:
        why = (f"they {where}, {lib} path {view.get('path_type')}, beyond NCCL_NET_GDR_LEVEL={st.gdr_level} "
               f"({st.gdr_level_source})")
        return (f"{lib} will not use GPUDirect RDMA between {pair_label(ctx, p)}: {why}",
                f"{lib} will not use GPUDirect RDMA: {why}")
    if code == P2P_BEYOND_LEVEL.code:
        why = f"they {where}, beyond NCCL_P2P_LEVEL={st.p2p_level} ({st.p2p_level_source})"
        return (f"{lib} will use host memory, not P2P, between {pair_label(ctx, p)}: {why}",
                f"{lib} will use host memory, not P2P: {why}")
    return f"{pair_label(ctx, p)} {where}", f"the two {where}"


_NO_VIEW: dict = {}  # what a pair without NCCL's view reads (never written)


def _library(ctx: Context) -> str:
    """The library whose decision a message reports: RCCL on an AMD node (gdrcheck.rules.rccl), else NCCL."""
    from gdrcheck.rules.rccl.releases import node_reason

    return "RCCL" if node_reason(ctx.snap, ctx.topo) else "NCCL"
NVLINK_SETTLE = ("run gdrcheck on the node (NVML shows NVLink), or give an NCCL topology dump made there "
                 "(NCCL_TOPO_DUMP_FILE) or nvidia-smi topo -m")


_NVLINK_NEEDS = frozenset(("gdr.pxn_nvlink", "p2p.nvlink"))  # a decision that waits on whether NVLink joins two GPUs


def _rests_on_nvlink(view) -> bool:
    """Whether NCCL's decision waits on an NVLink the input cannot show: by its needs' codes."""
    return isinstance(view, Decision) and any(n.code in _NVLINK_NEEDS for n in view.needs)


def _check_levels(ctx: Context) -> Iterable[Finding]:
    st = ctx.nccl
    best = _closest(ctx)
    # pairs that are not the ones to use (a GPU has a closer peer of that kind) only inform, folded
    # into one finding per (rule, GPU, peer kind): NCCL and GDS take the closest
    far: dict[tuple[str, str, str], list] = {}
    unseen_words: dict[tuple, str] = {}  # what GDR009 says of a GPU pair, by what it is made of (one per kind)
    views = ctx.nccl_view
    for p in ctx.pairs:
        key = (p.a, p.b)
        view: dict = views.get(key, _NO_VIEW)
        if p.kind == "gpu-gpu" and st.user_p2p_level == "LOC" and view.get("p2p") == "disabled":
            yield _p2p_off_by_setting(ctx, p)  # whatever joins the two, NVLink or PCIe
            continue
        if p.kind == "gpu-gpu" and p.nvlink_unknown:
            said = unseen_words.get((p.nvlink_unknown, p.pcie_path, p.candidates))
            if said is None:
                said = unseen_words[(p.nvlink_unknown, p.pcie_path, p.candidates)] = (
                    f"{p.nvlink_unknown}; the PCIe path ({p.pcie_path or '/'.join(p.candidates) or 'unknown'}) "
                    "decides P2P only where no NVLink joins them")
            yield Finding(NVLINK_UNSEEN.code, "info", key, f"{pair_label(ctx, p)}: {said}",
                          pairs=(key,), effect="unknown", fold=said, settle=NVLINK_SETTLE)
            continue
        if p.kind == "gpu-nic" and view.get("gdr") == "unknown" and view.get("within_gdr_level") is False \
                and _rests_on_nvlink(view):
            said = (f"too far apart for GPUDirect RDMA directly ({p.pcie_path}), but NCCL sends through an NVLinked "
                    "GPU closer to the NIC (PXN) where NVLink joins them, and this input cannot show NVLink")
            yield Finding(NVLINK_UNSEEN.code, "info", key, f"{pair_label(ctx, p)}: {said}",
                          pairs=(key,), effect="unknown", fold=said, settle=NVLINK_SETTLE)
            continue
        if p.pcie_path is None and not p.nvlinks:
            unplaced = ctx.snap.unplaced and (p.a in ctx.snap.unplaced or p.b in ctx.snap.unplaced)
            why = ("the input does not show where one of them sits in the PCIe tree" if unplaced
                   else "on different root buses and the input gives no NUMA node")
            said = f"{why}; the path is {' or '.join(p.candidates) or 'unknown'}"
            yield Finding(PATH_UNDECIDED.code, "info", key, f"{pair_label(ctx, p)}: {said}",
                          pairs=(key,), effect="unknown", fold=said,
                          settle="run gdrcheck live on the node or send a snapshot")
            continue
        if p.nvlinks:
            continue
        code = _distance_code(p, view)
        if code is None:
            continue
        if p.kind != "gpu-gpu" and _far(ctx, p, best):
            far.setdefault((code, p.a, p.kind), []).append(p)
        else:
            msg, said = _distance_words(ctx, p, code, view)
            yield Finding(code, "warning", key, msg, pairs=(key,), effect="degraded", fold=said)
    what = {GDR_BEYOND_LEVEL.code: f"beyond NCCL_NET_GDR_LEVEL={st.gdr_level}",
            THROUGH_ROOT.code: "meeting it only at the root complex",
            CROSS_SOCKET.code: "on other NUMA nodes (SYS, inter-NUMA)"}
    for (code, gpu, kind), ps in far.items():
        cls, to = best[(gpu, kind)]
        peers = "NIC" if kind == "gpu-nic" else "NVMe drive"
        n = len(ps)
        yield Finding(code, "info", (gpu,),
                      f"{label(ctx, gpu)}: {n} {peers}{'s' if n != 1 else ''} {what[code]} "
                      f"({', '.join(label(ctx, p.b) for p in ps[:4])}{', ...' if n > 4 else ''}); not the ones to use: "
                      f"its closest is {label(ctx, to)}, {cls}")


def _p2p_off_by_setting(ctx: Context, p) -> Finding:
    """GDR006 where the job's setting (NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL=LOC) turns P2P off: the hardware is not
    the cause, NCCL runs the pair over shared host memory all the same (degraded)."""
    st = ctx.nccl
    src = st.sources.get(_setting_name(st)) or "the job"
    said = (f"{st.p2p_level_source} turns P2P off (set in {_SET_WITH.get(src, src)}), "
            f"whatever joins the two ({p.path or p.pcie_path or 'path not shown'}); unset it to let NCCL use P2P")
    return Finding(P2P_BEYOND_LEVEL.code, "warning", (p.a, p.b),
                   f"{_library(ctx)} will use host memory, not P2P, between {pair_label(ctx, p)}: {said}",
                   pairs=((p.a, p.b),), effect="degraded", fold=said)


_SET_WITH = {"gdrcheck options": "gdrcheck --env"}  # the layer of NCCL's settings gdrcheck's own --env is


def _setting_name(st) -> str:
    return st.p2p_level_source.split("=", 1)[0]


def _check_p2p_status(ctx: Context) -> Iterable[Finding]:
    from gdrcheck.rules.rccl.releases import node_reason

    if node_reason(ctx.snap, ctx.topo):  # RCCL has no NVML step (docs/rccl.md)
        return
    status = ctx.snap.p2p_status
    for p in ctx.pairs_of("gpu-gpu"):
        if p.nvlink_unknown:
            continue  # GDR009 says what would settle it
        got = {}
        for cap in ("read", "write"):
            v = status.get((p.a, p.b, cap)) or status.get((p.b, p.a, cap))
            if v is not None:
                got[cap] = v
        bad = {k: v for k, v in got.items() if v != "OK"}
        if len(got) < 2 and not bad:  # a refusal in either settles it: NCCL needs both OK
            yield Finding(P2P_UNKNOWN.code, "info", (p.a, p.b),
                          f"P2P status between {pair_label(ctx, p)} not known (no NVML answer)",
                          pairs=((p.a, p.b),), effect="unknown", fold="P2P status not known (no NVML answer)",
                          settle="run gdrcheck where the NVIDIA driver is loaded")
            continue
        if bad:
            # NCCL aborts only on an NVLink path (<= PATH_NVB) with NCCL_IGNORE_DISABLED_P2P unset; on PCIe it
            # sets p2p = 0 and runs the pair over shared memory (v2.30.7 paths.cc:373-410): degraded, not failed
            nvb = (ctx.nccl_view.get((p.a, p.b)) or {}).get("path_type") == "NVB"
            fails = bool(p.nvlinks or nvb) and ctx.nccl.ignore_disabled_p2p == 0
            rule = P2P_DISABLED if fails else P2P_REFUSED_ON_PCIE
            yield Finding(rule.code, rule.severity, (p.a, p.b),
                          f"driver P2P status between {pair_label(ctx, p)}: "
                          + ", ".join(f"{k} {v}" for k, v in sorted(bad.items())),
                          pairs=((p.a, p.b),), effect="fail" if fails else "degraded")


def _check_close_nic(ctx: Context) -> Iterable[Finding]:
    nics = [n for n in ctx.topo.of_kind("nic") if _rdma_capable(ctx, n) is not False]
    if not nics:
        return
    nic_set = set(nics)
    for g in ctx.gpu_bdfs():
        mine = [p for p in ctx.pairs_with(g) if p.kind == "gpu-nic" and p.a == g and p.b in nic_set]
        close: list[str] = [p.b for p in mine if p.pcie_path in ("PIX", "PXB")]
        undecided = any(p.pcie_path is None for p in mine)
        said = all(ctx.nccl_view.get((p.a, p.b), {}).get("within_gdr_level") is False for p in mine) or \
            any(ctx.nccl_view.get((p.a, p.b), {}).get("gpu_gdr_supported") is False for p in mine)  # GDR170
        if not close and not undecided and not said:
            sure = all(_rdma_capable(ctx, n) for n in nics)
            if _on_root_port(ctx, g):
                yield Finding(NO_SWITCH_FOR_NIC.code, "warning", (g,),
                              f"{label(ctx, g)} sits on a root port with no PCIe switch above it, so no "
                              f"{'RDMA NIC' if sure else 'NIC that may be an RDMA device'} shares a switch with it")
                continue
            yield Finding(NO_CLOSE_NIC.code, "warning", (g,),
                          f"{label(ctx, g)} has no {'RDMA NIC' if sure else 'NIC that may be an RDMA device'} "
                          "under a common PCIe switch")


def _on_root_port(ctx: Context, gpu: str) -> bool:
    """Whether the tree places the GPU with no switch port above it (on a root port, or on a root bus)."""
    if gpu in ctx.snap.unplaced:
        return False
    kinds = [ctx.topo.device_kind.get(a) for a in ctx.topo.ancestors(gpu)]
    return not any(k in ("switch_upstream", "switch_downstream") for k in kinds)


def _rdma_capable(ctx: Context, nic: str):
    from gdrcheck.rules.link_nic import rdma_capable

    return rdma_capable(ctx, nic)


CHECKS = (
    (GDR_BEYOND_LEVEL, _check_levels),
    (THROUGH_ROOT, None),
    (CROSS_SOCKET, None),
    (PATH_UNDECIDED, None),
    (NO_CLOSE_NIC, _check_close_nic),
    (NO_SWITCH_FOR_NIC, None),
    (P2P_BEYOND_LEVEL, None),
    (P2P_DISABLED, _check_p2p_status),
    (P2P_REFUSED_ON_PCIE, None),
    (P2P_UNKNOWN, None),
    (NVLINK_UNSEEN, None),
)
