"""Which GPU each rank of a job's NCCL log is, which NIC each network device is, and which of the log's
lines speak of each GPU pair and each GPU and NIC (:func:`gdrcheck.rules.nccl_log.reconcile` holds them to
the prediction).

Pure: each function takes the job's log and the topology it reads.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def rank_map(job, topo) -> tuple[dict[int, tuple[Optional[str], Optional[str], Optional[int]]], list[str]]:
    """rank -> (host, bus id, cudaDev) of the communicator with the most ranks; and what was assumed."""
    log = job["log"]
    notes: list[str] = []
    by_comm: dict[str, list[Any]] = {}
    for r in log.ranks:
        by_comm.setdefault(r.comm, []).append(r)
    out: dict[int, tuple[Optional[str], Optional[str], Optional[int]]] = {}
    if by_comm:
        comm = max(by_comm, key=lambda c: len(by_comm[c]))
        for r in by_comm[comm]:
            out[r.rank] = (r.host, r.bdf, r.cuda_dev)
        if len(by_comm) > 1:
            notes.append(f"{len(by_comm)} communicators in the log; ranks as in the largest "
                         f"({len(by_comm[comm])} ranks)")
    return out, notes


def bdf_of_bracket(text: Optional[str], topo, version) -> Optional[str]:
    """A connection line's bracket: the bus id up to 2.18.1, the nvmlDev from 2.18.3 (NVML's index, which is
    nvidia-smi's: the driver view's index, else PCI bus order)."""
    from gdrcheck.collectors.pastes.nccl_log import bdf_of_busid

    if text is None:
        return None
    if (version is not None and version < (2, 18, 3)) or len(text) >= 4 or re.search(r"[a-f]", text, re.I):
        return bdf_of_busid(text)
    idx = int(text)
    gpus = topo.of_kind("gpu")
    by_index = {topo.by_bdf[b].gpu_index: b for b in gpus if topo.by_bdf[b].gpu_index is not None}
    if by_index:
        return by_index.get(idx)
    from gdrcheck.model import bdf_key

    ordered = sorted(gpus, key=bdf_key)
    return ordered[idx] if idx < len(ordered) else None


_NIC_INDEX: list = [None, None]  # (the log, its devices by index): the last log's, built once per log


def _nics_by_index(log) -> dict[int, list[tuple[Optional[str], str, str]]]:
    """The log's ``NET/<net> : Using [i]name`` devices by ``i``: (host, transport, name), in the log's order."""
    if _NIC_INDEX[0] is not log:
        index: dict[int, list[tuple[Optional[str], str, str]]] = {}
        for h, t, i, d, _l in log.nics:
            index.setdefault(i, []).append((h, t, d))
        _NIC_INDEX[:] = [log, index]
    return _NIC_INDEX[1]


def net_of(log, dev: int) -> Optional[str]:
    """The transport (``IB``, ``IBext_v8``...) the log lists device ``dev`` under, sockets last."""
    got = [t for _h, t, _d in _nics_by_index(log).get(dev, ()) if t != "Socket"]
    return got[0] if got else None


def nic_of(job, topo, host, net: str, dev: int) -> Optional[str]:
    """The NIC of network device ``dev`` as the log's ``NET/<net> : Using [dev]name`` line names it."""
    log = job["log"]
    names = [d for h, t, d in _nics_by_index(log).get(dev, ()) if (h == host or h is None or host is None)
             and (t == net or net.startswith(t))]
    if not names:
        return None
    from gdrcheck.collectors.pastes.nccl_log import nic_device

    name = nic_device(names[0])[0]
    for b in topo.of_kind("nic"):
        d = topo.by_bdf[b]
        if name in d.rdma_devices or name in d.netdevs:
            return b
    return None


NET = re.compile(r"^NET/(.+?)/(\d+)(?:\((\d+)\))?((?:/[^/]+)*)$")


class Ranks:
    """The log's ranks as this host sees them: whether a rank is on it, and which GPU a rank or a connection
    line's bracket is."""

    def __init__(self, job, topo, logv) -> None:
        self.ranks, self.notes = rank_map(job, topo)
        self.topo, self.logv = topo, logv
        self.host = job["host"]
        self.several_hosts = len(job["log"].hosts) > 1

    def is_local(self, rank: int) -> Optional[bool]:
        h = self.ranks.get(rank, (None,))[0]
        if self.host is None or h is None:
            return None if self.several_hosts else True
        return h == self.host

    def gpu_of(self, rank: int, bracket: Optional[str]) -> Optional[str]:
        got = self.ranks.get(rank)
        if got is not None and got[1]:
            return got[1]
        return bdf_of_bracket(bracket, self.topo, self.logv)


def connection_lines(job, topo, rk: Ranks, gpus) -> tuple[dict[tuple[str, str], list[Any]],
                                                            dict[tuple[str, str], list[tuple[Any, dict]]]]:
    """The log's connection lines of this host: by GPU pair (in bus order), and by GPU and NIC with what each
    says (``/GDRDMA``, the relay GPU of a PXN connection)."""
    from gdrcheck.model import bdf_key

    log, local_host = job["log"], job["host"]
    gg: dict[tuple[str, str], list[Any]] = {}
    gn: dict[tuple[str, str], list[tuple[Any, dict]]] = {}
    for c in log.connections:
        if c.host != local_host and local_host is not None and c.host is not None:
            continue
        mine = rk.ranks.get(c.local)
        if mine is not None and c.cuda_dev is not None and mine[2] is not None and mine[2] != c.cuda_dev:
            continue  # a line of another communicator, whose ranks are numbered otherwise
        a = rk.gpu_of(c.src, c.src_dev)
        b = rk.gpu_of(c.dst, c.dst_dev)
        peer = c.dst if c.local == c.src else c.src
        net = NET.match(c.transport)
        if net:
            g = a if c.local == c.src else b
            nic = nic_of(job, topo, c.host, net.group(1), int(net.group(2))) if g in gpus else None
            if nic is not None:
                flags = net.group(4) or ""
                via = rk.gpu_of(int(net.group(3)), None) if net.group(3) else None
                gn.setdefault((g, nic), []).append((c, {"gdrdma": "/GDRDMA" in flags, "via": via}))
            if rk.is_local(peer) is not True:
                continue
        if rk.is_local(peer) is False or a is None or b is None or a == b or a not in gpus or b not in gpus:
            continue
        key = (a, b) if bdf_key(a) <= bdf_key(b) else (b, a)
        gg.setdefault(key, []).append(c)
    return gg, gn


def pair_gdr_lines(job, topo, rk: Ranks, gpus, gn: dict[tuple[str, str], list[tuple[Any, dict]]]) -> None:
    """NCCL's own ``GPU Direct RDMA Enabled|Disabled for GPU .. / HCA ..`` lines of this host, added to ``gn``."""
    from gdrcheck.collectors.pastes.nccl_log import bdf_of_busid

    log, local_host, logv = job["log"], job["host"], rk.logv
    for pg in log.pair_gdr:
        if pg.host != local_host and local_host is not None and pg.host is not None:
            continue
        if logv is not None and logv >= (2, 24, 0) and len(pg.gpu) < 4 and pg.gpu.isdigit():
            g = rk.gpu_of(int(pg.gpu), None)  # a rank (%d) from 2.24; hex digits are a bus id (%lx)
        else:
            g = bdf_of_busid(pg.gpu)
        hca = pg.hca
        if logv is not None and logv < (2, 21, 0) and pg.hca_text.isdigit():
            hca = int(pg.hca_text)  # %d before 2.21; the netId in hex from 2.21
        net_name = net_of(log, hca) or log.network or "IB"
        nic = nic_of(job, topo, pg.host, net_name, hca)
        if g in gpus and nic is not None and (pg.read in (None, 0) or not pg.enabled):
            gn.setdefault((g, nic), []).append((pg, {"gdrdma": pg.enabled, "via": None, "pair_line": True}))
