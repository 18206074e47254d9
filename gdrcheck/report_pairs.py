"""The ``pairs`` document (contract: ``interface.md``) and the exit status it implies."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from gdrcheck.evaluate import Report
from gdrcheck.model import bdf_key
from gdrcheck.report_topology import collectors_doc, header_doc, names_doc, rdma_doc
from gdrcheck.rules.base import Context, PairInfo
from gdrcheck.status import EXIT_OF_STATUS, SEVERITY_RANK, node_status



def _names(topo, bdf: str) -> Dict[str, Any]:
    d = topo.by_bdf[bdf]
    out: Dict[str, Any] = {"bdf": bdf, "kind": topo.kind[bdf], **names_doc(d)}
    if out["kind"] == "nic":
        out.update(rdma_doc(topo, bdf))
    if d.gpu_index is not None and topo.kind[bdf] == "gpu":
        out["gpu_index"] = d.gpu_index
    if d.name:
        out["name"] = d.name
    out["numa_node"] = topo.numa(bdf) if topo.snap.numa_known else None
    return out


def _natural(text: str) -> Tuple:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def device_labels(devices: List[Dict[str, Any]]) -> Dict[str, str]:
    """Column names as ``nvidia-smi topo -m`` prints them: GPUn by the driver's index, NICn in the
    order of the RDMA devices (NIC0 is ``mlx5_0``; NICs without an RDMA name follow in bus order), and
    NVMen in bus order. A NIC that is not a GPUDirect NIC (``rdma: false``) gets none."""
    out: Dict[str, str] = {}
    nics = [d for d in devices if d["kind"] == "nic" and d.get("rdma") is not False]
    nics.sort(key=lambda d: (0, _natural(d["rdma_devices"][0])) if d.get("rdma_devices") else (1, bdf_key(d["bdf"])))
    for i, d in enumerate(nics):
        out[d["bdf"]] = f"NIC{i}"
    nvmes = [d for d in devices if d["kind"] == "nvme"]
    for i, d in enumerate(nvmes):
        out[d["bdf"]] = f"NVMe{i}"
    for d in devices:
        if d["kind"] == "gpu":
            out[d["bdf"]] = f"GPU{d['gpu_index']}" if "gpu_index" in d else f"GPU {d['bdf']}"
    return out


def rules_doc(report: Report) -> Dict[str, Any]:
    """For each finding code of the document: the rule's name, title, origin (in words) and the fix in
    force (the guest's fix in a virtual machine), so renderers need not read the registry."""
    from gdrcheck.rules import by_code
    from gdrcheck.rules.base import ORIGIN_WORDS

    rules = by_code()
    virtual = bool(report.topo.virtual())
    out: Dict[str, Any] = {}
    for code in sorted({f.code for f in report.findings}):
        r = rules.get(code)
        if r is not None:
            out[code] = {"name": r.name, "title": r.title, "origin": ORIGIN_WORDS[r.origin], "fix": r.fix(virtual)}
    return out


def nccl_decision(report: Report, pair: PairInfo, nic_side: Tuple) -> Dict[str, Any]:
    """NCCL's predicted decision for the pair, with the reason."""
    view = dict(report.nccl_view.get((pair.a, pair.b), {}))
    if pair.kind == "gpu-nic":
        ok, why = nic_side
        within = view.get("within_gdr_level")
        if within is False:
            view["gdr"], view["reason"] = "disabled", f"path beyond NCCL_NET_GDR_LEVEL={report.settings.gdr_level}"
        elif ok is False:
            view["gdr"], view["reason"] = "disabled", why
        elif within is None or ok is None:
            view["gdr"] = "unknown"
            view["reason"] = why if ok is None else "path type not known"
        else:
            view["gdr"], view["reason"] = "enabled", why
    elif pair.kind == "gpu-gpu":
        st = report.snap.p2p_status
        caps = [st.get((pair.a, pair.b, c)) or st.get((pair.b, pair.a, c)) for c in ("read", "write")]
        within = view.get("within_p2p_level")
        if within is False:
            view["p2p"], view["reason"] = "disabled", f"path beyond NCCL_P2P_LEVEL={report.settings.p2p_level}"
        elif any(c is not None and c != "OK" for c in caps):
            view["p2p"], view["reason"] = "disabled", "NVML P2P status " + "/".join(c or "?" for c in caps)
        elif within is None or None in caps:
            view["p2p"] = "unknown"
            view["reason"] = (view.get("path_type_reason") or "path type not known") if within is None \
                else "NVML P2P status not known"
        else:
            view["p2p"] = "enabled"
            view["reason"] = ("xGMI" if (pair.path or "").startswith("XGMI") else "NVLink") if pair.nvlinks else f"path {view.get('path_type')} within NCCL_P2P_LEVEL"
    return view


def pairs_doc(report: Report, fail_on: str = "error") -> Dict[str, Any]:
    snap, topo = report.snap, report.topo
    doc = header_doc(snap)
    st = report.settings
    doc["nccl"] = {
        "version": ".".join(map(str, st.version)),
        "gdr_level": st.gdr_level, "gdr_level_source": st.gdr_level_source,
        "p2p_level": st.p2p_level, "p2p_level_source": st.p2p_level_source,
        "overrides": dict(st.overrides),
    }
    members = sorted({b for p in report.pairs for b in (p.a, p.b)} | set(topo.of_kind("gpu", "nic")),
                     key=bdf_key)
    doc["devices"] = [_names(topo, b) for b in members]
    labels = device_labels(doc["devices"])
    for dev in doc["devices"]:
        if dev["bdf"] in labels:
            dev["label"] = labels[dev["bdf"]]
    from gdrcheck.rules.peermem import nic_gdr

    nic_side = nic_gdr(Context(snap=snap, topo=topo, pairs=report.pairs, options=report.options,
                               nccl=report.settings, nccl_view=report.nccl_view))
    pairs: List[Dict[str, Any]] = []
    for p in report.pairs:
        key = (p.a, p.b)
        pairs.append({
            "a": p.a, "b": p.b, "kind": p.kind,
            "pcie_path": p.pcie_path, "path": p.path,
            "path_candidates": list(p.candidates) if p.pcie_path is None else [],
            "nvlinks": p.nvlinks,
            "verdict": report.verdicts[key],
            "findings": report.pair_findings[key],
            "nccl": nccl_decision(report, p, nic_side),
        })
    doc["pairs"] = pairs
    doc["findings"] = [f.to_doc() for f in report.findings]
    doc["rules"] = rules_doc(report)
    counts: Dict[str, int] = {}
    for v in report.verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    doc["summary"] = {"pairs": len(pairs), "verdicts": counts,
                      "findings": {s: sum(1 for f in report.findings if f.severity == s)
                                   for s in ("error", "warning", "info")}}
    doc["collectors"] = collectors_doc(snap)
    if snap.notes:
        doc["notes"] = list(snap.notes)
    doc["status"] = node_status_word(report, fail_on)
    doc["timed_out"] = timed_out(report)
    doc["summary_line"] = summary_line(report, fail_on)
    from gdrcheck.fingerprint import fingerprint

    doc["fingerprint"] = fingerprint(report.whole or report).to_doc()
    return doc


SUMMARY_MAX = 80  # Node Problem Detector cuts at 80 bytes; a Slurm drain reason shows the first word


def timeout_doc(seconds, host=None) -> Dict[str, Any]:
    """What can be said when the run overstayed its --timeout before any report was made."""
    from gdrcheck import FORMAT_VERSION, __version__

    line = _fit(f"GDR122 run-timed-out: no result within {seconds or 0:g} s")
    return {
        "format_version": FORMAT_VERSION, "gdrcheck_version": __version__,
        "host": host,
        "devices": [], "pairs": [], "status": "unknown", "timed_out": True, "summary_line": line,
        "findings": [{"code": "GDR122", "severity": "warning", "subject": ["gdrcheck"], "effect": "unknown",
                      "message": f"the --timeout of {seconds or 0:g} s ran out before the facts were read; "
                                 "nothing could be judged"}],
        "summary": {"pairs": 0, "verdicts": {}, "findings": {"error": 0, "warning": 1, "info": 0}},
    }


def timed_out(report: Report) -> bool:
    f = report.snap.host.get("run_deadline")
    return f is not None and bool(f.value)


def summary_line(report: Report, fail_on: str = "error") -> str:
    """One line, code first, at most 80 bytes: what an NHC drain reason or an NPD condition shows."""
    code, _missing = exit_status(report, fail_on)
    if code == 0:
        counts: Dict[str, int] = {}
        for v in report.verdicts.values():
            counts[v] = counts.get(v, 0) + 1
        topo = report.topo
        what = (f"{len(topo.of_kind('gpu'))} GPU, {len(topo.gpudirect_nics())} RDMA NIC, "
                f"{len(topo.of_kind('nvme'))} NVMe: ")
        # pairs can fail below --fail-on (a NIC that is not an RDMA device): the count says so
        parts = [f"{counts[v]} {v}" for v in ("ok", "degraded", "fail", "unknown") if counts.get(v)]
        return _fit("OK " + what + (", ".join(parts) if parts else "no pairs"))
    if code == 1:
        threshold = SEVERITY_RANK[fail_on]
        hits = [f for f in report.findings if SEVERITY_RANK[f.severity] >= threshold]
        hits.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.code))
    else:
        hits = [f for f in report.findings if f.code == "GDR122"] or \
            sorted((f for f in report.findings if f.effect == "unknown"), key=lambda f: f.code)
    first = hits[0]
    from gdrcheck.rules import by_code

    rule = by_code().get(first.code)
    head = f"{first.code} {rule.name if rule else first.severity}"
    if first.code == "GDR122":  # what did not answer in time
        head += " " + ",".join(first.subject)
    elif first.subject and first.subject[0] not in ("host", "gdrcheck"):
        head += " " + first.subject[0]
    more = len(hits) - 1
    return _fit(head, f" (+{more} more)" if more else "")


def _fit(text: str, tail: str = "") -> str:
    text = " ".join(text.split())
    room = SUMMARY_MAX - len(tail.encode())
    raw = text.encode()
    if len(raw) > room:
        text = raw[:room - 3].decode("utf-8", "ignore").rstrip() + "..."
    return text + tail


def node_status_word(report: Report, fail_on: str = "error") -> str:
    """pass, fail or unknown: the one answer for this node (see :mod:`gdrcheck.status`)."""
    missing = timed_out(report) or any(f.effect == "unknown" and not f.pairs for f in report.findings)
    return node_status(report.verdicts.values(), (f.severity for f in report.findings), fail_on,
                       facts_missing=missing)


def exit_status(report: Report, fail_on: str = "error") -> Tuple[int, List[str]]:
    """The contract's exit status, and for status 3 the facts that were missing."""
    word = node_status_word(report, fail_on)
    if word != "unknown":
        return EXIT_OF_STATUS[word], []
    if timed_out(report):
        f = report.snap.host["run_deadline"]
        return 3, [f"GDR122: the --timeout ran out before {', '.join(map(str, f.value.get('missed', ())))} "
                   "answered"]
    missing = sorted({f"{f.code}: {f.settle or f.message}" for f in report.findings if f.effect == "unknown"})
    return 3, missing
