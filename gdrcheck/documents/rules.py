"""The ``rules`` part a page shows beside its findings: each code's rule as ``gdrcheck rules --json``
gives it, so that renderers read documents, never the registry."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def rules_part(codes: Iterable[str], library: str = "NCCL") -> dict[str, dict[str, Any]]:
    """``{code: rule document}`` for the codes given that the registry knows; ``library``: whose rules judged
    the node (``RCCL``: the rules in RCCL's words)."""
    from gdrcheck.rules import by_code

    rules = by_code()
    return {c: rules[c].to_doc(library) for c in sorted(set(codes)) if c in rules}
