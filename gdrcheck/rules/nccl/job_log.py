"""A job's NCCL log as the node's facts hold it: what NCCL's own lines say of each HCA (the NIC flag NCCL set).
Read by NCCL's node model (:mod:`gdrcheck.rules.nccl.node`) and by the reconciliation
(:mod:`gdrcheck.rules.nccl_log`), which imports that model: so this sits below both."""

from __future__ import annotations

from gdrcheck.host_facts import host_record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


JOB_LOG = "the job's NCCL log"  # where a setting came from: NCCL reported it set ("... set by environment to")


def job_settings(snap) -> dict[str, str]:
    """Every ``NCCL_*`` the job's log reports set, with its value as NCCL reported it."""
    job = job_log(snap)
    return {name: value for name, value, _line in job["log"].settings} if job is not None else {}


def job_log(snap) -> Optional[dict[str, Any]]:
    return host_record(snap, "nccl_log")


def hca_evidence(snap) -> dict[str, str]:
    """RDMA device -> "1"/"0": NCCL's ``GPU Direct RDMA Enabled|Disabled for HCA n 'name'`` lines of this node's
    host (v2.28.9 ``graph/topo.cc:1357``, the NIC's ``net.gdr``, which NCCL sets from the plugin's ptrSupport:
    peer memory or DMA-BUF as NCCL found them in the job's environment)."""
    job = job_log(snap)
    if job is None:
        return {}
    if _HCA[0] is job["log"] and _HCA[1] == job["host"]:
        return _HCA[2]
    from gdrcheck.collectors.pastes.nccl_log import nic_device

    out: dict[str, str] = {}
    for h in job["log"].hca_gdr:
        if h.host in (job["host"], None) and h.net != "Socket":
            out.setdefault(nic_device(h.name)[0], "1" if h.enabled else "0")
    for name in gdrdma_lines(job):  # NCCL used GPUDirect RDMA through it: its flag was set
        out.setdefault(name, "1")
    _HCA[:] = [job["log"], job["host"], out]
    return out


_HCA: list = [None, None, {}]  # the last log, its host and its evidence: asked once per NIC


def gdrdma_lines(job: dict[str, Any]) -> dict[str, str]:
    """RDMA device -> the first connection line of this node's host that went through it with ``/GDRDMA``.
    NCCL prints ``/GDRDMA`` only where ``ncclTopoCheckGdr`` found the NIC's and the GPU's GPUDirect RDMA support
    set (v2.28.9 ``src/graph/paths.cc:429-430``, ``src/transport/net.cc:301-314``): peer memory or DMA-BUF
    worked for that NIC in the job. ``job``: the host fact ``nccl_log``'s value."""
    if _LAST[0] is job["log"] and _LAST[1] == job["host"]:
        return _LAST[2]
    import re

    from gdrcheck.collectors.pastes.nccl_log import nic_device

    log, host = job["log"], job["host"]
    names: dict[tuple[str, int], str] = {}
    for h, t, i, d, _l in log.nics:
        if h in (host, None) and t != "Socket":
            names.setdefault((t, i), nic_device(d)[0])
    out: dict[str, str] = {}
    for c in log.connections:
        m = re.match(r"NET/([^/]+)/(\d+)(?:\(\d+\))?/GDRDMA", c.transport)
        if m and c.host in (host, None):
            name = names.get((m.group(1), int(m.group(2))))
            if name is not None:
                out.setdefault(name, c.line)
    _LAST[:] = [log, host, out]
    return out


_LAST: list = [None, None, {}]  # the last log, its host and its lines: each GPU-NIC pair asks again
