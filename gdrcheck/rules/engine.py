"""From the facts to an evaluation: pairs, NCCL's view, findings and verdicts.

Pure: reads the snapshot only. The verdict of a pair is the worst effect of the
findings that concern it (fail > unknown > degraded), ``ok`` when none does.
"""

from __future__ import annotations

from gdrcheck.model import Snapshot, bdf_key
from gdrcheck.pair_classes import PAIR_KIND
from gdrcheck.pcie.topology import Topology
from gdrcheck.record import field, record, replace
from gdrcheck.rules import nccl
from gdrcheck.rules.base import Context, Finding, Options, PairInfo, folded_suffix
from gdrcheck.rules.nccl.decision import Decision
from gdrcheck.status import severity_for, worst_verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Optional


@record
class Evaluation:
    """What the rules made of one node's facts: pairs, NCCL's view, findings, verdicts (documents are built
    from it in gdrcheck.documents)."""

    snap: Snapshot
    topo: Topology
    options: Options
    settings: nccl.NcclSettings
    pairs: tuple[PairInfo, ...]
    findings: list[Finding]
    verdicts: dict[tuple[str, str], str] = field(default_factory=dict)
    pair_findings: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    nccl_view: dict[tuple[str, str], dict] = field(default_factory=dict)
    whole: Optional[Evaluation] = None  # for an evaluation restricted to some pair kinds: the node's full evaluation
    nccl_node: Any = None  # gdrcheck.rules.nccl.node.NodeNccl: NCCL's view of the node at the version judged
    nic_side: tuple[Optional[bool], str] = (None, "")  # NCCL's NIC-side GDR flag for this node, and why
    reconciled: Optional[dict[str, Any]] = None  # a job's NCCL log held to the prediction (rules.nccl_log)
    # answers worked out once for this evaluation and asked by several stages (rules.capabilities: the GPUs'
    # chosen NICs and drives), each beside what it was worked out from
    kept: dict[str, Any] = field(default_factory=dict)




def restrict(evaluation: Evaluation, capabilities, required: bool = True) -> Evaluation:
    """The evaluation as far as ``capabilities`` (gdr, p2p, gds) go: their pairs, and the findings that
    concern those pairs or no pair at all (BAR1, host facts). ``required``: a capability that nothing on
    the node could satisfy is an error finding (GDR011-013); a node without a GPU always is (GDR010)."""
    from gdrcheck.rules.requirements import unmet
    kinds = {PAIR_KIND[c] for c in capabilities}
    pairs = tuple(p for p in evaluation.pairs if p.kind in kinds)
    keep = {(p.a, p.b) for p in pairs}
    findings = []
    for f in evaluation.findings:
        if not f.pairs:
            findings.append(f)
            continue
        mine = tuple(k for k in f.pairs if k in keep)
        if mine:
            findings.append(replace(f, pairs=mine))
    findings = unmet(evaluation.topo, capabilities if required else ()) + findings
    if required:  # a capability asked for is passed only where it is used (rules.capabilities)
        from gdrcheck.rules.requirements import unsatisfied

        findings = unsatisfied(evaluation, capabilities) + findings
    return Evaluation(snap=evaluation.snap, topo=evaluation.topo, options=evaluation.options,
                      settings=evaluation.settings, pairs=pairs, findings=findings,
                      verdicts={k: v for k, v in evaluation.verdicts.items() if k in keep},
                      pair_findings={k: v for k, v in evaluation.pair_findings.items() if k in keep},
                      nccl_view={k: v for k, v in evaluation.nccl_view.items() if k in keep},
                      whole=evaluation.whole or evaluation, nccl_node=evaluation.nccl_node,
                      nic_side=evaluation.nic_side, reconciled=evaluation.reconciled)


def build_pairs(topo: Topology) -> tuple[PairInfo, ...]:
    gpus = topo.of_kind("gpu")
    nics = topo.gpudirect_nics()
    nvmes = topo.of_kind("nvme")
    out: list[PairInfo] = []

    pcie_class, path_bridges = topo.pcie_class, topo.path_bridges

    def gpu_pair(a: str, b: str) -> PairInfo:
        cls, cands = pcie_class(a, b)
        nvl = topo.nvlink_count(a, b)
        path = f"{topo.link_word(a, b)}{nvl}" if nvl else cls
        return PairInfo(a, b, "gpu-gpu", cls, path, tuple(cands), path_bridges(a, b), nvl, topo.nvlink_unseen(a, b))

    made = topo.class_tables.get("endpoint_pairs")  # (a, b, kind) -> the pair: its class and path alone decide it
    if made is None:
        made = topo.class_tables["endpoint_pairs"] = {}

    def endpoint_pair(a: str, b: str, kind: str) -> PairInfo:
        got = made.get((a, b, kind))
        if got is None:
            cls, cands = pcie_class(a, b)
            got = made[(a, b, kind)] = PairInfo(a, b, kind, cls, cls, tuple(cands), path_bridges(a, b))
        return got

    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            out.append(gpu_pair(a, b))
    for a in gpus:
        for b in nics:
            out.append(endpoint_pair(a, b, "gpu-nic"))
        for b in nvmes:
            out.append(endpoint_pair(a, b, "gpu-nvme"))
    return tuple(out)


def evaluate(snap: Snapshot, options: Optional[Options] = None, pcie_of: Optional[Topology] = None) -> Evaluation:
    """``pcie_of``: the topology of an evaluation of the same node's facts before some were filled in
    (:func:`gdrcheck.rules.expected.reevaluated`), whose tables of the PCIe tree carry over where they hold."""
    from gdrcheck.rules import registry

    options = options or Options()
    from gdrcheck.rules.nccl_log_settle import settled

    snap = settled(snap, options.env)  # what a job's NCCL log settles (its GPUs; P2P status of pairs joined by P2P)
    topo = Topology(snap, pcie_of)
    pairs = build_pairs(topo)
    node = nccl_node(snap, topo, pairs, options)
    st = node.st
    evaluation = Evaluation(snap=snap, topo=topo, options=options, settings=st, pairs=pairs, findings=[],
                            nccl_node=node)
    for pair in pairs:
        evaluation.nccl_view[(pair.a, pair.b)] = nccl_pair_view(topo, pair, st, node)
    from gdrcheck.rules.nccl_log import reconcile

    evaluation.reconciled = reconcile(snap, topo, pairs, evaluation.nccl_view, node,  # what a job's NCCL log shows
                                      dict(options.env))
    ctx = Context(snap=snap, topo=topo, pairs=pairs, options=options, nccl=st, nccl_view=evaluation.nccl_view)
    from gdrcheck.rules.peermem import nic_gdr

    evaluation.nic_side = nic_gdr(ctx)
    for _rule, check in registry():
        if check is None:
            continue
        for f in check(ctx):
            sev = severity_for(f.effect if f.pairs else None, f.severity)
            evaluation.findings.append(f if sev == f.severity else replace(f, severity=sev))
    subject_keys: dict[str, tuple[int, ...]] = {}  # subject -> its sort key (an address's numeric key, else zeros)

    def subject_key(s: str) -> tuple[int, ...]:
        got = subject_keys.get(s)
        if got is None:
            got = subject_keys[s] = bdf_key(s) if s.count(":") == 2 else (0, 0, 0, 0)
        return got

    evaluation.findings.sort(key=lambda f: (f.code, [subject_key(s) for s in f.subject], f.subject, f.message))
    by_pair: dict[tuple[str, str], list[tuple[str, Optional[str]]]] = {}  # pair -> (code, effect) of its findings
    for f in evaluation.findings:
        said = (f.code, f.effect)
        for key in f.pairs:
            by_pair.setdefault(key, []).append(said)
    # pairs whose findings have the same codes and effects share one verdict and one list of codes
    judged: dict[tuple, tuple[str, list[str]]] = {}
    for pair in pairs:
        key = (pair.a, pair.b)
        said = tuple(by_pair.get(key, ()))
        got = judged.get(said)
        if got is None:
            got = judged[said] = (worst_verdict(e for _c, e in said), sorted({c for c, _e in said}))
        evaluation.verdicts[key], evaluation.pair_findings[key] = got
    evaluation.findings = fold_repeats(evaluation.findings, {(p.a, p.b): p.kind for p in pairs})
    return evaluation


FOLD_OVER = 8  # a code said of more pairs than this (what a text listing shows one by one) is folded


def fold_repeats(findings: list[Finding], kinds: dict[tuple[str, str], str]) -> list[Finding]:
    """Per-pair findings that say the same thing (code, severity, effect, what settles it, the message without
    the pair, and the kind of pair) become one finding where the first of them stood: its message is the
    first one's, with how many more pairs say the same, its ``pairs`` all of them. Only a code said of more than
    FOLD_OVER pairs is folded, all of its groups alike: on a large fabric, thousands of lines that differ
    only in the pair they name. ``kinds``: pair -> gpu-gpu, gpu-nic, gpu-nvme (a group never mixes kinds,
    so restricting an evaluation to some kinds keeps or drops a folded finding whole)."""
    per_code: dict[tuple[str, str], int] = {}  # (code, severity) -> how many foldable findings
    groups: dict[tuple, list[int]] = {}  # what a foldable finding says -> where such findings stand
    for i, f in enumerate(findings):
        if f.fold and len(f.pairs) == 1 and tuple(f.subject) == f.pairs[0]:
            per_code[(f.code, f.severity)] = per_code.get((f.code, f.severity), 0) + 1
            groups.setdefault((f.code, f.severity, f.effect, f.settle, f.fold, kinds.get(f.pairs[0])), []).append(i)
    if not any(n > FOLD_OVER for n in per_code.values()):
        return findings
    big = {idx[0]: idx for key, idx in groups.items() if per_code[key[:2]] > FOLD_OVER and len(idx) > 1}
    drop = {i for idx in big.values() for i in idx[1:]}
    out: list[Finding] = []
    for i, f in enumerate(findings):
        if i in drop:
            continue
        if i in big:
            members = [findings[j] for j in big[i]]
            first = set(f.subject)
            rest = sorted({s for m in members[1:] for s in m.subject} - first, key=bdf_key)
            f = replace(f, subject=tuple(f.subject) + tuple(rest), pairs=tuple(m.pairs[0] for m in members),
                        message=f.message + folded_suffix(len(members)))
        out.append(f)
    return out


def nccl_node(snap: Snapshot, topo: Topology, pairs, options: Options, version: Optional[str] = None):
    """NCCL's view of the node: the version judged (``--nccl-version``, else the newest found), its settings
    and every pair's decision (``gdrcheck.rules.nccl.node``)."""
    from gdrcheck.rules.nccl import node as nccl_node_mod
    from gdrcheck.rules.nccl.versions import choose_version, versions_found
    from gdrcheck.rules.nccl_log import job_options

    found = versions_found(snap)
    options, job_version, job_why = job_options(snap, options, version)  # a job's NCCL log: its version, settings
    from gdrcheck.rules.rccl.releases import node_reason

    why_rccl = node_reason(snap, topo)
    if why_rccl is not None:  # AMD GPUs or RCCL's input: RCCL's rules, never NCCL's (docs/rccl.md)
        from gdrcheck.rules.rccl import node as rccl_node_mod
        from gdrcheck.rules.rccl.releases import log_release

        logged, logged_why = log_release(snap)
        asked = version or logged or options.nccl_version
        asked_why = logged_why if logged and asked == logged else "--nccl-version" if asked else ""
        return rccl_node_mod.build(snap, topo, pairs, options, asked, asked_why, [], why_rccl)
    v, why = choose_version(version or job_version or options.nccl_version, found)
    return nccl_node_mod.build(snap, topo, pairs, options, v, job_why if job_version else why, found)


def nccl_pair_view(topo: Topology, pair: PairInfo, st: nccl.NcclSettings, node=None) -> Mapping[str, Any]:
    """NCCL's path type for the pair, its level check, and NCCL's decision (``gdr`` / ``p2p``)."""
    key = (pair.a, pair.b)
    known = node.types.get(key) if node is not None else None
    if known is None:
        from gdrcheck.rules.nccl.paths import pair_type

        known = pair_type(topo, pair, st.version, st)
    t, cands, flat, via = known
    view: dict = {"path_type": t}
    if cands:
        view["path_type_candidates"] = list(cands)
    if flat:
        view["broadcom_flattened"] = True
    if via:
        view["nvb_via"] = via
    decided = None
    if pair.kind == "gpu-nic":
        view["gdr_level"] = st.gdr_level
        view["within_gdr_level"] = nccl.within(t, st.gdr_level, st.version)
        decided = node.gdr_view.get(key) if node is not None else None
        if decided is not None:
            view.update(decided.facts if isinstance(decided, Decision) else decided)
            distance, via = decided.get("distance"), decided.get("via")
            if distance and not via:  # after NCCL's C2C rewrite (PXN is the job's)
                view["within_gdr_level"] = nccl.within(distance, view["gdr_level"], st.version)
    elif pair.kind == "gpu-gpu":
        view["p2p_level"] = st.p2p_level
        view["within_p2p_level"] = nccl.within(t, st.p2p_check_level, st.version)
        decided = node.p2p_view.get(key) if node is not None else None
        if decided is not None:
            view.update(decided.facts if isinstance(decided, Decision) else decided)
    # the decision record, with the path facts beside it; a pair NCCL does not decide keeps the facts alone
    return decided.beside(view) if isinstance(decided, Decision) else view


def other_versions(evaluation: Evaluation) -> list[dict[str, Any]]:
    """For each other NCCL version found on the node: the pairs it would decide differently."""
    node = evaluation.nccl_node
    seen = {node.version}
    out: list[dict[str, Any]] = []
    for e in node.versions_found:
        try:
            v = nccl.parse_version(str(e["version"]))
        except ValueError:
            continue
        if v in seen:
            continue
        seen.add(v)
        other = nccl_node(evaluation.snap, evaluation.topo, evaluation.pairs, evaluation.options,
                          version=str(e["version"]))
        differ = []
        for key, view in list(node.gdr_view.items()) + list(node.p2p_view.items()):
            ov = other.gdr_view.get(key) or other.p2p_view.get(key) or {}
            word = "gdr" if "gdr" in view else "p2p"
            if ov.get(word) != view.get(word):
                differ.append({"a": key[0], "b": key[1], word: ov.get(word), "reason": ov.get("reason")})
        out.append({"version": str(e["version"]), "where": e.get("where"), "pairs_that_differ": differ})
    return out
