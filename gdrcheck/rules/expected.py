"""The answer an expert gives from an input that does not show everything: each pair's verdict and NCCL's
decision with every fact the input does not show taken at the value a node set up for GPUDirect has.

Pure: the rules are not repeated here. The facts are frozen records, so the facts the input lacks are filled
into a copy (peer memory usable, IOMMU off, ACS redirect off, the driver's P2P status OK, NVLink between
SXM/OAM parts, the job using every GPU of the node, each undecided NUMA node on its own node, which is the
worse answer) and :func:`gdrcheck.rules.engine.evaluate` runs again on the copy. Nothing is assumed against
evidence the input carries: only a fact that is missing is filled. What still stays open after that (a finding
no assumption settles) is left out of the expected verdict and listed as assumed with what settles it; an NCCL
decision that still rests on the job is taken as ``disabled``, the worse answer.

An assumption never changes ``status`` or the exit status: :mod:`gdrcheck.documents.pairs` writes the answer
beside the pair's own, as ``expected``; :mod:`gdrcheck.documents.expected` says it in words.
"""

from __future__ import annotations

from gdrcheck.pair_classes import PAIR_KIND
from gdrcheck.record import record
from gdrcheck.rules.assumed_facts import _REACH_BRIEF, JOB, KNOWN, SETTLE_ALL, Assumption, assumed_facts
from gdrcheck.rules.nccl.decision import Decision
from gdrcheck.status import worst_verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


@record
class Expected:
    """The expected answers of one evaluation: per pair ``{verdict, path, nccl, assumes}``, and the node's."""

    pairs: dict[tuple[str, str], dict[str, Any]]
    status: str  # pass or fail
    assumes: list[dict[str, Any]]  # each assumption once, with how many pairs rest on it


def _word(kind: str) -> Optional[str]:
    return "gdr" if kind == "gpu-nic" else "p2p" if kind == "gpu-gpu" else None


def _own(evaluation, pair) -> dict[str, Any]:
    word = _word(pair.kind)
    return {"verdict": evaluation.verdicts[(pair.a, pair.b)], "path": pair.path,
            "nccl": {word: _decided(evaluation, pair, word)} if word else {}, "assumes": []}


def _decided(evaluation, pair, word: str) -> Any:
    """NCCL's (or RCCL's) answer for the pair: ``enabled``, ``disabled`` or ``unknown``."""
    record = evaluation.nccl_view.get((pair.a, pair.b))
    if isinstance(record, Decision):
        return record.value
    from gdrcheck.rules.decisions import nccl_decision

    return nccl_decision(evaluation, pair).get(word)


def _unknown_codes(evaluation) -> dict[tuple[str, str], list[Any]]:
    out: dict[tuple[str, str], list[Any]] = {}
    for f in evaluation.findings:
        if f.effect == "unknown":
            for k in f.pairs:
                out.setdefault(k, []).append(f)
    return out


def _needs(evaluation, pair) -> frozenset[str]:
    """The codes of what NCCL's (or RCCL's) decision for the pair rests on and the input does not show."""
    record = evaluation.nccl_view.get((pair.a, pair.b))
    return frozenset(n.code for n in record.needs) if isinstance(record, Decision) and record.needs else frozenset()


def _said(view: dict[str, Any]) -> str:
    return " ".join([str(view.get("reason") or "")] + [str(d) for d in view.get("depends_on") or ()])


def reevaluated(whole, memo: Optional[dict[str, Any]] = None) -> tuple[Any, tuple[Assumption, ...]]:
    """(the node's evaluation on its facts with every fact it lacks filled in, the assumptions made): computed
    once per ``memo`` (a gate and its node share one). Where nothing was assumed the facts are the input's own,
    and so is the evaluation: ``whole`` itself."""
    from gdrcheck.rules.engine import evaluate

    if memo is not None and "again" in memo:
        return memo["again"], memo["made"]
    snap2, options2, made = assumed_facts(whole)
    again = evaluate(snap2, options2, whole.topo) if made else whole
    if memo is not None:
        memo["again"], memo["made"] = again, made
    return again, made


def expected(evaluation, fail_on: str = "error", memo: Optional[dict[str, Any]] = None) -> Expected:
    """Each pair's expected answer (the pairs of ``evaluation``; the node's facts are judged whole). ``memo``:
    where a gate and its node both ask, the node's second evaluation is made once (:func:`reevaluated`)."""
    from gdrcheck.rules.engine import restrict

    whole = evaluation.whole or evaluation
    before = _unknown_codes(evaluation)
    open_pairs = [p for p in evaluation.pairs
                  if (p.a, p.b) in before or evaluation.verdicts[(p.a, p.b)] == "unknown"
                  or (_word(p.kind) and _decided(evaluation, p, _word(p.kind)) == "unknown")]
    out: dict[tuple[str, str], dict[str, Any]] = {(p.a, p.b): _own(evaluation, p) for p in evaluation.pairs}
    # what no pair settles; a required capability's open answer (GDR015) rests on the pairs' assumptions
    node_open = [f for f in evaluation.findings if f.effect == "unknown" and not f.pairs and f.code != "GDR015"]
    if not open_pairs and not node_open:
        return Expected(out, _status(evaluation, out, fail_on), [])
    again, made = reevaluated(whole, memo)
    if evaluation.whole is not None:  # a gate restricted to some capabilities: the same restriction
        kinds = {p.kind for p in evaluation.pairs}
        caps = [c for c, k in PAIR_KIND.items() if k in kinds]
        again = restrict(again, caps, required=False)
    after = _unknown_codes(again)
    effects_of: dict[tuple[str, str], list[str]] = {}  # pair -> the effects of its findings, once for all pairs
    for f in again.findings:
        if f.effect is not None and f.effect != "unknown":
            for k in f.pairs:
                effects_of.setdefault(k, []).append(f.effect)
    by_key = {(p.a, p.b): p for p in again.pairs}
    seen = (before, after, effects_of)
    made_of: dict[tuple, dict[str, Any]] = {}  # what an answer is made of -> the answer (pairs share it)
    for p in open_pairs:
        q = by_key.get((p.a, p.b))
        if q is None:
            continue
        parts = _parts(evaluation, again, p, seen, out[(p.a, p.b)])
        got = made_of.get(parts) if parts is not None else None
        if got is None:
            got = _pair_expected(evaluation, again, p, q, seen, made, out[(p.a, p.b)])
            if parts is not None:
                made_of[parts] = got
        elif got["path"] != q.path:
            got = dict(got, path=q.path)
        out[(p.a, p.b)] = got
    status = _status(evaluation, out, fail_on)
    if status == "pass" and _finding_fails(again, fail_on):
        status = "fail"
    node = _node_assumes(out)
    for f in node_open:  # what no assumption settles and concerns no pair (a timeout, functions of no kind)
        if f.effect == "unknown" and not f.pairs:
            brief = _REACH_BRIEF.get(f.subject[0], "") if f.code == "GDR160" else ""
            node.append(dict(_not_in_the_way(f), **({"brief": brief} if brief else {}), pairs=0))
    return Expected(out, status, node)


def _parts(evaluation, again, p, seen, own: dict[str, Any]) -> Optional[tuple]:
    """What one open pair's expected answer is made of: its kind, its verdicts before and after, the findings
    that concern it, and NCCL's decision records before and after (records that share one set of causes and
    needs are one). Two pairs made of the same parts have the same answer but for the path; None where a part
    is the pair's own (a job's log observed the pair)."""
    key = (p.a, p.b)
    before, after, effects_of = seen
    parts: tuple = (p.kind, own["verdict"], again.verdicts[key], tuple(effects_of.get(key, ())),
                    frozenset(f.code for f in before.get(key, ())), tuple(map(id, after.get(key, ()))))
    word = _word(p.kind)
    if word is None:
        return parts
    mine, theirs = evaluation.nccl_view.get(key), again.nccl_view.get(key)
    if not (isinstance(mine, Decision) and isinstance(theirs, Decision)) or "observed" in mine.facts:
        return None
    alts = tuple((a[word], a["if"]) for a in theirs.get("alternatives") or ())
    # the words of the decision after are read only where it stays open without a fork
    words = _content(theirs) if theirs.value not in ("enabled", "disabled") and not alts else None
    return parts + (mine.value, _needs(evaluation, p) if mine.value == "unknown" else None, theirs.value, alts,
                    words)


def _content(d: Decision) -> Any:
    """A decision's causes and needs with their parameters, as a key (where every parameter can be hashed;
    else the record itself), made once per shared record."""
    root = d.shared()
    got = root.__dict__.get("_content")
    if got is None:
        try:
            got = tuple((c.code, tuple(c.params.items())) for c in root.causes + root.needs)
            hash(got)
        except TypeError:  # a parameter that is a list, a mapping or a record
            got = ("record", id(root))
        root.__dict__["_content"] = got  # a cache of the key, not a field (as the words are)
    return got


def expected_status(evaluation, ex: Expected, capabilities, fail_on: str = "error") -> str:
    """The node's expected status: ``fail`` where the node fails, a pair is expected to, or a required
    capability whose answer is open (GDR015) is expected no, partly or not-applicable (``capabilities``:
    :func:`gdrcheck.rules.capabilities.expected_answers`); else ``pass``."""
    from gdrcheck.rules.decisions import node_status_word

    if node_status_word(evaluation, fail_on) == "fail":
        return "fail"
    required_open = {f.subject[0] for f in evaluation.findings if f.code == "GDR015"}
    if any(capabilities[c].answer != "yes" for c in required_open):
        return "fail"
    return ex.status


def _pair_expected(evaluation, again, p, q, seen, made, own: dict[str, Any]) -> dict[str, Any]:
    """One open pair's expected answer: ``q``, the pair judged again on the filled facts; ``seen``: (the open
    findings before, those after, each pair's effects after); ``own``: the pair's own answer."""
    from gdrcheck.rules.decisions import library_word, nccl_decision

    before, after, effects_of = seen
    key = (p.a, p.b)
    lib = library_word(evaluation)
    word = _word(p.kind)
    own_view = nccl_decision(evaluation, p)
    view = nccl_decision(again, q)
    assumes: list[dict[str, str]] = []
    codes = {f.code for f in before.get(key, ())}
    open_decision = bool(word) and own_view.get(word) == "unknown"
    needs = _needs(evaluation, p) if open_decision else frozenset()
    # where NCCL's default P2P level forks on the job's GPU count (and the CPU), an open GPU-GPU decision rests
    # on the job whatever step it stopped at: the level is asked once the path is known
    job_level = open_decision and p.kind == "gpu-gpu" and evaluation.settings.p2p_check_level is None
    for a in made:
        if codes & set(a.codes) or needs & set(a.needs) or (a is JOB and job_level):
            assumes.append(a.to_doc(lib))
    verdict = again.verdicts[key]
    if verdict == "unknown":
        verdict = worst_verdict(effects_of.get(key, ()))
        assumes.extend(_not_in_the_way(f) for f in after.get(key, ()))
    nccl: dict[str, Any] = {}
    otherwise: dict[str, Any] = {}
    if word:
        decided = view.get(word)
        fork = _fork(view, own_view.get("observed"), word, lib)
        if decided not in ("enabled", "disabled") and fork is not None:
            decided, otherwise, settled = fork
            if settled:
                assumes.append(settled)
        elif decided not in ("enabled", "disabled"):
            decided = "disabled"
            assumes.append({"fact": f"{lib}'s decision: {_said(view).strip() or 'not shown by the input'}",
                            "assumed": f"{lib} does not use it (the worse answer)", "settle": SETTLE_ALL,
                            "brief": f"{lib}'s open choices taken as off"})
        nccl = {word: decided}
    if not assumes and made:  # NCCL's answer moved with an assumption its words do not name
        if verdict != own["verdict"] or nccl != own["nccl"]:
            assumes = [a.to_doc(lib) for a in made]
    out = {"verdict": verdict, "path": q.path, "nccl": nccl, "assumes": _unique(assumes)}
    if otherwise:
        out["otherwise"] = otherwise
    return out


CPU_SETTLE = "lscpu | grep 'Vendor ID' (or run gdrcheck on the node); the job's GPU count: CUDA_VISIBLE_DEVICES"
_CPU_SETTLE_RCCL = ("lscpu | grep 'Vendor ID' (or run gdrcheck on the node); the job's GPU count: "
                    "HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES")


def _fork(view: dict[str, Any], observed, word: str, lib: str = "NCCL"):
    """A decision that forks on a fact of the hardware or the job the input does not show (NCCL's default P2P
    level: the CPU vendor and the job's GPU count): (the worse answer, ``otherwise`` with the other answer and
    its condition, None); where a job's NCCL log beside the input shows what NCCL did on this pair, that answer,
    no ``otherwise``, and the assumption that the log settled it. None where the decision does not fork."""
    alts = view.get("alternatives") or ()
    if not alts:
        return None
    seen = (observed or {}).get(word)
    if seen in ("enabled", "disabled"):
        cond = "; ".join(a["if"] for a in alts if a[word] == seen)
        return seen, {}, {"fact": "CPU vendor and the job's GPUs", "assumed": f"{cond}: the job's {lib} log beside "
                          f"the input shows {lib}'s {word.upper()} {seen} on this pair ({observed.get('transport')})",
                          "settle": _CPU_SETTLE_RCCL if lib == "RCCL" else CPU_SETTLE,
                          "brief": f"the fork settled by the job's {lib} log ({cond})"}
    worse = "disabled"
    better = [a["if"] for a in alts if a[word] != worse]
    return worse, {"nccl": {word: "enabled"}, "if": " or ".join(better)}, None


def _not_in_the_way(f) -> dict[str, str]:
    """A finding no assumption settles, taken as no obstacle: said in words (the rule's title), not by code."""
    from gdrcheck.rules import by_code

    rule = by_code().get(f.code)
    title = rule.title if rule is not None else f.code
    return {"fact": f"{f.fold or f.message} ({f.code})", "assumed": "no obstacle", "settle": f.settle or SETTLE_ALL,
            "brief": f"no obstacle where {title[0].lower()}{title[1:]}"}


def _finding_fails(evaluation, fail_on: str) -> bool:
    from gdrcheck.status import SEVERITY_RANK

    return any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on] for f in evaluation.findings)


def _unique(items: list[dict[str, str]]) -> list[dict[str, str]]:
    seen, out = set(), []
    for i in items:
        k = (i["fact"], i["assumed"])
        if k not in seen:
            seen.add(k)
            out.append(i)
    return out


def _status(evaluation, out, fail_on: str) -> str:
    """``fail`` where the node fails or a pair's expected verdict does, else ``pass``."""
    from gdrcheck.rules.decisions import node_status_word

    if node_status_word(evaluation, fail_on) == "fail":
        return "fail"
    return "fail" if any(e["verdict"] == "fail" for e in out.values()) else "pass"


def _node_assumes(out) -> list[dict[str, Any]]:
    counts: dict[tuple[str, str, str, str], int] = {}
    for e in out.values():
        for a in e["assumes"]:
            k = (a["fact"], a["assumed"], a["settle"], a.get("brief", ""))
            counts[k] = counts.get(k, 0) + 1
    order = {said["brief"]: i for i, a in enumerate(KNOWN) for said in (a.said_for("NCCL"), a.said_for("RCCL"))}
    keys = sorted(counts, key=lambda k: (order.get(k[3], len(order)), k[3]))
    return [{"fact": f, "assumed": v, "settle": s, "brief": b, "pairs": counts[(f, v, s, b)]} for f, v, s, b in keys]
