"""RCCL's settings: its level names, the P2P default by CPU, the GDR default, and the settings that differ from
NCCL's (source ``ROCm/rccl``; the same lines at ``rocm-6.1.0``, ``rocm-6.2.2`` and ``develop@0cbce2a7`` unless
named):

* level names, ``topoPathTypeStr`` ``src/graph/topo.cc:26@rocm-6.2.2`` (``:27`` on develop): LOC, XGMI, NVB, PIX,
  PXB, PXN, PHB, SYS. ``NCCL_P2P_LEVEL=NVL`` names no level of RCCL's and is ignored (``ncclGetLevel``
  ``src/graph/paths.cc:216-251@rocm-6.2.2``: ``strcmp`` with those names, else a leading digit as the old
  numbers). gdrcheck keeps NCCL's name ``NVL`` for the XGMI rank inside, so the order is NCCL's of the base.
* P2P: the user's ``NCCL_P2P_DISABLE``/``NCCL_P2P_LEVEL`` first (``paths.cc:285-290@rocm-6.2.2``), else SYS,
  PXB on ARM, Intel and Zhaoxin (``paths.cc:282-301``): SYS on an AMD CPU for any number of GPUs (NCCL's
  "at most two GPUs" rule of 2.23 is not in RCCL).
* no NVML step: ``paths.cc:307-342@rocm-6.2.2`` is compiled out under ``__HIP_PLATFORM_AMD__``, so
  ``NCCL_IGNORE_DISABLED_P2P`` does nothing.
* GDR: ``NCCL_NET_GDR_LEVEL`` else PXB (``paths.cc:410-412@rocm-6.2.2``); the Rome/Milan PHB rule is per pair
  (:mod:`gdrcheck.rules.rccl.decide`).
* ``NCCL_NET_DISABLE_INTRA`` default 1 (``paths.cc:466@rocm-6.2.2``, ``:441@rocm-6.1.0``, ``:469`` develop):
  the network never replaces P2P inside a node unless it is set to 0.
* ``NCCL_PXN_DISABLE`` default 1 (``paths.cc:525@rocm-6.2.2``, ``:500@rocm-6.1.0``, ``:528`` develop).
* ``NCCL_DMABUF_ENABLE`` default 0 (``src/misc/rocmwrap.cc:21``, all three).
"""

from __future__ import annotations

from gdrcheck.record import replace
from gdrcheck.rules.nccl.core import LEGACY_LEVELS
from gdrcheck.rules.nccl.settings import c_strtol, p2p_disabled, param, to_c_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

    from gdrcheck.rules.nccl.settings import NcclSettings
    from gdrcheck.rules.rccl.releases import Release

LEVEL_NAMES = ("LOC", "XGMI", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS")
INSIDE = {"XGMI": "NVL"}  # RCCL's name -> the name gdrcheck ranks it by (the same rank, topo.h PATH_NVL)
SHOWN = {"NVL": "XGMI"}
HONOURED = ("NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_NET_GDR_READ", "NCCL_TOPO_FILE",
            "NCCL_DMABUF_ENABLE", "NCCL_PXN_DISABLE", "NCCL_NET_DISABLE_INTRA", "NCCL_IB_DISABLE", "NCCL_IB_HCA",
            "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_IB_PCI_RELAXED_ORDERING", "RCCL_FORCE_ENABLE_GDRDMA")


def shown(level: Optional[str]) -> Optional[str]:
    """A level as RCCL names it (``XGMI`` for NCCL's ``NVL``)."""
    return SHOWN.get(level, level) if level else level


def parse_level(value: Optional[str]) -> Optional[str]:
    """``NCCL_*_LEVEL`` as RCCL's ``ncclGetLevel`` reads it (in gdrcheck's inside names); None when ignored."""
    if value is None:
        return None
    if value in LEVEL_NAMES:
        return INSIDE.get(value, value)
    if value[:1] in tuple("0123456789"):
        old = to_c_int(c_strtol(value)[0])
        return None if old < 0 else LEGACY_LEVELS[min(old, 5)]
    return None


def default_p2p(cpu: Optional[str]) -> tuple[tuple[str, ...], str]:
    """RCCL's P2P default by CPU (``paths.cc:282-301@rocm-6.2.2``): the level, or PXB and SYS when the CPU is not
    shown, and why."""
    if cpu in ("intel", "arm", "zhaoxin"):
        return ("PXB",), f"RCCL default on {cpu} (paths.cc:295-301@rocm-6.2.2)"
    if cpu is None:
        return ("PXB", "SYS"), ("RCCL default: PXB on Intel, ARM and Zhaoxin, SYS on AMD and other CPUs "
                           "(paths.cc:282-301@rocm-6.2.2); the CPU vendor is not shown")
    return ("SYS",), f"RCCL default on {cpu}: SYS for any number of GPUs (paths.cc:282@rocm-6.2.2)"


def rccl_settings(base: NcclSettings, release: Release, env: Mapping[str, str], cpu: Optional[str]) -> NcclSettings:
    """RCCL's settings in force: ``base`` carries the environment and settings files as read for the NCCL base
    (RCCL's ``param.cc`` is NCCL's), the levels and defaults are RCCL's."""
    ignored: list[str] = []
    user_gdr = parse_level(env.get("NCCL_NET_GDR_LEVEL"))
    if env.get("NCCL_NET_GDR_LEVEL") is not None and user_gdr is None:
        ignored.append(f"NCCL_NET_GDR_LEVEL={env['NCCL_NET_GDR_LEVEL']!r} (not a level name of RCCL: "
                       f"{', '.join(LEVEL_NAMES)}; the default is kept)")
    gdr = (user_gdr, f"NCCL_NET_GDR_LEVEL={env['NCCL_NET_GDR_LEVEL']}") if user_gdr \
        else ("PXB", "RCCL default (paths.cc:410@rocm-6.2.2), PHB for a GPU and NIC one bridge below the same AMD "
                     "Rome/Milan CPU (paths.cc:413-428)")
    user_p2p: Optional[str] = None
    if p2p_disabled(env):
        user_p2p, p2p_src = "LOC", f"NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']}"
    else:
        user_p2p = parse_level(env.get("NCCL_P2P_LEVEL"))
        p2p_src = f"NCCL_P2P_LEVEL={env.get('NCCL_P2P_LEVEL')}"
        if env.get("NCCL_P2P_LEVEL") is not None and user_p2p is None:
            ignored.append(f"NCCL_P2P_LEVEL={env['NCCL_P2P_LEVEL']!r} (not a level name of RCCL: "
                           f"{', '.join(LEVEL_NAMES)}; the default is kept)")
    if user_p2p:
        p2p_levels: tuple[str, ...] = (user_p2p,)
    else:
        p2p_levels, p2p_src = default_p2p(cpu)
    overrides = {k: env[k] for k in HONOURED if k in env and env[k] != ""}
    return replace(base, version=release.nccl_base, gdr_level=gdr[0], gdr_level_source=gdr[1],
                   p2p_levels=p2p_levels, p2p_level_source=p2p_src, user_p2p_level=user_p2p, user_gdr_level=user_gdr,
                   dmabuf_enabled=param(env, "NCCL_DMABUF_ENABLE", 0)[0] != 0, overrides=overrides,
                   ignore_disabled_p2p=0, ignored=tuple(ignored))
