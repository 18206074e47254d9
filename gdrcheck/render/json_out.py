"""JSON output: stable bytes (sorted keys), nothing else on stdout."""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Any, Dict


def render_json(doc: Dict[str, Any], pretty: bool = False) -> str:
    """Compact (C encoder, fast) for pipes and files; indented when a person reads a terminal."""
    if pretty:
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
