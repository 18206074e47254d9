"""Where the two ends of a pair meet in the PCIe tree, and what NCCL makes of it."""

from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.util import label, pair_label

GDR_BEYOND_LEVEL = Rule(
    "GDR001", "gdr-beyond-nccl-level", "warning", "pair",
    "GPU and NIC are further apart than NCCL's GPUDirect RDMA level",
    "NCCL uses GPUDirect RDMA only when the GPU-NIC path type is at most NCCL_NET_GDR_LEVEL (PXB by "
    "default: both under common PCIe switches). Past it, NCCL stages every transfer through host memory: "
    "the job runs, slower, and nothing says why.",
    "Use the NIC closest to each GPU (NCCL picks it when the topology is right), move the NIC or GPU to a "
    "slot under the same PCIe switch, or, only if you measured that the root complex forwards peer traffic "
    "well, set NCCL_NET_GDR_LEVEL=PHB (same NUMA node) in the job environment or /etc/nccl.conf.",
    origin="nccl", pair_kinds=("gpu-nic",))
THROUGH_ROOT = Rule(
    "GDR002", "through-root-complex", "warning", "pair",
    "Peer traffic between the two devices crosses a CPU root complex",
    "GPUDirect is best when both ends sit under one PCIe switch. Through a root complex it works on most "
    "platforms but P2P read bandwidth can be severely limited (NVIDIA GPUDirect RDMA docs, 'Supported "
    "systems'). NCCL 2.23+ uses host memory there instead of PCIe P2P, except on x86 AMD CPUs with at most "
    "two GPUs in the communicator; 2.9.6-2.22 use P2P there on AMD and POWER CPUs (pairs[].nccl says which).",
    "Place the GPU and the NVMe drive (or the two GPUs) under the same PCIe switch; check the slot map in "
    "the server manual. `gdrcheck topology` shows where each device sits.",
    origin="nvidia-docs", pair_kinds=("gpu-gpu", "gpu-nvme"))
CROSS_SOCKET = Rule(
    "GDR003", "cross-socket", "warning", "pair",
    "The path crosses the link between NUMA nodes (QPI/UPI/xGMI)",
    "A PCIe peer path across sockets is, per NVIDIA, 'may be extremely slow or unreliable'. By default NCCL "
    "does not use GPUDirect RDMA across NUMA nodes (it may relay through an NVLinked GPU, PXN); it does use "
    "PCIe P2P across them on x86 AMD CPUs with at most two GPUs (2.23+), on AMD and POWER CPUs (2.9.6-2.22) "
    "and wherever NCCL_P2P_LEVEL=SYS (pairs[].nccl says which).",
    "Pair each GPU with a NIC or NVMe drive on its own NUMA node (`gdrcheck topology` shows NUMA per "
    "device); for jobs, bind ranks to the GPU's NUMA node (`numactl --cpunodebind`).",
    origin="nvidia-docs", pair_kinds=("gpu-gpu", "gpu-nic", "gpu-nvme"))
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
    "the same model (`gdrcheck fingerprint` on both).")
P2P_BEYOND_LEVEL = Rule(
    "GDR006", "p2p-beyond-nccl-level", "warning", "pair",
    "NCCL will not use PCIe P2P between these GPUs",
    "Without NVLink, NCCL uses P2P only when the GPU-GPU path type is at most NCCL_P2P_LEVEL (PXB by "
    "default since 2.23; SYS on AMD CPUs with at most two GPUs). Past it, traffic goes through shared host "
    "memory.",
    "Place the GPUs under a common PCIe switch, or set NCCL_P2P_LEVEL=PHB/SYS only after measuring that "
    "P2P through the root complex is faster than host memory on this platform.",
    origin="nccl", pair_kinds=("gpu-gpu",))
P2P_DISABLED = Rule(
    "GDR007", "p2p-disabled-by-driver", "error", "pair",
    "The NVIDIA driver reports P2P as not supported between these GPUs",
    "NCCL asks NVML for P2P read and write status (`nvidia-smi topo -p2p r` / `w`); anything but OK "
    "disables P2P, and between NVLink-connected GPUs NCCL fails at init ('P2P is disabled between NVLINK "
    "connected GPUs').",
    "Read `nvidia-smi topo -p2p r` and `-p2p w`: CNS = chipset not supported (BIOS/platform), TNS = "
    "topology not supported, GNS = GPU not supported, DR = disabled by regkey. In a VM the hypervisor "
    "must expose P2P. Check `nvidia-smi nvlink -s` for NVLink pairs.",
    origin="nccl", pair_kinds=("gpu-gpu",))
P2P_UNKNOWN = Rule(
    "GDR008", "p2p-status-unknown", "info", "pair",
    "The driver's P2P status for these GPUs is not known",
    "Whether the driver allows P2P between two GPUs is only known from NVML (or `nvidia-smi topo -p2p`); "
    "NCCL checks it before using P2P.",
    "Run gdrcheck on the node with the NVIDIA driver loaded (NVML), or take a snapshot there.",
    pair_kinds=("gpu-gpu",))


ORDER = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}


def _closest(ctx: Context) -> Dict:
    """Per (GPU, pair kind): the best path class the GPU has to any peer of that kind, and to which."""
    best: Dict = {}
    for p in ctx.pairs:
        if p.kind == "gpu-gpu" or p.pcie_path is None:
            continue
        if p.kind == "gpu-nic" and _rdma_capable(ctx, p.b) is False:
            continue
        key = (p.a, p.kind)
        if key not in best or ORDER[p.pcie_path] < ORDER[best[key][0]]:
            best[key] = (p.pcie_path, p.b)
    return best


def _severity(ctx: Context, p, best: Dict, default: str) -> Tuple[str, str]:
    """A pair worse than the GPU's closest peer of that kind is not the one to use: info, and say which is."""
    got = best.get((p.a, p.kind))
    if got is not None and p.pcie_path in ORDER and ORDER[got[0]] < ORDER[p.pcie_path]:
        return "info", f" (not the pair to use: its closest is {label(ctx, got[1])}, {got[0]})"
    return default, ""


def _check_levels(ctx: Context) -> Iterable[Finding]:
    st = ctx.nccl
    best = _closest(ctx)
    # pairs that are not the ones to use (a GPU has a closer peer of that kind) are folded into one
    # info finding per (rule, GPU, peer kind): a large chassis would otherwise list every far pair
    far: Dict[Tuple[str, str, str], List] = {}
    for p in ctx.pairs:
        view: Dict = ctx.nccl_view.get((p.a, p.b), {})
        if p.pcie_path is None and not p.nvlinks:
            yield Finding(PATH_UNDECIDED.code, "info", (p.a, p.b),
                          f"{pair_label(ctx, p)}: on different root buses and the input gives no NUMA node; "
                          f"the path is {' or '.join(p.candidates) or 'unknown'}",
                          pairs=((p.a, p.b),), effect="unknown",
                          settle="run gdrcheck live on the node or send a snapshot")
            continue
        sev, _note = _severity(ctx, p, best, "warning")
        hits = []
        if p.kind == "gpu-nic" and view.get("within_gdr_level") is False and _rdma_capable(ctx, p.b) is not False:
            hits.append((GDR_BEYOND_LEVEL.code,
                         f"NCCL will not use GPUDirect RDMA between {pair_label(ctx, p)}: path "
                         f"{p.pcie_path} (NCCL {view.get('path_type')}) is beyond "
                         f"NCCL_NET_GDR_LEVEL={st.gdr_level} ({st.gdr_level_source})"))
        if not p.nvlinks:
            if p.kind in ("gpu-gpu", "gpu-nvme") and p.pcie_path in ("PHB", "NODE"):
                hits.append((THROUGH_ROOT.code, f"{pair_label(ctx, p)} meet only at the root complex ({p.pcie_path})"))
            if p.pcie_path == "SYS":
                hits.append((CROSS_SOCKET.code, f"{pair_label(ctx, p)} are on different NUMA nodes (SYS)"))
        for code, msg in hits:
            if sev == "info":
                far.setdefault((code, p.a, p.kind), []).append(p)
            else:
                yield Finding(code, sev, (p.a, p.b), msg, pairs=((p.a, p.b),), effect="degraded")
        if not p.nvlinks and p.kind == "gpu-gpu" and view.get("within_p2p_level") is False:
            yield Finding(P2P_BEYOND_LEVEL.code, "warning", (p.a, p.b),
                          f"NCCL will use host memory, not P2P, between {pair_label(ctx, p)}: path "
                          f"{p.pcie_path} is beyond NCCL_P2P_LEVEL={st.p2p_level} ({st.p2p_level_source})",
                          pairs=((p.a, p.b),), effect="degraded")
    what = {GDR_BEYOND_LEVEL.code: f"beyond NCCL_NET_GDR_LEVEL={st.gdr_level}",
            THROUGH_ROOT.code: "meeting it only at the root complex", CROSS_SOCKET.code: "on other NUMA nodes (SYS)"}
    for (code, gpu, kind), ps in far.items():
        cls, to = best[(gpu, kind)]
        peers = "NIC" if kind == "gpu-nic" else "NVMe drive"
        n = len(ps)
        yield Finding(code, "info", (gpu,),
                      f"{label(ctx, gpu)}: {n} {peers}{'s' if n != 1 else ''} {what[code]} "
                      f"({', '.join(p.b for p in ps[:4])}{', ...' if n > 4 else ''}); not the ones to use: "
                      f"its closest is {label(ctx, to)}, {cls}",
                      pairs=tuple((p.a, p.b) for p in ps), effect="degraded")


def _check_p2p_status(ctx: Context) -> Iterable[Finding]:
    status = ctx.snap.p2p_status
    for p in ctx.pairs_of("gpu-gpu"):
        got = {}
        for cap in ("read", "write"):
            v = status.get((p.a, p.b, cap)) or status.get((p.b, p.a, cap))
            if v is not None:
                got[cap] = v
        if len(got) < 2:
            yield Finding(P2P_UNKNOWN.code, "info", (p.a, p.b),
                          f"P2P status between {pair_label(ctx, p)} not known (no NVML answer)",
                          pairs=((p.a, p.b),), effect="unknown",
                          settle="run gdrcheck where the NVIDIA driver is loaded")
            continue
        bad = {k: v for k, v in got.items() if v != "OK"}
        if bad:
            worst = "fail" if p.nvlinks or ctx.nccl.ignore_disabled_p2p == 0 else "degraded"
            yield Finding(P2P_DISABLED.code, "error", (p.a, p.b),
                          f"driver P2P status between {pair_label(ctx, p)}: "
                          + ", ".join(f"{k} {v}" for k, v in sorted(bad.items())),
                          pairs=((p.a, p.b),), effect=worst)


def _check_close_nic(ctx: Context) -> Iterable[Finding]:
    nics = [n for n in ctx.topo.of_kind("nic") if _rdma_capable(ctx, n) is not False]
    if not nics:
        return
    nic_set = set(nics)
    for g in ctx.gpu_bdfs():
        mine = [p for p in ctx.pairs_with(g) if p.kind == "gpu-nic" and p.a == g and p.b in nic_set]
        close: List[str] = [p.b for p in mine if p.pcie_path in ("PIX", "PXB")]
        undecided = any(p.pcie_path is None for p in mine)
        if not close and not undecided:
            yield Finding(NO_CLOSE_NIC.code, "warning", (g,),
                          f"{label(ctx, g)} has no RDMA NIC under a common PCIe switch")


def _rdma_capable(ctx: Context, nic: str):
    from gdrcheck.rules.link_nic import rdma_capable

    return rdma_capable(ctx, nic)


CHECKS = (
    (GDR_BEYOND_LEVEL, _check_levels),
    (THROUGH_ROOT, None),
    (CROSS_SOCKET, None),
    (PATH_UNDECIDED, None),
    (NO_CLOSE_NIC, _check_close_nic),
    (P2P_BEYOND_LEVEL, None),
    (P2P_DISABLED, _check_p2p_status),
    (P2P_UNKNOWN, None),
)
