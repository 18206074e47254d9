"""``amd-smi topology`` pasted as an input: the tables ``ACCESS TABLE``, ``WEIGHT TABLE``, ``HOPS TABLE``,
``LINK TYPE TABLE`` and ``NUMA BW TABLE``, each a header of the GPUs' bus ids and a row per GPU
(``ROCm/amdsmi`` ``amdsmi_cli/amdsmi_commands.py`` ``topology``, ``:2843-2852`` and ``:3067-3077@rocm-6.2.2``:
``SELF``, ``PCIE``, ``XGMI``, ``N/A``; ``amdsmi_logger.py:129-130``: columns 13 wide). The GPUs keep their bus
ids but are placed in no PCIe tree; a pair of link type XGMI and one hop is joined directly by xGMI, as RCCL's
own dump counts it (``xml.cc:692-719@rocm-6.2.2``).
"""

from __future__ import annotations

import re

from gdrcheck.errors import InputError
from gdrcheck.model import CollectorStatus, NvLink, PciFunction, Snapshot, bdf_key, frozen_map
from gdrcheck.patterns import lazy_pattern

KIND = "amd-smi-topology"
_TITLE = lazy_pattern(r"^(ACCESS|WEIGHT|HOPS|LINK TYPE|NUMA BW) TABLE:\s*$", re.M)
_BDF = lazy_pattern(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
MAX_GPUS = 512


def looks_like_amd_smi_topology(text: str) -> bool:
    return bool(_TITLE.search(text.lstrip("\ufeff")[:65536]))


def _tables(text: str, name: str) -> tuple[list[str], dict[str, dict[tuple[str, str], str]]]:
    """(the GPUs' bus ids in order, title -> {(row, column): cell})."""
    order: list[str] = []
    out: dict[str, dict[tuple[str, str], str]] = {}
    title, cols = None, []
    for n, raw in enumerate(text.lstrip("\ufeff").splitlines(), 1):
        line = raw.strip()
        m = _TITLE.match(line)
        if m:
            title, cols = m.group(1), []
            continue
        if title is None or not line:
            continue
        cells = line.split()
        if not cols:
            if not all(_BDF.match(c) for c in cells):
                raise InputError(f"{name}:{n}: amd-smi table header of GPU bus ids expected, got {line[:60]!r}")
            cols = [c.lower() for c in cells]
            order.extend(c for c in cols if c not in order)
            continue
        if not _BDF.match(cells[0]) or len(cells) != len(cols) + 1:
            title = None  # the table ended (a line of another command, a prompt)
            continue
        for c, cell in zip(cols, cells[1:]):
            out.setdefault(title, {})[(cells[0].lower(), c)] = cell
    return order, out


def parse_amd_smi_topology(text: str, name: str) -> Snapshot:
    from gdrcheck.collectors.pastes.merge_matrix import bus_of

    order, tables = _tables(text, name)
    if not order:
        raise InputError(f"{name}: amd-smi topology output that lists no GPU")
    if len(order) > MAX_GPUS:
        raise InputError(f"{name}: more than {MAX_GPUS} GPUs")
    devices = tuple(PciFunction(bdf=b, root=bus_of(b), kind_hint="gpu", vendor=0x1002,
                                name=f"GPU {b} of amd-smi topology") for b in sorted(order, key=bdf_key))
    kinds, hops = tables.get("LINK TYPE", {}), tables.get("HOPS", {})
    links = tuple(NvLink(a, b, 1, source="xgmi") for (a, b), kind in kinds.items()
                  if bdf_key(a) < bdf_key(b) and kind.upper() == "XGMI" and hops.get((a, b), "1") == "1")
    notes = ["amd-smi topology places its GPUs in no PCIe tree: every path between them but xGMI is open"]
    if not kinds:
        notes.append("no LINK TYPE TABLE: which GPUs xGMI joins is not shown")
    return Snapshot(
        input_kind=KIND, label=name, devices=devices, roots=tuple(sorted({d.root for d in devices})),
        root_numa=frozen_map({d.root: None for d in devices}), numa_known=False,
        shows_nvlink=bool(kinds), nvlinks=links,
        collectors=(CollectorStatus(KIND, "ok", f"{len(devices)} GPUs, {len(links)} xGMI links"),),
        notes=tuple(notes), unplaced=tuple(d.bdf for d in devices))
