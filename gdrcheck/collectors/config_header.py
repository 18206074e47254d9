"""What a function's sysfs attribute files say, taken from its config space where that says the same.

Pure functions, no I/O. The kernel fills most of ``/sys/bus/pci/devices/<bdf>/*`` from config
space; where the collector reads ``config`` anyway, the same values come from those bytes and the
attribute files are not opened. Each function below returns a dict holding only the facts the bytes
decide exactly as the kernel shows them; a fact left out is read from its attribute file (config
short, not readable past 64 bytes without root, or a case where the kernel's answer depends on its
version or on more than the bytes).

Header (``drivers/pci/probe.c``, ``pci_setup_device`` and ``pci_scan_device``; ``pci-sysfs.c``):

* ``vendor``/``device`` are the words at 0x00/0x02, ``revision`` the byte at 0x08. An SR-IOV VF
  reads 0xFFFF there (the kernel gives it its PF's vendor and the SR-IOV capability's VF device id)
  and takes class, revision and subsystem ids from its first VF (``pci_read_vf_config_common``,
  drivers/pci/iov.c): VFs are left to the attribute files.
* ``class`` is ``pdev->class``, which early fixups may rewrite (``DECLARE_PCI_FIXUP_*`` in
  drivers/pci/quirks.c, e.g. ``fixup_ti816x_class``, ``quirk_tw686x_class``; host drivers that make a
  root port a PCI bridge: ``tegra_pcie_fixup_class``, ``quirk_paxc_bridge``, ``loongson_bridge_class_quirk``)
  and that probe.c sets to 0 when the header type does not match it. The collector reads ``class``
  from sysfs (it decides whether ``config`` is read at all); where config's class differs from it the
  kernel changed something for that function, and every fact comes from the attribute files.
* header type 0 (``pci_subsystem_ids``): subsystem vendor/device at 0x2c/0x2e; no bus numbers
  (``secondary_bus_number``/``subordinate_bus_number`` are shown for bridges only).
* header type 1: secondary/subordinate bus at 0x19/0x1a (``secondary_bus_number_show`` reads them
  from config space when asked); subsystem ids from the Bridge Subsystem Vendor ID capability
  (``PCI_CAP_ID_SSVID`` 0x0d, +4/+6), 0 when there is none (``pci_find_capability`` stops at an
  all-ones capability id).

Link (``pcie_dev_attrs``, shown only for PCI Express functions): ``current_link_*`` from Link Status
(cap +0x12; ``pcie_link_speed[CLS]``, "Unknown" for 0 and codes the table does not hold: a link that
is down may read 0), ``max_link_width`` from Link Capabilities (+0x0c; ``pcie_get_width_cap``),
``max_link_speed`` as ``pcie_get_speed_cap``: the Supported Link Speeds vector of Link Capabilities 2
(+0x2c, PCIe capability version 2 and later) when non-zero, else LNKCAP's Max Link Speed for 2.5 and
5.0 GT/s. The kernel reads these registers only for the port types of ``pcie_cap_has_lnkctl``, which
changed over time; a root-complex integrated endpoint or event collector, and a switch port or
bridge with a version 1 capability, are left to the attribute files.
Where kernels differ, the attribute file says what this kernel shows and is read: since 6.13
(``pcie_get_supported_speeds``) speeds above LNKCAP's Max Link Speed are ignored, before they were
not; 64 GT/s is known only to newer kernels; an all-zero LNKCAP shows width 255 on newer kernels
and 0 before.
"""

from __future__ import annotations

import struct

from gdrcheck.pcie.caps import CAP_ID_PCIE, walk_caps

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

CAP_ID_SSVID = 0x0D
HEADER_BYTES = 0x40

# Link Status / Link Capabilities speed codes -> the GT/s figure sysfs prints (pcie_link_speed[] and
# pci_speed_string(), drivers/pci/probe.c and drivers/pci/pci.h). 6 (64 GT/s) is known only to newer
# kernels and is left to the attribute file.
_SPEED = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}
_KERNEL_VERSION_DEPENDENT_SPEED = 6
# pcie_cap_has_lnkctl() (drivers/pci/access.c): endpoint, legacy endpoint, root port, upstream, downstream,
# PCIe-to-PCI, PCI-to-PCIe. Kernels before it took "capability version > 1, or a root port or endpoint";
# both agree on these types for version 2, and on the first three for version 1.
_LNKCTL_PORT_TYPES = frozenset((0x0, 0x1, 0x4, 0x5, 0x6, 0x7, 0x8))
_LNKCTL_PORT_TYPES_V1 = frozenset((0x0, 0x1, 0x4))


def _cap(config: bytes, cap_id: int) -> Optional[int]:
    """Offset of a standard capability as ``pci_find_capability`` finds it; None when absent.

    Raises LookupError when the bytes read cannot say: the list lives in the first 256 bytes, and a
    non-root read stops at 64."""
    if len(config) < 256:
        raise LookupError("config space read short of the capability list")
    caps, why = walk_caps(config)
    for off, cid in caps:
        if cid == 0xFF:  # __pci_find_next_cap_ttl stops at an all-ones id
            return None
        if cid == cap_id:
            return off
    if why == "truncated":
        raise LookupError("capability list runs past the bytes read")
    return None


def header_facts(config: Optional[bytes], class_code: Optional[int]) -> dict[str, Optional[int]]:
    """vendor, device, revision, subsys_vendor, subsys_device, secondary_bus, subordinate_bus: those
    the bytes decide as sysfs shows them. ``class_code`` is what sysfs ``class`` said."""
    if config is None or len(config) < HEADER_BYTES:
        return {}
    vendor, device = struct.unpack_from("<HH", config, 0)
    if vendor in (0xFFFF, 0x0000):  # a VF, or a function that did not answer
        return {}
    (class_rev,) = struct.unpack_from("<I", config, 0x08)
    if class_code is None or class_rev >> 8 != class_code:
        return {}
    out: dict[str, Optional[int]] = {"vendor": vendor, "device": device, "revision": class_rev & 0xFF}
    hdr = config[0x0E] & 0x7F
    if hdr == 0:
        out["subsys_vendor"], out["subsys_device"] = struct.unpack_from("<HH", config, 0x2C)
        out["secondary_bus"] = out["subordinate_bus"] = None
    elif hdr == 1:
        out["secondary_bus"], out["subordinate_bus"] = config[0x19], config[0x1A]
        try:
            ssvid = _cap(config, CAP_ID_SSVID)
        except LookupError:
            return out
        if ssvid is None:
            out["subsys_vendor"] = out["subsys_device"] = 0
        elif ssvid + 8 <= len(config):
            out["subsys_vendor"], out["subsys_device"] = struct.unpack_from("<HH", config, ssvid + 4)
    return out


def link_facts(config: Optional[bytes]) -> dict[str, Optional[float]]:
    """cur_speed, cur_width, max_speed, max_width: those the bytes decide as sysfs shows them
    (all None for a function without a PCI Express capability: the kernel shows no link files)."""
    if config is None:
        return {}
    try:
        cap = _cap(config, CAP_ID_PCIE)
    except LookupError:
        return {}
    if cap is None:
        return {"cur_speed": None, "cur_width": None, "max_speed": None, "max_width": None}
    if cap + 0x30 > len(config):
        return {}
    (flags,) = struct.unpack_from("<H", config, cap + 0x02)
    if (flags >> 4) & 0xF not in (_LNKCTL_PORT_TYPES if flags & 0xF > 1 else _LNKCTL_PORT_TYPES_V1):
        return {}
    (lnkcap,) = struct.unpack_from("<I", config, cap + 0x0C)
    (lnksta,) = struct.unpack_from("<H", config, cap + 0x12)
    lnkcap2 = struct.unpack_from("<I", config, cap + 0x2C)[0] if flags & 0xF > 1 else 0
    out: dict[str, Optional[float]] = {}
    cls = lnksta & 0xF
    if cls != _KERNEL_VERSION_DEPENDENT_SPEED:
        out["cur_speed"] = _SPEED.get(cls)
    out["cur_width"] = ((lnksta >> 4) & 0x3F) or None
    if lnkcap:
        out["max_width"] = ((lnkcap >> 4) & 0x3F) or None
        max_speed = _max_speed(lnkcap, lnkcap2)
        if max_speed is not False:
            out["max_speed"] = max_speed
    return out


def _max_speed(lnkcap: int, lnkcap2: int):
    """pcie_get_speed_cap() as every kernel since 4.17 agrees on it; False where they differ."""
    sls = lnkcap & 0xF
    vector = lnkcap2 & 0xFE
    if vector:
        top = vector.bit_length() - 1  # the highest supported speed, as PCIE_LNKCAP2_SLS2SPEED picks it
        capped = vector & ((2 << sls) - 1)  # 6.13 and later: speeds above Max Link Speed ignored
        top_capped = capped.bit_length() - 1 if capped else (sls if sls in (1, 2) else 0)
        if top != top_capped or top not in _SPEED:
            return False
        return _SPEED[top]
    if sls in (1, 2):
        return _SPEED[sls]
    return False  # no vector and a Max Link Speed past 5 GT/s: older kernels printed it, newer "Unknown"
