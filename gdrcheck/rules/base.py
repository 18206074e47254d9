"""What a rule is, what a finding is, and what a check sees.

A rule is declarative: stable code (``GDR`` + number, never reused), kebab-case
name, severity, scope, title, rationale, remediation with the exact command,
and whether it is one of NCCL's own conditions or an addition of gdrcheck's.
A check is a pure function of the :class:`Context`; it yields findings.
"""

from __future__ import annotations

from functools import cached_property

from gdrcheck.record import field, record
from gdrcheck.status import EFFECTS, SEVERITIES  # noqa: F401 - the one vocabulary, re-exported for rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, Callable, Optional

    from gdrcheck.rules.nccl.core import Version
    Check = Callable[["Context"], Iterable["Finding"]]

SCOPES = ("host", "device", "pair")
# where a rule comes from, in the words every output uses
ORIGIN_WORDS = {"nccl": "NCCL's rule", "rccl": "RCCL's rule", "nvidia-docs": "NVIDIA's documented requirement",
                "kernel": "the Linux kernel's rule", "gdrcheck": "gdrcheck's own check"}
ORIGINS = tuple(ORIGIN_WORDS)


@record(frozen=True)
class Rule:
    code: str
    name: str
    severity: str
    scope: str
    title: str
    rationale: str
    remediation: str
    origin: str = "gdrcheck"
    pair_kinds: tuple[str, ...] = ()  # for pair rules: which of gpu-gpu, gpu-nic, gpu-nvme
    vm_remediation: str = ""  # the fix inside a virtual machine, where the guest cannot move cards or set ACS
    rccl_title: str = ""  # one of NCCL's conditions that RCCL keeps: the title in RCCL's words, for AMD nodes
    rccl_remediation: str = ""  # and its fix in RCCL's words
    rccl_rationale: str = ""  # and why it matters, in RCCL's words

    def title_for(self, library: str) -> str:
        """The title for a node judged by ``library`` (``NCCL`` or ``RCCL``)."""
        return self.rccl_title if library == "RCCL" and self.rccl_title else self.title

    def origin_for(self, library: str) -> str:
        """Where the rule comes from, in words: NCCL's conditions are RCCL's on a node RCCL judges."""
        return ORIGIN_WORDS["rccl" if library == "RCCL" and self.origin == "nccl" else self.origin]

    def fix(self, virtual: bool, library: str = "NCCL") -> str:
        if virtual and self.vm_remediation:
            return self.vm_remediation
        return self.rccl_remediation if library == "RCCL" and self.rccl_remediation else self.remediation

    def to_doc(self, library: str = "NCCL") -> dict[str, Any]:
        """The rule as documents carry it; ``library`` ``RCCL``: for a node RCCL judges, in RCCL's words."""
        rccl = library == "RCCL"
        return {
            "code": self.code, "name": self.name, "severity": self.severity, "scope": self.scope,
            "title": self.title_for(library),
            "rationale": self.rccl_rationale if rccl and self.rccl_rationale else self.rationale,
            "remediation": self.fix(False, library),
            "origin": "rccl" if rccl and self.origin == "nccl" else self.origin,
            "nccl_rule": self.origin == "nccl", "pair_kinds": list(self.pair_kinds),
            **({"vm_remediation": self.vm_remediation} if self.vm_remediation else {}),
        }


@record(frozen=True)
class Finding:
    """One thing a rule found.

    ``subject``: the addresses or host facility it concerns. ``pairs``: the
    (a, b) pairs whose verdict it moves, and ``effect`` how (fail, unknown,
    degraded, or None for a finding that does not move verdicts). ``fold``: for
    a finding about one pair, what it says without naming the pair, shared by
    every pair it would say it of; findings that repeat for many pairs become
    one that names the first and lists them all (``gdrcheck.rules.engine.fold_repeats``),
    and every count counts it as the findings it stands for (``weight``).
    """

    code: str
    severity: str
    subject: tuple[str, ...]
    message: str
    pairs: tuple[tuple[str, str], ...] = ()
    effect: Optional[str] = None
    evidence: str = ""
    settle: str = ""  # for unknowns: what would settle it
    fold: str = ""

    @property
    def weight(self) -> int:
        """How many findings this one stands for: a finding folded from per-pair ones, one per pair."""
        return len(self.pairs) if self.fold and len(self.pairs) > 1 else 1

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"code": self.code, "severity": self.severity, "subject": list(self.subject),
                               "message": self.message}
        if self.weight > 1:
            doc["folded"] = self.weight
        if self.effect:
            doc["effect"] = self.effect
        if self.evidence:
            doc["evidence"] = self.evidence
        if self.settle:
            doc["settle"] = self.settle
        if self.pairs:
            doc["pairs"] = list(map(list, self.pairs))
        return doc


def folded_suffix(n: int) -> str:
    """What a finding folded from ``n`` per-pair ones adds to the first one's message."""
    return f" (and {n - 1} more pair{'s' if n > 2 else ''} like it)"


@record(frozen=True)
class Options:
    """Settings that change how facts are judged."""

    nccl_version: Optional[Version] = None  # --nccl-version; None: the newest found, else the newest known
    min_bar1_bytes: int = 1 << 30
    bar1_used_max_pct: float = 90.0
    env: Mapping[str, str] = field(default_factory=dict)  # NCCL_* from the environment
    job_gpus: Optional[int] = None  # how many of the node's GPUs the job's communicator holds, where known


@record(frozen=True)
class PairInfo:
    """A pair of interest and what topology says of it (filled by the evaluator)."""

    a: str
    b: str
    kind: str  # gpu-gpu, gpu-nic, gpu-nvme
    pcie_path: Optional[str]
    path: Optional[str]
    candidates: tuple[str, ...]
    bridges: tuple[str, ...]  # bridges on the path (through the lowest common bridge)
    nvlinks: Optional[int] = None
    nvlink_unknown: str = ""  # GPU-GPU: why NVLink may join the pair although the input cannot show it


@record(frozen=True)
class Context:
    """What every check sees: the snapshot, its topology, the pairs and the options."""

    snap: Any  # gdrcheck.model.Snapshot
    topo: Any  # gdrcheck.pcie.topology.Topology
    pairs: tuple[PairInfo, ...]
    options: Options = Options()
    nccl: Any = None  # gdrcheck.rules.nccl.NcclSettings in force
    nccl_view: Mapping[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @cached_property
    def _by_kind(self) -> dict[str, tuple[PairInfo, ...]]:
        got: dict[str, list[PairInfo]] = {}
        for p in self.pairs:
            got.setdefault(p.kind, []).append(p)
        return {k: tuple(v) for k, v in got.items()}

    @cached_property
    def _by_dev(self) -> dict[str, tuple[PairInfo, ...]]:
        index: dict[str, list[PairInfo]] = {}
        for p in self.pairs:
            index.setdefault(p.a, []).append(p)
            index.setdefault(p.b, []).append(p)
        return {k: tuple(v) for k, v in index.items()}

    def pairs_of(self, *kinds: str) -> tuple[PairInfo, ...]:
        if len(kinds) == 1:
            return self._by_kind.get(kinds[0], ())
        return tuple(p for p in self.pairs if p.kind in kinds)

    def pairs_with(self, bdf: str) -> tuple[PairInfo, ...]:
        """Every pair one of whose ends is ``bdf`` (indexed once: no per-device scans)."""
        return self._by_dev.get(bdf, ())

    def gpu_bdfs(self) -> tuple[str, ...]:
        return tuple(self.topo.of_kind("gpu"))
