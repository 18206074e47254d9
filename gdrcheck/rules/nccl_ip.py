"""NCCL's IB transport, and its bootstrap, need an IP interface: where the node's settings leave NCCL's interface
search nothing, NCCL does not start (the search is followed in ``rules/nccl/ib.py``)."""

from __future__ import annotations

from gdrcheck.rules.base import Context, Finding, Rule
from gdrcheck.rules.nccl import ib as ib_rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

NO_IP_INTERFACE = Rule(
    "GDR208", "nccl-no-ip-interface", "error", "host",
    "NCCL's interface search finds no IP interface: NCCL does not start",
    "NCCL's IB transport opens only after it has found one IP interface (\"NET/IB : No IP interface found\"), and "
    "the bootstrap that every NCCL job runs first uses the same search: NCCL_SOCKET_IFNAME (prefixes, '^' "
    "excludes, '=' exact names) and NCCL_SOCKET_FAMILY narrow it, and from NCCL 2.28.3 only links that are "
    "running count. When they leave nothing, every job fails at its first collective (unless NCCL_COMM_ID "
    "names the bootstrap address, and then the network falls back to sockets without GPUDirect RDMA).",
    "Set NCCL_SOCKET_IFNAME to an interface that is up with an IP address (`ip -o addr show up`), e.g. the "
    "IPoIB or Ethernet interface of the rail, or remove it (and NCCL_SOCKET_FAMILY) from the job and from "
    "/etc/nccl.conf or ~/.nccl.conf.", origin="nccl")


def _check(ctx: Context) -> Iterable[Finding]:
    st = ctx.nccl
    if st is None:
        return
    found, why = ib_rules.ip_interface_found(st.version, st.env, ib_rules.ip_interfaces(ctx.snap))
    if found is False:
        subject = next((f"{k}={st.env[k]}" for k in ("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY") if st.env.get(k)),
                       "IP interfaces")
        yield Finding(NO_IP_INTERFACE.code, "error", (subject,), why,
                      evidence="ip -o addr show, /sys/class/net/*/flags")


CHECKS = ((NO_IP_INTERFACE, _check),)
