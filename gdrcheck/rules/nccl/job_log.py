"""A job's NCCL log as the node's facts hold it: what NCCL's own lines say of each HCA (the NIC flag NCCL set).
Read by NCCL's node model (:mod:`gdrcheck.rules.nccl.node`) and by the reconciliation
(:mod:`gdrcheck.rules.nccl_log`), which imports that model: so this sits below both."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


JOB_LOG = "the job's NCCL log"  # where a setting came from: NCCL reported it set ("... set by environment to")


def job_settings(snap) -> dict[str, str]:
    """Every ``NCCL_*`` the job's log reports set, with its value as NCCL reported it."""
    job = job_log(snap)
    return {name: value for name, value, _line in job["log"].settings} if job is not None else {}


def job_log(snap) -> Optional[dict[str, Any]]:
    f = snap.host.get("nccl_log")
    return f.value if f is not None and isinstance(f.value, dict) else None


def hca_evidence(snap) -> dict[str, str]:
    """RDMA device -> "1"/"0": NCCL's ``GPU Direct RDMA Enabled|Disabled for HCA n 'name'`` lines of this node's
    host (v2.28.9 ``graph/topo.cc:1357``, the NIC's ``net.gdr``, which NCCL sets from the plugin's ptrSupport:
    peer memory or DMA-BUF as NCCL found them in the job's environment)."""
    job = job_log(snap)
    if job is None:
        return {}
    from gdrcheck.collectors.pastes.nccl_log import nic_device

    out: dict[str, str] = {}
    for h in job["log"].hca_gdr:
        if h.host in (job["host"], None) and h.net != "Socket":
            out.setdefault(nic_device(h.name)[0], "1" if h.enabled else "0")
    return out
