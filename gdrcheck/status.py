"""The one vocabulary: verdicts, severities, node statuses and exit codes, and how each follows from the others.

Every output (pairs, check in each format, the HTML report, Prometheus, fleet summarize) takes its words
from here, so the same node gets the same answer everywhere:

* a finding that moves a pair has an effect; its severity follows the effect (``fail`` is an ``error``,
  ``degraded`` a ``warning``); a finding that only informs keeps its rule's severity;
* a pair's verdict is the worst effect of its findings (``fail`` > ``unknown`` > ``degraded`` > ``ok``);
* a node is ``fail`` when a pair fails or a finding reaches ``--fail-on``, else ``unknown`` when a pair is
  unknown or a needed fact is missing, else ``pass``;
* the exit status follows from the status word and the engine that reads it (:func:`exit_status`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional


VERDICTS = ("fail", "unknown", "degraded", "ok")  # worst first
EFFECTS = VERDICTS[:3]  # how a finding moves a pair's verdict, worst first
SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
SEVERITY_OF_EFFECT = {"fail": "error", "degraded": "warning"}
STATUSES = ("pass", "fail", "unknown")
# The exit status of every run, by its status word and the engine that reads it; :func:`exit_status` is the
# one place a word becomes a number. Besides a node's pass, fail and unknown: ``usage`` (bad usage or
# unreadable input), ``interrupted`` (Ctrl-C, as a shell reports SIGINT), ``terminated`` (SIGTERM, as a shell
# reports it) and Nagios' ``warning`` (a passing node with warnings below --fail-on).
_EXIT_STATUS = {
    "contract": {"pass": 0, "fail": 1, "usage": 2, "unknown": 3, "interrupted": 130, "terminated": 143},
    # NPD treats anything but 0/1 as unknown and documents 2 for it
    "npd": {"unknown": 2, "usage": 2},
    # Nagios plugins: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; a broken invocation is UNKNOWN, not CRITICAL
    "nagios": {"warning": 1, "fail": 2, "usage": 3},
}
NAGIOS_STATES = {"pass": "OK", "warning": "WARNING", "fail": "CRITICAL", "unknown": "UNKNOWN"}
STATUS_WORDS = {"pass": "PASS", "fail": "FAIL", "unknown": "UNKNOWN"}
# a capability's answer as a gate reads it (check --require, Prometheus' gdrcheck_check_result): passed only on yes
GATE_OF_ANSWER = {"yes": "pass", "no": "fail", "partly": "fail", "not-applicable": "fail", "unknown": "unknown",
                  "not-in-input": "unknown"}
_VERDICT_RANK = {v: i for i, v in enumerate(VERDICTS)}


def exit_status(word: str, engine: str = "contract") -> int:
    """The exit status of a run whose status word is ``word``, for the engine that reads it (``nhc``, ``npd``,
    ``nagios``; any other output, text and JSON included, has the contract's)."""
    own = _EXIT_STATUS.get(engine, {})
    return own[word] if word in own else _EXIT_STATUS["contract"][word]


def severity_for(effect: Optional[str], declared: str) -> str:
    """A finding's severity: the one its effect implies, else (a finding that only informs) its rule's."""
    return SEVERITY_OF_EFFECT.get(effect or "", declared)


def worst_verdict(effects: Iterable[Optional[str]]) -> str:
    """A pair's verdict from the effects of its findings."""
    worst = "ok"
    for e in effects:
        if e and _VERDICT_RANK[e] < _VERDICT_RANK[worst]:
            worst = e
    return worst


def reaches(severity: str, fail_on: str) -> bool:
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[fail_on]


def node_status(verdicts: Iterable[str], severities: Iterable[str], fail_on: str = "error", *,
                facts_missing: bool = False) -> str:
    """``pass``, ``fail`` or ``unknown`` for a node, from its pairs' verdicts and its findings' severities."""
    verdicts = list(verdicts)
    if "fail" in verdicts or any(reaches(s, fail_on) for s in severities):
        return "fail"
    if "unknown" in verdicts or facts_missing:
        return "unknown"
    return "pass"
