"""The question gdrcheck exists for, once per capability: will GPUDirect RDMA, GPU peer-to-peer and GPUDirect
Storage be used on this node, from the pairs NCCL (or cuFile) would actually use.

* ``gdr``: per GPU of the job, the NICs NCCL picks for it (its local NICs: the best path type, as
  ``ncclTopoGetLocal`` ranks them, v2.30.7 ``src/graph/topo.cc:1943-1971``; :meth:`pxn.Relays.local_nets`),
  and NCCL's GDR decision and the pair's verdict on them.
* ``p2p``: per pair of the job's GPUs (``CUDA_VISIBLE_DEVICES`` where the job sets it), NCCL's P2P decision and
  the pair's verdict.
* ``gds``: per GPU, its nearest NVMe drives (the best PCIe class), and whether GPUDirect Storage reaches them
  (nvidia-fs or kernel P2PDMA; GDR060/GDR062 mean cuFile's compatibility mode, through host memory).

Pure: reads an evaluation (and, for the expected answer, each pair's expected answer). Each answer is a
:class:`Capability` record with the typed cause of each count; words are composed in
:mod:`gdrcheck.documents.capabilities`.
"""

from __future__ import annotations

from gdrcheck.model import bdf_key
from gdrcheck.pair_classes import PAIR_KIND, PCIE_RANK
from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

CAPABILITIES = ("gdr", "p2p", "gds")
UNIT = {"gdr": "gpus", "p2p": "pairs", "gds": "gpus"}
_REACH = {"gdr": "nics", "gds": "nvme", "p2p": "gpus"}
# cuFile's compatibility mode: no direct path between the GPU and the drive
NO_GDS_CODES = frozenset({"GDR060", "GDR062"})

WITH, WITHOUT, UNDECIDED = "with", "without", "undecided"


@record(frozen=True)
class Unit:
    """One GPU (gdr, gds) or one GPU pair (p2p) of the job, and what the capability is there: ``state`` with,
    without or undecided; ``cause`` why (``beyond-level``, ``nccl-off``, ``fails``, ``compat-mode``,
    ``missing-facts``, ``no-choice``, ``port-down``); ``pairs`` the pairs it rests on."""

    subject: tuple[str, ...]
    state: str
    cause: str = ""
    pairs: tuple[tuple[str, str], ...] = ()


@record(frozen=True)
class Capability:
    """One capability's answer on the node (``yes``, ``partly``, ``no``, ``unknown``, ``not-applicable``,
    ``not-in-input``) and the units it rests on."""

    name: str
    answer: str
    units: tuple[Unit, ...] = ()

    def count(self, state: str) -> int:
        return sum(1 for u in self.units if u.state == state)


def answer_of(units) -> str:
    if not units:
        return "not-applicable"
    states = {u.state for u in units}
    if UNDECIDED in states:
        return "unknown"
    if states == {WITH}:
        return "yes"
    if states == {WITHOUT}:
        return "no"
    return "partly"


def job_gpus(evaluation) -> list[str]:
    """The GPUs of the job: those ``CUDA_VISIBLE_DEVICES`` names where the input says which, else every GPU."""
    whole = evaluation.whole or evaluation
    gpus = whole.topo.of_kind("gpu")
    job = getattr(whole.nccl_node, "job", None)
    if job is not None and job.gpus is not None:
        return [g for g in gpus if g in set(job.gpus)]
    return gpus


def chosen_nics(evaluation) -> dict[str, Optional[tuple[str, ...]]]:
    """Per GPU, the NICs NCCL would use for it (its local NICs); ``None`` where the input does not show the
    path types NCCL compares. Worked out once per evaluation of the node."""
    whole = evaluation.whole or evaluation
    node = whole.nccl_node
    if node is None:
        return {}
    # kept beside NCCL's view of the node: the capabilities, their expected answers and the pairs' ``chosen`` ask
    got = whole.kept.get("chosen_nics")
    if got is None or got[0] is not node:
        got = whole.kept["chosen_nics"] = (node, _chosen_nics(whole, node))
    return got[1]


def _chosen_nics(whole, node) -> dict[str, Optional[tuple[str, ...]]]:
    from gdrcheck.rules.nccl.pxn import Relays

    rl = getattr(node, "relays", None)  # the one NCCL's GPU-NIC decisions asked, its answers kept
    if not (isinstance(rl, Relays) and rl.node is node and rl.snap is whole.snap and rl.topo is whole.topo
            and rl.types is node.types):
        rl = Relays(node, whole.snap, whole.topo, whole.pairs, node.types)
    out: dict[str, Optional[tuple[str, ...]]] = {}
    for g in rl.gpus:
        nets = rl.local_nets(g)
        out[g] = tuple(nets) if nets is not None else None
    return out


def chosen_drives(evaluation) -> dict[str, Optional[tuple[str, ...]]]:
    """Per GPU, the NVMe drives nearest to it (the best PCIe class), the ones a GPUDirect Storage setup reads
    through; ``None`` where a class is undecided. Worked out once per evaluation of the node (its pairs)."""
    whole = evaluation.whole or evaluation
    got = whole.kept.get("chosen_drives")  # kept beside the pairs they were worked out from
    if got is None or got[0] is not whole.pairs:
        got = whole.kept["chosen_drives"] = (whole.pairs, _chosen_drives(whole))
    return got[1]


def _chosen_drives(whole) -> dict[str, Optional[tuple[str, ...]]]:
    by_gpu: dict[str, list[Any]] = {}
    for p in whole.pairs:
        if p.kind == "gpu-nvme":
            by_gpu.setdefault(p.a, []).append(p)
    out: dict[str, Optional[tuple[str, ...]]] = {}
    for g, pairs in by_gpu.items():
        known = [p for p in pairs if p.pcie_path in PCIE_RANK]
        best = min((PCIE_RANK[p.pcie_path] for p in known), default=None)
        # an undecided class (NODE or SYS where the input shows no NUMA node) still loses to a nearer known one
        open_best = [min((PCIE_RANK[c] for c in p.candidates if c in PCIE_RANK), default=-1)
                     for p in pairs if p.pcie_path not in PCIE_RANK]
        if best is None or any(b <= best for b in open_best):
            out[g] = None
            continue
        out[g] = tuple(p.b for p in known if PCIE_RANK[p.pcie_path] == best)
    return out


def chosen(evaluation) -> dict[tuple[str, str], Optional[bool]]:
    """``chosen`` of every GPU-NIC and GPU-NVMe pair: True where NCCL (cuFile) would use it for its GPU, False
    where another, None where undecided."""
    whole = evaluation.whole or evaluation
    nics, drives = chosen_nics(whole), chosen_drives(whole)
    out: dict[tuple[str, str], Optional[bool]] = {}
    for p in whole.pairs:
        if p.kind not in ("gpu-nic", "gpu-nvme"):
            continue
        pick = (nics if p.kind == "gpu-nic" else drives).get(p.a)
        out[(p.a, p.b)] = None if pick is None else p.b in pick
    return out


# -- one pair's state: from the pair's own answer, or from its expected answer


def _pair_state(cap: str, verdict: str, decided: Optional[str], codes, logged: bool = False) -> tuple[str, str]:
    if verdict == "fail":
        return WITHOUT, "fails"
    if cap == "gds":
        if NO_GDS_CODES & set(codes):
            return WITHOUT, "compat-mode"
        return (UNDECIDED, "missing-facts") if verdict == "unknown" else (WITH, "")
    if decided == "disabled":
        return WITHOUT, "log-off" if logged else "nccl-off"
    if decided != "enabled" or verdict == "unknown":
        return UNDECIDED, "missing-facts"
    return WITH, ""


def _fold(states: list[tuple[str, str]], any_with: bool) -> tuple[str, str]:
    """A GPU's state over the pairs it would use: with where all are (any, for an expected answer whose choice
    is open), without where none is, else undecided."""
    got = {s for s, _ in states}
    if WITH in got and (any_with or got == {WITH}):
        return WITH, ""
    if got == {WITHOUT}:
        causes = [c for _, c in states]
        return WITHOUT, max(set(causes), key=causes.index)
    return UNDECIDED, next((c for s, c in states if s == UNDECIDED), "missing-facts")


# pair kind -> the decision NCCL makes on such a pair (named as the capability is: gdr, p2p)
_WORD = {kind: cap for cap, kind in PAIR_KIND.items() if cap != "gds"}


def _own(evaluation):
    """(pair key -> (verdict, NCCL's decision, finding codes, whether the job's log settled it)) of the whole
    evaluation."""
    whole = evaluation.whole or evaluation
    views, verdicts, findings = whole.nccl_view, whole.verdicts, whole.pair_findings
    out = {}
    for p in whole.pairs:
        key = (p.a, p.b)
        word = _WORD.get(p.kind)
        if word is None:  # NCCL decides nothing on it (a GPU-NVMe pair)
            out[key] = (verdicts[key], None, findings.get(key, ()), False)
            continue
        view = views.get(key) or {}
        decided = view.get(word)
        seen = _as_seen(view, word, decided)
        out[key] = (verdicts[key], seen, findings.get(key, ()), seen != decided)
    return out


def _as_seen(view: dict, word: Optional[str], decided: Optional[str]) -> Optional[str]:
    """NCCL's decision, or where the prediction leaves it open (a fork on the CPU vendor, a path the input does
    not place) and the job's NCCL log beside the input shows what NCCL did on this pair: that."""
    seen = (view.get("observed") or {}).get(word) if word else None
    if decided not in ("enabled", "disabled") and seen in ("enabled", "disabled"):
        return seen
    return decided


def _beyond(evaluation, key) -> bool:
    """NCCL's path (every path the input leaves possible) is beyond NCCL_NET_GDR_LEVEL."""
    from gdrcheck.rules.nccl import within

    whole = evaluation.whole or evaluation
    view = whole.nccl_view.get(key) or {}
    if view.get("within_gdr_level") is False:
        return True
    cands = view.get("path_type_candidates") or ()
    st = whole.settings
    return view.get("path_type") is None and bool(cands) and \
        all(within(t, st.gdr_level, st.version) is False for t in cands)


def _units(cap: str, evaluation, said, expected: bool) -> tuple[Unit, ...]:
    """The capability's units, each pair's answer taken from ``said`` (key -> (verdict, decision, codes))."""
    whole = evaluation.whole or evaluation
    gpus = job_gpus(whole)
    if cap == "p2p":
        job = set(gpus)
        out = []
        for p in whole.pairs:
            if p.kind == "gpu-gpu" and p.a in job and p.b in job:
                state, cause = _pair_state(cap, *said[(p.a, p.b)])
                out.append(Unit((p.a, p.b), state, cause, ((p.a, p.b),)))
        return tuple(out)
    picks = chosen_nics(whole) if cap == "gdr" else chosen_drives(whole)
    ends = whole.topo.gpudirect_nics() if cap == "gdr" else whole.topo.of_kind("nvme")
    if not ends:
        return ()
    units = []
    for g in gpus:
        pick = picks.get(g)
        keys = tuple((g, e) for e in (pick if pick is not None else ends) if (g, e) in said)
        if not keys:
            continue
        states = [_pair_state(cap, *said[k]) for k in keys]
        state, cause = _fold(states, pick is None and expected)
        if state == UNDECIDED and all(s != UNDECIDED for s, _ in states):
            cause = "no-choice"  # which of them NCCL picks is open, and they differ
        if cap == "gdr" and cause == "nccl-off" and all(_beyond(whole, k) for k in keys):
            cause = "beyond-level"
        if cap == "gdr" and state == WITHOUT and cause in ("nccl-off", "beyond-level") and \
                all(nic_ports_down(whole, k[1]) for k in keys):
            cause = "port-down"  # the NIC is not listed at all: first of what stands in the way
        units.append(Unit((g,), state, cause, keys))
    return tuple(units)


def nic_ports_down(evaluation, nic: str) -> str:
    """The NIC's RDMA ports, where the input shows every one and none is ACTIVE (NCCL's IB transport lists only
    ACTIVE ports, v2.30.7 ``net_ib/init.cc:363``); else ''."""
    from gdrcheck.rules.nccl.ib import ports_down

    whole = evaluation.whole or evaluation
    d = whole.topo.by_bdf.get(nic)
    return ports_down(whole.snap, tuple(d.rdma_devices)) if d is not None and d.rdma_devices else ""


def _not_shown(cap: str, evaluation) -> bool:
    from gdrcheck.reach import shows

    whole = evaluation.whole or evaluation
    return not shows(whole.snap, _REACH[cap])


def devices_unknown(evaluation) -> bool:
    """What the node's devices are is not known: the PCI tree was not read (GDR123), or functions the input
    names by address only may be GPUs, NICs or drives (GDR124). Nothing to use is then not nothing there."""
    from gdrcheck.rules.facts import blank_functions

    whole = evaluation.whole or evaluation
    return any(c.name == "sysfs-pci" and c.status != "ok" for c in whole.snap.collectors) \
        or bool(blank_functions(whole.topo))


def answers(evaluation, own=None) -> dict[str, Capability]:
    """Each capability's answer from the pairs' own answers (``own``: :func:`_own` of the evaluation, where the
    caller made it)."""
    said = own if own is not None else _own(evaluation)
    unknown_devices = devices_unknown(evaluation)
    out = {}
    for cap in CAPABILITIES:
        if _not_shown(cap, evaluation):
            out[cap] = Capability(cap, "not-in-input")
            continue
        units = _units(cap, evaluation, said, False)
        out[cap] = Capability(cap, "unknown" if not units and unknown_devices else answer_of(units), units)
    return out


def answers_and_expected(evaluation, pair_expected: dict[tuple[str, str], dict[str, Any]]) -> tuple[
        dict[str, Capability], dict[str, Capability]]:
    """:func:`answers` and :func:`expected_answers`, the pairs' own answers and the capabilities' own units read
    once for both."""
    own = _own(evaluation)
    got = answers(evaluation, own)
    return got, expected_answers(evaluation, pair_expected, own, got)


def expected_answers(evaluation, pair_expected: dict[tuple[str, str], dict[str, Any]], own=None,
                     answered: Optional[dict[str, Capability]] = None) -> dict[str, Capability]:
    """Each capability's expected answer, from each pair's expected answer (never ``unknown``); ``own`` and
    ``answered``: :func:`_own` and :func:`answers` of the evaluation, where the caller made them."""
    whole = evaluation.whole or evaluation
    if own is None:
        own = _own(whole)
    said = {}
    for key, (verdict, decided, codes, logged) in own.items():
        e = pair_expected.get(key)
        if e is None or logged:  # nothing assumed, or what NCCL did is in the job's log
            said[key] = (e["verdict"] if e is not None else verdict, decided, codes, logged)
            continue
        nccl = e.get("nccl") or {}
        word = next(iter(nccl), None)
        said[key] = (e["verdict"], nccl.get(word) if word else None, codes, False)
    out = {}
    for cap in CAPABILITIES:
        if _not_shown(cap, whole):
            out[cap] = Capability(cap, "not-in-input")
            continue
        units = answered[cap].units if answered is not None else _units(cap, whole, own, False)
        own_open = {u.subject for u in units if u.state == UNDECIDED}
        units = tuple(_worse(u, u.subject in own_open) for u in _units(cap, whole, said, True))
        out[cap] = Capability(cap, "not-in-input" if not units and devices_unknown(whole) else answer_of(units),
                              units)
    return out


def _worse(u: Unit, was_open: bool) -> Unit:
    """An expected unit: an open one taken as without (the worse answer); one NCCL turned off only on the
    expected answer's open choices says so (``assumed-off``)."""
    if u.state == UNDECIDED or (u.state == WITHOUT and was_open and u.cause == "nccl-off"):
        return Unit(u.subject, WITHOUT, "assumed-off", u.pairs)
    return u


def sorted_subjects(units, state: str) -> list[str]:
    return sorted({s for u in units if u.state == state for s in u.subject}, key=bdf_key)
