"""Which RDMA devices and ports NCCL's IB transport lists: ``NCCL_IB_HCA`` and the ports' state.

Sources (``NVIDIA/nccl``; line numbers at the tag named):
* ``NCCL_IB_HCA``: v2.30.7 ``src/transport/net_ib/init.cc:317-324, 368-370`` (``^`` excludes, then ``=`` exact
  names, else prefixes); its entries, ``parseStringList`` ``src/misc/utils.cc:193-215`` (``name:port``, the
  port ``atoi``-ed, absent or empty -1), matched per port by ``matchIfList`` ``utils.cc:224-243`` (a port of -1
  on either side matches every port). A device is used when one of its ACTIVE ports is listed.
* only ACTIVE ports are listed: v2.30.7 ``net_ib/init.cc:363``, v2.18.1 ``net_ib.cc:210``.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional


def _atoi(text: str) -> int:
    i = 0
    while i < len(text) and text[i] in " \t\n\v\f\r":
        i += 1
    j = i + (1 if text[i:i + 1] in ("+", "-") else 0)
    k = j
    while k < len(text) and text[k].isdigit():
        k += 1
    return int(text[i:k]) if k > j else 0


def parse_hca(spec: str) -> tuple[bool, bool, list[tuple[str, int]]]:
    """(exclude, exact, [(name or prefix, port or -1)]) as NCCL reads ``NCCL_IB_HCA``."""
    s = spec
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    items = []
    for entry in (e for e in s.split(",") if e):
        parts = entry.split(":")
        if not parts[0]:
            continue
        port = _atoi(parts[1]) if len(parts) > 1 and parts[1] != "" else -1
        items.append((parts[0], port))
    return exclude, exact, items


class NameList:
    """A parsed ``NCCL_IB_HCA`` / ``NCCL_SOCKET_IFNAME`` list indexed once: the ports listed with each name
    (exact) or prefix, so a lookup costs the name's length, not the list's (a list of many thousand entries
    times every interface and pair burned CPU)."""

    def __init__(self, spec: str) -> None:
        self.exclude, self.exact, items = parse_hca(spec)
        self.empty = not items
        self._ports: dict[str, set] = {}
        for name, port in items:
            self._ports.setdefault(name, set()).add(port)
        self._lengths = sorted({len(n) for n in self._ports})

    def ports(self, name: str) -> set:
        """The ports listed with ``name`` (-1: every port); empty when it is not listed."""
        if self.exact:
            return self._ports.get(name, set())
        got: set = set()
        for k in self._lengths:
            if k > len(name):
                break
            got |= self._ports.get(name[:k], set())
        return got

    def listed(self, name: str, port: Optional[int]) -> Optional[bool]:
        """``matchIfList`` for one port; None when the port is not known and the answer depends on it."""
        if self.empty:
            return True
        wants = self.ports(name)
        if -1 in wants or (port is not None and port in wants):
            return True
        return None if port is None and wants else False


_NAME_LISTS: dict[str, NameList] = {}


def name_list(spec: str) -> NameList:
    """:class:`NameList` of ``spec``, made once per run for each setting's value."""
    got = _NAME_LISTS.get(spec)
    if got is None:
        if len(_NAME_LISTS) > 64:
            _NAME_LISTS.clear()
        got = _NAME_LISTS[spec] = NameList(spec)
    return got


def hca_match(spec: str, names: tuple[str, ...], ports: Mapping[str, Mapping[str, str]]) -> Optional[bool]:
    """Whether ``NCCL_IB_HCA=spec`` leaves NCCL one of the NIC's ports. ``ports``: ``{device: {port: state}}`` as
    the input shows them (ACTIVE ones count; none shown: the port is not known)."""
    if not names:
        return None
    listing = name_list(spec)
    seen: list[Optional[bool]] = []
    for dev in names:
        shown = ports.get(dev) or {}
        active = [int(p) for p, s in shown.items() if str(p).isdigit() and s == "ACTIVE"]
        for port in (active or ([None] if not shown else [])):
            got = listing.listed(dev, port)
            seen.append(None if got is None else (got != listing.exclude))
    if any(seen):
        return True
    return None if any(s is None for s in seen) else False


def ports_down(snap, rdma: tuple[str, ...]) -> str:
    """The NIC's RDMA ports and their states, when every port is shown and none is ACTIVE; else ''."""
    states = port_states(snap)
    seen = [(dev, port, s) for dev in rdma for port, s in sorted((states.get(dev) or {}).items())]
    if not rdma or not seen or any(dev not in states for dev in rdma) or any(s == "ACTIVE" for _d, _p, s in seen):
        return ""
    return ", ".join(f"{dev} port {port} ({s})" for dev, port, s in seen)


def port_states(snap) -> dict[str, dict[str, str]]:
    return host_record(snap, "rdma_port_states") or {}


# ---------------------------------------------------------------------------
# The IP interface the IB transport needs
#
# ``ncclIbInitDevices`` first asks ``ncclFindInterfaces`` for one IP interface and, finding none, does not start
# ("NET/IB : No IP interface found", v2.30.7 ``src/transport/net_ib/init.cc:305-310``; v2.18.6 ``net_ib.cc:169-171``).
# The search (v2.30.7 ``src/misc/socket.cc:178-233``): ``NCCL_SOCKET_IFNAME`` when longer than one character
# (``^`` excludes, ``=`` exact names, else prefixes; ``parseStringList``/``matchIfList``), else ``ib``, then
# anything but ``docker``, ``lo`` (and ``virbr`` from 2.28.3), then ``docker``, ``lo`` (then ``virbr``): with no
# setting, any interface at all will do. An interface counts with an IPv4 or IPv6 address (not ``::1``), of the
# family ``NCCL_SOCKET_FAMILY`` forces (``AF_INET``/``AF_INET6``, any other text forces nothing), and from 2.28.3
# only while its link is running (``IFF_RUNNING``, v2.28.3 ``src/misc/socket.cc``; ``src/os/linux.cc`` at v2.30.7).
# The bootstrap runs the same search (v2.30.7 ``src/bootstrap.cc:124-128``) unless ``NCCL_COMM_ID`` is set, so
# where it finds nothing NCCL does not start at all.

RUNNING_FROM = (2, 28, 3)


def ip_interfaces(snap) -> Optional[dict[str, dict[str, Optional[bool]]]]:
    return host_record(snap, "ip_interfaces", known_only=True)


def _qualifies(fams: Mapping[str, Optional[bool]], family: Optional[str], running: bool) -> Optional[bool]:
    has = (family in (None, "AF_INET") and fams.get("inet")) or (family in (None, "AF_INET6") and fams.get("inet6"))
    if not has:
        return False
    if running:
        return fams.get("running")
    return True


def ip_interface_found(version, env: Mapping[str, str],
                       interfaces: Optional[Mapping[str, Mapping[str, Optional[bool]]]]) -> tuple[Optional[bool], str]:
    """Whether NCCL's interface search finds an IP interface, and, where it does not or may not, why."""
    ifname = env.get("NCCL_SOCKET_IFNAME") or ""
    spec = ifname if len(ifname) > 1 else ""
    fam_env = env.get("NCCL_SOCKET_FAMILY")
    family = fam_env if fam_env in ("AF_INET", "AF_INET6") else None
    if interfaces is None:
        if not spec and family is None:
            return True, ""
        asked = " and ".join(f"{k}={env[k]}" for k in ("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY")
                             if (k == "NCCL_SOCKET_IFNAME" and spec) or (k == "NCCL_SOCKET_FAMILY" and family))
        return None, (f"{asked}: whether an interface of that name is up with an address is not in this input "
                      "(NCCL's IB transport needs one, v2.30.7 net_ib/init.cc:305-310)")
    listing = name_list(spec)
    seen: list[Optional[bool]] = []
    for name, fams in interfaces.items():
        if not listing.empty and bool(listing.ports(name)) == listing.exclude:
            continue
        seen.append(_qualifies(fams, family, version >= RUNNING_FROM))
    if any(seen):
        return True, ""
    wanted = (f"NCCL_SOCKET_IFNAME={ifname}" if spec else "NCCL's interface search (no NCCL_SOCKET_IFNAME)") + \
        (f" with NCCL_SOCKET_FAMILY={fam_env}" if family else "")
    state = "running " if version >= RUNNING_FROM else ""
    if any(s is None for s in seen):
        return None, (f"{wanted}: the matching interfaces' link state is not in this input, and from 2.28.3 NCCL "
                      "counts only running links (v2.30.7 net_ib/init.cc:305-310)")
    return False, (f"{wanted} finds no {state}interface with an IP address: NCCL's IB transport does not start "
                   "(\"NET/IB : No IP interface found\", v2.30.7 net_ib/init.cc:305-310), nor does its bootstrap "
                   "unless NCCL_COMM_ID is set (bootstrap.cc:124-128)")


# ---------------------------------------------------------------------------
# DMA-BUF: one probe per process up to 2.22.3
#
# Up to 2.22.3 ``ncclIbDmaBufSupport`` keeps its answer in one static for the whole process: the first device
# NCCL asks about (device 0 of the IB transport, the first of ``ibv_get_device_list`` that NCCL lists) decides
# for every NIC (v2.22.3 ``src/transport/net_ib.cc:626-651``). From 2.23.4 each device is probed once
# (``pthread_once`` per device, v2.23.4 ``net_ib.cc:736-748``).

DMABUF_PER_DEVICE_FROM = (2, 23, 0)
DMABUF_ONCE_WHY = ("NCCL up to 2.22.3 probes DMA-BUF once per process, on the first RDMA device it lists, and "
                   "applies that answer to every NIC (v2.22.3 net_ib.cc:626-651): this node's RDMA NICs answer "
                   "differently, so it depends on which one ibv_get_device_list names first (`ibv_devices`)")


def dmabuf_probe_answers(version, own: Optional[bool], listed: list[Optional[bool]]) -> list[Optional[bool]]:
    """The DMA-BUF answers this NIC may get from NCCL's probe: ``[]`` where the NIC's own answer stands (from
    2.23, or every NIC NCCL lists answers alike), else each answer a first-listed NIC could give."""
    if version >= DMABUF_PER_DEVICE_FROM or all(v == own for v in listed):
        return []
    return sorted(set(listed) | {own}, key=lambda v: (v is None, bool(v)))
