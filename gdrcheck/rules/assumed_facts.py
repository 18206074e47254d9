"""The facts an input does not show, filled at the value a node set up for GPUDirect has: each assumption (what
it is, the value taken, what settles it) and the copy of the snapshot with them filled in, which
:mod:`gdrcheck.rules.expected` judges again.

Nothing is assumed against evidence the input carries: only a fact that is missing is filled.
"""

from __future__ import annotations

import struct

from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.model import Fact, NvLink, address_on_node, frozen_map
from gdrcheck.record import record, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


@record(frozen=True)
class Assumption:
    """One fact taken at its GPUDirect-ready value: what it is, the value assumed, the command that settles it.
    ``codes``: the findings (effect unknown) it settles; ``needs``: the codes of the needs
    (:class:`gdrcheck.rules.nccl.decision.Need`) an NCCL decision that rests on it names."""

    key: str
    fact: str
    assumed: str
    settle: str
    codes: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    brief: str = ""  # how a one-line verdict names it ("peer memory loaded")
    rccl: tuple[tuple[str, str], ...] = ()  # on a node RCCL judges (AMD GPUs): the fields said in its terms

    def said_for(self, library: str) -> dict[str, str]:
        """fact, assumed, settle and brief for a node judged by ``library`` (``NCCL`` or ``RCCL``)."""
        doc = {"fact": self.fact, "assumed": self.assumed, "settle": self.settle, "brief": self.brief}
        if library == "RCCL":
            doc.update(self.rccl)
        return doc

    def settle_for(self, library: str) -> str:
        return self.said_for(library)["settle"]

    def to_doc(self, library: str = "NCCL") -> dict[str, str]:
        return self.said_for(library)


PEER_MEMORY = Assumption(
    "peer_memory", "peer memory", "nvidia_peermem loaded (or DMA-BUF usable)",
    "lsmod | grep nvidia_peermem; ls /sys/kernel/mm/memory_peers (or run gdrcheck on the node)",
    ("GDR021",), ("nic.peer_memory",), brief="peer memory loaded")
IOMMU = Assumption(
    "iommu", "IOMMU", "off or passthrough",
    "cat /proc/cmdline; cat /sys/kernel/iommu_groups/*/type (identity = passthrough)", ("GDR043",),
    brief="IOMMU off or passthrough")
ACS = Assumption(
    "acs", "ACS redirect", "off on the path's bridges",
    "sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'", ("GDR041",), brief="ACS redirect off")
P2P_STATUS = Assumption(
    "p2p_status", "driver P2P status", "OK (read and write)",
    "nvidia-smi topo -p2p r; nvidia-smi topo -p2p w", ("GDR008",), ("p2p.nvml_status", "p2p.nvlink", "gdr.pxn_nvlink"),
    brief="driver P2P status OK")
# a decision that rests on whether NVLink joins two GPUs: between the pair (P2P), or between the GPU and the
# NIC's relay GPU (PXN); NCCL then checks the driver's P2P status across that NVLink (paths.cc, p2p.cc)
_NVLINK_NEEDS = ("p2p.nvlink", "gdr.pxn_nvlink")
_XGMI_SETTLE = "amd-smi topology, or rocm-smi --showtopo (link type XGMI)"
NVLINK = Assumption(
    "nvlink", "NVLink", "present between every two of these GPUs: the part decides it (H100/H200/B200/GB200 SXM "
    "and A100 SXM4 GPUs sit on NVLink boards, 4-GPU all-to-all or NVSwitch; MI300-class OAM on xGMI; gdrcheck's "
    "table of all-to-all parts, _ALL_TO_ALL in gdrcheck/rules/assumed_facts.py, over the models of "
    "gdrcheck/device_models.py)",
    "nvidia-smi topo -m; nvidia-smi nvlink -s", ("GDR009",), _NVLINK_NEEDS, brief="NVLink between the SXM/OAM GPUs",
    rccl=(("fact", "xGMI"), ("assumed", "present between every two of these GPUs: the part decides it (MI300-class "
          "OAM on xGMI; gdrcheck's table of all-to-all parts, _ALL_TO_ALL in gdrcheck/rules/assumed_facts.py)"),
          ("settle", _XGMI_SETTLE), ("brief", "xGMI between the OAM GPUs")))
NVLINK_OPEN = Assumption(
    "nvlink_open", "NVLink", "not assumed: these GPUs' NVLinks may join only some pairs (a V100/P100 SXM2 "
    "hybrid cube mesh, or a model the input does not name); each pair is taken over PCIe, the worse answer",
    "nvidia-smi topo -m; nvidia-smi nvlink -s", ("GDR009",), _NVLINK_NEEDS,
    brief="no NVLink assumed (the input does not show which pairs it joins)",
    rccl=(("fact", "xGMI"), ("assumed", "not assumed: these GPUs' xGMI links may join only some pairs; each pair "
          "is taken over PCIe, the worse answer"), ("settle", _XGMI_SETTLE),
          ("brief", "no xGMI assumed (the input does not show which pairs it joins)")))
NUMA = Assumption(
    "numa", "NUMA node", "the undecided pairs on different NUMA nodes (SYS: the worse answer)",
    "nvidia-smi topo -m, or cat /sys/bus/pci/devices/<bdf>/numa_node", ("GDR004",),
    ("gdr.path_class",), brief="undecided NUMA nodes taken as different (SYS)",
    rccl=(("settle", "cat /sys/bus/pci/devices/<bdf>/numa_node, or amd-smi topology (NUMA column)"),))
JOB = Assumption(
    "job", "the job's GPUs", "the job uses every GPU of the node",
    "CUDA_VISIBLE_DEVICES of the job (gdrcheck --env CUDA_VISIBLE_DEVICES=...)", (),
    ("gdr.pxn_rank", "p2p.nvb_rank", "p2p.with", "p2p.host_with"), brief="the job uses every GPU",
    rccl=(("settle", "HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES of the job "
           "(gdrcheck --env CUDA_VISIBLE_DEVICES=... with the job's list)"),))
ACS_DECLARED = Assumption(
    "acs_declared", "ACS redirect", "off on the host's switch behind a switch the input declares",
    "ask the provider: the switch has no address on the node (no lspci, no setpci)", ("GDR041",),
    brief="ACS redirect off on the host's switches")
NVIDIA_FS = Assumption(
    "nvidia_fs", "GPUDirect Storage", "nvidia-fs loaded", "lsmod | grep nvidia_fs; gdscheck -p", ("GDR063",),
    brief="nvidia-fs loaded")

_REACH_BRIEF = {"nics": "RDMA NICs beside the GPUs (NICs are not in this input)",
                "nvme": "NVMe drives as GPUDirect Storage needs them (not in this input)"}
KNOWN = (PEER_MEMORY, IOMMU, ACS, ACS_DECLARED, P2P_STATUS, NVLINK, NVLINK_OPEN, NUMA, JOB, NVIDIA_FS)
SETTLE_ALL = "run gdrcheck on the node"

# parts whose GPUs are all joined to each other (NVSwitch, or all-to-all NVLink/xGMI on their boards); a V100
# or P100 SXM2 board (DGX-1, NDv2) is a hybrid cube mesh, an MI250X board joins some pairs by one link, others
# by two, or none
_ALL_TO_ALL = ("V100 SXM3", "A100", "A800", "H100", "H800", "H200 SXM", "GH200", "B200", "B100", "GB200", "B300",
               "GB300", "MI300", "MI325", "MI350", "MI355", "sm_80", "sm_90", "sm_100")


def all_to_all(part: str) -> bool:
    """Whether every two GPUs of this part (as :func:`gdrcheck.device_models.nvlink_part` names it) are joined."""
    return any(word in part for word in _ALL_TO_ALL)


# typical NVLink count between two GPUs of an NVSwitch system, by model (what nvidia-smi topo -m prints)
_NV_COUNT = (("H100", 18), ("H200", 18), ("H800", 8), ("GH200", 18), ("B200", 18), ("B100", 18), ("GB200", 18),
             ("A100", 12), ("A800", 8), ("V100 SXM3", 6), ("V100", 2), ("P100", 1), ("sm_90", 18), ("sm_100", 18),
             ("sm_80", 12), ("sm_70", 2))


def _acs_off_config(config: Optional[bytes]) -> bytes:
    """The function's config space as read, extended to 4 KiB with one ACS capability whose Control is 0."""
    head = (config or b"")[:0x100]
    head = head + bytes(0x100 - len(head))
    ext = struct.pack("<IHH", 0x000D | (1 << 16), 0, 0)  # ACS, version 1, last in the list; Capability, Control 0
    return head + ext + bytes(0x1000 - 0x100 - len(ext))


def _nv_count(part: str) -> int:
    for word, n in _NV_COUNT:
        if word in part:
            return n
    return 1


def assumed_facts(evaluation) -> tuple[Any, Any, tuple[Assumption, ...]]:
    """(a copy of the snapshot with the facts it lacks filled in, the options to judge it with, the assumptions
    made)."""
    snap, topo = evaluation.snap, evaluation.topo
    made: list[Assumption] = []
    changes: dict[str, Any] = {"host": frozen_map(_host_filled(snap, topo, made)),
                               "devices": _acs_filled(snap, topo, made)}
    gpus = topo.of_kind("gpu")
    status, filled = dict(snap.p2p_status), False
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            for cap in ("read", "write"):
                if (a, b, cap) not in status and (b, a, cap) not in status:
                    status[(a, b, cap)], filled = "OK", True
    made.extend((P2P_STATUS,) if filled else ())
    changes["p2p_status"] = frozen_map(status)
    links = _links_filled(snap, topo, gpus, made)
    if links or NVLINK_OPEN in made:  # the pairs without an assumed link are taken over PCIe
        changes["nvlinks"] = tuple(snap.nvlinks) + tuple(links)
        changes["shows_nvlink"] = True
    open_roots = [r for r in snap.roots if snap.root_numa.get(r) is None]
    if any(p.pcie_path is None and set(p.candidates) == {"NODE", "SYS"} for p in evaluation.pairs) and open_roots:
        numa = dict(snap.root_numa)
        used = {n for n in numa.values() if n is not None} | {d.numa_node for d in snap.devices
                                                               if d.numa_node is not None}
        nxt = max(used, default=-1) + 1
        for r in open_roots:
            numa[r] = nxt
            nxt += 1
        changes["root_numa"] = frozen_map(numa)
        changes["numa_known"] = True
        made.append(NUMA)
    options = evaluation.options
    if len(gpus) > 1 and getattr(evaluation.nccl_node, "job_gpus", None) is None:
        options = replace(options, job_gpus=len(gpus))
        made.append(JOB)
    return replace(snap, **changes), options, tuple(made)


def _host_filled(snap, topo, made: list[Assumption]) -> dict[str, Any]:
    """The host facts with peer memory, the IOMMU mode and nvidia-fs filled where the input lacks them."""
    from gdrcheck.collectors.host_peermem import ALL_NCCL_PEERMEM_FILES

    host = dict(snap.host)
    pm = host_record(snap, "peermem")
    if not (pm is not None and isinstance(pm.get("nccl_files"), dict)):
        host["peermem"] = Fact({"nvidia_peermem_loaded": True, "nv_peer_mem_loaded": False,
                                "nccl_files": {f: True for f in ALL_NCCL_PEERMEM_FILES}}, source="assumed")
        made.append(PEER_MEMORY)
    per_dev = dict(host_record(snap, "iommu_devices") or {})
    missing = [d.bdf for d in snap.devices if per_dev.get(d.bdf) in (None, "unknown")]
    if missing:
        per_dev.update({b: "off" for b in missing})
        host["iommu_devices"] = Fact(per_dev, source="assumed")
        made.append(IOMMU)
    nvfs = host_fact(snap, "nvidia_fs")
    if topo.of_kind("nvme") and (nvfs is None or nvfs.value is None):
        host["nvidia_fs"] = Fact({"loaded": True}, source="assumed")
        made.append(NVIDIA_FS)
    return host


def _acs_filled(snap, topo, made: list[Assumption]) -> tuple[Any, ...]:
    """The functions, each bridge whose ACS the input cannot show given an ACS capability with Control 0."""
    devices = list(snap.devices)
    for i, d in enumerate(devices):
        if d.is_bridge and topo.device_kind.get(d.bdf) != "gpu" and not topo.acs(d.bdf).known:
            devices[i] = replace(d, config=_acs_off_config(d.config))
            which = ACS if address_on_node(d) else ACS_DECLARED
            if which not in made:
                made.append(which)
    return tuple(devices)


def _links_filled(snap, topo, gpus, made: list[Assumption]) -> list[NvLink]:
    """NVLink where the input cannot show it and both GPUs are parts whose GPUs are all joined (NVSwitch, or
    all-to-all xGMI); a part whose links may join only some pairs (a V100/P100 SXM2 hybrid cube mesh, a model
    the input does not name) gets no link, and the assumption says so."""
    from gdrcheck.device_models import link_word

    links: list[NvLink] = []
    parts = {g: _part(topo.by_bdf[g]) for g in gpus}  # each GPU's part, asked once (not once per pair)
    joined = {g: all_to_all(part) for g, part in parts.items()}
    for i, a in enumerate(gpus):
        xgmi = link_word(topo.by_bdf[a]) == "xGMI"
        for b in gpus[i + 1:]:
            if topo.nvlink_unseen(a, b):
                if joined[a] and joined[b]:
                    links.append(NvLink(a, b, 1 if xgmi else _nv_count(parts[a]),
                                        source="xgmi" if xgmi else "assumed"))
                elif NVLINK_OPEN not in made:
                    made.append(NVLINK_OPEN)
    if links:
        made.append(NVLINK)
    return links


def _part(d) -> str:
    """The part as the input names it: the NVLink part's word (``SXM5`` where an lspci name gives only that),
    the model the device id names, and the name itself (``GH100 [H100 SXM5 80GB]``)."""
    from gdrcheck.device_models import gpu_model, nvlink_part

    part = nvlink_part(d) or ""
    if not part or part.startswith("GPUs of a model"):
        return part
    return " ".join(x for x in (part, gpu_model(d) or "", d.name or "") if x)
