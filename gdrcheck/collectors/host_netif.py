"""The node's IP interfaces, as NCCL's interface search sees them: name, address families, and whether the link
is running.

NCCL's IB transport starts only when its interface search (``ncclFindInterfaces``) finds one IP interface
(v2.30.7 ``src/transport/net_ib/init.cc:303-307``), and the search reads ``getifaddrs``: IPv4 and IPv6
addresses, IPv6 loopback skipped, and from 2.28.3 only links with ``IFF_RUNNING`` (``src/os/linux.cc``).
gdrcheck reads the same through ``ip -o addr show`` (kept in a snapshot like every command) and each link's
``/sys/class/net/<name>/flags``. The bootstrap every NCCL job runs first makes the same search
(v2.30.7 ``src/bootstrap.cc:124-128``), so it matters on any node with a GPU, RDMA device or not.
"""

from __future__ import annotations

from gdrcheck.collectors.host_util import HostCtx
from gdrcheck.model import Fact, unknown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Optional

IFF_RUNNING = 0x40  # include/uapi/linux/if.h
NET_CLASS = "/sys/class/net"
IP_ADDR = ("ip", "-o", "addr", "show")


def parse_ip_addr(text: str) -> Dict[str, Dict[str, bool]]:
    """``{interface: {"inet": bool, "inet6": bool}}`` from ``ip -o addr show``; ``inet6`` counts only addresses
    NCCL keeps (not the IPv6 loopback ``::1``)."""
    out: Dict[str, Dict[str, bool]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[0].endswith(":"):
            continue
        name = parts[1].split("@", 1)[0]
        fams = out.setdefault(name, {"inet": False, "inet6": False})
        if parts[2] == "inet":
            fams["inet"] = True
        elif parts[2] == "inet6" and parts[3].split("/", 1)[0] != "::1":
            fams["inet6"] = True
    return out


def _running(ctx: HostCtx, name: str) -> Optional[bool]:
    text = ctx.src.read_line(f"{NET_CLASS}/{name}/flags")
    try:
        return bool(int(text or "", 16) & IFF_RUNNING)
    except ValueError:
        return None


def ip_interfaces_fact(ctx: HostCtx) -> Fact:
    """``{interface: {"inet": bool, "inet6": bool, "running": bool | None}}``."""
    if not any(d.rdma_devices or (d.class_code or 0) >> 16 == 0x03 for d in ctx.devices):
        return unknown("no GPU and no RDMA device: no NCCL job runs here", source="/sys/bus/pci/devices")
    res = ctx.src.run(IP_ADDR, timeout=5.0)
    if not res.ok:
        return unknown(f"`{' '.join(IP_ADDR)}`: {res.error or f'exit {res.rc}'}", settle="ip -o addr show",
                       source=" ".join(IP_ADDR))
    out = parse_ip_addr(res.stdout)
    for name, fams in out.items():
        fams["running"] = _running(ctx, name)
    return Fact(out, source=f"{' '.join(IP_ADDR)}, {NET_CLASS}/*/flags")
