"""The words of RCCL's decision records (:mod:`gdrcheck.rules.rccl.decide`, :mod:`gdrcheck.rules.rccl.node`): one
function per ``rccl.*`` cause and need code, composed here only and read by
:mod:`gdrcheck.documents.decision_words` as NCCL's are. The GDR level a pair is judged at is named by a code
(``why``: ``user``, ``default``, ``rome_phb``, ``cpu_model_unseen``, ``bridge_unseen``) inside the causes that
compare a path with it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    Cause = Any  # gdrcheck.rules.nccl.decision.Cause, read here by its code and parameters only

NO_P2P_STATUS = "no driver P2P-status step on AMD (paths.cc:307@rocm-6.2.2)"
PXN_WITH = "RCCL reaches the NIC through GPU {via} over xGMI (NCCL_PXN_DISABLE=0, paths.cc:680-694)"
HYPERV_UNSEEN = ("on Hyper-V (bios_version 'Hyper-V UEFI Release') RCCL makes this pair PXB "
                 "(paths.cc:653-671@rocm-6.2.2): cat /sys/devices/virtual/dmi/id/bios_version")
PXN_LATER = ("RCCL releases after 2.21.5 turn PXN on for gfx942 jobs of 64 ranks or more and gfx950 jobs of 32 "
             "or more (rcclSetPxn, src/rccl_wrap.cc, in ROCm/rocm-systems; not read at a tag), and the job's "
             "rank count is not in the input")
LEVEL_WHY = {  # the code a pair's GDR level rests on -> its words (``user``: the setting that named it)
    "default": "RCCL default (paths.cc:410@rocm-6.2.2)",
    "rome_phb": "RCCL on AMD Rome/Milan: GPU and NIC one bridge below the same CPU (paths.cc:413-428@rocm-6.2.2)",
    "cpu_model_unseen": ("PXB, or PHB on an AMD Rome/Milan CPU with the GPU and NIC one bridge below it "
                         "(paths.cc:413-428@rocm-6.2.2): the CPU model is not shown (/proc/cpuinfo)"),
    "bridge_unseen": "PHB if the GPU and NIC hang one bridge below the same Rome/Milan CPU, which is not shown",
}


def level_why(c: Cause) -> str:
    """Why the pair is judged at its GDR level: the setting, or RCCL's default and its Rome/Milan rule."""
    return str(c.get("source")) if c.get("why") == "user" else LEVEL_WHY[c.get("why")]


def _p2p_unplaced(c: Cause) -> str:
    cands = c.get("candidates")
    return "the input does not show where the two GPUs meet" + (f" ({' or '.join(cands)})" if cands else "")


def _p2p_within_lead(c: Cause) -> str:
    link = "xGMI" if c.get("xgmi") else "PCIe"
    via = c.get("via")
    hop = f" through GPU {via} (RCCL keeps the type XGMI: no NVB, paths.cc:98@rocm-6.2.2)" if via else ""
    return f"{link}{hop}: path {c.get('path')} within NCCL_P2P_LEVEL={c.get('level')} ({c.get('source')})"


def _p2p_within(c: Cause) -> str:
    return f"{_p2p_within_lead(c)}; {NO_P2P_STATUS}"


def _p2p_beyond_lead(c: Cause) -> str:
    return f"path {c.get('path')} is beyond NCCL_P2P_LEVEL={c.get('level')} ({c.get('source')})"


def _p2p_beyond(c: Cause) -> str:
    return _p2p_beyond_lead(c) + "; RCCL uses shared host memory"


def _gdr_base_lead(c: Cause) -> str:
    return f"path {c.get('distance')} within NCCL_NET_GDR_LEVEL={c.get('level')} ({level_why(c)})"


def _gdr_base(c: Cause) -> str:
    via = c.get("via")
    return _gdr_base_lead(c) + (f"; PXN: {PXN_WITH.format(via=via)}" if via else "")


def _gdr_beyond_lead(c: Cause) -> str:
    return f"path {c.get('distance')} is beyond NCCL_NET_GDR_LEVEL={c.get('level')} ({level_why(c)})"


def _gdr_beyond(c: Cause) -> str:
    return _gdr_beyond_lead(c) + "; RCCL stages transfers through host memory"


def _gdr_open_flags_lead(c: Cause) -> str:
    """The first clause of an open flags cause: the path, and the first flag missing (unless the PXN relay is
    said first)."""
    if c.get("via"):
        return _gdr_base_lead(c)
    return f"{_gdr_base(c)}, but " + next(iter(c.get("missing")), "")


# code -> (the joint before it when it is not the first cause, its words)
CAUSES: dict[str, tuple[str, Callable[[Cause], str]]] = {
    "rccl.p2p.unplaced": ("; ", _p2p_unplaced),
    "rccl.p2p.default_open": ("; ", lambda c: f"path {c.get('path')}: {c.get('source')}"),
    "rccl.p2p.beyond": ("; ", _p2p_beyond),
    "rccl.p2p.within": ("; ", _p2p_within),
    "rccl.nic_flag": ("; ", lambda c: str(c.get("text"))),
    "rccl.gpu_flag": ("; ", lambda c: str(c.get("text"))),
    "rccl.gdr.nic_off": ("; ", lambda c: f"the NIC has no GPUDirect RDMA in RCCL: {c.get('text')}"),
    "rccl.gdr.gpu_off": ("; ", lambda c: f"the GPU has no GPUDirect RDMA in RCCL: {c.get('text')}"),
    "rccl.gdr.unplaced": ("; ", lambda c: "the input does not show where the GPU and the NIC meet"),
    "rccl.gdr.level_open": ("; ", lambda c: f"path {c.get('distance')}: {level_why(c)}"),
    "rccl.gdr.beyond": ("; ", _gdr_beyond),
    "rccl.gdr.within": ("; ", _gdr_base),
    "rccl.gdr.open_flags": ("; ", lambda c: f"{_gdr_base(c)}, but " + "; ".join(c.get("missing"))),
    "rccl.gdr.hyperv_unseen": ("; ", lambda c: HYPERV_UNSEEN),
    "rccl.gdr.pxn_later": ("; ", lambda c: PXN_LATER),
}
# code -> a cause's first clause, where its words say more after it (gdrcheck.documents.decision_words.LEADS)
LEADS: dict[str, Callable[[Cause], str]] = {
    "rccl.p2p.beyond": _p2p_beyond_lead,
    "rccl.p2p.within": _p2p_within_lead,
    "rccl.gdr.beyond": _gdr_beyond_lead,
    "rccl.gdr.within": _gdr_base_lead,
    "rccl.gdr.open_flags": _gdr_open_flags_lead,
}
NEEDS: dict[str, Callable[[Cause], str]] = {
    "rccl.p2p.cpu_vendor": lambda c: (f"the CPU vendor: P2P at level {'/'.join(c.get('levels'))} (Intel, ARM or "
                                      "Zhaoxin gives PXB, AMD and others SYS; /proc/cpuinfo vendor_id)"),
    "rccl.p2p.check_net": lambda c: ("NCCL_NET_DISABLE_INTRA=0: ncclTopoCheckNet may send through a NIC that both "
                                     "GPUs reach faster (paths.cc:469-500@rocm-6.2.2)"),
    "rccl.nic_flag": lambda c: str(c.get("text")),
    "rccl.gpu_flag": lambda c: str(c.get("text")),
    "rccl.gdr.level": level_why,
    "rccl.gdr.hyperv_unseen": lambda c: HYPERV_UNSEEN,
    "rccl.gdr.pxn_later": lambda c: PXN_LATER,
}
