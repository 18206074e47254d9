"""The words of NCCL's decision records (:mod:`gdrcheck.rules.nccl.decision`): one function per cause and need
code, composed here only (RCCL's ``rccl.*`` codes in :mod:`gdrcheck.documents.rccl_words`). A decision's reason
is its causes' words, each later one after its joint ("; ", "; but ", " "); its ``depends_on`` is its needs'
words."""

from __future__ import annotations

from gdrcheck.documents import rccl_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    Cause = Decision = Any  # gdrcheck.rules.nccl.decision's records, read here by their attributes only

PXN_PATHS = "paths.cc:812-843"
IP_SETTLE = "an IP interface NCCL_SOCKET_IFNAME names, up with an address (ip -o addr show)"
MLOPART_LINES = "paths.cc:466, 487"


C2C_REWRITES = {  # gdrcheck.rules.nccl.gdr.distance's rewrites of a PHB path on a Grace (C2C) GPU
    "p2c_as_c2c": "NIC on the GPU's own Grace CPU: P2C, counted as C2C (NCCL_NET_GDR_C2C)",
    "p2c": "NIC on the GPU's own Grace CPU: P2C",
    "phb_as_c2c": "NIC on the GPU's own Grace CPU, NCCL_NET_GDR_C2C=1: counted as C2C",
}


def _said(c: Cause) -> str:
    return str(c.get("text"))


def _gdr_within(c: Cause) -> str:
    return f"path {c.get('distance')} within NCCL_NET_GDR_LEVEL={c.get('level')} ({c.get('source')})"


def _gdr_beyond_lead(c: Cause) -> str:
    return f"path {c.get('distance')} is beyond NCCL_NET_GDR_LEVEL={c.get('level')} ({c.get('source')})"


def _gdr_beyond(c: Cause) -> str:
    return _gdr_beyond_lead(c) + "; NCCL stages transfers through host memory"


def _gdr_open_flags_head(c: Cause) -> str:
    route = c.get("route")
    return (f"path {c.get('distance')} within NCCL_NET_GDR_LEVEL={c.get('level')}"
            + (f" ({words(route)})" if route is not None else "") + ", but ")


def _gdr_open_flags(c: Cause) -> str:
    return _gdr_open_flags_head(c) + "; ".join(c.get("missing"))


def _gdr_pxn(c: Cause) -> str:
    return (f"PXN: NCCL reaches the NIC through GPU {c.get('peer')} over NVLink (that GPU's path: "
            f"{c.get('peer_type')})")


def _gdr_mlopart(c: Cause) -> str:
    return (f"an MLOPart partition ({c.get('why')}) and NCCL_NET_GDR_MLOPART={c.get('setting')}: NCCL "
            f"{c.get('version')} gives such GPUs no GDR ({MLOPART_LINES})")


def _gdr_every_path_beyond(c: Cause) -> str:
    return (f"every possible path ({', '.join(c.get('candidates'))}) is beyond NCCL_NET_GDR_LEVEL={c.get('level')} "
            f"({c.get('source')})")


def _gdr_unplaced(c: Cause) -> str:
    cands = c.get("candidates")
    return "the input does not show where the GPU and the NIC meet" + (f" ({' or '.join(cands)})" if cands else "")


def _gdr_pxn_unseen(c: Cause) -> str:
    return (f"if NCCL keeps an NVLink path between this GPU and {c.get('relay')}, the NIC's local GPU (the input "
            f"cannot show it), NCCL reaches the NIC through that GPU (PXN, {PXN_PATHS})")


def _file_tree(c: Cause) -> str:
    return (f"(path type {c.get('path_type')} in NCCL's tree: the topology file {c.get('path')}, which NCCL loads "
            "first, with what it lacks hung from the node's sysfs tree; the node's tree alone says "
            f"{c.get('node_says') or 'no single type'})")


def _job_not_in(c: Cause) -> str:
    out = c.get("gpus")
    return (f"not a pair of this job: {' and '.join(out)} {'is' if len(out) == 1 else 'are'} not in "
            f"{c.get('setting')}")


def _job_devices(c: Cause) -> str:
    device = c.get("device") or "cuda"
    return f"the job's {device}:{c.get('a')} and {device}:{c.get('b')}"


def _p2p_every_path_beyond(c: Cause) -> str:
    return (f"every possible path ({', '.join(c.get('candidates'))}) is beyond NCCL_P2P_LEVEL={c.get('level')} "
            f"({c.get('source')})")


def _p2p_unplaced(c: Cause) -> str:
    cands = c.get("candidates")
    return "the input does not show where the two GPUs meet" + (f" ({' or '.join(cands)})" if cands else "")


def _p2p_nvb_memcpy(c: Cause) -> str:
    return (f"NVB path (through GPU {c.get('via')}) and NCCL_P2P_USE_CUDA_MEMCPY set: the P2P transport refuses "
            "indirect paths (p2p.cc)")


def _p2p_beyond_defaults_lead(c: Cause) -> str:
    return f"path {c.get('path')} is beyond every default level ({c.get('why')})"


def _p2p_beyond_defaults(c: Cause) -> str:
    return _p2p_beyond_defaults_lead(c) + "; NCCL uses shared host memory"


def _p2p_default_open(c: Cause) -> str:
    return f"path {c.get('path')}: {c.get('why')}"


def _p2p_beyond_lead(c: Cause) -> str:
    return f"path {c.get('path')} is beyond NCCL_P2P_LEVEL={c.get('level')} ({c.get('source')})"


def _p2p_beyond(c: Cause) -> str:
    return _p2p_beyond_lead(c) + "; NCCL uses shared host memory"


def _p2p_within(c: Cause) -> str:
    return f"path {c.get('path')} within NCCL_P2P_LEVEL={c.get('level')} ({c.get('source')})"


def _hops(c: Cause) -> str:
    return "; ".join(f"{hop}: read {r or '?'}, write {w or '?'}" for hop, r, w in c.get("hops"))


def _p2p_nvml_abort_lead(c: Cause) -> str:
    return (f"NVML P2P status {_hops(c)} on an {c.get('link')} path: NCCL aborts at init ('P2P is disabled "
            "between NVLINK connected GPUs')")


def _p2p_nvml_abort(c: Cause) -> str:
    return _p2p_nvml_abort_lead(c) + "; NCCL_IGNORE_DISABLED_P2P=1 makes it use host memory instead"


def _p2p_nvml_fallback(c: Cause) -> str:
    return f"NVML P2P status {_hops(c)}: NCCL does not use P2P and falls back to shared host memory"


def _p2p_nvml_logged_lead(c: Cause) -> str:
    return f"NVML P2P status {_hops(c)}: NCCL {c.get('version')} only logs it on a PCIe path"


def _p2p_nvml_logged(c: Cause) -> str:
    return (_p2p_nvml_logged_lead(c) + "; the P2P transport's cudaDeviceCanAccessPeer decides, which the input "
            "does not show")


def _p2p_nvml_unknown(c: Cause) -> str:
    return f"NVML P2P status (read and write) not known for {', '.join(c.get('hops'))}"


def _p2p_no_nvml_check(c: Cause) -> str:
    return (f"NCCL {c.get('version')} has no NVML check: cudaDeviceCanAccessPeer decides, which the input does not "
            "show")


def _p2p_net_faster(c: Cause) -> str:
    return (f"the network is faster ({c.get('detail')}): ncclTopoCheckNet makes NCCL use the NIC, not P2P "
            "(NCCL_NET_DISABLE_INTRA=1 keeps P2P)")


def _p2p_transport(c: Cause) -> str:
    t, link = c.get("path"), c.get("link")
    return link if t == "NVL" else f"{link} through GPU {c.get('via')} (NVB)" if t == "NVB" else "PCIe"


def _p2p_nvlink_unseen(c: Cause) -> str:
    return f"{c.get('text')}; NCCL decides P2P over NVLink or over PCIe ({', '.join(c.get('candidates'))})"


def _first_hop(c: Cause) -> str:
    hop, r, w = c.get("hops")[0]
    return f"NVML P2P status {hop}: read {r or '?'}, write {w or '?'}"


def _nvml_lead(lead: Callable[[Cause], str]) -> Callable[[Cause], str]:
    """A NVML P2P status cause's first clause: its first hop's status where it names several, else ``lead``."""
    return lambda c: _first_hop(c) if len(c.get("hops")) > 1 else lead(c)


def _flags_lead(head: Callable[[Cause], str]) -> Callable[[Cause], str]:
    """An open flags cause's first clause: the path, and the first flag missing."""
    return lambda c: head(c) + next(iter(c.get("missing")), "")


# code -> a cause's first clause, where its words say more after it (a consequence, another hop, another flag
# missing); every other cause's first clause is its words
LEADS: dict[str, Callable[[Cause], str]] = {
    "gdr.beyond": _gdr_beyond_lead,
    "gdr.open_flags": _flags_lead(_gdr_open_flags_head),
    "p2p.beyond_defaults": _p2p_beyond_defaults_lead,
    "p2p.beyond": _p2p_beyond_lead,
    "p2p.nvml_abort": _nvml_lead(_p2p_nvml_abort_lead),
    "p2p.nvml_fallback": _nvml_lead(_p2p_nvml_fallback),
    "p2p.nvml_logged": _nvml_lead(_p2p_nvml_logged_lead),
    "p2p.nvlink_unseen": _said,
}


# code -> (the joint before it when it is not the first cause, its words)
CAUSES: dict[str, tuple[str, Callable[[Cause], str]]] = {
    "nic_flag": ("; ", _said),
    "gpu_flag": ("; ", _said),
    "gdr.within": ("; ", _gdr_within),
    "gdr.c2c": ("; ", lambda c: C2C_REWRITES[c.get("rewrite")]),
    "gdr.pxn": ("; ", _gdr_pxn),
    "gdr.beyond": ("; ", _gdr_beyond),
    "gdr.open_flags": ("; ", _gdr_open_flags),
    "gdr.mlopart": ("; ", _gdr_mlopart),
    "gdr.every_path_beyond": ("; ", _gdr_every_path_beyond),
    "gdr.unplaced": ("; ", _gdr_unplaced),
    "gdr.pxn_unseen": ("; but ", _gdr_pxn_unseen),
    "data_direct": ("; but ", _said),
    "file_tree": (" ", _file_tree),
    "job.not_in": ("; ", _job_not_in),
    "job.devices": ("; ", _job_devices),
    "p2p.every_path_beyond": ("; ", _p2p_every_path_beyond),
    "p2p.unplaced": ("; ", _p2p_unplaced),
    "p2p.nvb_memcpy": ("; ", _p2p_nvb_memcpy),
    "p2p.beyond_defaults": ("; ", _p2p_beyond_defaults),
    "p2p.default_open": ("; ", _p2p_default_open),
    "p2p.beyond": ("; ", _p2p_beyond),
    "p2p.within": ("; ", _p2p_within),
    "p2p.nvml_abort": ("; ", _p2p_nvml_abort),
    "p2p.nvml_fallback": ("; ", _p2p_nvml_fallback),
    "p2p.nvml_logged": ("; ", _p2p_nvml_logged),
    "p2p.nvml_unknown": ("; ", _p2p_nvml_unknown),
    "p2p.nvml_ok": ("; ", lambda c: "NVML P2P read/write OK" + (" from the job's NCCL log (NCCL used P2P between "
                                                                  "them)" if c.get("from_log") else "")),
    "p2p.nvml_skipped": ("; ", lambda c: "NVML check skipped (NCCL_IGNORE_DISABLED_P2P=2)"),
    "p2p.no_nvml_check": ("; ", _p2p_no_nvml_check),
    "p2p.net_faster": (", but ", _p2p_net_faster),
    "p2p.nvlink_unseen": ("; ", _p2p_nvlink_unseen),
}
HEADINGS: dict[str, Callable[[Cause], str]] = {  # said first, before ": ", wherever the record holds it
    "p2p.transport": _p2p_transport,
}


def _need_pxn_rank(c: Cause) -> str:
    return f"GPU {c.get('peer')} is a rank of the same communicator (NCCL_PXN_DISABLE unset)"


def _need_mlopart(c: Cause) -> str:
    return (f"the job does not run the GPU as an MLOPart partition ({c.get('why')}; a CUDA device name with "
            f"'MLOPart', NCCL's <gpu mlopart> in NCCL_TOPO_DUMP_FILE): NCCL {c.get('version')} gives a partition "
            f"no GDR unless NCCL_NET_GDR_MLOPART=1 ({MLOPART_LINES})")


def _need_pxn_nvlink(c: Cause) -> str:
    return (f"whether NVLink joins {c.get('gpu')} and {c.get('relay')} and NCCL keeps P2P on it (nvidia-smi topo -m, "
            "NVML)")


def _need_data_direct(c: Cause) -> str:
    return (f"whether NCCL uses a Data Direct DMA function for {c.get('names')} and where it sits (NCCL_DEBUG=INFO "
            f"prints 'NET/IB: Data Direct DMA Interface is detected for device {c.get('device')}'; then "
            "NCCL_TOPO_DUMP_FILE shows the _dma device's PCI path; NCCL_IB_DATA_DIRECT=0 turns it off)")


def _need_job_gpus(c: Cause) -> str:
    return f"which GPUs the job holds: {c.get('text')}"


NEEDS: dict[str, Callable[[Cause], str]] = {
    "nic.plugin_ptr": lambda c: "the net plugin's ptrSupport (NCCL_PTR_CUDA / NCCL_PTR_DMABUF)",
    "nic.ip_interface": lambda c: IP_SETTLE,
    "nic.peer_memory": lambda c: "peer-memory module files (/sys/module/nvidia_peermem, /sys/kernel/mm/memory_peers)",
    "nic.flag": _said,
    "gpu.flag": _said,
    "gdr.path_class": lambda c: "the GPU-NIC path class",
    "gdr.pxn_rank": _need_pxn_rank,
    "gdr.mlopart": _need_mlopart,
    "gdr.pxn_nvlink": _need_pxn_nvlink,
    "data_direct": _need_data_direct,
    "job.gpus": _need_job_gpus,
    "job.assumes": _said,
    "p2p.nvb_rank": lambda c: f"GPU {c.get('via')} (the NVLink hop between them) is a rank of the same communicator",
    "p2p.with": lambda c: f"P2P with: {c.get('condition')}",
    "p2p.host_with": lambda c: f"host memory with: {c.get('condition')}",
    "p2p.can_access": lambda c: "cudaDeviceCanAccessPeer between the two GPUs",
    "p2p.nvml_status": lambda c: "NVML P2P read/write status (nvidia-smi topo -p2p r / -p2p w)",
    "p2p.check_net": lambda c: f"ncclTopoCheckNet: {c.get('detail')}",
    "p2p.nvlink": lambda c: "whether NVLink joins the two GPUs (nvidia-smi nvlink -s, NVML)",
}
CAUSES.update(rccl_words.CAUSES)  # RCCL's codes (rccl.*), composed the same way
LEADS.update(rccl_words.LEADS)
NEEDS.update(rccl_words.NEEDS)


def words(c: Cause) -> str:
    return CAUSES[c.code][1](c)


def reason(d: Decision) -> str:
    """The decision's reason: its causes' words in order; a job's log line said instead of NCCL's XML flag."""
    parts: list[str] = []
    heading = ""
    logged = None  # the first log.line cause
    for c in d.causes:
        code = c.code
        if code in HEADINGS:
            heading = HEADINGS[code](c) + ": "
        elif code != "log.line":
            joint, said_by = CAUSES[code]
            parts.append(joint + said_by(c) if parts else said_by(c))
        elif logged is None:
            logged = c
    text = heading + "".join(parts)
    line = logged.get("line") if logged is not None else None
    if line is None:
        return text
    nic = next((c.get("nic") for c in d.causes if c.code == "nic_flag" and c.get("from_input")), None)
    how = logged.get("how")
    said = "NCCL used GPUDirect RDMA through it in the job's log" if how == "gdrdma" else \
        "NCCL's own line in the job's log"
    return (f"NIC {nic}" if nic else text) + f": {said} ({line})"


def first_clause(d: Decision) -> str:
    """The decision's reason as far as its first clause: the heading and the first cause's lead (:data:`LEADS`);
    a job's log line is said as the reason says it."""
    heading, first, logged = "", None, None
    for c in d.causes:
        code = c.code
        if code in HEADINGS:
            heading = HEADINGS[code](c) + ": "
        elif code == "log.line":
            logged = logged or c
        elif first is None:
            first = c
    if logged is not None and logged.get("line") is not None:
        return reason(d)
    if first is None:
        return heading
    lead = LEADS.get(first.code)
    return heading + (lead(first) if lead is not None else words(first))


def depends_on(d: Decision) -> list[str]:
    return [NEEDS[n.code](n) for n in d.needs]


def said(d: Decision) -> tuple[str, list[str]]:
    """The decision's reason and ``depends_on``."""
    return reason(d), depends_on(d)
