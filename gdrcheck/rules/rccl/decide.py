"""RCCL's decision for each pair (``ROCm/rccl`` ``src/graph/paths.cc``; lines at ``rocm-6.2.2``, the same logic at
``rocm-6.1.0`` and ``develop@0cbce2a7``):

* path types: NCCL's search, but a path through an intermediate GPU over xGMI stays XGMI: the line that makes
  it NVB is commented out (``paths.cc:98@rocm-6.2.2``, ``:99`` develop), so RCCL has no NVB path.
* P2P (``ncclTopoCheckP2p``, ``paths.cc:255-352``): the path type against the P2P level; no NVML step
  (``paths.cc:307``, compiled out on AMD); the network replaces P2P only when ``NCCL_NET_DISABLE_INTRA=0``
  (``paths.cc:466-474``).
* GDR (``ncclTopoCheckGdr``, ``paths.cc:372-448``): both flags (``:383-384``), ``NCCL_NET_GDR_READ=0`` turns
  the send side off (``:386-388``; NCCL's pre-Ampere read rule is compiled out, ``:389``), the GDR level (PXB;
  PHB where the CPU is AMD Rome/Milan (``topo.cc:507``: cpuid family 0x17 model >= 0x31, or 0x19) and the GPU
  and the NIC hang each one bridge below the same CPU with bus numbers of one 0x10 block, ``:413-428``).
* PXN, only with ``NCCL_PXN_DISABLE=0`` (default 1, ``paths.cc:525``): the NIC's local GPU, at PXB or closer to
  it and joined to this GPU by xGMI, relays (``paths.cc:680-694``); its distance counts (``:432-438``).
* the gfx94x rule on Hyper-V (``paths.cc:653-671``): on an Intel CPU with gfx94x GPUs (8 GPUs and 8 NICs, or a
  job of part of the node), GPU-NIC pairs whose bus ids are exactly 0x100000, else 0x1000, else 0xff00000
  apart (in NCCL's bus-id number) become PXB when every GPU has such a NIC (``rcclPathOverride``,
  ``:571-594``); only where ``/sys/devices/virtual/dmi/id/bios_version`` starts "Hyper-V UEFI Release".
"""

from __future__ import annotations

from gdrcheck.rules.nccl.core import within
from gdrcheck.rules.rccl.settings import shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

ROME_FAMILIES = ((143, 49), (175, 0), (23, 49), (25, 0))  # (family, lowest model): NCCL's cpuid coding and Linux's
OVERRIDE_STEPS = (0x100000, 0x1000, 0xff00000)


def bus_number(bdf: str) -> int:
    """NCCL's ``busIdToInt64``: the hex digits of ``dddd:bb:dd.f`` as one number."""
    return int(bdf.replace(":", "").replace(".", ""), 16)


def p2p_view(st, t: Optional[str], cands: tuple[str, ...], via: Optional[str]) -> dict[str, object]:
    if t is None:
        return {"p2p": "unknown", "reason": "the input does not show where the two GPUs meet"
                + (f" ({' or '.join(shown(c) or c for c in cands)})" if cands else "")}
    name = shown(t)
    hop = f" through GPU {via} (RCCL keeps the type XGMI: no NVB, paths.cc:98@rocm-6.2.2)" if via else ""
    levels = [st.user_p2p_level] if st.user_p2p_level else list(st.p2p_levels)
    outcomes = {lv: within(t, lv, st.version) for lv in levels}
    src = st.p2p_level_source
    if len(set(outcomes.values())) > 1:
        ok = [shown(lv) for lv, v in outcomes.items() if v]
        return {"p2p": "unknown", "reason": f"path {name}: {src}",
                "depends_on": [f"the CPU vendor: P2P at level {'/'.join(ok)} (Intel, ARM or Zhaoxin gives PXB, "
                               "AMD and others SYS; /proc/cpuinfo vendor_id)"]}
    level = shown(levels[0]) if len(levels) == 1 else "/".join(shown(lv) for lv in levels)
    if not next(iter(outcomes.values())):
        return {"p2p": "disabled", "reason": f"path {name} is beyond NCCL_P2P_LEVEL={level} ({src}); RCCL uses "
                                            "shared host memory"}
    link = "xGMI" if t == "NVL" else "PCIe"
    reason = f"{link}{hop}: path {name} within NCCL_P2P_LEVEL={level} ({src}); no driver P2P-status step on AMD " \
             "(paths.cc:307@rocm-6.2.2)"
    out: dict[str, object] = {"p2p": "enabled", "reason": reason}
    if st.param("NCCL_NET_DISABLE_INTRA", 1) == 0:
        out["depends_on"] = ["NCCL_NET_DISABLE_INTRA=0: ncclTopoCheckNet may send through a NIC that both GPUs "
                             "reach faster (paths.cc:469-500@rocm-6.2.2)"]
    return out


def rome_cpu(cpu: Optional[str], family: Optional[int], model: Optional[int]) -> Optional[bool]:
    if cpu is None:
        return None
    if cpu != "amd":
        return False
    if family is None or model is None:
        return None
    return any(family == f and model >= m for f, m in ROME_FAMILIES)


def rome_phb(topo, g: str, n: str, t: Optional[str]) -> Optional[bool]:
    """``paths.cc:417-427@rocm-6.2.2``: the GPU and the NIC each two hops from the same CPU (one bridge between,
    in the tree the input draws) with bus numbers of one 0x10 block. Only a PHB pair can be one (a SYS pair
    meets across CPUs; a PIX/PXB pair is within PXB anyway)."""
    if t is None:
        return None
    if t != "PHB":
        return False
    if len(topo.ancestors(g)) != 1 or len(topo.ancestors(n)) != 1:
        return False
    return bus_number(g) & 0xF0000 == bus_number(n) & 0xF0000


def hyperv_override(gpus: list[str], nics: list[str]) -> set[tuple[str, str]]:
    """``rcclPathOverride`` (``paths.cc:571-594@rocm-6.2.2``): the pairs made PXB, for the first step at which
    every GPU has a NIC that far."""
    for step in OVERRIDE_STEPS:
        hits = {(g, n) for g in gpus for n in nics if abs(bus_number(n) - bus_number(g)) == step}
        if gpus and all(any(h[0] == g for h in hits) for g in gpus):
            return hits
    return set()


def gdr_view(st, t: Optional[str], nic: tuple[Optional[bool], str], gpu: tuple[Optional[bool], str],
             level: tuple[Optional[str], str], relay: Optional[tuple[str, str]] = None,
             notes: tuple[str, ...] = ()) -> dict[str, object]:
    """One GPU-NIC pair's receive side (``ncclTopoCheckGdr`` with read=0), then the send side. ``level``: the GDR
    level for this pair (None where it rests on a fact not shown) and why; ``relay``: (GPU, its path type) when
    PXN is on and a relay applies."""
    nic_ok, nic_why = nic
    gpu_ok, gpu_why = gpu
    if nic_ok is False:
        return {"gdr": "disabled", "reason": f"the NIC has no GPUDirect RDMA in RCCL: {nic_why}"}
    if gpu_ok is False:
        return {"gdr": "disabled", "reason": f"the GPU has no GPUDirect RDMA in RCCL: {gpu_why}",
                "gpu_gdr_supported": False}
    if t is None:
        return {"gdr": "unknown", "reason": "the input does not show where the GPU and the NIC meet"}
    d, via, how = t, None, ""
    if relay is not None and not within(t, "PXB", st.version):
        via, d = relay
        how = f"; PXN: RCCL reaches the NIC through GPU {via} over xGMI (NCCL_PXN_DISABLE=0, paths.cc:680-694)"
    lv, lv_why = level
    pair_level = {"gdr_level": lv} if lv and lv != st.gdr_level else {}  # the Rome/Milan PHB of this pair
    if lv is None:
        return {"gdr": "unknown", "distance": d, "reason": f"path {shown(d)}: {lv_why}",
                "depends_on": [lv_why]}
    if not within(d, lv, st.version):
        return {"gdr": "disabled", "distance": d,
                "reason": f"path {shown(d)} is beyond NCCL_NET_GDR_LEVEL={shown(lv)} ({lv_why}); RCCL stages "
                          "transfers through host memory" + (f"; {notes[0]}" if notes else "")}
    out: dict[str, object] = {"gdr": "enabled", "distance": d, **pair_level}
    if via:
        out["via"] = via
    missing = [w for ok, w in ((nic_ok, nic_why), (gpu_ok, gpu_why)) if ok is None]
    base = f"path {shown(d)} within NCCL_NET_GDR_LEVEL={shown(lv)} ({lv_why}){how}"
    if missing:
        out.update(gdr="unknown", reason=f"{base}, but " + "; ".join(missing), depends_on=missing)
        return out
    out["reason"] = f"{nic_why}; {gpu_why}; {base}"
    raw = st.env.get("NCCL_NET_GDR_READ")
    read_off = raw not in (None, "") and st.param("NCCL_NET_GDR_READ", -2) == 0
    out["gdr_read"] = "disabled" if read_off else "enabled"
    out["gdr_read_reason"] = f"NCCL_NET_GDR_READ={raw}" if read_off else \
        "RCCL sends with GPUDirect too: the base's pre-Ampere read rule is compiled out on AMD " \
        "(paths.cc:389@rocm-6.2.2)"
    if notes:
        out["depends_on"] = list(notes)
    return out
