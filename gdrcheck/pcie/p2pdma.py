"""The kernel's P2PDMA verdict for a provider/client pair: its map type and distance.

Follows drivers/pci/p2pdma.c (``calc_map_type_and_dist``, ``pci_p2pdma_whitelist[]``,
``host_bridge_whitelist``, ``cpu_supports_p2pdma``) of the Linux PCI tree; pure, over
the ACS states of :mod:`gdrcheck.pcie.acs` and the facts of the host.
"""

from __future__ import annotations

from gdrcheck.pcie.acs import AcsState, redirects
from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from gdrcheck.model import PciFunction


@record(frozen=True)
class WhitelistEntry:
    vendor: int
    device: Optional[int]  # None: any device (PCI_ANY_ID)
    same_host_bridge_only: bool
    what: str
    since: str  # first kernel with the entry, as far as known


_INTEL, _GOOGLE, _NVIDIA, _ZHAOXIN = 0x8086, 0x1AE0, 0x10DE, 0x1D17

# pci_p2pdma_whitelist[] of drivers/pci/p2pdma.c in the Linux PCI maintainer tree
P2PDMA_WHITELIST: tuple[WhitelistEntry, ...] = (
    WhitelistEntry(_INTEL, 0x3C00, True, "Xeon E5 / Core i7 (Sandy Bridge-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x3C01, True, "Xeon E5 / Core i7 (Sandy Bridge-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x2F00, True, "Xeon E7 v3 / E5 v3 (Haswell-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x2F01, True, "Xeon E7 v3 / E5 v3 (Haswell-EP)", "5.2"),
    WhitelistEntry(_INTEL, 0x2030, False, "Skylake-E root port A", "5.2"),
    WhitelistEntry(_INTEL, 0x2031, False, "Skylake-E root port B", "5.7"),
    WhitelistEntry(_INTEL, 0x2032, False, "Skylake-E root port C", "5.7"),
    WhitelistEntry(_INTEL, 0x2033, False, "Skylake-E root port D", "5.7"),
    WhitelistEntry(_INTEL, 0x2020, False, "Skylake-E DMI3 at 00.0", "5.2"),
    WhitelistEntry(_INTEL, 0x09A2, False, "Ice Lake Xeon and later (Memory Map/VT-d)", "5.18"),
    WhitelistEntry(_INTEL, 0x0B25, False, "Sapphire Rapids DSA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x0CFE, False, "Sapphire Rapids IAX root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x11FB, False, "Granite Rapids-D DSA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x1212, False, "Diamond Rapids DSA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x1216, False, "Diamond Rapids IAA root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4940, False, "QAT 4xxx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4942, False, "QAT 401xx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4944, False, "QAT 402xx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4946, False, "QAT 420xx root bus", "2026 tree"),
    WhitelistEntry(_INTEL, 0x4948, False, "QAT 6xxx root bus", "2026 tree"),
    WhitelistEntry(_GOOGLE, None, False, "Google SoCs", "5.9"),
    WhitelistEntry(_NVIDIA, 0x2F95, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_NVIDIA, 0x2F96, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_NVIDIA, 0x2F97, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_NVIDIA, 0x2F98, False, "NVIDIA Arm CPU root port", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1003, True, "Zhaoxin KX-6000", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1005, True, "Zhaoxin KH-40000", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1006, True, "Zhaoxin KX-6000G", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1007, True, "Zhaoxin KX-7000", "newest tree"),
    WhitelistEntry(_ZHAOXIN, 0x1008, False, "Zhaoxin KH-50000", "newest tree"),
)


def whitelist_match(ids: Optional[tuple[int, int]]) -> Optional[WhitelistEntry]:
    if ids is None:
        return None
    vendor, device = ids
    for e in P2PDMA_WHITELIST:
        if e.vendor == vendor and (e.device is None or e.device == device):
            return e
    return None


def cpu_supports_p2pdma(cpu_vendor: Optional[str], cpu_family: Optional[int]) -> Optional[bool]:
    """x86 AMD family >= 0x17 (every Zen): any pair may go through the host bridge."""
    if cpu_vendor is None:
        return None
    if cpu_vendor != "AuthenticAMD":
        return False
    if cpu_family is None:
        return None
    return cpu_family >= 0x17


def host_bridge_whitelisted(root_a: str, root_b: str,
                            root_ids: Mapping[str, Optional[tuple[int, int]]]) -> Optional[bool]:
    """``host_bridge_whitelist()``: ``root_ids`` maps a root bus to the vendor:device of its
    qualifying first device (None: none qualifies); a missing key means not known."""
    if root_a not in root_ids or root_b not in root_ids:
        return None
    ea, eb = whitelist_match(root_ids[root_a]), whitelist_match(root_ids[root_b])
    if root_a == root_b:
        return ea is not None
    return ea is not None and eb is not None and not ea.same_host_bridge_only and not eb.same_host_bridge_only


@record(frozen=True)
class P2pdmaVerdict:
    """``map_type`` (the kernel's pci_p2pdma_map_type): bus_addr, thru_host_bridge, not_supported or
    unknown (``candidates`` then lists what remains possible). ``redirect``: devices with ACS RR/CR/EC in walk order."""

    map_type: str
    distance: Optional[int] = None
    reason: str = ""
    redirect: tuple[str, ...] = ()
    unknown_acs: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    common: Optional[str] = None

    @property
    def kernel_name(self) -> str:
        return {"bus_addr": "BUS_ADDR", "thru_host_bridge": "THRU_HOST_BRIDGE",
                "not_supported": "NOT_SUPPORTED"}.get(self.map_type, "UNKNOWN")

    @property
    def disable_acs_redir(self) -> str:
        """The kernel parameter its warning suggests, or "" when nothing redirects."""
        return f"pci=disable_acs_redir={';'.join(self.redirect)}" if self.redirect else ""

    def as_tuple(self) -> tuple[str, object]:
        """("bus_addr", distance) | ("thru_host_bridge", distance) | ("not_supported", reason) | ("unknown", reason)."""
        if self.map_type in ("bus_addr", "thru_host_bridge"):
            return (self.map_type, self.distance)
        return (self.map_type, self.reason)


def _host_bridge_step(dist: int, root_a: str, root_b: str, cpu_vendor: Optional[str],
                      cpu_family: Optional[int], root_ids: Mapping[str, Optional[tuple[int, int]]],
                      redirect: tuple[str, ...], unknown: tuple[str, ...], why: str) -> P2pdmaVerdict:
    amd = cpu_supports_p2pdma(cpu_vendor, cpu_family)
    wl = host_bridge_whitelisted(root_a, root_b, root_ids)
    if amd or wl:
        how = "AMD Zen CPU (family >= 0x17)" if amd else "whitelisted host bridge"
        return P2pdmaVerdict("thru_host_bridge", dist, f"{why}; allowed: {how}", redirect, unknown)
    if amd is None or wl is None:
        missing = [n for n, v in (("CPU vendor/family", amd), ("root-bus first device", wl)) if v is None]
        return P2pdmaVerdict("unknown", dist, f"{why}; not known: {', '.join(missing)}", redirect, unknown,
                             candidates=("thru_host_bridge", "not_supported"))
    return P2pdmaVerdict("not_supported", dist,
                         f"{why}; no shared upstream bridge or whitelisted host bridge", redirect, unknown)


def kernel_p2pdma_verdict(provider_chain: Sequence[str], client_chain: Sequence[str],
                          acs: Mapping[str, Optional[AcsState]], *, provider_root: str, client_root: str,
                          cpu_vendor: Optional[str], cpu_family: Optional[int],
                          root_ids: Mapping[str, Optional[tuple[int, int]]]) -> P2pdmaVerdict:
    """The kernel's map type for a provider/client pair (``calc_map_type_and_dist()``, drivers/pci/p2pdma.c).

    Chains list the device first, then each ``pci_upstream_bridge()`` up to the
    device on the root bus (see :func:`upstream_chain`). ``acs`` maps a BDF to its
    ACS state; a device missing from it counts as unknown.
    """
    A, B = list(provider_chain), list(client_chain)
    if not A or not B:
        return P2pdmaVerdict("unknown", None, "empty bridge chain")
    common = next((a for a in A if a in B), None)
    if common is None:
        return _host_bridge_step(len(A) + len(B), provider_root, client_root, cpu_vendor, cpu_family,
                                 root_ids, (), (), "no common upstream bridge")
    ia, ib = A.index(common), B.index(common)
    redirect: list[str] = []
    unknown: list[str] = []
    for d in A[:ia + 1] + B[:ib]:
        r = redirects(acs.get(d))
        if r is None:
            unknown.append(d)
        elif r:
            redirect.append(d)
    dist = ia + ib
    red, unk = tuple(redirect), tuple(unknown)
    if redirect:
        return _host_bridge_step(dist, provider_root, client_root, cpu_vendor, cpu_family, root_ids,
                                 red, unk, f"ACS redirect set on {', '.join(red)}")
    if not unknown:
        return P2pdmaVerdict("bus_addr", dist, f"common upstream device {common}", common=common)
    fallback = _host_bridge_step(dist, provider_root, client_root, cpu_vendor, cpu_family, root_ids,
                                 red, unk, "if ACS redirects")
    alt = fallback.candidates or (fallback.map_type,)
    return P2pdmaVerdict("unknown", dist,
                         f"ACS not readable on {', '.join(unk)}: BUS_ADDR if no ACS redirect there",
                         red, unk, candidates=("bus_addr",) + tuple(k for k in alt if k != "bus_addr"),
                         common=common)


def upstream_chain(bdf: str, parent: Mapping[str, Optional[str]],
                   physfn: Optional[Mapping[str, Optional[str]]] = None) -> list[str]:
    """Device first, then ``pci_upstream_bridge()`` repeatedly; a VF continues at its PF's bridge."""
    chain = [bdf]
    seen = {bdf}
    cur: Optional[str] = bdf
    while cur is not None:
        base = (physfn or {}).get(cur) or cur
        cur = parent.get(base)
        if cur is None or cur in seen:
            break
        seen.add(cur)
        chain.append(cur)
    return chain


def device_chain(dev: PciFunction, devices: Sequence[PciFunction]) -> list[str]:
    """:func:`upstream_chain` over a list of :class:`~gdrcheck.model.PciFunction`."""
    parent = {d.bdf: d.parent for d in devices}
    parent.setdefault(dev.bdf, dev.parent)
    physfn = {d.bdf: d.physfn for d in devices if d.physfn}
    if dev.physfn:
        physfn[dev.bdf] = dev.physfn
    return upstream_chain(dev.bdf, parent, physfn)


def _devfn(bdf: str) -> int:
    dev, fn = bdf.rsplit(":", 1)[1].split(".")
    return int(dev, 16) * 8 + int(fn)


def root_ids_from_devices(devices: Sequence[PciFunction]) -> dict[str, Optional[tuple[int, int]]]:
    """Root bus -> vendor:device of ``pci_host_bridge_dev()`` (drivers/pci/p2pdma.c), emulated.

    The lowest-devfn function on the root bus counts only if it is ``00.0`` or a
    root port (class 0x0604xx stands in for the port type, which needs root to
    read); then None. Roots whose first function's IDs are not known are left out
    (unknown to :func:`host_bridge_whitelisted`).
    """
    on_root: dict[str, list[PciFunction]] = {}
    for d in devices:
        if d.parent is None and d.physfn is None:
            on_root.setdefault(d.root, []).append(d)
    out: dict[str, Optional[tuple[int, int]]] = {}
    for root, funcs in on_root.items():
        first = min(funcs, key=lambda d: _devfn(d.bdf))
        if first.vendor is None or first.device is None:
            continue
        is_port = first.class_code is not None and first.class_code >> 8 == 0x0604
        out[root] = (first.vendor, first.device) if _devfn(first.bdf) == 0 or is_port else None
    return out
