"""The report's header and host table where they read the pairs document: the three answers, the CPU as NCCL's
view has it, a virtual machine a finding saw."""

from __future__ import annotations

from html import escape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def capabilities(pairs) -> str:
    """The three answers, in words, under the verdict."""
    from gdrcheck.documents.capabilities import capability_lines

    lines = capability_lines(pairs)
    return ('<ul class="capabilities">' + "".join(f"<li>{escape(x)}</li>" for x in lines) + "</ul>") if lines else ""


def cpu_of_pairs(pairs) -> str:
    """The CPU as NCCL's view of the node has it (from the root complexes' names, an NCCL file), where the host
    facts do not say."""
    cpu = (pairs.get("nccl") or {}).get("cpu") or {}
    if cpu.get("kind"):
        return escape(str(cpu["kind"])) + (f' <span class="why">({escape(str(cpu["source"]))})</span>'
                                           if cpu.get("source") else "")
    return '<span class="unknown">not known</span>'


def virtual(facts, pairs, cell: str) -> str:
    """``cell`` (the host facts' yes/no) where they say; else yes where a finding saw a hypervisor's devices
    (GDR121)."""
    if (facts.get("virtual") or {}).get("value") is None:
        seen = next((f for f in pairs.get("findings") or () if f.get("code") == "GDR121"), None)
        if seen is not None:
            return f'yes <span class="why">(GDR121: {escape(str(seen.get("message", "")))})</span>'
    return cell


def amd_peer(n: dict[str, Any]) -> str:
    """RCCL's peer memory (the amdkfd client), as the pairs document says it."""
    pm = n.get("peer_memory") or {}
    said = {True: "amdkfd peer-memory client registered",
            False: "no amdkfd peer-memory client"}.get(pm.get("loaded"))
    return escape(said or f"not known: {pm.get('why') or 'not in this input'}")


def library_of(pairs) -> str:
    """The library whose rules judged the node, as the pairs document names it (``nccl.library``)."""
    return "RCCL" if (pairs.get("nccl") or {}).get("library") == "rccl" else "NCCL"
