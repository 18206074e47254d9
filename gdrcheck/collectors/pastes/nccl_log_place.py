"""A job's NCCL log placed on the node of an ``nvidia-smi topo -m`` matrix: which of the matrix's GPUs each of
the log's GPUs is.

A matrix has no bus ids (its GPUs sit at synthetic addresses, :mod:`gdrcheck.collectors.pastes.merge_matrix`);
the log names each rank's GPU twice, in ``ncclCommInitRank ... cudaDev 0 nvmlDev 0 busId 81000`` (v2.28.9
``src/init.cc:1574``): ``nvmlDev`` is NVML's index of the GPU (``nvmlDeviceGetIndex`` of the handle NCCL got by
the bus id), which is the index nvidia-smi prints as ``GPU<n>``, and ``busId`` its PCI address. So the matrix's
``GPU<nvmlDev>`` is at ``busId``, and it is given that address. Before 2.18 the line has no ``nvmlDev``: when
the log's host shows as many GPUs as the matrix, nvidia-smi's index order is PCI bus order (NVML enumerates by
bus id), so the i-th bus id in bus order is ``GPU<i>``; with fewer GPUs (``CUDA_VISIBLE_DEVICES``) no GPU is
placed and the note says which line would.

Both assume the log and the matrix saw one view of the node: a container that shows fewer GPUs numbers them
from 0 in NVML too, so a log of a container held to the host's matrix (or the other way round) places GPUs
by the container's numbering. A GPU the log names with an index beyond the matrix's is on another node.

Pure: the log, the chosen host and the merge's devices in, a map of addresses and notes out.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

ASSUMED = ("the log's nvmlDev is NVML's index, the GPU<n> nvidia-smi prints, when both ran in one view of the "
           "node (a container numbers the GPUs it shows from 0)")


def _log_gpus(log, host: Optional[str]) -> tuple[dict[str, Optional[int]], dict[str, str]]:
    """bus id -> nvmlDev (None when the line has none), and bus id -> the rank that named it, for ``host``."""
    index: dict[str, Optional[int]] = {}
    said: dict[str, str] = {}
    for r in log.ranks:
        if host is not None and r.host not in (host, None):
            continue
        if r.bdf not in index or index[r.bdf] is None:
            index[r.bdf] = r.nvml_dev
        said.setdefault(r.bdf, f"rank {r.rank}")
    if not index:  # no ncclCommInitRank line: the bus ids of connection lines before 2.18.3
        from gdrcheck.collectors.pastes.nccl_log_host import bus_ids_shown

        for bdf, what in bus_ids_shown(log, host):
            index[bdf] = None
            said[bdf] = what
    return index, said


def _by_nvml_index(index: dict[str, Optional[int]], synth: dict[int, str]) -> tuple[dict[str, str], list[str]]:
    """synthetic address -> bus id by the nvmlDev of each line; a clash (two bus ids for one index) places none."""
    by_index: dict[int, set] = {}
    for bdf, i in index.items():
        if i is not None:
            by_index.setdefault(i, set()).add(bdf)
    clash = sorted(i for i, bdfs in by_index.items() if len(bdfs) > 1)
    if clash:
        return {}, [f"the log gives more than one bus id for nvmlDev {', '.join(map(str, clash))} (several "
                    "nodes' ranks under one host name?): no GPU placed by it"]
    out = {synth[i]: next(iter(bdfs)) for i, bdfs in by_index.items() if i in synth}
    return out, []


def _by_bus_order(index: dict[str, Optional[int]], synth: dict[int, str]) -> tuple[dict[str, str], list[str]]:
    """Lines without nvmlDev (NCCL before 2.18): bus order is nvidia-smi's index order, when every GPU is named."""
    from gdrcheck.model import bdf_key

    plain = sorted((b for b, i in index.items() if i is None), key=bdf_key)
    if not plain:
        return {}, []
    if len(index) == len(synth) and len(plain) == len(index) and sorted(synth) == list(range(len(synth))):
        return {synth[i]: b for i, b in enumerate(plain)}, [
            "the log's lines give no nvmlDev (NCCL before 2.18): its GPUs placed by PCI bus order, which is "
            "nvidia-smi's index order"]
    return {}, [f"the log's lines give no nvmlDev (NCCL before 2.18) and name {len(plain)} of the matrix's "
                f"{len(synth)} GPUs (CUDA_VISIBLE_DEVICES?): which GPU<n> each bus id is is not in this input "
                "(a log of NCCL 2.18 or later names it: ncclCommInitRank ... nvmlDev N busId B)"]


def matrix_addresses(log, host: Optional[str], devs) -> tuple[dict[str, str], list[str], list[str]]:
    """(synthetic address -> the log's bus id, notes, the log's bus ids this input cannot place).

    ``devs``: the merge's devices by address. Only GPUs a matrix drew without a bus id are given one; a bus id
    another input already shows is not moved."""
    from gdrcheck.model import address_known

    synth = {d.gpu_index: b for b, d in devs.items()
             if not address_known(d) and d.kind_hint == "gpu" and d.gpu_index is not None}
    if not synth:
        return {}, [], []
    index, said = _log_gpus(log, host)
    index = {b: i for b, i in index.items() if b not in devs}
    moved, notes = _by_nvml_index(index, synth)
    more, more_notes = _by_bus_order(index, synth)
    moved.update(more)
    notes.extend(more_notes)
    if moved:
        got = ", ".join(f"GPU{devs[s].gpu_index}={b} ({said[b]})" for s, b in sorted(
            moved.items(), key=lambda kv: devs[kv[0]].gpu_index))
        notes.insert(0, f"the matrix's GPUs given the bus ids of the log's ncclCommInitRank lines: {got}; assumed: "
                        f"{ASSUMED}")
    unplaced = sorted(b for b, i in index.items() if b not in moved.values() and (i is None or i in synth))
    return moved, notes, unplaced


def readdress(mapping: dict[str, str], devs: dict, facts: dict, p2p: dict, nvlinks: list, unplaced: list) -> None:
    """Move each device of ``mapping`` (old address -> new) to its new address, with every fact keyed by it."""
    from gdrcheck.collectors.pastes.merge_matrix import bus_of
    from gdrcheck.model import bdf_key, frozen_map
    from gdrcheck.record import replace

    def new(b: str) -> str:
        return mapping.get(b, b)

    for old, bdf in mapping.items():
        d = devs.pop(old)
        extra = {k: v for k, v in (d.extra or {}).items() if k != "synthetic"}
        extra["bus_id_from"] = "the job's NCCL log"
        name = f"{d.name}, bus id from the job's NCCL log" if d.name else None
        devs[bdf] = replace(d, bdf=bdf, root=bus_of(bdf), extra=frozen_map(extra), name=name)
    for (a, b), fact in list(facts.items()):
        if a in mapping or b in mapping:
            del facts[(a, b)]
            x, y = new(a), new(b)
            facts[(x, y) if bdf_key(x) <= bdf_key(y) else (y, x)] = fact
    for (a, b, cap), code in list(p2p.items()):
        if a in mapping or b in mapping:
            del p2p[(a, b, cap)]
            p2p[(new(a), new(b), cap)] = code
    nvlinks[:] = [replace(n, a=new(n.a), b=new(n.b)) if n.a in mapping or n.b in mapping else n for n in nvlinks]
    unplaced[:] = [new(b) for b in unplaced]
