"""NCCL's GPU-GPU P2P decision for one pair: ``ncclTopoCheckP2p``, then the P2P transport's own checks.

Sources (``NVIDIA/nccl``):
* default level per version and CPU: v2.8.4 ``src/graph/paths.cc:267-290`` (SYS; ARM PXB; Intel BDW PXB,
  other Intel PHB; Zhaoxin PXB), v2.22.3 ``paths.cc:284-300`` (SYS; ARM, Intel, Zhaoxin PXB; first with
  this rule v2.9.6), v2.23.4 ``paths.cc:277-290`` (PXB; x86 AMD with at most two GPU nodes SYS), v2.30.7
  ``paths.cc:355-365`` (the same, counting physical GPUs: DEV nodes). The user's level replaces the default
  (``ncclGetUserP2pLevel`` ``paths.cc:287-294``).
* NVB: a path through one intermediate GPU over NVLink, v2.30.7 ``paths.cc:73-82`` (``NCCL_NVB_DISABLE``
  ``paths.cc:36``, since v2.12.7 ``paths.cc:32``); NCCL_P2P_USE_CUDA_MEMCPY rejects it (``p2p.cc:138-141``).
* NVML status, only when the level check passed: v2.30.7 ``paths.cc:373-412`` (since v2.19.1 a bad status
  sets p2p=0 on every path; an NVLink path aborts init unless ``NCCL_IGNORE_DISABLED_P2P``; ``=2`` skips the
  check); v2.12.7-v2.18.6 ``paths.cc:314-330`` (a bad status on PCIe only logs when the setting is 0, and
  the transport's ``cudaDeviceCanAccessPeer`` decides); no NVML check before v2.12.7.
* the network preferred over P2P: ``ncclTopoCheckNet`` v2.30.7 ``paths.cc:599-631`` (since v2.18.1
  ``paths.cc:415``; first in v2.14.3 ``paths.cc:402-434``), called by the P2P transport (``p2p.cc:130-210``)
  after an NVB path has returned (``p2p.cc:138-141``): NVB pairs never take the network.
"""

from __future__ import annotations

from gdrcheck.record import record
from gdrcheck.rules.nccl.core import version_str, within
from gdrcheck.rules.nccl.decision import Cause, Decision, Need, cause, need, shared_cause

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version

PXB_DEFAULT_FROM = (2, 23, 0)
INTEL_ARM_PXB_FROM = (2, 9, 6)
NVML_CHECK_FROM = (2, 12, 7)
NVML_PCIE_DISABLES_FROM = (2, 19, 0)
NVB_DISABLE_FROM = (2, 12, 7)
CHECK_NET_FROM = (2, 14, 0)


@record(frozen=True)
class DefaultLevel:
    level: Optional[str]  # None when it rests on a fact the input does not show, or on the job
    reason: str
    alternatives: tuple[tuple[str, str], ...] = ()  # (level, the condition under which NCCL uses it)


def default_p2p_level(version: Version, cpu: Optional[str], n_gpus: int,
                      job_gpus: Optional[int] = None) -> DefaultLevel:
    """NCCL's default P2P level. ``job_gpus``: how many of the node's GPUs the job's communicator holds, where
    that is known (``None``: any number up to ``n_gpus``)."""
    v = version_str(version)
    if version >= PXB_DEFAULT_FROM:
        amd_sys = ("SYS", "x86 AMD CPU and at most 2 GPUs of the communicator on this node")
        if job_gpus is not None and job_gpus > 2 and cpu in (None, "amd"):
            return DefaultLevel("PXB", f"NCCL {v} default with {job_gpus} GPUs of this node in the "
                                       "communicator, more than 2, on any CPU")
        if job_gpus is not None and cpu == "amd":
            return DefaultLevel("SYS", f"NCCL {v} default on x86 AMD with {job_gpus} GPUs in the communicator")
        if cpu is None:
            return DefaultLevel(None, f"NCCL {v} default: PXB, SYS on x86 AMD with at most 2 GPUs; the CPU "
                                      "vendor is not shown",
                                (amd_sys, ("PXB", "any other CPU, or more than 2 GPUs")))
        if cpu != "amd":
            return DefaultLevel("PXB", f"NCCL {v} default on {cpu}")
        if n_gpus and n_gpus <= 2:
            return DefaultLevel("SYS", f"NCCL {v} default on x86 AMD with {n_gpus} GPUs")
        return DefaultLevel(None, f"NCCL {v} default on x86 AMD: SYS when the communicator has at most 2 GPUs "
                                  "on this node, else PXB",
                            (amd_sys, ("PXB", "x86 AMD CPU and more than 2 GPUs of the communicator on this node")))
    if version >= INTEL_ARM_PXB_FROM:
        if cpu is None:
            return DefaultLevel(None, f"NCCL {v} default: PXB on Intel, ARM and Zhaoxin, SYS otherwise; the CPU "
                                      "vendor is not shown",
                                (("PXB", "Intel, ARM or Zhaoxin CPU"), ("SYS", "AMD, POWER or another CPU")))
        if cpu in ("intel", "arm", "zhaoxin"):
            return DefaultLevel("PXB", f"NCCL {v} default on {cpu}")
        return DefaultLevel("SYS", f"NCCL {v} default on {cpu}")
    # 2.8.x: SYS; ARM and Zhaoxin PXB; Intel Broadwell PXB, newer Intel PHB
    if cpu in ("arm", "zhaoxin"):
        return DefaultLevel("PXB", f"NCCL {v} default on {cpu}")
    if cpu == "intel":
        return DefaultLevel(None, f"NCCL {v} default on Intel: PXB on Broadwell and older, PHB on newer",
                            (("PXB", "Intel Broadwell or older (cpuid model < 0x55)"),
                             ("PHB", "Intel Skylake or newer")))
    if cpu is None:
        return DefaultLevel(None, f"NCCL {v} default: SYS, PXB on ARM/Zhaoxin/Intel Broadwell, PHB on newer "
                                  "Intel; the CPU vendor is not shown",
                            (("SYS", "AMD, POWER or another CPU"), ("PXB", "ARM, Zhaoxin or Intel Broadwell"),
                             ("PHB", "Intel Skylake or newer")))
    return DefaultLevel("SYS", f"NCCL {v} default on {cpu}")


@record(frozen=True)
class PairFacts:
    """What the P2P decision needs about one GPU pair (filled by the evaluator)."""

    path_type: Optional[str]  # NCCL's type: NVL, NVB, PIX, PXB, PHB, SYS; None when the input cannot say
    path_candidates: tuple[str, ...] = ()
    via: Optional[str] = None  # the intermediate GPU of an NVB path
    nvml: tuple[tuple[str, Optional[str], Optional[str]], ...] = ()  # per hop: (hop, read, write)
    net_faster: Optional[bool] = False  # ncclTopoCheckNet: both GPUs have a faster NIC at PXB or closer
    net_detail: str = ""
    link: str = "NVLink"  # the GPU link's name in the reasons ("xGMI" on an AMD GPU pair)


def decide(version: Version, st, default: DefaultLevel, f: PairFacts) -> Decision:
    """One pair's decision (``init_fails`` among its facts where NCCL aborts at init)."""
    t = f.path_type
    if t is None:
        cands = tuple(f.path_candidates)
        if cands:
            outcomes = {_level_ok(version, st, default, c) for c in cands}
            if outcomes == {False}:
                return Decision("p2p", "disabled", (cause("p2p.every_path_beyond", candidates=cands,
                                                          level=st.p2p_level, source=st.p2p_level_source),))
        return Decision("p2p", "unknown", (cause("p2p.unplaced", candidates=cands),))
    depends: tuple[Need, ...] = ()
    if t == "NVB":
        if st.param("NCCL_P2P_USE_CUDA_MEMCPY", 0):
            return Decision("p2p", "disabled", (cause("p2p.nvb_memcpy", via=f.via),))
        depends += (need("p2p.nvb_rank", via=f.via),)
    level, level_src = st.user_p2p_level, st.p2p_level_source
    if level is None:
        if default.level is not None:
            level = default.level
        else:
            outcomes = {lv: within(t, lv, version) for lv, _ in default.alternatives}
            if len(set(outcomes.values())) == 1:
                if not outcomes[default.alternatives[0][0]]:
                    return Decision("p2p", "disabled", (cause("p2p.beyond_defaults", path=t, why=default.reason),))
                levels = "/".join(lv for lv, _ in default.alternatives)
                return _after_level(version, st, f, t, cause("p2p.within", path=t, level=levels,
                                                             source=default.reason), depends)
            needs = tuple(need("p2p.with" if outcomes[lv] else "p2p.host_with", condition=cond)
                          for lv, cond in default.alternatives)
            ordered = tuple(n for n in needs if n.code == "p2p.with") + tuple(n for n in needs if n.code != "p2p.with")
            ok = [cond for lv, cond in default.alternatives if outcomes[lv]]
            no = [cond for lv, cond in default.alternatives if not outcomes[lv]]
            # the fork, typed: each answer with the fact of the hardware or the job it rests on
            alternatives = [{"p2p": "enabled", "if": c} for c in ok] + [{"p2p": "disabled", "if": c} for c in no]
            return Decision("p2p", "unknown", (cause("p2p.default_open", path=t, why=default.reason),), ordered,
                            facts={"alternatives": alternatives})
    if not within(t, level, version):
        return Decision("p2p", "disabled", (cause("p2p.beyond", path=t, level=level, source=level_src),))
    return _after_level(version, st, f, t, shared_cause("p2p.within", path=t, level=level, source=level_src),
                        depends)


def _after_level(version: Version, st, f: PairFacts, t: str, level_ok: Cause, depends: tuple[Need, ...]) \
        -> Decision:
    """NVML status, then the transport's network check, once the level check passed."""
    # NVML P2P status, only now that the level check passed
    ignore = st.ignore_disabled_p2p
    nvlink = t in ("NVL", "NVB")
    said: tuple[Cause, ...] = (level_ok,)
    if version >= NVML_CHECK_FROM and ignore != 2:
        bad = tuple((hop, r, w) for hop, r, w in f.nvml if (r is not None and r != "OK")
                    or (w is not None and w != "OK"))
        missing = tuple(hop for hop, r, w in f.nvml if r is None or w is None)
        if bad:
            if nvlink and not ignore:
                return Decision("p2p", "disabled", (cause("p2p.nvml_abort", hops=bad, link=f.link),),
                                facts={"init_fails": True})
            if version >= NVML_PCIE_DISABLES_FROM or ignore:
                return Decision("p2p", "disabled", (cause("p2p.nvml_fallback", hops=bad),))
            return Decision("p2p", "unknown", (cause("p2p.nvml_logged", hops=bad, version=version_str(version)),),
                            (need("p2p.can_access"),))
        if missing:
            return Decision("p2p", "unknown", said + (cause("p2p.nvml_unknown", hops=missing),),
                            (need("p2p.nvml_status"),))
        said += (shared_cause("p2p.nvml_ok"),)
    elif version < NVML_CHECK_FROM:
        bad_hops = [hop for hop, r, w in f.nvml if (r and r != "OK") or (w and w != "OK")]
        if bad_hops or any(r is None or w is None for _, r, w in f.nvml):
            return Decision("p2p", "unknown", said + (cause("p2p.no_nvml_check", version=version_str(version)),),
                            (need("p2p.can_access"),))
    else:
        said += (cause("p2p.nvml_skipped"),)
    # an NVB path returns before ncclTopoCheckNet (p2p.cc:138-141@v2.30.7, p2p.cc:116-119@v2.18.6)
    if version >= CHECK_NET_FROM and st.param("NCCL_NET_DISABLE_INTRA", 0) != 1 and t != "NVB":
        if f.net_faster:
            return Decision("p2p", "disabled", said + (cause("p2p.net_faster", detail=f.net_detail),))
        if f.net_faster is None:
            depends += (need("p2p.check_net", detail=f.net_detail),)
    transport = shared_cause("p2p.transport", path=t, link=f.link, via=f.via)
    return Decision("p2p", "enabled", said + (transport,), depends)


def _level_ok(version, st, default: DefaultLevel, t: str) -> Optional[bool]:
    if st.user_p2p_level:
        return within(t, st.user_p2p_level, version)
    if default.level:
        return within(t, default.level, version)
    got = {within(t, lv, version) for lv, _ in default.alternatives}
    return got.pop() if len(got) == 1 else None
