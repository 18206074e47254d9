"""Which of a job's log's hosts is the node, and which GPUs the log names on a host: what places a log beside
the node's own input."""

from __future__ import annotations

import re

from gdrcheck.collectors.pastes.nccl_log import bdf_of_busid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.collectors.pastes.nccl_log import NcclLog


def choose_host(log: NcclLog, node_gpus, hostname: Optional[str]) -> tuple[Optional[str], str]:
    """Which of the log's hosts is the node: the only one; the node's host name; else the host whose ranks'
    GPUs the node shows most, then the one with most ranks, then the first in the log."""
    hosts = log.hosts
    if not hosts:
        return None, "the log's lines name no host"
    if len(hosts) == 1:
        return hosts[0], "the only host in the log"
    if hostname and hostname.split(".")[0] in hosts:
        return hostname.split(".")[0], "the node's host name"

    scores = _host_scores(log, node_gpus)
    best = max(hosts, key=scores.__getitem__)
    s = scores[best]
    if s[0] and sum(1 for v in scores.values() if v[0] == s[0]) == 1:
        return best, "the host whose GPUs' bus ids the node shows"
    if sum(1 for v in scores.values() if v[1] == s[1]) == 1:
        return best, "the host with the most ranks"
    return best, "the first host in the log (hosts with as many ranks tie; the node's input names none of them)"


def _host_scores(log: NcclLog, node_gpus) -> dict[str, tuple[int, int, int]]:
    """Per host, in one pass over the log: (its ranks' GPUs the node shows, its ranks, minus its place in the
    log). A host without Init lines counts the ranks that printed its connection lines."""
    shown = dict.fromkeys(log.hosts, 0)
    ranks = dict.fromkeys(log.hosts, 0)
    for r in log.ranks:
        if r.host in ranks:
            ranks[r.host] += 1
            shown[r.host] += r.bdf in node_gpus
    printed: dict[str, set] = {}
    for c in log.connections:
        if c.host in ranks and not ranks[c.host]:
            printed.setdefault(c.host, set()).add(c.local)
    return {h: (shown[h], ranks[h] or len(printed.get(h, ())), -i) for i, h in enumerate(log.hosts)}


def bus_ids_shown(log: NcclLog, host: Optional[str]) -> list[tuple[str, str]]:
    """(bus id, how NCCL named it) of each GPU of ``host`` the log names: the ranks' Init lines, else the bus ids
    of connection lines before 2.18.3."""
    out: dict[str, str] = {}
    for r in log.ranks:
        if host is None or r.host in (host, None):
            out.setdefault(r.bdf, f"rank {r.rank}, cudaDev {r.cuda_dev}")
    if not out:
        for c in log.connections:
            if host is not None and c.host not in (host, None):
                continue
            for rank, dev in ((c.src, c.src_dev), (c.dst, c.dst_dev)):
                if dev and (len(dev) >= 4 or re.search(r"[a-fA-F]", dev)):
                    bdf = bdf_of_busid(dev)
                    if bdf:
                        out.setdefault(bdf, f"rank {rank}")
    from gdrcheck.model import bdf_key

    return sorted(out.items(), key=lambda kv: bdf_key(kv[0]))
