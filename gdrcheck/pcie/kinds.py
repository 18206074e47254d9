"""What a PCI function is, from its ids, class and (when that is all there is) its name.

Bridges are refined by structure in :mod:`gdrcheck.pcie.topology` (a switch is an
upstream port whose secondary bus holds downstream ports), never by vendor id.
"""

from __future__ import annotations

import re

from gdrcheck.model import PciFunction
from gdrcheck.patterns import lazy_pattern
from gdrcheck.pcie.caps import pcie_port_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

NVIDIA = 0x10DE
AMD_ATI = 0x1002
AMD = 0x1022

# Port kinds an input may declare outright (topology trusts them). A plain "bridge"
# hint (an lspci -t bus range) says only "a bridge", so it is not among them and
# topology works out root port / switch port by structure.
BRIDGE_KINDS = ("root_port", "switch_upstream", "switch_downstream")


def is_nvidia_gpu(d: PciFunction) -> bool:
    return d.vendor == NVIDIA and d.class_code is not None and (d.class_code >> 8) in (0x0300, 0x0302)


def base_kind(d: PciFunction) -> str:
    """Kind before structure: gpu, nic, nvme, nvswitch, host_bridge, bridge or other."""
    cc = d.class_code
    if cc is not None:
        cls = cc >> 8
        if cls in (0x0604, 0x0609):
            return "bridge"
        if cls == 0x0600:
            return "host_bridge"
        if cc == 0x010802:
            return "nvme"
        if cls == 0x0680 and d.vendor == NVIDIA:
            return "nvswitch"
        if cc >> 16 == 0x02 or cls == 0x0C06:
            return "nic"
        if d.vendor in (NVIDIA,) and cls in (0x0300, 0x0302, 0x1200):
            return "gpu"
        if d.vendor == AMD_ATI and cls in (0x0380, 0x1200):
            return "gpu"
        if d.vendor is None and d.kind_hint == "gpu":
            return "gpu"
        if d.vendor is None and cls in (0x0302, 0x0380, 0x1200) and d.kind_hint != "other":
            return "gpu"
        if d.kind_hint in ("gpu", "nic", "nvswitch") and d.vendor is None:
            return d.kind_hint
        return "other"
    if d.kind_hint:
        return "bridge" if d.kind_hint in BRIDGE_KINDS else d.kind_hint
    if d.name:
        named = _kind_named(d.name)
        if named is not None:
            return named
    # a paste made without pci.ids names a function "Device 10de:2330": the vendor id says what the vendor's
    # name would have said
    if d.vendor == NVIDIA and d.device in NVSWITCH_IDS:
        return "nvswitch"
    return VENDOR_KIND.get(d.vendor, "other") if d.vendor is not None else "other"


_NAME_RULES = (
    (lazy_pattern(r"\b(audio|usb|serial bus|ucsi|smbus|sata|ide |lpc|isa bridge|raid|management interface)", re.I),
     "other"),
    (lazy_pattern(r"\bnvswitch\b|NVIDIA Corporation Device (1af1|1ac2|22a3)", re.I), "nvswitch"),
    (lazy_pattern(r"host bridge|root complex", re.I), "host_bridge"),
    (lazy_pattern(r"(pci|pcie).{0,20}(bridge|switch|port)|\bbridge\b|root port|downstream|upstream", re.I), "bridge"),
    (lazy_pattern(r"non-volatile memory|\bnvme\b|\bssd\b", re.I), "nvme"),
    (lazy_pattern(r"connectx|bluefield|ethernet|infiniband|network|mellanox|\bnic\b|elastic fabric|\bEFA\b", re.I),
     "nic"),
    (lazy_pattern(r"NVIDIA Corporation|nVidia", re.I), "gpu"),
    (lazy_pattern(r"\b(instinct|MI\d{2,3}X?|Aldebaran|Arcturus|Vega 20)\b", re.I), "gpu"),
)


NVSWITCH_IDS = (0x1AF1, 0x1AC2, 0x22A3)  # NVIDIA device ids of the NVSwitch parts (the name rule below)
# what a vendor's name alone makes of a function in _NAME_RULES ("NVIDIA Corporation Device 2330" is a GPU,
# "Mellanox Technologies Device 1021" a NIC)
VENDOR_KIND = {NVIDIA: "gpu", 0x15B3: "nic"}


def _kind_named(name: str) -> Optional[str]:
    for rx, kind in _NAME_RULES:
        if rx.search(name):
            return kind
    return None


def kind_from_name(name: str) -> str:
    """Best guess from an lspci ``-tv`` name when no ids or class are known."""
    return _kind_named(name) or "other"


def port_type(d: PciFunction) -> Optional[int]:
    """PCIe capability's Device/Port Type (4 root port, 5 upstream, 6 downstream, ...), if readable."""
    return pcie_port_type(d.config)
