"""The one explicit registry of rules, in code order."""

from __future__ import annotations

from gdrcheck.rules.base import Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Tuple

# Each family module exports CHECKS: a tuple of (Rule, check function or None).
# A rule with check None is evaluated by the family's other checks (it only names findings).
_FAMILIES: Tuple[str, ...] = (
    "gdrcheck.rules.topology_rules",
    "gdrcheck.rules.peermem",
    "gdrcheck.rules.acs_iommu",
    "gdrcheck.rules.nvme_gds",
    "gdrcheck.rules.link_nic",
    "gdrcheck.rules.bar1",
    "gdrcheck.rules.facts",
    "gdrcheck.rules.reach_rules",
    "gdrcheck.rules.requirements",
    "gdrcheck.rules.probe_rules",
    "gdrcheck.rules.nccl_log",
    "gdrcheck.rules.fabric",
    "gdrcheck.rules.gds_modules",
    "gdrcheck.rules.gpu_gdr",
    "gdrcheck.rules.nccl_ip",
)


def _load() -> List[Tuple[Rule, object]]:
    import importlib

    out: List[Tuple[Rule, object]] = []
    for mod in _FAMILIES:
        out.extend(importlib.import_module(mod).CHECKS)
    out.sort(key=lambda rc: rc[0].code)
    return out


_CACHE: List[Tuple[Rule, object]] = []


def registry() -> List[Tuple[Rule, object]]:
    if not _CACHE:
        _CACHE.extend(_load())
    return _CACHE


def all_rules() -> List[Rule]:
    return [r for r, _ in registry()]


def by_code() -> Dict[str, Rule]:
    return {r.code: r for r in all_rules()}
