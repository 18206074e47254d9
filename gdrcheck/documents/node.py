"""The documents of one evaluated node, built once, for the outputs that show several at a time
(the HTML page, Prometheus metrics)."""

from __future__ import annotations

from gdrcheck.documents.bar1 import bar1_doc
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.documents.rules import rules_part
from gdrcheck.documents.topology import topology_doc
from gdrcheck.rules.decisions import library_word

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def node_documents(evaluation, fail_on: str = "error", *, pairs: Optional[dict[str, Any]] = None,
                   describe_input: bool = False) -> dict[str, dict[str, Any]]:
    """``pairs`` (given: the pairs a gate judges), ``topology``, ``bar1`` and the ``rules`` of the findings."""
    return {"pairs": pairs if pairs is not None else pairs_doc(evaluation, fail_on),
            "topology": topology_doc(evaluation.topo, describe_input=describe_input),
            "bar1": bar1_doc(evaluation.snap, evaluation.topo, evaluation.findings, fail_on),
            "rules": rules_part((f.code for f in evaluation.findings), library_word(evaluation))}
