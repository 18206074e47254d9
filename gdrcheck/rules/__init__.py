"""The one explicit registry of rules, in code order."""

from __future__ import annotations

from gdrcheck.rules.base import Rule

# Each family module exports CHECKS: a tuple of (Rule, check function or None).
# A rule with check None is evaluated by the family's other checks (it only names findings).
_FAMILIES: tuple[str, ...] = (
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
    "gdrcheck.rules.rccl_rules",
)


def _load() -> list[tuple[Rule, object]]:
    import importlib

    out: list[tuple[Rule, object]] = []
    for mod in _FAMILIES:
        out.extend(importlib.import_module(mod).CHECKS)
    out.sort(key=lambda rc: rc[0].code)
    return out


_CACHE: list[tuple[Rule, object]] = []


def registry() -> list[tuple[Rule, object]]:
    if not _CACHE:
        _CACHE.extend(_load())
    return _CACHE


def all_rules() -> list[Rule]:
    return [r for r, _ in registry()]


def by_code() -> dict[str, Rule]:
    return {r.code: r for r in all_rules()}
