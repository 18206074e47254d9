"""What a job's NCCL log settles about the node before it is judged: the driver's P2P status of a GPU pair NCCL
connected through P2P.

From 2.19, ``ncclTopoCheckP2p`` reads NVML's P2P read and write status of two GPUs of one host once the level
check has passed and turns P2P off for that pair unless both are OK (v2.28.9 ``src/graph/paths.cc:333-358``;
``NCCL_IGNORE_DISABLED_P2P=2`` skips the check). So a ``via P2P/...`` connection between two GPUs of the node
says their status is OK, where the input does not say it otherwise. Through an intermediate GPU (an NVB path,
``paths.cc:307-316``) NCCL checks each hop, not the pair: only a pair joined directly by NVLink, or on a node the
input shows without NVLink, is settled. The GPU side of GPUDirect RDMA (``/GDRDMA``) is settled where the NIC's
flag is read (:func:`gdrcheck.rules.nccl.job_log.hca_evidence`).

The job's ``CUDA_VISIBLE_DEVICES`` (``--env``) places the GPUs of a log the merge could not place (NCCL before
2.18 names no ``nvmlDev``, and a subset of GPUs cannot be placed by bus order): a rank's ``cudaDev c`` is the
job's c-th visible GPU (:func:`gdrcheck.rules.cuda_visible.select`, in CUDA's order), so the matrix's GPU of that
index takes the rank's bus id.

Pure: a snapshot in, the same snapshot with the settled facts (and a note naming the log's line) out.
"""

from __future__ import annotations

from gdrcheck.model import Fact, address_known, bdf_key, frozen_map
from gdrcheck.record import replace
from gdrcheck.rules.nccl.job_log import job_log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

NVML_DISABLES_FROM = (2, 19, 0)  # a status other than OK turns P2P off on every path (paths.cc:333-358)
SETTLED = "p2p_status_from_log"  # host fact: "a b" -> the connection line that settled the pair's status


def _gpu_of(snap_gpus: dict[int, str], ranks: dict[int, str], rank: int, bracket: Optional[str]) -> Optional[str]:
    from gdrcheck.collectors.pastes.nccl_log import bdf_of_busid

    if rank in ranks:
        return ranks[rank]
    if bracket is None:
        return None
    if bracket.isdigit() and len(bracket) < 4:
        return snap_gpus.get(int(bracket))  # the nvmlDev: nvidia-smi's index
    return bdf_of_busid(bracket)


def _p2p_pairs(snap, job) -> dict[tuple[str, str], list[str]]:
    """(a, b) in bus order -> the transports of every connection line between two GPUs of this host."""
    log, host = job["log"], job["host"]
    gpus = {d.gpu_index: d.bdf for d in snap.devices if d.gpu_index is not None}
    present = set(gpus.values())
    largest: dict[str, list] = {}
    for r in log.ranks:
        largest.setdefault(r.comm, []).append(r)
    comm = max(largest.values(), key=len) if largest else []
    ranks = {r.rank: r.bdf for r in comm if r.host in (host, None)}
    elsewhere = {r.rank for r in comm if r.host not in (host, None)}
    out: dict[tuple[str, str], list[str]] = {}
    for c in log.connections:
        if c.host not in (host, None) or c.src in elsewhere or c.dst in elsewhere:
            continue
        a = _gpu_of(gpus, ranks, c.src, c.src_dev)
        b = _gpu_of(gpus, ranks, c.dst, c.dst_dev)
        if a is None or b is None or a == b or a not in present or b not in present:
            continue
        out.setdefault((a, b) if bdf_key(a) <= bdf_key(b) else (b, a), []).append(c)
    return out


def _direct(snap, a: str, b: str, linked: set, ends: set) -> bool:
    """Whether NCCL's path between ``a`` and ``b`` cannot go through a third GPU: NVLink joins them, or the input
    shows NVLink and neither GPU has any."""
    if not snap.shows_nvlink:
        return False
    return (a, b) in linked or (b, a) in linked or (a not in ends and b not in ends)


def placed_by_visible(snap, env):
    """``snap`` with the log's GPUs the merge left unplaced given their matrix GPU by the job's
    ``CUDA_VISIBLE_DEVICES`` and each rank's ``cudaDev``; unchanged where that does not decide."""
    job = job_log(snap)
    if job is None or not job.get("unplaced") or "CUDA_VISIBLE_DEVICES" not in env:
        return snap
    from gdrcheck.rules import cuda_visible

    synth = [d.bdf for d in snap.devices if not address_known(d) and d.kind_hint == "gpu"]
    sel = cuda_visible.select(env, [cuda_visible.GpuId(b) for b in sorted(synth, key=bdf_key)])
    if sel is None or sel.gpus is None:
        return snap
    mapping: dict[str, str] = {}
    for r in job["log"].ranks:
        if r.bdf in job["unplaced"] and r.host in (job["host"], None) and r.cuda_dev < len(sel.gpus):
            if mapping.setdefault(sel.gpus[r.cuda_dev], r.bdf) != r.bdf:
                return snap  # two bus ids for one visible GPU: ranks of several nodes, not placed
    if not mapping or len(set(mapping.values())) != len(mapping):
        return snap
    return _readdressed(snap, job, mapping, sel)


def _readdressed(snap, job, mapping: dict[str, str], sel):
    from gdrcheck.collectors.pastes.merge_matrix import bus_of
    from gdrcheck.collectors.pastes.nccl_log_place import readdress

    devs = {d.bdf: d for d in snap.devices}
    facts, p2p, nvlinks, unplaced = dict(snap.path_facts), dict(snap.p2p_status), list(snap.nvlinks), \
        list(snap.unplaced)
    said = ", ".join(f"GPU{devs[s].gpu_index}={b}" for s, b in sorted(mapping.items(), key=lambda kv: bdf_key(kv[0])))
    readdress(mapping, devs, facts, p2p, nvlinks, unplaced)
    host = dict(snap.host)
    left = [b for b in job["unplaced"] if b not in mapping.values()]
    host["nccl_log"] = Fact(dict(job, unplaced=left), source=host["nccl_log"].source)
    note = (f"{job['log'].label}: the matrix's GPUs given the bus ids of the log's ranks by the job's "
            f"CUDA_VISIBLE_DEVICES={sel.setting} and each rank's cudaDev: {said}"
            + (f"; assumed: {sel.assumes}" if sel.assumes else ""))
    roots = tuple(sorted({*snap.roots, *(bus_of(b) for b in mapping.values())},
                         key=lambda r: tuple(int(x, 16) for x in r.split(":"))))
    return replace(snap, devices=tuple(sorted(devs.values(), key=lambda d: bdf_key(d.bdf))), roots=roots,
                   path_facts=frozen_map(facts), p2p_status=frozen_map(p2p), nvlinks=tuple(nvlinks),
                   unplaced=tuple(unplaced), host=frozen_map(host), notes=tuple(snap.notes) + (note,))


def settled(snap, env=None):
    """``snap`` with the driver's P2P status OK (read and write) of each pair the job's log shows connected
    through P2P, where that settles it (and the log's GPUs placed by ``CUDA_VISIBLE_DEVICES`` first);
    unchanged where nothing does."""
    snap = placed_by_visible(snap, env or {})
    job = job_log(snap)
    if job is None or not job["log"].connections:
        return snap
    from gdrcheck.rules.nccl.core import parse_version

    log = job["log"]
    try:
        v = parse_version(log.version, floor=False) if log.version else None
    except ValueError:
        v = None
    if v is None or v < NVML_DISABLES_FROM or log.setting("NCCL_IGNORE_DISABLED_P2P") == "2":
        return snap
    linked = {(n.a, n.b) for n in snap.nvlinks}
    ends = {n.a for n in snap.nvlinks} | {n.b for n in snap.nvlinks}
    status = dict(snap.p2p_status)
    said: dict[str, str] = {}
    for (a, b), conns in _p2p_pairs(snap, job).items():
        if not all(c.transport.startswith("P2P/") for c in conns) or not _direct(snap, a, b, linked, ends):
            continue
        if any((x, y, cap) in status for x, y in ((a, b), (b, a)) for cap in ("read", "write")):
            continue  # the input's own status stands
        status[(a, b, "read")] = status[(a, b, "write")] = "OK"
        said[f"{a} {b}"] = conns[0].line
    if not said:
        return snap
    host = dict(snap.host)
    host[SETTLED] = Fact(said, source=log.label)
    note = (f"{log.label}: the driver's P2P status (read and write) OK for {len(said)} GPU pair(s), from the job's "
            f"NCCL log: NCCL {log.version} connected them through P2P, which it does only where NVML says OK "
            "(src/graph/paths.cc:333-358@v2.28.9-1)")
    return replace(snap, p2p_status=frozen_map(status), host=frozen_map(host), notes=tuple(snap.notes) + (note,))
