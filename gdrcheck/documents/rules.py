"""The ``rules`` part a page shows beside its findings: each code's rule as ``gdrcheck rules --json``
gives it, so that renderers read documents, never the registry."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable


def rules_part(codes: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """``{code: rule document}`` for the codes given that the registry knows."""
    from gdrcheck.rules import by_code

    rules = by_code()
    return {c: rules[c].to_doc() for c in sorted(set(codes)) if c in rules}
