"""The CPU NCCL keys its P2P default on: arch and vendor of CPU node 0.

NCCL reads them with ``cpuid`` (v2.30.7 ``src/graph/xml.cc:503-560``), stores them on ``<cpu arch vendor>``
and matches the vendor with ``kvDictCpuVendor`` (v2.30.7 ``src/graph/topo.cc:707-711``: ``GenuineIntel``,
``AuthenticAMD``, ``CentaurHauls`` and ``"  Shanghai  "`` for Zhaoxin, prefix match ``xml.h:425-438``;
any other string, e.g. Hygon's ``HygonGenuine``, is vendor 0: none of the three). ``ncclTopoCpuType``
returns CPU node 0's values (``topo.cc:2141-2146``).

Where the input has no ``/proc/cpuinfo``, gdrcheck takes the vendor from what the input does show: the
``<cpu>`` of an NCCL topology XML, else the vendor of the host bridges in the PCI tree (Intel 0x8086,
AMD 0x1022, Zhaoxin 0x1d17, IBM POWER 0x1014; NVIDIA Grace and Ampere Computing root ports are ARM).
"""

from __future__ import annotations

from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.rules.nccl.core import NEWEST, version_str

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


# PCI vendor of the host bridge / root ports -> NCCL's CPU kind
_HOST_BRIDGE_VENDORS = {0x8086: "intel", 0x1022: "amd", 0x1D17: "zhaoxin", 0x1014: "power", 0x10DE: "arm",
                        0x1DEF: "arm", 0x19E5: "arm", 0x1D94: "other"}


def cpu_kind(vendor: Optional[str]) -> Optional[str]:
    """``intel``, ``amd``, ``zhaoxin`` (x86 vendors NCCL knows), ``arm``, ``power``, ``other``; None unknown."""
    if vendor is None:
        return None
    v = str(vendor)
    if v in ("intel", "amd", "zhaoxin", "arm", "power", "other"):
        return v
    if v.startswith("GenuineIntel"):
        return "intel"
    if v.startswith("AuthenticAMD"):
        return "amd"
    # /proc/cpuinfo readers strip the padding of "  Shanghai  "; NCCL's cpuid string keeps it
    if v.startswith("CentaurHauls") or v.strip() == "Shanghai":
        return "zhaoxin"
    if v in ("ARM", "arm64", "aarch64"):
        return "arm"
    if v in ("IBM", "ppc64", "ppc64le", "POWER"):
        return "power"
    return "other"


def node_cpu(snap, library: str = "NCCL") -> tuple[Optional[str], str]:
    """(kind, where it came from) for the snapshot's CPU node 0; kind None when nothing shows it. ``library``:
    whose topology XML the ``<cpu>`` is said to be (``RCCL`` on AMD nodes)."""
    f = host_fact(snap, "cpu_vendor")
    if f is not None and getattr(f, "known", False) and f.value is not None:
        return cpu_kind(f.value), f"{f.source or '/proc/cpuinfo'}: {f.value!r}"
    x = host_record(snap, "nccl_cpu", known_only=True)
    if x is not None:
        arch, vendor = x.get("arch"), x.get("vendor")
        if arch == "x86_64" and vendor is not None:
            return cpu_kind(vendor), f"{library} topology XML <cpu vendor={vendor!r}>"
        if arch in ("arm64", "ppc64"):
            return cpu_kind(arch), f"{library} topology XML <cpu arch={arch!r}>"
    seen = set()
    for d in snap.devices:
        if d.class_code is not None and (d.class_code >> 8) in (0x0600, 0x0604) and d.vendor is not None \
                and d.parent is None and d.vendor in _HOST_BRIDGE_VENDORS:
            seen.add((_HOST_BRIDGE_VENDORS[d.vendor], d.vendor))
    kinds = {k for k, _ in seen}
    if len(kinds) == 1:
        kind = kinds.pop()
        vid = sorted(v for _, v in seen)[0]
        return kind, f"host bridge / root port vendor 0x{vid:04x} in the PCI tree"
    named = root_complex_names(snap)
    if named is not None:
        return named
    return None, f"the input shows no /proc/cpuinfo, no {library} <cpu> and no host bridge of a known CPU vendor"


# what lspci calls the function at 00.0 of a root bus (the root complex) on each CPU vendor's parts
_ROOT_NAMES = (("Advanced Micro Devices", "amd"), ("Intel Corporation", "intel"), ("IBM", "power"),
               ("Ampere Computing", "arm"), ("Huawei", "arm"))
_NOT_ROOT = ("[AMD/ATI]", "Ethernet", "Network", "NVMe", "Non-Volatile", "VGA", "Display", "3D")


def root_complex_names(snap) -> Optional[tuple[str, str]]:
    """(kind, why) from the names an lspci tree gives the function at 00.0 of each root bus (``Advanced Micro
    Devices, Inc. [AMD] Device 14a4``, ``Intel Corporation Sky Lake-E DMI3 Registers``), where the input
    has no ids; None where they do not agree or name no CPU vendor, or in a virtual machine, whose emulated
    chipset (QEMU's Intel Q35) says nothing of the host's CPU, which is what NCCL reads."""
    from gdrcheck.device_models import virtual_platform

    got = set()
    shown = ""
    for d in snap.devices:
        if d.parent is not None or d.vendor is not None or not d.name or not d.bdf.endswith(":00.0"):
            continue
        if any(w in d.name for w in _NOT_ROOT):
            continue
        for word, kind in _ROOT_NAMES:
            if d.name.startswith(word):
                got.add(kind)
                shown = shown or f"{d.bdf} {d.name!r}"
    if len(got) != 1 or virtual_platform(snap.devices):
        return None
    return got.pop(), f"the root complex's name in the lspci tree ({shown})"


# ncclTopoGetInterCpuBw, GB/s (v2.30.7 src/graph/topo.cc:60-83, topo.h:25-38; v2.26.2 topo.cc:70-92;
# v2.18.6 topo.cc:62-80): LOC_BW (5000) where no branch matches
LOC_BW = 5000.0
AMD_BW_FROM = (2, 19, 0)  # v2.19.1 topo.h AMD_BW 16; v2.18.6 has no AMD branch (LOC_BW)
SRP_ERP_FROM = (2, 26, 0)  # v2.26.2 topo.cc:80-85: Sapphire and Emerald Rapids


def cpu_model(snap) -> tuple[Optional[int], Optional[int]]:
    """(cpuid family, model) of the first CPU: /proc/cpuinfo, else the NCCL XML's ``<cpu familyid modelid>``."""
    fam, mod = host_fact(snap, "cpu_family"), host_fact(snap, "cpu_model")
    if fam is not None and mod is not None and getattr(fam, "known", False) and getattr(mod, "known", False):
        return fam.value, mod.value
    x = host_record(snap, "nccl_cpu")
    if x is not None:
        try:
            return int(str(x.get("familyid")), 0), int(str(x.get("modelid")), 0)
        except ValueError:
            pass
    return None, None


# NVIDIA/nccl dev (2.31.0a7, 86fa684d) topo.cc:77-79 and topo.h: AMD by Zen generation, from the cpuid family as
# Linux counts it (0x17 Zen 1/2, 0x19 Zen 3/4, 0x1A Zen 5) or as NCCL up to 2.30.7 wrote it (0x8F, 0xAF, 0xBF);
# topo.cc:750-751: Granite Rapids (0xAD, 0xAE) and Sierra Forest (0xAF) class as Emerald Rapids
DEV_AMD_BW = {0x17: 16.0, 0x8F: 16.0, 0x19: 24.0, 0xAF: 24.0, 0x1A: 32.0, 0xBF: 32.0}
DEV_INTEL_ERP_MODELS = (0xAD, 0xAE, 0xAF)


def _dev_branch_bw(kind: Optional[str], family: Optional[int], model: Optional[int]) -> tuple[float, ...]:
    """The CPU link bandwidths NCCL's development branch (2.31.0a7) may set where 2.30.7's differ."""
    if kind == "amd":
        return (16.0, 24.0, 32.0) if family is None else (DEV_AMD_BW.get(family, 16.0),)
    if kind == "intel" and (family is None or model is None):
        return (40.0,)
    if kind == "intel" and family == 6 and model in DEV_INTEL_ERP_MODELS:
        return (40.0,)
    return ()


def inter_cpu_bw(version, kind: Optional[str], family: Optional[int], model: Optional[int]) \
        -> tuple[tuple[float, ...], str]:
    """:func:`inter_cpu_bw_modelled`; for a version newer than the newest modelled (2.30.7), the figures of
    NCCL's development branch (2.31.0a7) are possible too where they differ: which of them the release ships is
    not known (its notes do not say), so a decision they would change is ``unknown``."""
    bws, why = inter_cpu_bw_modelled(min(version, NEWEST), kind, family, model)
    if version <= NEWEST:
        return bws, why
    extra = tuple(b for b in _dev_branch_bw(kind, family, model) if b not in bws)
    if not extra:
        return bws, why
    v = version_str(version)
    return tuple(sorted(bws + extra)), (f"{why}; NCCL's development branch (2.31.0a7, topo.cc:76-80, 750-771@dev) "
                                        f"sets {'/'.join(f'{b:g}' for b in extra)} GB/s here, and whether NCCL "
                                        f"{v} does is not known")


def inter_cpu_bw_modelled(version, kind: Optional[str], family: Optional[int], model: Optional[int]) \
        -> tuple[tuple[float, ...], str]:
    """NCCL's CPU-to-CPU bandwidth: every value it may take (one where the input shows the model) and why.
    Intel: Emerald Rapids (family 6, model >= 0xCF) 40, Sapphire Rapids (>= 0x8F) 22 (both from 2.26),
    Skylake (>= 0x55) 10, older 6; AMD 16 from 2.19 (before: LOC_BW); Zhaoxin Yongfeng (7, 0x5B) 9, else 6;
    ARM 6; POWER 32; other x86 vendors LOC_BW (topo.cc:745-756@v2.30.7 sets the model)."""
    v = version_str(version)
    if kind == "intel":
        if family is None or model is None:
            bws = (6.0, 10.0, 22.0, 40.0) if version >= SRP_ERP_FROM else (6.0, 10.0)
            return bws, f"NCCL {v} on Intel: {'/'.join(f'{b:g}' for b in bws)} GB/s by CPU model (not shown)"
        if family == 6 and model >= 0xCF and version >= SRP_ERP_FROM:
            return (40.0,), f"NCCL {v}: Intel Emerald Rapids (model 0x{model:x}), 40 GB/s"
        if family == 6 and model >= 0x8F and version >= SRP_ERP_FROM:
            return (22.0,), f"NCCL {v}: Intel Sapphire Rapids (model 0x{model:x}), 22 GB/s"
        if family == 6 and model >= 0x55:
            return (10.0,), f"NCCL {v}: Intel Skylake or newer (model 0x{model:x}), 10 GB/s"
        return (6.0,), f"NCCL {v}: Intel Broadwell or older (family {family}, model 0x{model:x}), 6 GB/s"
    if kind == "amd":
        if version >= AMD_BW_FROM:
            return (16.0,), f"NCCL {v}: AMD, 16 GB/s"
        return (LOC_BW,), f"NCCL {v} has no AMD inter-CPU figure (LOC_BW)"
    if kind == "zhaoxin":
        if family is None or model is None:
            return (6.0, 9.0), f"NCCL {v} on Zhaoxin: 6 or 9 GB/s (Yongfeng) by CPU model (not shown)"
        return ((9.0,), f"NCCL {v}: Zhaoxin Yongfeng, 9 GB/s") if (family, model) == (7, 0x5B) else \
            ((6.0,), f"NCCL {v}: Zhaoxin, 6 GB/s")
    if kind == "arm":
        return (6.0,), f"NCCL {v}: ARM, 6 GB/s"
    if kind == "power":
        return (32.0,), f"NCCL {v}: POWER, 32 GB/s"
    if kind is None:
        return (6.0, 9.0, 10.0, 16.0, 22.0, 32.0, 40.0, LOC_BW), "the CPU is not shown"
    return (LOC_BW,), f"NCCL {v}: {kind} CPU, no inter-CPU figure (LOC_BW)"
