"""What a device is from its ids (or, in a paste, its name): which NICs can do RDMA, which GPUs are
NVLink/xGMI parts, and which devices only a hypervisor presents.

Used where the input cannot show the fact itself (an lspci paste has no /sys/class/infiniband, an lspci
tree no NVLink); every verdict built on it says that it was decided from the model.
"""

from __future__ import annotations

import re

from gdrcheck.model import PciFunction, address_known
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

# -- NICs ---------------------------------------------------------------------------------------------

# (vendor, device ids or None for every device of the vendor, RDMA-capable, what it is)
_NIC_MODELS: tuple[tuple[int, Optional[frozenset], bool, str], ...] = (
    (0x15B3, None, True, "NVIDIA/Mellanox ConnectX or BlueField (mlx5/mlx4)"),
    (0x1D0F, frozenset({0xEFA0, 0xEFA1, 0xEFA2, 0xEFA3}), True, "AWS Elastic Fabric Adapter (efa)"),
    (0x1D0F, frozenset({0xEC20, 0xEC21, 0x0EC2, 0x1EC2}), False, "AWS ENA (no RDMA)"),
    # Intel E810 / X722 (irdma), Omni-Path (hfi1)
    (0x8086, frozenset({0x1591, 0x1592, 0x1593, 0x1599, 0x159A, 0x159B, 0x188A, 0x188B, 0x188C, 0x188D,
                        0x188E, 0x1890, 0x1891, 0x1892, 0x1893, 0x1894, 0x1895, 0x1897, 0x1898, 0x1899,
                        0x37D0, 0x37D1, 0x37D2, 0x37D3}), True, "Intel E810/X722 (irdma)"),
    (0x8086, frozenset({0x24F0, 0x24F1}), True, "Intel Omni-Path (hfi1)"),
    # Intel ports without RDMA: I210/I211/I350/82576/82574, X520/X540/X550, X710/XL710/XXV710
    (0x8086, frozenset({0x1533, 0x1536, 0x1537, 0x1538, 0x1539, 0x157B, 0x157C, 0x1521, 0x1522, 0x1523,
                        0x1524, 0x10C9, 0x10E6, 0x10E7, 0x10E8, 0x1526, 0x150A, 0x1518, 0x150D, 0x10D3,
                        0x10FB, 0x1528, 0x1563, 0x15AD, 0x15AB, 0x1572, 0x1574, 0x1580, 0x1581, 0x1583,
                        0x1584, 0x1585, 0x1586, 0x1587, 0x1588, 0x1589, 0x158A, 0x158B, 0x37CE, 0x37CF,
                        0x154C, 0x10ED, 0x1515, 0x15A8}),
     False, "Intel Ethernet without RDMA (igb/ixgbe/i40e)"),
    # Broadcom NetXtreme-E (bnxt_re)
    (0x14E4, frozenset({0x16C1, 0x16C8, 0x16C9, 0x16CA, 0x16CC, 0x16CE, 0x16CF, 0x16D0, 0x16D1, 0x16D2,
                        0x16D4, 0x16D5, 0x16D6, 0x16D7, 0x16D8, 0x16D9, 0x16DE, 0x16DF, 0x16E1, 0x16E2,
                        0x16E3, 0x16E5, 0x16E7, 0x16E8, 0x16E9, 0x16EB, 0x16EF, 0x16F0, 0x16F1, 0x1604,
                        0x1605, 0x1606, 0x1609, 0x1614, 0x1750, 0x1751, 0x1752, 0x1760, 0x1800, 0x1801,
                        0x1802, 0x1803, 0x1804, 0x1805, 0x1806, 0x1807, 0x1808, 0x1809, 0xD800, 0xD802,
                        0xD804}), True, "Broadcom NetXtreme-E (bnxt_re)"),
    (0x1425, None, True, "Chelsio T5/T6 (iw_cxgb4)"),
    (0x1077, frozenset({0x1634, 0x1629, 0x1636, 0x1644, 0x1654, 0x1656, 0x8070, 0x8080, 0x8090}), True,
     "Marvell/QLogic FastLinQ (qedr)"),
    (0x1AF4, None, False, "virtio-net (no RDMA)"),
    (0x1414, None, False, "Hyper-V network adapter (no RDMA)"),
    (0x15AD, None, False, "VMware vmxnet (no RDMA)"),
    (0x10EC, None, False, "Realtek Ethernet (no RDMA)"),
    (0x1AE0, None, False, "Google gVNIC (no RDMA)"),
    (0x1D6A, None, False, "Aquantia/Marvell AQtion (no RDMA)"),
)

_NIC_NAMES = (
    (lazy_pattern(r"connectx|bluefield|mellanox|infiniband|\bmt2\d{3}", re.I), True,
     "NVIDIA/Mellanox ConnectX or BlueField (mlx5/mlx4)"),
    (lazy_pattern(r"elastic fabric adapter|\befa\b", re.I), True, "AWS Elastic Fabric Adapter (efa)"),
    (lazy_pattern(r"\bE810\b|\bX722\b|omni-?path", re.I), True, "Intel E810/X722/Omni-Path (irdma, hfi1)"),
    (lazy_pattern(r"BCM57[45]\d{2}|BCM576\d\d|BCM578\d\d|NetXtreme-E|P[24]\d{2}[a-z]? .*Broadcom|Thor", re.I), True,
     "Broadcom NetXtreme-E (bnxt_re)"),
    (lazy_pattern(r"chelsio", re.I), True, "Chelsio (iw_cxgb4)"),
    (lazy_pattern(r"virtio", re.I), False, "virtio-net (no RDMA)"),
    (lazy_pattern(r"\bI21[01]\b|\bI350\b|\b8257[46]|\bX710\b|\bXL710\b|\bXXV710\b|\bX520\b|\bX540\b|\bX550\b|"
                r"\b82599|\bI22[56]\b|\bI219\b", re.I), False, "Intel Ethernet without RDMA"),
    (lazy_pattern(r"realtek|\bRTL8\d{3}", re.I), False, "Realtek Ethernet (no RDMA)"),
    (lazy_pattern(r"Hyper-V|vmxnet|\bgVNIC\b|\bENA\b", re.I), False, "virtual NIC (no RDMA)"),
)


def nic_model(d: PciFunction) -> tuple[Optional[bool], str]:
    """(whether the model can be an RDMA device, what it is); (None, "") when the model is not known."""
    if d.class_code is not None and d.class_code >> 8 in (0x0207, 0x0C06):
        return True, "InfiniBand controller"
    if d.vendor is not None:
        for vendor, ids, capable, what in _NIC_MODELS:
            if d.vendor == vendor and (ids is None or d.device in ids):
                return capable, what
        if d.device is not None:
            return None, ""
    if d.name:
        for rx, capable, what in _NIC_NAMES:
            if rx.search(d.name):
                return capable, what
    return None, ""


# -- GPUs with NVLink / NVSwitch / xGMI -------------------------------------------------------------------

# NVIDIA GPUs by device id (names as in the public pci.ids, 2026): the NVLink/NVSwitch (SXM) parts, and
# parts that are not, so that an lspci made with an older pci.ids ("NVIDIA Corporation Device 2335") is read
# by its id
_NVLINK_GPUS = {
    0x15F9: "P100 SXM2", 0x1DB1: "V100 SXM2", 0x1DB5: "V100 SXM2", 0x1DB8: "V100 SXM3", 0x1DB7: "V100 DGXS",
    0x20B0: "A100 SXM4", 0x20B2: "A100 SXM4", 0x20B3: "A100 SXM", 0x20B4: "A100 SXM4", 0x20BD: "A800 SXM4",
    0x2330: "H100 SXM5 80GB", 0x2324: "H800 SXM5", 0x2335: "H200 SXM 141GB", 0x2336: "H100 SXM5",
    0x2337: "H100 SXM5 64GB", 0x2338: "H100 SXM5 96GB", 0x2339: "H100 SXM5 94GB", 0x233B: "H200 NVL",
    0x2342: "GH200", 0x2348: "GH200 144GB HBM3e", 0x2901: "B200", 0x2909: "HGX B200 168GB", 0x2941: "GB200",
    0x2920: "B100", 0x3182: "B300 SXM6", 0x31C2: "GB300", 0x31C3: "GB300",
}
_OTHER_NVIDIA_GPUS = {
    0x2321: "H100 NVL", 0x2322: "H800 PCIe", 0x2331: "H100 PCIe", 0x233A: "H800 NVL", 0x233D: "H100 96GB",
    0x20B1: "A100 PCIe 40GB", 0x20B5: "A100 PCIe 80GB", 0x20F1: "A100 PCIe 40GB", 0x26B5: "L40", 0x26B9: "L40S",
    0x27B8: "L4",
    0x26B1: "RTX 6000 Ada Generation", 0x2684: "GeForce RTX 4090", 0x2B85: "GeForce RTX 5090",
    0x2BB1: "RTX PRO 6000 Blackwell Workstation Edition", 0x2BB5: "RTX PRO 6000 Blackwell Server Edition",
}
_XGMI_GPUS = {0x7408: "MI250X", 0x740C: "MI250/MI250X", 0x74A0: "MI300A", 0x74A1: "MI300X", 0x74A5: "MI325X",
              0x74A9: "MI300X HF", 0x74BD: "MI300X HF", 0x75A0: "MI350X", 0x75A3: "MI355X"}
_NVLINK_NAME = lazy_pattern(r"\bSXM\d?\b|\bHGX\b|\bGH200\b|\bGB200\b|\bB200\b|\bH200\b|\bMI2[05]0X?\b|\bMI3\d\dX?\b|"
                          r"\bOAM\b", re.I)


# compute capabilities of the data-centre generations that come as SXM parts (V100, A100, H100/H200,
# B200): an NCCL topology file that names only ``sm`` cannot rule NVLink out for them
_NVLINK_SM = {"70": "sm_70 (V100-class)", "80": "sm_80 (A100-class)", "90": "sm_90 (H100/H200-class)",
              "100": "sm_100 (B200-class)"}


_NVIDIA_BARE_ID = lazy_pattern(r"NVIDIA Corporation Device ([0-9a-fA-F]{4})\s*$")
# Grace CPU + GPU products (NVLink-C2C): GH200, GB200, GB300. Chip names (GH100, GB100, GB110, GB202 ...) are
# GPUs alone, in x86 machines as well: lspci names an H100 SXM "GH100 [H100 SXM5 80GB]", an RTX 5090 "GB202"
_GRACE_PART = lazy_pattern(r"\bG[HB][2-9]00\b")


def nvidia_device_id(d: PciFunction) -> Optional[int]:
    """The NVIDIA device id: from the ids, or from the name an lspci with an older pci.ids gives
    ("NVIDIA Corporation Device 2335")."""
    if d.vendor == 0x10DE and d.device is not None:
        return d.device
    if d.vendor is None and d.name:
        m = _NVIDIA_BARE_ID.search(d.name)
        if m:
            return int(m.group(1), 16)
    return None


def gpu_model(d: PciFunction) -> Optional[str]:
    """The NVIDIA GPU model known from the device id (``None`` when the id is not in the table)."""
    dev = nvidia_device_id(d)
    if dev is None:
        return None
    return _NVLINK_GPUS.get(dev) or _OTHER_NVIDIA_GPUS.get(dev)


def grace_part(name: Optional[str]) -> bool:
    """Whether a GPU model name is a Grace CPU + GPU product (GH200, GB200, GB300), joined by NVLink-C2C."""
    return bool(name) and _GRACE_PART.search(name) is not None


def nvlink_part(d: PciFunction) -> Optional[str]:
    """The GPU model when it is an SXM/OAM part whose GPUs talk over NVLink/NVSwitch (or xGMI), else None."""
    dev = nvidia_device_id(d)
    if dev in _NVLINK_GPUS:
        return _NVLINK_GPUS[dev]
    if dev is not None:
        return None
    if d.vendor == 0x1002 and d.device in _XGMI_GPUS:
        return _XGMI_GPUS[d.device]
    sm = (d.extra.get("nccl_gpu") or {}).get("sm") if d.device is None else None
    if sm and str(sm).strip() in _NVLINK_SM:
        return _NVLINK_SM[str(sm).strip()]
    if d.device is None and d.name:
        m = _NVLINK_NAME.search(d.name)
        if m:
            return m.group(0)
    if d.device is None and (not d.name or not address_known(d)) and not sm:  # a matrix's GPUn: no model
        return "GPUs of a model the input does not name"
    return None


def link_word(d: PciFunction) -> str:
    return "xGMI" if d.vendor == 0x1002 or (d.name and re.search(r"\bMI\d{3}", d.name)) else "NVLink"


# -- virtual platforms -----------------------------------------------------------------------------------

# (vendor, device or None, what): devices only a hypervisor presents
_VIRTUAL = (
    (0x1AF4, None, "QEMU/KVM (Red Hat virtio devices)"),
    (0x1B36, None, "QEMU/KVM (QEMU PCIe ports)"),
    (0x1234, 0x1111, "QEMU/KVM (QEMU VGA)"),
    (0x8086, 0x29C0, "QEMU/KVM (Q35 host bridge)"),
    (0x8086, 0x1237, "QEMU/KVM (i440FX host bridge)"),
    (0x1414, None, "Hyper-V (Microsoft devices)"),
    (0x15AD, None, "VMware (VMware devices)"),
    (0x5853, None, "Xen (Xen platform device)"),
    (0x104C, 0x8232, "QEMU/KVM (emulated TI XIO3130 switch port)"),
    (0x104C, 0x8233, "QEMU/KVM (emulated TI XIO3130 switch port)"),
)
_VIRTUAL_NAMES = (
    (lazy_pattern(r"Red Hat, Inc\.? (Virtio|QEMU)|\bVirtio\b", re.I), "QEMU/KVM (Red Hat virtio devices)"),
    (lazy_pattern(r"\bQEMU\b|\b82G33/G31/P35/P31 Express DRAM|\bQ35\b", re.I), "QEMU/KVM (QEMU devices)"),
    (lazy_pattern(r"Microsoft Corporation Hyper-V|Hyper-V virtual", re.I), "Hyper-V (Microsoft devices)"),
    (lazy_pattern(r"VMware", re.I), "VMware (VMware devices)"),
    (lazy_pattern(r"Firecracker", re.I), "Firecracker"),
    (lazy_pattern(r"XenSource|Xen Platform", re.I), "Xen (Xen platform device)"),
)


def virtual_platform(devices: Iterable[PciFunction]) -> Optional[tuple[str, str]]:
    """(platform, the device that shows it) when any device is one only a hypervisor presents."""
    for d in devices:
        if d.vendor is not None:
            for vendor, device, what in _VIRTUAL:
                if d.vendor == vendor and (device is None or d.device == device):
                    return what, d.bdf
        elif d.name:
            for rx, what in _VIRTUAL_NAMES:
                if rx.search(d.name):
                    return what, d.bdf
    return None
