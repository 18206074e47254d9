"""JSON output: stable bytes (sorted keys), nothing else on stdout."""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Any, Dict


def render_json(doc: Dict[str, Any], pretty: bool = False) -> str:
    """Compact (C encoder, fast) for pipes and files; indented when a person reads a terminal. A document is a
    tree (built fresh by gdrcheck.documents; parts may be shared, never contain themselves), so the encoder's
    cycle check, a lookup per object of a large fabric's tens of thousands, is left out."""
    if pretty:
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, check_circular=False) + "\n"
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), check_circular=False) + "\n"
