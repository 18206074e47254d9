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

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Optional, Tuple


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


def node_cpu(snap) -> Tuple[Optional[str], str]:
    """(kind, where it came from) for the snapshot's CPU node 0; kind None when nothing shows it."""
    f = snap.host.get("cpu_vendor")
    if f is not None and getattr(f, "known", False) and f.value is not None:
        return cpu_kind(f.value), f"{f.source or '/proc/cpuinfo'}: {f.value!r}"
    x = snap.host.get("nccl_cpu")
    if x is not None and getattr(x, "known", False) and isinstance(x.value, dict):
        arch, vendor = x.value.get("arch"), x.value.get("vendor")
        if arch == "x86_64" and vendor is not None:
            return cpu_kind(vendor), f"NCCL topology XML <cpu vendor={vendor!r}>"
        if arch in ("arm64", "ppc64"):
            return cpu_kind(arch), f"NCCL topology XML <cpu arch={arch!r}>"
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
    return None, "the input shows no /proc/cpuinfo, no NCCL <cpu> and no host bridge of a known CPU vendor"


# what lspci calls the function at 00.0 of a root bus (the root complex) on each CPU vendor's parts
_ROOT_NAMES = (("Advanced Micro Devices", "amd"), ("Intel Corporation", "intel"), ("IBM", "power"),
               ("Ampere Computing", "arm"), ("Huawei", "arm"))
_NOT_ROOT = ("[AMD/ATI]", "Ethernet", "Network", "NVMe", "Non-Volatile", "VGA", "Display", "3D")


def root_complex_names(snap) -> Optional[Tuple[str, str]]:
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
