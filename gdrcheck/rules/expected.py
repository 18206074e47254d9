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

import struct

from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.model import Fact, NvLink, address_on_node, frozen_map
from gdrcheck.pair_classes import PAIR_KIND
from gdrcheck.record import record, replace
from gdrcheck.rules.nccl.decision import Decision
from gdrcheck.status import worst_verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


@record(frozen=True)
class Assumption:
    """One fact taken at its GPUDirect-ready value: what it is, the value assumed, the command that settles it.
    ``codes``: the findings (effect unknown) it settles; ``needs``: the codes of the needs
    (:class:`gdrcheck.rules.nccl.decision.Need`) an NCCL decision that rests on it names."""

    key: str
    fact: str
    assumed: str
    settle: str
    codes: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    brief: str = ""  # how a one-line verdict names it ("peer memory loaded")
    rccl: tuple[tuple[str, str], ...] = ()  # on a node RCCL judges (AMD GPUs): the fields said in its terms

    def said_for(self, library: str) -> dict[str, str]:
        """fact, assumed, settle and brief for a node judged by ``library`` (``NCCL`` or ``RCCL``)."""
        doc = {"fact": self.fact, "assumed": self.assumed, "settle": self.settle, "brief": self.brief}
        if library == "RCCL":
            doc.update(self.rccl)
        return doc

    def settle_for(self, library: str) -> str:
        return self.said_for(library)["settle"]

    def to_doc(self, library: str = "NCCL") -> dict[str, str]:
        return self.said_for(library)


PEER_MEMORY = Assumption(
    "peer_memory", "peer memory", "nvidia_peermem loaded (or DMA-BUF usable)",
    "lsmod | grep nvidia_peermem; ls /sys/kernel/mm/memory_peers (or run gdrcheck on the node)",
    ("GDR021",), ("nic.peer_memory",), brief="peer memory loaded")
IOMMU = Assumption(
    "iommu", "IOMMU", "off or passthrough",
    "cat /proc/cmdline; cat /sys/kernel/iommu_groups/*/type (identity = passthrough)", ("GDR043",),
    brief="IOMMU off or passthrough")
ACS = Assumption(
    "acs", "ACS redirect", "off on the path's bridges",
    "sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'", ("GDR041",), brief="ACS redirect off")
P2P_STATUS = Assumption(
    "p2p_status", "driver P2P status", "OK (read and write)",
    "nvidia-smi topo -p2p r; nvidia-smi topo -p2p w", ("GDR008",), ("p2p.nvml_status", "p2p.nvlink", "gdr.pxn_nvlink"),
    brief="driver P2P status OK")
# a decision that rests on whether NVLink joins two GPUs: between the pair (P2P), or between the GPU and the
# NIC's relay GPU (PXN); NCCL then checks the driver's P2P status across that NVLink (paths.cc, p2p.cc)
_NVLINK_NEEDS = ("p2p.nvlink", "gdr.pxn_nvlink")
_XGMI_SETTLE = "amd-smi topology, or rocm-smi --showtopo (link type XGMI)"
NVLINK = Assumption(
    "nvlink", "NVLink", "present between every two of these GPUs: the part decides it (H100/H200/B200/GB200 SXM "
    "and A100 SXM4 GPUs sit on NVLink boards, 4-GPU all-to-all or NVSwitch; MI300-class OAM on xGMI; gdrcheck's "
    "table of all-to-all parts, _ALL_TO_ALL in gdrcheck/rules/expected.py, over the models of "
    "gdrcheck/device_models.py)",
    "nvidia-smi topo -m; nvidia-smi nvlink -s", ("GDR009",), _NVLINK_NEEDS, brief="NVLink between the SXM/OAM GPUs",
    rccl=(("fact", "xGMI"), ("assumed", "present between every two of these GPUs: the part decides it (MI300-class "
          "OAM on xGMI; gdrcheck's table of all-to-all parts, _ALL_TO_ALL in gdrcheck/rules/expected.py)"),
          ("settle", _XGMI_SETTLE), ("brief", "xGMI between the OAM GPUs")))
NVLINK_OPEN = Assumption(
    "nvlink_open", "NVLink", "not assumed: these GPUs' NVLinks may join only some pairs (a V100/P100 SXM2 "
    "hybrid cube mesh, or a model the input does not name); each pair is taken over PCIe, the worse answer",
    "nvidia-smi topo -m; nvidia-smi nvlink -s", ("GDR009",), _NVLINK_NEEDS,
    brief="no NVLink assumed (the input does not show which pairs it joins)",
    rccl=(("fact", "xGMI"), ("assumed", "not assumed: these GPUs' xGMI links may join only some pairs; each pair "
          "is taken over PCIe, the worse answer"), ("settle", _XGMI_SETTLE),
          ("brief", "no xGMI assumed (the input does not show which pairs it joins)")))
NUMA = Assumption(
    "numa", "NUMA node", "the undecided pairs on different NUMA nodes (SYS: the worse answer)",
    "nvidia-smi topo -m, or cat /sys/bus/pci/devices/<bdf>/numa_node", ("GDR004",),
    ("gdr.path_class",), brief="undecided NUMA nodes taken as different (SYS)",
    rccl=(("settle", "cat /sys/bus/pci/devices/<bdf>/numa_node, or amd-smi topology (NUMA column)"),))
JOB = Assumption(
    "job", "the job's GPUs", "the job uses every GPU of the node",
    "CUDA_VISIBLE_DEVICES of the job (gdrcheck --env CUDA_VISIBLE_DEVICES=...)", (),
    ("gdr.pxn_rank", "p2p.nvb_rank", "p2p.with", "p2p.host_with"), brief="the job uses every GPU",
    rccl=(("settle", "HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES of the job "
           "(gdrcheck --env CUDA_VISIBLE_DEVICES=... with the job's list)"),))
ACS_DECLARED = Assumption(
    "acs_declared", "ACS redirect", "off on the host's switch behind a switch the input declares",
    "ask the provider: the switch has no address on the node (no lspci, no setpci)", ("GDR041",),
    brief="ACS redirect off on the host's switches")
NVIDIA_FS = Assumption(
    "nvidia_fs", "GPUDirect Storage", "nvidia-fs loaded", "lsmod | grep nvidia_fs; gdscheck -p", ("GDR063",),
    brief="nvidia-fs loaded")

_REACH_BRIEF = {"nics": "RDMA NICs beside the GPUs (NICs are not in this input)",
                "nvme": "NVMe drives as GPUDirect Storage needs them (not in this input)"}
KNOWN = (PEER_MEMORY, IOMMU, ACS, ACS_DECLARED, P2P_STATUS, NVLINK, NVLINK_OPEN, NUMA, JOB, NVIDIA_FS)
SETTLE_ALL = "run gdrcheck on the node"

# parts whose GPUs are all joined to each other (NVSwitch, or all-to-all NVLink/xGMI on their boards); a V100
# or P100 SXM2 board (DGX-1, NDv2) is a hybrid cube mesh, an MI250X board joins some pairs by one link, others
# by two, or none
_ALL_TO_ALL = ("V100 SXM3", "A100", "A800", "H100", "H800", "H200 SXM", "GH200", "B200", "B100", "GB200", "B300",
               "GB300", "MI300", "MI325", "MI350", "MI355", "sm_80", "sm_90", "sm_100")


def all_to_all(part: str) -> bool:
    """Whether every two GPUs of this part (as :func:`gdrcheck.device_models.nvlink_part` names it) are joined."""
    return any(word in part for word in _ALL_TO_ALL)


# typical NVLink count between two GPUs of an NVSwitch system, by model (what nvidia-smi topo -m prints)
_NV_COUNT = (("H100", 18), ("H200", 18), ("H800", 8), ("GH200", 18), ("B200", 18), ("B100", 18), ("GB200", 18),
             ("A100", 12), ("A800", 8), ("V100 SXM3", 6), ("V100", 2), ("P100", 1), ("sm_90", 18), ("sm_100", 18),
             ("sm_80", 12), ("sm_70", 2))


@record
class Expected:
    """The expected answers of one evaluation: per pair ``{verdict, path, nccl, assumes}``, and the node's."""

    pairs: dict[tuple[str, str], dict[str, Any]]
    status: str  # pass or fail
    assumes: list[dict[str, Any]]  # each assumption once, with how many pairs rest on it


def _acs_off_config(config: Optional[bytes]) -> bytes:
    """The function's config space as read, extended to 4 KiB with one ACS capability whose Control is 0."""
    head = (config or b"")[:0x100]
    head = head + bytes(0x100 - len(head))
    ext = struct.pack("<IHH", 0x000D | (1 << 16), 0, 0)  # ACS, version 1, last in the list; Capability, Control 0
    return head + ext + bytes(0x1000 - 0x100 - len(ext))


def _nv_count(part: str) -> int:
    for word, n in _NV_COUNT:
        if word in part:
            return n
    return 1


def assumed_facts(evaluation) -> tuple[Any, Any, tuple[Assumption, ...]]:
    """(a copy of the snapshot with the facts it lacks filled in, the options to judge it with, the assumptions
    made)."""
    snap, topo = evaluation.snap, evaluation.topo
    made: list[Assumption] = []
    changes: dict[str, Any] = {"host": frozen_map(_host_filled(snap, topo, made)),
                               "devices": _acs_filled(snap, topo, made)}
    gpus = topo.of_kind("gpu")
    status, filled = dict(snap.p2p_status), False
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            for cap in ("read", "write"):
                if (a, b, cap) not in status and (b, a, cap) not in status:
                    status[(a, b, cap)], filled = "OK", True
    made.extend((P2P_STATUS,) if filled else ())
    changes["p2p_status"] = frozen_map(status)
    links = _links_filled(snap, topo, gpus, made)
    if links or NVLINK_OPEN in made:  # the pairs without an assumed link are taken over PCIe
        changes["nvlinks"] = tuple(snap.nvlinks) + tuple(links)
        changes["shows_nvlink"] = True
    open_roots = [r for r in snap.roots if snap.root_numa.get(r) is None]
    if any(p.pcie_path is None and set(p.candidates) == {"NODE", "SYS"} for p in evaluation.pairs) and open_roots:
        numa = dict(snap.root_numa)
        used = {n for n in numa.values() if n is not None} | {d.numa_node for d in snap.devices
                                                               if d.numa_node is not None}
        nxt = max(used, default=-1) + 1
        for r in open_roots:
            numa[r] = nxt
            nxt += 1
        changes["root_numa"] = frozen_map(numa)
        changes["numa_known"] = True
        made.append(NUMA)
    options = evaluation.options
    if len(gpus) > 1 and getattr(evaluation.nccl_node, "job_gpus", None) is None:
        options = replace(options, job_gpus=len(gpus))
        made.append(JOB)
    return replace(snap, **changes), options, tuple(made)


def _host_filled(snap, topo, made: list[Assumption]) -> dict[str, Any]:
    """The host facts with peer memory, the IOMMU mode and nvidia-fs filled where the input lacks them."""
    from gdrcheck.collectors.host_peermem import ALL_NCCL_PEERMEM_FILES

    host = dict(snap.host)
    pm = host_record(snap, "peermem")
    if not (pm is not None and isinstance(pm.get("nccl_files"), dict)):
        host["peermem"] = Fact({"nvidia_peermem_loaded": True, "nv_peer_mem_loaded": False,
                                "nccl_files": {f: True for f in ALL_NCCL_PEERMEM_FILES}}, source="assumed")
        made.append(PEER_MEMORY)
    per_dev = dict(host_record(snap, "iommu_devices") or {})
    missing = [d.bdf for d in snap.devices if per_dev.get(d.bdf) in (None, "unknown")]
    if missing:
        per_dev.update({b: "off" for b in missing})
        host["iommu_devices"] = Fact(per_dev, source="assumed")
        made.append(IOMMU)
    nvfs = host_fact(snap, "nvidia_fs")
    if topo.of_kind("nvme") and (nvfs is None or nvfs.value is None):
        host["nvidia_fs"] = Fact({"loaded": True}, source="assumed")
        made.append(NVIDIA_FS)
    return host


def _acs_filled(snap, topo, made: list[Assumption]) -> tuple[Any, ...]:
    """The functions, each bridge whose ACS the input cannot show given an ACS capability with Control 0."""
    devices = list(snap.devices)
    for i, d in enumerate(devices):
        if d.is_bridge and topo.device_kind.get(d.bdf) != "gpu" and not topo.acs(d.bdf).known:
            devices[i] = replace(d, config=_acs_off_config(d.config))
            which = ACS if address_on_node(d) else ACS_DECLARED
            if which not in made:
                made.append(which)
    return tuple(devices)


def _links_filled(snap, topo, gpus, made: list[Assumption]) -> list[NvLink]:
    """NVLink where the input cannot show it and both GPUs are parts whose GPUs are all joined (NVSwitch, or
    all-to-all xGMI); a part whose links may join only some pairs (a V100/P100 SXM2 hybrid cube mesh, a model
    the input does not name) gets no link, and the assumption says so."""
    from gdrcheck.device_models import link_word

    links: list[NvLink] = []
    parts = {g: _part(topo.by_bdf[g]) for g in gpus}  # each GPU's part, asked once (not once per pair)
    joined = {g: all_to_all(part) for g, part in parts.items()}
    for i, a in enumerate(gpus):
        xgmi = link_word(topo.by_bdf[a]) == "xGMI"
        for b in gpus[i + 1:]:
            if topo.nvlink_unseen(a, b):
                if joined[a] and joined[b]:
                    links.append(NvLink(a, b, 1 if xgmi else _nv_count(parts[a]),
                                        source="xgmi" if xgmi else "assumed"))
                elif NVLINK_OPEN not in made:
                    made.append(NVLINK_OPEN)
    if links:
        made.append(NVLINK)
    return links


def _part(d) -> str:
    """The part as the input names it: the NVLink part's word (``SXM5`` where an lspci name gives only that),
    the model the device id names, and the name itself (``GH100 [H100 SXM5 80GB]``)."""
    from gdrcheck.device_models import gpu_model, nvlink_part

    part = nvlink_part(d) or ""
    if not part or part.startswith("GPUs of a model"):
        return part
    return " ".join(x for x in (part, gpu_model(d) or "", d.name or "") if x)


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
