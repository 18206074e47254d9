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
from gdrcheck.rules.nccl.decision import Decision, cause, need
from gdrcheck.rules.rccl.settings import shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Optional

ROME_FAMILIES = ((143, 49), (175, 0), (23, 49), (25, 0))  # (family, lowest model): NCCL's cpuid coding and Linux's
OVERRIDE_STEPS = (0x100000, 0x1000, 0xff00000)


def bus_number(bdf: str) -> int:
    """NCCL's ``busIdToInt64``: the hex digits of ``dddd:bb:dd.f`` as one number."""
    return int(bdf.replace(":", "").replace(".", ""), 16)


def p2p_view(st, t: Optional[str], cands: tuple[str, ...], via: Optional[str]) -> Decision:
    if t is None:
        return Decision("p2p", "unknown", (cause("rccl.p2p.unplaced", candidates=tuple(shown(c) or c for c in cands)),))
    name = shown(t)
    levels = [st.user_p2p_level] if st.user_p2p_level else list(st.p2p_levels)
    outcomes = {lv: within(t, lv, st.version) for lv in levels}
    src = st.p2p_level_source
    if len(set(outcomes.values())) > 1:
        ok = tuple(shown(lv) for lv, v in outcomes.items() if v)
        return Decision("p2p", "unknown", (cause("rccl.p2p.default_open", path=name, source=src),),
                        (need("rccl.p2p.cpu_vendor", levels=ok),))
    level = shown(levels[0]) if len(levels) == 1 else "/".join(shown(lv) for lv in levels)
    if not next(iter(outcomes.values())):
        return Decision("p2p", "disabled", (cause("rccl.p2p.beyond", path=name, level=level, source=src),))
    said = cause("rccl.p2p.within", xgmi=t == "NVL", via=via, path=name, level=level, source=src)
    net = (need("rccl.p2p.check_net"),) if st.param("NCCL_NET_DISABLE_INTRA", 1) == 0 else ()
    return Decision("p2p", "enabled", (said,), net)


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
             level: tuple[Optional[str], Mapping[str, Any]], relay: Optional[tuple[str, str]] = None,
             hyperv_unseen: bool = False) -> Decision:
    """One GPU-NIC pair's receive side (``ncclTopoCheckGdr`` with read=0), then the send side. ``level``: the GDR
    level for this pair (None where it rests on a fact not shown) and why (``why``: a code of
    :data:`gdrcheck.documents.rccl_words.LEVEL_WHY` or ``user``, with the setting as ``source``); ``relay``: (GPU,
    its path type) when PXN is on and a relay applies; ``hyperv_unseen``: the gfx94x Hyper-V override would make
    the pair PXB, and whether the node is on Hyper-V is not shown."""
    nic_ok, nic_why = nic
    gpu_ok, gpu_why = gpu
    if nic_ok is False:
        return Decision("gdr", "disabled", (cause("rccl.gdr.nic_off", text=nic_why),))
    if gpu_ok is False:
        return Decision("gdr", "disabled", (cause("rccl.gdr.gpu_off", text=gpu_why),),
                        facts={"gpu_gdr_supported": False})
    if t is None:
        return Decision("gdr", "unknown", (cause("rccl.gdr.unplaced"),))
    d, via = t, None
    if relay is not None and not within(t, "PXB", st.version):
        via, d = relay
    lv, lv_why = level
    if lv is None:
        return Decision("gdr", "unknown", (cause("rccl.gdr.level_open", distance=shown(d), **lv_why),),
                        (need("rccl.gdr.level", **lv_why),), distance=d)
    hyperv = (cause("rccl.gdr.hyperv_unseen"),) if hyperv_unseen else ()
    if not within(d, lv, st.version):
        return Decision("gdr", "disabled", (cause("rccl.gdr.beyond", distance=shown(d), level=shown(lv), **lv_why),
                                            *hyperv), distance=d)
    pair_level = {"gdr_level": lv} if lv != st.gdr_level else {}  # the Rome/Milan PHB of this pair
    path = {"distance": shown(d), "level": shown(lv), "via": via, **lv_why}
    missing = tuple(c for ok, c in ((nic_ok, need("rccl.nic_flag", text=nic_why)),
                                    (gpu_ok, need("rccl.gpu_flag", text=gpu_why))) if ok is None)
    if missing:
        return Decision("gdr", "unknown", (cause("rccl.gdr.open_flags", missing=tuple(c.get("text") for c in missing),
                                                 **path),), missing, distance=d, via=via, facts=pair_level)
    raw = st.env.get("NCCL_NET_GDR_READ")
    read_off = raw not in (None, "") and st.param("NCCL_NET_GDR_READ", -2) == 0
    send = {"gdr_read": "disabled" if read_off else "enabled",
            "gdr_read_reason": f"NCCL_NET_GDR_READ={raw}" if read_off else
            "RCCL sends with GPUDirect too: the base's pre-Ampere read rule is compiled out on AMD "
            "(paths.cc:389@rocm-6.2.2)"}
    return Decision("gdr", "enabled", (cause("rccl.nic_flag", text=nic_why), cause("rccl.gpu_flag", text=gpu_why),
                                       cause("rccl.gdr.within", **path)),
                    (need("rccl.gdr.hyperv_unseen"),) if hyperv_unseen else (), distance=d, via=via,
                    facts={**pair_level, **send})
