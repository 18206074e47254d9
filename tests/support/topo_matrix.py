"""A parser for ``nvidia-smi topo -m`` / ``-mp`` / ``-p2p`` matrices, as tests read them.

Real copies have tabs expanded, hand-mangled whitespace and ANSI underline
escapes; split on whitespace runs and treat the multi-word headers as units.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MULTI = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
CODES = re.compile(r"^(X|PIX|PXB|PHB|NODE|SYS|SOC|NV\d+|OK|CNS|GNS|TNS|NS|DR|U)$")


def parse_matrix(text: str) -> tuple[list[str], dict[tuple[str, str], str], dict[str, str]]:
    """Return (device names in header order, {(row, col): code}, {NICn: rdma name})."""
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header = None
    cells: dict[tuple[str, str], str] = {}
    legend: dict[str, str] = {}
    for ln in lines:
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", ln)
        if m:
            legend[m.group(1)] = m.group(2)
            continue
        if header is None:
            toks = ln.split()
            if toks and toks[0].startswith(("GPU", "mlx", "NIC")) and not CODES.match(toks[1] if len(toks) > 1 else ""):
                for h in _MULTI:
                    ln = ln.replace(h, h.replace(" ", "_"))
                header = [t for t in ln.split() if t.replace("_", " ") not in _MULTI]
            continue
        toks = ln.split()
        if not toks or toks[0] == "Legend:":
            if toks and toks[0] == "Legend:":
                break
            continue
        row = toks[0]
        codes = toks[1:1 + len(header)]
        for col, code in zip(header, codes):
            if CODES.match(code):
                cells[(row, col)] = code
    return header or [], cells, legend
