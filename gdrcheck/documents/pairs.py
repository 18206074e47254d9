"""The ``pairs`` document (schema: ``gdrcheck/schemas/pairs.schema.json``) and the exit status it implies."""

from __future__ import annotations

from gdrcheck.documents.labels import device_labels
from gdrcheck.documents.topology import collectors_doc, header_doc, names_doc, rdma_doc
from gdrcheck.host_facts import host_record
from gdrcheck.model import address_known, bdf_key
from gdrcheck.rules.decisions import library_word, nccl_decision, node_status_word, timed_out  # noqa: F401
from gdrcheck.rules.engine import Evaluation, other_versions
from gdrcheck.rules.nccl.core import version_str
from gdrcheck.status import SEVERITY_RANK, STATUS_WORDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def _names(topo, bdf: str) -> dict[str, Any]:
    d = topo.by_bdf[bdf]
    out: dict[str, Any] = {"bdf": bdf, "kind": topo.device_kind[bdf], **names_doc(d)}
    if out["kind"] == "nic":
        out.update(rdma_doc(topo, bdf))
    if d.gpu_index is not None and topo.device_kind[bdf] == "gpu":
        out["gpu_index"] = d.gpu_index
    if d.name:
        out["name"] = d.name
    out["numa_node"] = topo.numa(bdf) if topo.snap.numa_known else None
    return out


def rules_doc(evaluation: Evaluation) -> dict[str, Any]:
    """For each finding code of the document: the rule's name, title, origin (in words) and the fix in
    force (the guest's fix in a virtual machine), so renderers need not read the registry."""
    from gdrcheck.rules import by_code

    rules = by_code()
    virtual = bool(evaluation.topo.virtual())
    lib = library_word(evaluation)
    out: dict[str, Any] = {}
    for code in sorted({f.code for f in evaluation.findings}):
        r = rules.get(code)
        if r is not None:
            out[code] = {"name": r.name, "title": r.title_for(lib), "origin": r.origin_for(lib),
                         "fix": r.fix(virtual, lib)}
    return out


def nccl_doc(evaluation: Evaluation) -> dict[str, Any]:
    """The top-level ``nccl`` object: the version judged and why, the versions found, the settings in force,
    and the pairs another version found on the node would decide differently."""
    st = evaluation.settings
    node = evaluation.nccl_node
    doc: dict[str, Any] = {
        "version": version_str(st.version),
        "version_reason": st.version_reason or (node.version_reason if node is not None else ""),
        "versions_found": [dict(e) for e in (node.versions_found if node is not None else [])],
        "gdr_level": st.gdr_level, "gdr_level_source": st.gdr_level_source,
        "p2p_level": st.p2p_level, "p2p_level_source": st.p2p_level_source,
        "overrides": dict(st.overrides),
        "settings_files_read": list(st.files_read),
    }
    if st.ignored:
        doc["ignored_settings"] = list(st.ignored)
    from gdrcheck.rules.nccl.core import NEWEST

    if st.version > NEWEST:  # the rules' own comparison (versions.beyond_modelled), carried for the header
        doc["newest_modelled"] = version_str(NEWEST)
    if node is None:
        return doc
    if getattr(node, "library", "nccl") == "rccl":  # AMD GPUs: RCCL's rules (gdrcheck.rules.rccl)
        _rccl_doc(doc, node)
    doc["cpu"] = {"kind": node.cpu, "source": node.cpu_source}
    if node.plugins:
        doc["net_plugins"] = list(node.plugins)
    if node.topo_files:
        doc["topology_files"] = dict(node.topo_files)
    doc["gpus"] = {b: {"gdr": g.gdr, "gdr_source": g.gdr_source, "sm": g.sm, "c2c": g.c2c}
                   for b, g in sorted(node.gpus.items())}
    doc["gpu_nics"] = _gpu_nics(evaluation)
    from gdrcheck.rules.decisions import resting

    depends = resting(evaluation)
    if depends:  # how many pairs' depends_on is the job's to settle, how many facts the input does not show
        doc["depends"] = depends
    from gdrcheck.documents.nccl_log import log_doc

    log = log_doc(evaluation)
    if log is not None:  # a job's NCCL log: what NCCL did, beside the prediction
        doc["log"] = log
    doc["other_versions"] = other_versions(evaluation)
    return doc


def _rccl_doc(doc: dict[str, Any], node) -> None:
    """The library, RCCL's release and its NCCL base, and the levels by RCCL's names (``XGMI``)."""
    from gdrcheck.rules.rccl.releases import vstr
    from gdrcheck.rules.rccl.settings import shown

    r = node.release
    doc.update(library="rccl", version=vstr(r.version), nccl_base=vstr(r.nccl_base), rules=node.label,
               library_reason=node.why_rccl, release={"rocm": r.rocm, "source": f"ROCm/rccl {r.tag}"},
               gdr_level=shown(doc["gdr_level"]), p2p_level="|".join(shown(x) for x in node.st.p2p_levels))
    peer, why, settle = node.peer_memory
    doc["peer_memory"] = {"loaded": peer, "why": why, **({"settle": settle} if settle else {})}
    if node.gcn:
        doc["gfx"] = node.gcn


def _gpu_nics(evaluation: Evaluation) -> dict[str, Any]:
    """For each GPU, the NICs NCCL would use with GPUDirect RDMA, and through which GPU (PXN)."""
    out: dict[str, Any] = {}
    node = evaluation.nccl_node
    for (g, n), v in sorted(node.gdr_view.items()):
        if v.get("gdr") == "enabled":
            entry = {"nic": n}
            if v.get("via"):
                entry["via"] = v["via"]
            out.setdefault(g, []).append(entry)
    return out


def _pair_rows(evaluation: Evaluation, expected_pairs: dict[tuple[str, str], Any],
               picked: dict[tuple[str, str], Any]) -> list[dict[str, Any]]:
    """Each pair's own answer: path, verdict, findings, NCCL's decision, the class an input stated, its expected
    answer and (a GPU-NIC or GPU-NVMe pair) whether it is the one its GPU would use."""
    from gdrcheck.rules.nccl.decision import Decision

    pairs: list[dict[str, Any]] = []
    verdicts, codes, path_facts = evaluation.verdicts, evaluation.pair_findings, evaluation.snap.path_facts
    views = evaluation.nccl_view
    for p in evaluation.pairs:
        key = (p.a, p.b)
        view = views.get(key)
        row = {
            "a": p.a, "b": p.b, "kind": p.kind,
            "pcie_path": p.pcie_path, "path": p.path,
            "path_candidates": list(p.candidates) if p.pcie_path is None else [],
            "nvlinks": p.nvlinks,
            "verdict": verdicts[key],
            "findings": codes[key],
            # a decision record's mapping, as nccl_decision gives it, read straight; any other view through it
            "nccl": view.as_contract() if isinstance(view, Decision) else nccl_decision(evaluation, p),
        }
        fact = path_facts.get(key if bdf_key(p.a) <= bdf_key(p.b) else (p.b, p.a)) if path_facts else None
        if fact is not None:  # the class an input stated (nvidia-smi topo -m), and the tree's when they differ
            row["path_source"] = {"input": fact.source, "class": fact.cls, "tree": fact.tree,
                                  "trusted": fact.source, "why": fact.why or None}
        row["expected"] = expected_pairs[key]
        if p.kind != "gpu-gpu":
            row["chosen"] = picked.get(key)
        pairs.append(row)
    return pairs


def pairs_doc(evaluation: Evaluation, fail_on: str = "error") -> dict[str, Any]:
    snap, topo = evaluation.snap, evaluation.topo
    doc = header_doc(snap)
    doc["nccl"] = nccl_doc(evaluation)
    members = sorted({p.a for p in evaluation.pairs} | {p.b for p in evaluation.pairs}
                     | set(topo.of_kind("gpu", "nic")), key=bdf_key)
    doc["devices"] = [_names(topo, b) for b in members]
    labels = device_labels(doc["devices"])
    for dev in doc["devices"]:
        if dev["bdf"] in labels:
            dev["label"] = labels[dev["bdf"]]
    from gdrcheck.rules.expected import expected, expected_status

    memo: dict[str, Any] = {}  # the node's second evaluation, made once for the gate and the node
    ex = expected(evaluation, fail_on, memo)
    from gdrcheck.rules import capabilities as caps

    pairs = _pair_rows(evaluation, ex.pairs, caps.chosen(evaluation))
    doc["pairs"] = pairs
    doc["capabilities"], expected_caps = _capabilities(evaluation, ex, labels, fail_on, memo)
    doc["findings"] = [f.to_doc() for f in evaluation.findings]
    doc["rules"] = rules_doc(evaluation)
    counts: dict[str, int] = {}
    for v in evaluation.verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    doc["summary"] = {"pairs": len(pairs), "verdicts": counts,
                      "findings": {s: sum(f.weight for f in evaluation.findings if f.severity == s)
                                   for s in ("error", "warning", "info")}}
    doc["collectors"] = collectors_doc(snap)
    if snap.notes:
        doc["notes"] = list(snap.notes)
    from gdrcheck.reach import not_shown

    doc["not_in_input"] = list(not_shown(snap))
    doc["status"] = node_status_word(evaluation, fail_on)
    doc["expected_status"] = expected_status(evaluation, ex, expected_caps, fail_on)
    doc["assumes"] = ex.assumes
    otherwise = _otherwise(pairs)
    if otherwise:
        doc["otherwise"] = otherwise
    doc["missing"] = missing_doc(evaluation)
    doc["timed_out"] = timed_out(evaluation)
    doc["summary_line"] = summary_line(evaluation, fail_on)
    from gdrcheck.documents.fingerprint import fingerprint

    doc["fingerprint"] = fingerprint(evaluation.whole or evaluation).to_doc()
    return doc


def _capabilities(evaluation: Evaluation, ex, labels, fail_on: str, memo: dict[str, Any]) -> tuple[dict[str, Any],
                                                                                                     Any]:
    """``capabilities``, from the node's whole evaluation (a gate's pairs are a part of it), and the expected
    answers it writes; ``memo``: the node's second evaluation where the gate's expected answers made it."""
    from gdrcheck.documents.capabilities import capabilities_doc
    from gdrcheck.rules import capabilities as caps

    whole = evaluation.whole
    if whole is not None:  # the expected answers of every pair of the node, not only the gate's
        from gdrcheck.rules.expected import expected

        ex = expected(whole, fail_on, memo)
    answers, expected_caps = caps.answers_and_expected(evaluation, ex.pairs)
    return capabilities_doc(evaluation, answers, expected_caps, labels), expected_caps


def _otherwise(rows) -> list[dict[str, Any]]:
    """The node's forks (``expected.otherwise``), each once, with how many pairs rest on it."""
    counts: dict[tuple[str, str, str], int] = {}
    for row in rows:
        o = (row.get("expected") or {}).get("otherwise")
        if o:
            (word, answer), = o["nccl"].items()
            counts[(word, answer, o["if"])] = counts.get((word, answer, o["if"]), 0) + 1
    return [{"nccl": {w: a}, "if": c, "pairs": n} for (w, a, c), n in counts.items()]


SUMMARY_MAX = 80  # Node Problem Detector cuts at 80 bytes; a Slurm drain reason shows the first word


def timeout_doc(seconds, host=None) -> dict[str, Any]:
    """What can be said when the run overstayed its --timeout before any evaluation was made."""
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


def summary_line(evaluation: Evaluation, fail_on: str = "error") -> str:
    """One line, code first, at most 80 bytes: what an NHC drain reason or an NPD condition shows."""
    word = node_status_word(evaluation, fail_on)
    if word == "pass":
        counts: dict[str, int] = {}
        for v in evaluation.verdicts.values():
            counts[v] = counts.get(v, 0) + 1
        topo = evaluation.topo
        from gdrcheck.reach import NOT_IN_INPUT, shows

        nics = f"{len(topo.gpudirect_nics())} RDMA NIC" if shows(topo.snap, "nics") else f"NICs: {NOT_IN_INPUT}"
        nvme = f"{len(topo.of_kind('nvme'))} NVMe" if shows(topo.snap, "nvme") else f"NVMe: {NOT_IN_INPUT}"
        what = f"{len(topo.of_kind('gpu'))} GPU, {nics}, {nvme}: "
        # pairs can fail below --fail-on (a NIC that is not an RDMA device): the count says so
        parts = [f"{counts[v]} {v}" for v in ("ok", "degraded", "fail", "unknown") if counts.get(v)]
        return _fit("OK " + what + (", ".join(parts) if parts else "no pairs"))
    # the most severe finding first (what moves pairs furthest, then by code); the count is every other
    # finding of the document's list, as its summary counts them
    timeout = [f for f in evaluation.findings if f.code == "GDR122"] if word != "fail" else []
    hits = timeout or sorted(evaluation.findings, key=_lead_key)
    if not hits:
        return _fit(f"{STATUS_WORDS[word]} no finding")
    first = hits[0]
    from gdrcheck.rules import by_code

    more = sum(f.weight for f in evaluation.findings) - 1
    if word == "unknown" and not timeout:  # what is missing, never a definite finding; the count: the others
        missing = missing_doc(evaluation)
        if missing:
            first = next(f for f in hits if f.code == missing[0]["code"])
            more = len(missing) - 1
    rule = by_code().get(first.code)
    subject = tuple(_subject_name(evaluation, s) for s in first.subject) if first.code != "GDR122" else first.subject
    return headline(first.code, rule.name if rule else first.severity, subject, more,
                    "missing" if word == "unknown" and not timeout and more else "")


_EFFECT_RANK = {"fail": 0, "unknown": 1, "degraded": 2}


def _lead_key(f) -> tuple:
    return (-SEVERITY_RANK[f.severity], _EFFECT_RANK.get(f.effect or "", 3), f.code)


def _subject_name(evaluation: Evaluation, subject: str) -> str:
    """A subject as the line names it: its address, except one gdrcheck made up (a matrix without bus ids),
    which is named as the input names it (GPU0, mlx5_0)."""
    d = evaluation.topo.by_bdf.get(subject)
    if d is None or address_known(d) or subject not in evaluation.snap.unplaced:
        return subject
    if d.gpu_index is not None:
        return f"GPU{d.gpu_index}"
    if d.rdma_devices:
        return d.rdma_devices[0]
    return (d.name or subject).replace(" of nvidia-smi topo -m", "")


def headline(code: str, name: str, subject, more: int, what: str = "") -> str:
    """The one way a finding heads a line (the summary line, Nagios' WARNING line): code, rule name, the
    first subject (what did not answer, for a timeout), and how many more findings there are."""
    head = f"{code} {name}"
    if code == "GDR122":  # what did not answer in time
        head += " " + ",".join(subject)
    elif subject and subject[0] not in ("host", "gdrcheck"):
        head += " " + subject[0]
    return _fit(head, f" (+{more} more{' ' + what if what else ''})" if more else "")


def _fit(text: str, tail: str = "") -> str:
    text = " ".join(text.split())
    room = SUMMARY_MAX - len(tail.encode())
    raw = text.encode()
    if len(raw) > room:
        text = raw[:room - 3].decode("utf-8", "ignore").rstrip() + "..."
    return text + tail


def missing_doc(evaluation: Evaluation) -> list[dict[str, Any]]:
    """The facts whose absence leaves the node undecided, one per finding code (a finding whose effect is
    unknown): ``code``, ``fact`` (what is missing, in words), ``settle`` (the command that shows it) and
    ``pairs`` (how many pairs wait on it). The one list the why line, stderr and the summary line count."""
    from gdrcheck.reach import FACTS
    from gdrcheck.rules.assumed_facts import KNOWN

    lib = library_word(evaluation)
    facts: dict[str, str] = {}
    settles: dict[str, Optional[str]] = {}
    for a in KNOWN:
        said = a.said_for(lib)
        for c in a.codes:  # a code two assumptions settle (GDR041: a bridge, a declared switch): the finding's
            facts.setdefault(c, said["fact"])
            settles[c] = said["settle"] if c not in settles else None
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(evaluation.findings, key=_lead_key):
        if f.effect != "unknown" or f.code == "GDR015":  # GDR015: a required answer that waits on these
            continue
        got = out.get(f.code)
        if got is None:
            fact = facts.get(f.code) or (
                FACTS.get(f.subject[0], f.subject[0]) if f.code == "GDR160" and f.subject else (f.fold or f.message))
            got = out[f.code] = {"code": f.code, "fact": fact,
                                 "settle": settles.get(f.code) or f.settle or "run gdrcheck on the node",
                                 "pairs": 0}
        got["pairs"] += len(f.pairs)
    return list(out.values())


def status_and_missing(evaluation: Evaluation, fail_on: str = "error") -> tuple[str, list[str]]:
    """The node's status word, and when it is unknown the facts that were missing."""
    word = node_status_word(evaluation, fail_on)
    if word != "unknown":
        return word, []
    if timed_out(evaluation):
        deadline = host_record(evaluation.snap, "run_deadline") or {}
        return word, [f"GDR122: the --timeout ran out before {', '.join(map(str, deadline.get('missed', ())))} "
                      "answered"]
    missing = [f"{m['code']} {m['fact']}: {m['settle']}" for m in missing_doc(evaluation)]
    return word, missing
