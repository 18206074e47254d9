"""The probe plan: which checks run on which devices and why, from the static report. Pure.

A pair on which the static check finds ACS redirect on its path (GDR040) or a
translating IOMMU (GDR042) gets only the harmless calls unless ``--risky``: on such
a pair a peer copy or an RDMA write may hang or return garbage. A busy node (GPU
compute processes, MIG, a non-default compute mode) is refused unless ``--force``.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.model import bdf_key
from gdrcheck.pair_classes import PCIE_RANK
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Optional

RISKY_CODES = {"GDR040": "ACS redirect on the path", "GDR042": "a translating IOMMU"}
# PCIe raw data rate per lane in GB/s after line coding (8b/10b to Gen2, 128b/130b from Gen3; Gen6 FLIT ~ 242/256)
RAW_GB_PER_LANE = {2.5: 0.25, 5.0: 0.5, 8.0: 0.9846, 16.0: 1.9692, 32.0: 3.9385, 64.0: 7.5635}
GEN_OF = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
EFFICIENCY = 0.85  # what a large pinned copy reaches of the raw rate (measured: Gen5 x16 ~53 GB/s)
DEGRADED_BELOW = 0.75  # of the expected rate
HOST_COPY_BYTES = 256 << 20
# 256 MiB per peer copy: on four NVSwitch H200s single copies reach 97% of their 1 GiB rate at 256 MiB and
# 88% at 64 MiB (fixtures/nccl-runs-4gpu-vm/bandwidth.json); the probe queues several back to back
P2P_COPY_BYTES = 256 << 20
DEADLINES = {"cuda": 60.0, "host-bandwidth": 60.0, "p2p": 90.0, "rdma-register": 60.0,
             "rdma-loopback": 60.0, "gds-read": 90.0}


@record
class Step:
    """One check on one subject: what it is, why it is planned, or why it is skipped."""

    check: str
    subjects: tuple[str, ...]
    status: str  # planned | skipped
    why: str
    reason: str = ""  # why skipped
    predicted: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # what the worker needs
    harmless_only: bool = False  # risky pair: only the calls that move no data
    deadline_s: float = 60.0

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"check": self.check, "subjects": list(self.subjects), "status": self.status,
                               "why": self.why}
        if self.reason:
            doc["reason"] = self.reason
        doc["predicted"] = dict(self.predicted)
        doc["expected"] = dict(self.expected)
        doc["deadline_s"] = self.deadline_s
        if self.params.get("cpulist") is not None:
            doc["cpus"] = self.params["cpulist"]
        if self.params.get("numa_node") is not None:
            doc["numa_node"] = self.params["numa_node"]
        if self.harmless_only:
            doc["harmless_only"] = True
        return doc


@record
class Plan:
    steps: list[Step]
    busy: list[str]  # why the node is busy (empty: idle)
    refused: bool  # busy and not --force
    notes: list[str] = field(default_factory=list)


def link_expectation(topo, bdf: str) -> dict[str, Any]:
    """The expected host copy rate from the GPU's link: the lower of its own and its port's maximum."""
    d = topo.by_bdf[bdf]
    speeds = [d.link.max_speed]
    widths = [d.link.max_width]
    up = topo.parent(bdf)
    if up is not None and up in topo.by_bdf:
        pl = topo.by_bdf[up].link
        speeds.append(pl.max_speed)
        widths.append(pl.max_width)
    speeds = [s for s in speeds if s]
    widths = [w for w in widths if w]
    if not speeds or not widths:
        return {"basis": "the link's speed and width are not shown by the input"}
    speed, width = min(speeds), min(widths)
    per_lane = RAW_GB_PER_LANE.get(speed)
    if per_lane is None:
        return {"basis": f"unknown link speed {speed:g} GT/s"}
    raw = per_lane * width
    gen = GEN_OF.get(speed)
    return {"link": f"Gen{gen} x{width}", "link_speed_gts": speed, "link_width": width,
            "raw_gb_per_s": round(raw, 2), "h2d_gb_per_s": round(raw * EFFICIENCY, 1),
            "d2h_gb_per_s": round(raw * EFFICIENCY, 1),
            "degraded_below_gb_per_s": round(raw * EFFICIENCY * DEGRADED_BELOW, 1),
            "basis": f"{int(EFFICIENCY * 100)}% of the raw rate of Gen{gen} x{width} "
                     f"({raw:.1f} GB/s; the lower of the GPU's and its port's maximum); "
                     f"degraded below {int(DEGRADED_BELOW * 100)}% of that"}


def p2p_expectation(report, a: str, b: str) -> dict[str, Any]:
    """What a peer copy each way should reach: NVLink active links x the per-link rate NVML gives (the lower of
    the two GPUs'), or over PCIe the lower of the two GPUs' expected host copy rates; degraded below 75%."""
    topo, snap = report.topo, report.snap
    n = topo.nvlink_count(a, b) if snap.shows_nvlink else None
    if n:
        nv = [((next((g for g in snap.gpus if g.bdf == x), None) or _NoGpu).extra or {}).get("nvlink") or {}
              for x in (a, b)]
        rates = [x.get("rate_gb_per_s") for x in nv]
        basis = nv[0].get("rate_basis") or "NVML"
        if any(not isinstance(r, (int, float)) for r in rates):
            from gdrcheck.collectors.nvml_fabric import RATE_BY_VERSION, part_nvlink
            from gdrcheck.device_models import nvlink_part

            parts = {part_nvlink(nvlink_part(topo.by_bdf[x])) for x in (a, b)}
            if len(parts) == 1 and None not in parts:
                version = parts.pop()[1]
                rates = [RATE_BY_VERSION[version]]
                basis = f"NVLink {version}'s per-link rate for this part (the input has no per-link speed)"
        if any(not isinstance(r, (int, float)) for r in rates):
            return {"link": f"NV{n}", "basis": f"NV{n}: the per-link rate is not known (NVML did not give it)"}
        rate = min(rates)
        want = round(n * rate, 1)
        return {"link": f"NV{n}", "nvlinks": n, "rate_gb_per_s": rate, "gb_per_s": want,
                "degraded_below_gb_per_s": round(want * DEGRADED_BELOW, 1),
                "basis": f"{n} NVLinks x {rate:g} GB/s each way ({basis}); "
                         f"degraded below {int(DEGRADED_BELOW * 100)}% of that"}
    ea, eb = link_expectation(topo, a), link_expectation(topo, b)
    if ea.get("h2d_gb_per_s") is None or eb.get("h2d_gb_per_s") is None:
        return {"basis": "no NVLink shown, and the PCIe links' speed and width are not shown by the input"}
    low = ea if ea["h2d_gb_per_s"] <= eb["h2d_gb_per_s"] else eb
    want = low["h2d_gb_per_s"]
    return {"link": f"PCIe {low['link']}", "gb_per_s": want, "degraded_below_gb_per_s": round(want * DEGRADED_BELOW, 1),
            "basis": f"PCIe: the slower GPU link, {low['link']}, at {int(EFFICIENCY * 100)}% of its raw rate; "
                     f"degraded below {int(DEGRADED_BELOW * 100)}% of that"}


class _NoGpu:
    extra: dict[str, Any] = {}


def _risky(report, a: str, b: str) -> list[str]:
    """Why copying on this pair is dangerous: ACS redirect on its path, or a translating IOMMU that fails it."""
    codes = set(report.pair_findings.get((a, b), ())) | set(report.pair_findings.get((b, a), ()))
    out = []
    for f in report.findings:
        if f.code in RISKY_CODES and f.code in codes and ((a, b) in f.pairs or (b, a) in f.pairs) \
                and f.effect in ("fail", "degraded"):
            out.append(f"{RISKY_CODES[f.code]} ({f.code})")
    return sorted(set(out))


def busy_reasons(snap, live_state: Optional[dict[str, Any]] = None) -> list[str]:
    """Why the node is busy: compute processes (the snapshot), MIG and compute mode (asked live)."""
    out: list[str] = []
    for g in snap.gpus:
        if g.processes:
            pids = ", ".join(str(p.pid) for p in g.processes[:4])
            out.append(f"GPU {g.bdf} runs {len(g.processes)} process(es) (pid {pids})")
    for bdf, st in sorted((live_state or {}).items()):
        if st.get("mig_enabled"):
            out.append(f"GPU {bdf} has MIG enabled")
        mode = st.get("compute_mode")
        if mode not in (None, "default"):
            out.append(f"GPU {bdf} is in compute mode {mode}")
    return out


def _gpu_pred(report, bdf: str) -> dict[str, Any]:
    g = next((x for x in report.snap.gpus if x.bdf == bdf), None)
    out: dict[str, Any] = {"listed_by_driver": g is not None if report.snap.gpus else None}
    if g is not None and g.name:
        out["name"] = g.name
    codes = sorted({f.code for f in report.findings if bdf in f.subject and not f.pairs})
    if codes:
        out["findings"] = codes
    return out


def _pair_pred(report, a: str, b: str, key: str) -> dict[str, Any]:
    p = next((x for x in report.pairs if (x.a, x.b) in ((a, b), (b, a))), None)
    if p is None:
        return {}
    from gdrcheck.documents.pairs import nccl_decision

    dec = nccl_decision(report, p)
    out = {"verdict": report.verdicts[(p.a, p.b)], "path": p.path, "findings": report.pair_findings[(p.a, p.b)],
           "nccl_" + key: dec.get(key), "nccl_reason": dec.get("reason")}
    if p.kind == "gpu-gpu":  # NVML's P2P status, to stand beside cuDeviceCanAccessPeer
        st = report.snap.p2p_status
        for cap in ("read", "write"):
            v = st.get((p.a, p.b, cap)) or st.get((p.b, p.a, cap))
            if v is not None:
                out[f"nvml_p2p_{cap}"] = v
    return out


def build_plan(report, risky: bool = False, force: bool = False, gds_path: Optional[str] = None,
               live_state: Optional[dict[str, Any]] = None, only: Sequence[str] = (),
               copy_bytes: int = HOST_COPY_BYTES) -> Plan:
    topo, snap = report.topo, report.snap
    busy = busy_reasons(snap, live_state)
    refused = bool(busy) and not force
    gpus = sorted(topo.of_kind("gpu"), key=bdf_key)
    rdma_pairs = _rdma_pairs(report, gpus)
    steps: list[Step] = []
    for step in _steps(report, gpus, rdma_pairs, risky, gds_path, copy_bytes):
        if only and step.check not in only:
            continue
        step.deadline_s = DEADLINES[step.check]
        if refused and step.status == "planned":
            step.status, step.reason = "skipped", "node busy: " + "; ".join(busy) + " (--force to probe anyway)"
        steps.append(step)
    notes = []
    if not gpus:
        notes.append("no GPU in the input: nothing to probe")
    elif not rdma_pairs:
        notes.append("no RDMA NIC in the input: rdma-register and rdma-loopback have nothing to run on")
    return Plan(steps=steps, busy=busy, refused=refused, notes=notes)


def _steps(report, gpus: list[str], rdma_pairs, risky: bool, gds_path: Optional[str], copy_bytes: int):
    """Every step, in the order they run: each check on all its subjects before the next check."""
    yield from _cuda_steps(report, gpus)
    yield from _host_bandwidth_steps(report, gpus, copy_bytes)
    yield from _p2p_steps(report, gpus, risky, copy_bytes)
    yield from _rdma_steps(report, rdma_pairs, risky)
    yield from _gds_steps(report, gpus, gds_path)


def _gpu_params(topo, bdf: str) -> dict[str, Any]:
    d = topo.by_bdf[bdf]
    return {"gpu": bdf, "cpulist": d.local_cpulist, "numa_node": topo.numa(bdf)}


def _cuda_steps(report, gpus: list[str]):
    for g in gpus:
        yield Step("cuda", (g,), "planned", "every GPU: the driver API answers and finds it by its bus id",
                   predicted=_gpu_pred(report, g), params=_gpu_params(report.topo, g))


def _host_bandwidth_steps(report, gpus: list[str], copy_bytes: int):
    for g in gpus:
        exp = link_expectation(report.topo, g)
        yield Step("host-bandwidth", (g,), "planned",
                   "every GPU: pinned host memory on the GPU's NUMA node (the worker runs on its local CPUs), "
                   "host-to-device and device-to-host, verified, against the link's expected rate",
                   predicted=_gpu_pred(report, g), expected=exp,
                   params={**_gpu_params(report.topo, g), "bytes": copy_bytes, "expected": exp})


def _p2p_steps(report, gpus: list[str], risky: bool, copy_bytes: int):
    """Every GPU pair; on a risky pair (without ``--risky``) only cuDeviceCanAccessPeer."""
    topo = report.topo
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            danger = _risky(report, a, b)
            exp = p2p_expectation(report, a, b)
            st = Step("p2p", (a, b), "planned", "every GPU pair (pairs over NVLink on other GPUs at the same "
                      "time): peer access both ways, a "
                      "verified copy each way, the rate each way and both at once against what the link should "
                      "carry, beside the copy staged through host memory",
                      predicted=_pair_pred(report, a, b, "p2p"), expected=exp,
                      params={"gpus": [a, b], "bytes": min(copy_bytes, P2P_COPY_BYTES), "expected": exp,
                              "cpulist": topo.by_bdf[a].local_cpulist,
                              "numa_node": topo.numa(a)})
            if danger and not risky:
                st.status, st.harmless_only = "skipped", True
                st.reason = ("the static check finds " + " and ".join(danger) + ": a peer copy may hang or "
                             "return garbage; only cuDeviceCanAccessPeer is asked (--risky to copy)")
            yield st


def _rdma_steps(report, rdma_pairs, risky: bool):
    """rdma-register on every GPU and NIC of :func:`_rdma_pairs`, then rdma-loopback on them (on a risky pair,
    without ``--risky``, skipped)."""
    topo = report.topo
    peer = _peer_memory(report)
    for g, nic, why in rdma_pairs:
        d = topo.by_bdf[nic]
        params = {"gpu": g, "nic": nic, "rdma_devices": list(d.rdma_devices), "cpulist": topo.by_bdf[g].local_cpulist,
                  "numa_node": topo.numa(g)}
        yield Step("rdma-register", (g, nic), "planned",
                   f"{why}: NCCL's DMA-BUF probe, ibv_reg_mr on GPU memory (peer memory), DMA-BUF export and "
                   "ibv_reg_dmabuf_mr", predicted={**_pair_pred(report, g, nic, "gdr"), **peer}, params=params)
    for g, nic, why in rdma_pairs:
        d = topo.by_bdf[nic]
        danger = _risky(report, g, nic)
        st = Step("rdma-loopback", (g, nic), "planned",
                  f"{why}, where a port is ACTIVE: RDMA write GPU to GPU through the NIC on a queue pair "
                  "connected to itself, verified, host memory as baseline",
                  predicted=_pair_pred(report, g, nic, "gdr"),
                  params={"gpu": g, "nic": nic, "rdma_devices": list(d.rdma_devices),
                          "cpulist": topo.by_bdf[g].local_cpulist, "numa_node": topo.numa(g)})
        if danger and not risky:
            st.status, st.harmless_only = "skipped", True
            st.reason = ("the static check finds " + " and ".join(danger) + ": an RDMA write may hang or "
                         "corrupt memory (--risky to try)")
        yield st


def _gds_steps(report, gpus: list[str], gds_path: Optional[str]):
    for g in gpus:
        st = Step("gds-read", (g,), "planned", "with --gds-path: an O_DIRECT read through cuFile into GPU memory, "
                  "verified against a host read, nvidia-fs counters moving", predicted=_gpu_pred(report, g),
                  params={**_gpu_params(report.topo, g), "gds_path": gds_path})
        if not gds_path:
            st.status, st.reason = "skipped", "no --gds-path DIR on the target filesystem given"
        yield st


def _peer_memory(report) -> dict[str, Any]:
    """Whether the static view has a peer-memory module loaded and expects DMA-BUF to work (None: not known)."""
    from gdrcheck.rules.base import Context
    from gdrcheck.rules.peermem import dmabuf_possible

    pmv = host_record(report.snap, "peermem") or {}
    ctx = Context(snap=report.snap, topo=report.topo, pairs=report.pairs, options=report.options,
                  nccl=report.settings, nccl_view=report.nccl_view)
    return {"peermem_loaded": pmv.get("nvidia_peermem_loaded") if pmv else None,
            "dmabuf_expected": dmabuf_possible(ctx)}


def _rdma_pairs(report, gpus) -> list[tuple[str, str, str]]:
    """Per GPU, the RDMA NICs NCCL would use for it (GPUDirect enabled) and the closest ones."""
    out: list[tuple[str, str, str]] = []
    for g in gpus:
        cands = []
        for p in report.pairs:
            if p.kind != "gpu-nic" or p.a != g:
                continue
            if "GDR082" not in report.pair_findings.get((p.a, p.b), ()):  # GDR082: not an RDMA device
                cands.append(p)
        if not cands:
            continue
        ranks = [PCIE_RANK.get(p.pcie_path or "", 9) for p in cands]
        best = min(ranks)
        for p, r in zip(cands, ranks):
            view = report.nccl_view.get((p.a, p.b), {})
            if r == best:
                out.append((g, p.b, f"closest RDMA NIC ({p.pcie_path or 'path unknown'})"))
            elif view.get("within_gdr_level"):
                out.append((g, p.b, f"within NCCL_NET_GDR_LEVEL ({p.pcie_path})"))
    return out
