"""``rocm-smi --showtopo`` (and ``--showtopotype``, ``--showtopohops``, ``--showtopoweight``, ``--showtoponuma``)
pasted as an input: an AMD node's GPUs by index, the link type between each two (``XGMI`` or ``PCIE``), their
hops and weights, and each GPU's NUMA node. The tables are rocm_smi_lib's (``rsmi_topo_get_link_type``,
``rsmi_topo_get_link_weight``, ``rsmi_topo_get_numa_node_number``); the paste prints no bus id, so the GPUs
are shown at synthetic addresses (domain ffff, as for ``nvidia-smi topo -m``) and placed in no PCIe tree.
A pair of link type XGMI and one hop is joined directly by xGMI, as RCCL's own dump counts it
(``xml.cc:692-719@rocm-6.2.2``: ``RSMI_IOLINK_TYPE_XGMI`` and ``hops == 1``); every other pair's path is open.
"""

from __future__ import annotations

import re

from gdrcheck.errors import InputError
from gdrcheck.model import CollectorStatus, NvLink, PciFunction, Snapshot, frozen_map
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

KIND = "rocm-smi-topo"
_TITLE = lazy_pattern(r"^=+\s*(Weight|Hops|Link Type) between two GPUs\s*=+\s*$|^=+\s*Numa Nodes\s*=+\s*$", re.M)
_NUMA = lazy_pattern(r"^GPU\[(\d+)\]\s*:\s*\(Topology\) Numa Node:\s*(-?\d+)\s*$", re.M)
_GPU_CELL = lazy_pattern(r"GPU(\d+)$")
MAX_GPUS = 512


def looks_like_rocm_smi_topo(text: str) -> bool:
    head = text.lstrip("\ufeff")[:65536]
    return bool(_TITLE.search(head))


def _tables(text: str, name: str) -> dict[str, dict[tuple[int, int], str]]:
    """Each ``... between two GPUs`` table: title -> {(row GPU, column GPU): cell}."""
    out: dict[str, dict[tuple[int, int], str]] = {}
    title, cols = None, []
    for n, raw in enumerate(text.lstrip("\ufeff").splitlines(), 1):
        line = raw.strip()
        m = _TITLE.match(line)
        if m or line.startswith("="):
            title, cols = (m.group(1) if m else None), []
            continue
        if title is None or not line:
            continue
        cells = line.split()
        if not cols:
            got = [_GPU_CELL.match(c) for c in cells]
            if not all(got):
                raise InputError(f"{name}:{n}: rocm-smi table header of GPU columns expected, got {line[:60]!r}")
            cols = [int(g.group(1)) for g in got]
            continue
        row = _GPU_CELL.match(cells[0])
        if not row or len(cells) != len(cols) + 1:
            raise InputError(f"{name}:{n}: rocm-smi table row of {len(cols)} GPUs expected, got {line[:60]!r}")
        for c, cell in zip(cols, cells[1:]):
            out.setdefault(title, {})[(int(row.group(1)), c)] = cell
    return out


def parse_rocm_smi_topo(text: str, name: str) -> Snapshot:
    from gdrcheck.collectors.pastes.merge_matrix import bus_of, synthetic_bdf

    tables = _tables(text, name)
    numa = {int(g): int(v) for g, v in _NUMA.findall(text)}
    gpus = sorted({i for t in tables.values() for k in t for i in k} | set(numa))
    if not gpus:
        raise InputError(f"{name}: rocm-smi --showtopo output that lists no GPU")
    if len(gpus) > MAX_GPUS:
        raise InputError(f"{name}: more than {MAX_GPUS} GPUs")
    bdf = {g: synthetic_bdf(i) for i, g in enumerate(gpus)}
    devices = tuple(PciFunction(bdf=bdf[g], root=bus_of(bdf[g]), kind_hint="gpu", vendor=0x1002,
                                name=f"GPU[{g}] of rocm-smi --showtopo", gpu_index=g,
                                numa_node=numa.get(g) if numa.get(g, -1) >= 0 else None,
                                extra=frozen_map({"synthetic": True})) for g in gpus)
    links = _xgmi(tables, bdf)
    notes = [f"rocm-smi --showtopo gives no bus ids: its GPUs are shown at synthetic addresses in domain ffff "
             f"({', '.join(f'GPU[{g}]={b}' for g, b in bdf.items())}), placed in no PCIe tree"]
    if "Link Type" not in tables:
        notes.append("no 'Link Type between two GPUs' table: which GPUs xGMI joins is not shown")
    return Snapshot(
        input_kind=KIND, label=name, devices=devices,
        roots=tuple(sorted({d.root for d in devices})),
        root_numa=frozen_map({d.root: d.numa_node for d in devices}), numa_known=bool(numa),
        shows_nvlink="Link Type" in tables, nvlinks=links,
        collectors=(CollectorStatus(KIND, "ok", f"{len(devices)} GPUs, {len(links)} xGMI links"),),
        notes=tuple(notes), unplaced=tuple(d.bdf for d in devices))


def _xgmi(tables, bdf) -> tuple[NvLink, ...]:
    kinds, hops = tables.get("Link Type", {}), tables.get("Hops", {})
    out = []
    for (a, b), kind in kinds.items():
        if a < b and kind.upper() == "XGMI" and _hop(hops, a, b) in (None, 1):
            out.append(NvLink(bdf[a], bdf[b], 1, source="xgmi"))
    return tuple(out)


def _hop(hops, a: int, b: int) -> Optional[int]:
    v = hops.get((a, b))
    return int(v) if v is not None and v.isdigit() else None
