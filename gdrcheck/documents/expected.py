"""The expected answer in words: what a document's ``expected_status`` rests on, and the node's forks, each in one
line. The answers themselves are decided in :mod:`gdrcheck.rules.expected`; this module only writes them."""

from __future__ import annotations

from gdrcheck.rules.assumed_facts import SETTLE_ALL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def otherwise_line(doc: dict[str, Any]) -> str:
    """The node's forks in one line: ``expected otherwise: P2P enabled on 1 pair if x86 AMD CPU and ...``."""
    parts = []
    for o in doc.get("otherwise") or ():
        (word, answer), = o["nccl"].items()
        parts.append(f"{word.upper()} {answer} on {o['pairs']} pair{'s' if o['pairs'] != 1 else ''} if {o['if']}")
    return ("expected otherwise: " + "; ".join(parts) + " (the worse answer is shown)") if parts else ""


def expected_if(doc: dict[str, Any]) -> str:
    """``expected PASS if: peer memory loaded, IOMMU off or passthrough (run gdrcheck on the node)``: what a
    document's ``expected_status`` rests on, in one line; '' where the document assumed nothing."""
    if doc.get("status") != "unknown" or not doc.get("expected_status"):
        return ""
    word = doc["expected_status"].upper()
    rests_on = expected_rests_on(doc)
    if not rests_on:
        return f"expected {word}"
    return f"expected {word} {'if' if word == 'PASS' else 'even if'}: {rests_on}"


def expected_rests_on(doc: dict[str, Any]) -> str:
    """``peer memory loaded, IOMMU off or passthrough (run gdrcheck on the node)``: the assumptions a document's
    ``expected_status`` rests on, each named once, and what settles them; '' where it rests on none."""
    if doc.get("status") != "unknown" or not doc.get("expected_status"):
        return ""
    briefs: list[str] = []
    for a in doc.get("assumes") or ():
        b = a.get("brief") or a["fact"]
        if b not in briefs:
            briefs.append(b)
    return f"{', '.join(briefs)} ({SETTLE_ALL})" if briefs else ""
