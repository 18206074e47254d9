"""The node's IP interfaces, as NCCL's interface search sees them: name, address families, and whether the link
is running.

NCCL's IB transport starts only when its interface search (``ncclFindInterfaces``) finds one IP interface
(v2.30.7 ``src/transport/net_ib/init.cc:305-310``), and the search reads ``getifaddrs``: IPv4 and IPv6
addresses, IPv6 loopback skipped, and from 2.28.3 only links with ``IFF_RUNNING`` (``src/os/linux.cc``).
gdrcheck reads the same addresses (``Source.ip_addresses``: ``SIOCGIFADDR`` and ``/proc/net/if_inet6``,
kept in a snapshot like a command's output) and each link's ``/sys/class/net/<name>/flags`` and ``operstate``.
The bootstrap every NCCL job runs first makes the same search (v2.30.7 ``src/bootstrap.cc:124-128``), so it
matters on any node with a GPU, RDMA device or not.
"""

from __future__ import annotations

from gdrcheck.collectors.host_util import HostCtx
from gdrcheck.model import Fact, unknown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

IFF_UP = 0x1  # include/uapi/linux/if.h
NET_CLASS = "/sys/class/net"
SOURCE = "getifaddrs (SIOCGIFADDR, /proc/net/if_inet6)"


def parse_addresses(text: str) -> dict[str, dict[str, bool]]:
    """``{interface: {"inet": bool, "inet6": bool}}`` from ``name family address`` lines; ``inet6`` counts only
    addresses NCCL keeps (not the IPv6 loopback)."""
    import ipaddress

    out: dict[str, dict[str, bool]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] not in ("inet", "inet6"):
            continue
        fams = out.setdefault(parts[0], {"inet": False, "inet6": False})
        try:
            loopback6 = parts[1] == "inet6" and ipaddress.ip_address(parts[2]).is_loopback
        except ValueError:
            continue
        if not loopback6:
            fams[parts[1]] = True
    return out


def _running(ctx: HostCtx, name: str) -> Optional[bool]:
    """``IFF_RUNNING`` as getifaddrs reports it: the kernel's ``dev_get_flags`` sets it on a link that is up
    (``IFF_UP`` in ``flags``) with an operational state of ``up`` or ``unknown`` (``netif_oper_up``; a loopback
    or tunnel says ``unknown``). The ``flags`` file alone never shows it."""
    text = ctx.src.read_line(f"{NET_CLASS}/{name}/flags")
    state = ctx.src.read_line(f"{NET_CLASS}/{name}/operstate")
    try:
        up = bool(int(text or "", 16) & IFF_UP)
    except ValueError:
        return None
    if not up:
        return False
    return None if not state else state.strip() in ("up", "unknown")


def ip_interfaces_fact(ctx: HostCtx) -> Fact:
    """``{interface: {"inet": bool, "inet6": bool, "running": bool | None}}``."""
    if not any(d.rdma_devices or (d.class_code or 0) >> 16 == 0x03 for d in ctx.devices):
        return unknown("no GPU and no RDMA device: no NCCL job runs here", source="/sys/bus/pci/devices")
    res = ctx.src.ip_addresses()
    if not res.ok:
        return unknown(f"the IP addresses: {res.error or f'exit {res.rc}'}", settle="ip -o addr show", source=SOURCE)
    out: dict[str, dict[str, Optional[bool]]] = dict(parse_addresses(res.stdout))
    for name, fams in out.items():
        fams["running"] = _running(ctx, name)
    return Fact(out, source=f"{SOURCE}, {NET_CLASS}/*/flags, {NET_CLASS}/*/operstate")
