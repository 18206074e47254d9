"""The document's ``capabilities``: the answers :mod:`gdrcheck.rules.capabilities` decided, in words.

Words only: every answer, count and cause is the rules'; this module names the GPUs, the level and the facts
that are missing (with the command that settles each)."""

from __future__ import annotations

from gdrcheck.documents.decision_words import first_clause
from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.rules.capabilities import CAPABILITIES, UNDECIDED, UNIT, WITH, WITHOUT
from gdrcheck.rules.decisions import library_word
from gdrcheck.rules.nccl.decision import Decision

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TITLES = {"gdr": "GPUDirect RDMA", "p2p": "GPU P2P", "gds": "GPUDirect Storage"}
_NONE = {"gdr": "no RDMA NIC in this input", "p2p": "fewer than two GPUs in the job",
         "gds": "no NVMe drive in this input"}
_NOT_SHOWN = {"gdr": "this input cannot show NICs", "p2p": "this input cannot show GPUs",
              "gds": "this input cannot show NVMe drives"}
NAMES_SHOWN = 4


def _names(subjects, labels) -> str:
    names = [labels.get(s, s) for s in subjects]
    if len(names) > NAMES_SHOWN:
        return ", ".join(names[:NAMES_SHOWN]) + f" and {len(names) - NAMES_SHOWN} more"
    return ", ".join(names)


def _unit_names(units, labels) -> str:
    subjects = dict.fromkeys("-".join(labels.get(x, x) for x in u.subject) for u in units)  # each once, in order
    return _names(list(subjects), {})


def missing_facts(evaluation, pairs) -> list[tuple[str, str]]:
    """The facts whose absence leaves ``pairs`` undecided: (what, the command that settles it), each once."""
    from gdrcheck.rules.assumed_facts import KNOWN, SETTLE_ALL

    whole = evaluation.whole or evaluation
    keys = set(pairs)
    by_code = {c: a for a in KNOWN for c in a.codes}
    lib = library_word(evaluation)
    out: list[tuple[str, str]] = []
    for f in whole.findings:
        if f.effect != "unknown" or keys.isdisjoint(f.pairs):
            continue
        a = by_code.get(f.code)
        item = (a.said_for(lib)["fact"], a.settle_for(lib)) if a is not None else \
            (f"{f.fold or f.message} ({f.code})", f.settle or SETTLE_ALL)
        if item not in out:
            out.append(item)
    return out


def _cause_words(cause: str, evaluation, keys, every: bool) -> str:
    whole = evaluation.whole or evaluation
    lib = library_word(evaluation)
    if cause == "beyond-level":
        return f"{'every path is' if every else 'path'} beyond NCCL_NET_GDR_LEVEL={whole.settings.gdr_level}"
    if cause == "fails":
        codes = sorted({c for k in keys for c in whole.pair_findings.get(k, ()) if whole.verdicts.get(k) == "fail"})
        return "the pair fails" + (f" ({', '.join(codes[:3])})" if codes else "")
    if cause == "port-down":
        from gdrcheck.rules.capabilities import nic_ports_down

        down = list(dict.fromkeys(nic_ports_down(whole, k[1]) for k in keys))
        return (f"no RDMA port is ACTIVE ({', '.join(down)}): NCCL's IB transport lists only ACTIVE ports "
                f"(v2.30.7 net_ib/init.cc:363), so it uses {'none of these NICs' if len(down) > 1 else 'no such NIC'}")
    if cause == "log-off":
        return f"the job's {lib} log shows {lib} did not use it"
    if cause == "compat-mode":
        return "cuFile falls back to its compatibility mode (through host memory)"
    if cause == "assumed-off":
        return f"{lib}'s decision rests on facts not in this input and is taken as off (the worse answer)"
    if cause == "no-choice":
        return f"which NIC {lib} picks is not shown (path types undecided)"
    view = whole.nccl_view.get(keys[0]) if keys else None
    if isinstance(view, Decision):  # the record's first clause, composed from its first cause
        reason = first_clause(view)
    else:  # the words the rules gave a pair NCCL decides nothing on (a NIC it would not enumerate)
        reason = str((view or {}).get("reason") or "")
    return f"{lib} does not use it: " + (reason or f"{lib}'s rule")


def _open_words(evaluation, units) -> str:
    """Why units are undecided: the facts not in this input (each once), else NCCL's open choice."""
    keys = [k for u in units for k in u.pairs]
    facts = missing_facts(evaluation, keys)
    words = [f"not in this input: {', '.join(f for f, _ in facts)}"] if facts else []
    if any(u.cause == "no-choice" for u in units):
        words.append(_cause_words("no-choice", evaluation, keys, False))
    if not words:
        words.append(f"{library_word(evaluation)}'s decision rests on facts not in this input")
    return "; ".join(words)


def _closed_words(evaluation, units, every: bool) -> str:
    causes: list[str] = []
    down = [k for u in units if u.cause == "port-down" for k in u.pairs]  # every NIC's ports in one clause
    for u in units:
        keys = down if u.cause == "port-down" else list(u.pairs)
        words = _cause_words(u.cause, evaluation, keys, every)
        if words not in causes:
            causes.append(words)
    return "; ".join(causes)


_WHAT = {"gdr": "between each GPU and the NIC {lib} would use for it", "p2p": "between the job's GPUs",
         "gds": "between each GPU and its nearest NVMe drive"}
_NO = {"gdr": "{lib} uses it with no GPU's NIC", "p2p": "{lib} connects no pair of the job's GPUs by P2P",
       "gds": "no GPU reaches its NVMe drive directly"}
_UNIT_WORD = {"gpus": "GPUs", "pairs": "pairs"}


def _why(cap: str, c, evaluation, labels, unit: str) -> str:
    if c.answer == "not-in-input":
        return _NOT_SHOWN[cap]
    if c.answer == "not-applicable":
        return _NONE[cap]
    if not c.units:  # the devices themselves are not known (functions named by address only, no PCI tree)
        return "what the node's PCI functions are is not in this input: " + _NONE[cap].replace("no ", "no known ", 1)
    total, word = len(c.units), _UNIT_WORD[unit]
    used = [u for u in c.units if u.state == WITH]
    not_used = [u for u in c.units if u.state == WITHOUT]
    open_ = [u for u in c.units if u.state == UNDECIDED]
    if c.answer == "yes":
        what = _WHAT[cap].format(lib=library_word(evaluation))
        return f"used {what}: " + (f"all {total} {word}" if total > 1 else f"the one {word[:-1]}")
    if c.answer == "no":
        return f"{_NO[cap].format(lib=library_word(evaluation))}: {_closed_words(evaluation, not_used, True)}"
    parts = []
    if open_:
        parts.append(f"undecided for {len(open_)} of {total} {word} ({_unit_names(open_, labels)}): "
                     f"{_open_words(evaluation, open_)}")
    if used:
        parts.append(f"used for {len(used)} ({_unit_names(used, labels)})" if open_ else
                     f"used for {len(used)} of {total} {word} ({_unit_names(used, labels)})")
    if not_used:
        parts.append(f"not for {len(not_used)} ({_unit_names(not_used, labels)}): "
                     f"{_closed_words(evaluation, not_used, False)}")
    return "; ".join(parts)


def _measured(cap: str, evaluation) -> str:
    """A GDS measurement beside the input (gdsio's XferType GPUD runs), cited with its source: what ran, never an
    answer (gdsio's -d is CUDA's device index; with cuFile's compatibility mode on, GPUD may go through host
    memory, so the compat setting gdscheck -p shows is named beside it)."""
    whole = evaluation.whole or evaluation
    f = host_fact(whole.snap, "gds_measured") if cap == "gds" else None
    measured = host_record(whole.snap, "gds_measured") if f is not None else None
    runs = [r for r in (measured.get("runs") or ()) if r.get("xfer") == "GPUD"] if measured is not None else []
    if not runs:
        return ""
    devs = sorted({r["gpu"] for r in runs if r.get("gpu") is not None})
    rates = [r["gib_s"] for r in runs]
    said = (f"; measured: gdsio ran XferType GPUD {len(runs)} time(s)"
            + (f" on CUDA device(s) {', '.join(str(d) for d in devs)}" if devs else "")
            + f", {min(rates):.1f}-{max(rates):.1f} GiB/s ({f.source})")
    pd = host_fact(whole.snap, "peerdirect")
    compat = (host_record(whole.snap, "peerdirect") or {}).get("use_compat_mode")
    if compat is not None:
        said += f", with cuFile's use_compat_mode {str(compat).lower()} ({pd.source})"
    return said


def capabilities_doc(evaluation, answers, expected, labels) -> dict[str, Any]:
    """``capabilities``: per capability its answer, expected answer, counts and why (``labels``: address ->
    GPU0, NIC1, as the document names its devices)."""
    out: dict[str, Any] = {}
    for cap in CAPABILITIES:
        c, e = answers[cap], expected[cap]
        unit = UNIT[cap]
        entry: dict[str, Any] = {"answer": c.answer, "expected": e.answer, unit: len(c.units),
                                 "with": c.count(WITH), "without": c.count(WITHOUT), "undecided": c.count(UNDECIDED),
                                 "why": _why(cap, c, evaluation, labels, unit) + _measured(cap, evaluation)}
        if not c.units and c.answer in ("not-in-input", "unknown"):  # nothing counted: not a count of 0
            entry.update({unit: None, "with": None, "without": None, "undecided": None})
        if e.answer != c.answer:
            entry["expected_why"] = _why(cap, e, evaluation, labels, unit)
        out[cap] = entry
    return out


def capability_brief(doc: dict[str, Any]) -> str:
    """The three answers in one line, for the first line of a node's text (``GPUDirect RDMA no, GPU P2P
    unknown (expected yes), GPUDirect Storage not-applicable``); '' where the document has none."""
    caps = doc.get("capabilities") or {}
    parts = []
    for cap in CAPABILITIES:
        c = caps.get(cap)
        if c:
            said = f"{TITLES[cap]} {c['answer']}"
            parts.append(said + (f" (expected {c['expected']})" if c["expected"] != c["answer"] else ""))
    return ", ".join(parts)


def capability_lines(doc: dict[str, Any]) -> list[str]:
    """The three answers in words, one line each, as every text view of a node leads with them."""
    caps = doc.get("capabilities") or {}
    lines = []
    for cap in CAPABILITIES:
        c = caps.get(cap)
        if not c:
            continue
        head = f"{TITLES[cap]}: {c['answer']}"
        if c["expected"] != c["answer"]:
            head += f" (expected {c['expected']})"
        lines.append(f"{head} - {c['why']}")
    return lines
