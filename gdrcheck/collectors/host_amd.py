"""What an AMD GPU node shows RCCL (``docs/rccl.md``): the ``amdkfd`` peer-memory client in the places RCCL looks
for it, the kernel header RCCL 2.20 reads when it is absent, the BIOS string and NUMA balancing of its Hyper-V
rules, and the KFD topology (``/sys/class/kfd/kfd/topology/nodes/N``): each GPU node's gfx target
(``gfx_target_version``, 90402 = gfx942), its PCI address (``domain``, ``location_id`` = bus << 8 | devfn) and
its ``io_links`` (type 11 xGMI, 2 PCIe; ``weight`` 15 per xGMI hop, 20 for PCIe, as amdkfd's
``kfd_topology.c`` sets them). ``/proc/kallsyms``, which RCCL 2.21 reads, is never read: it holds the kernel's
addresses, which a snapshot handed on must not carry.
"""

from __future__ import annotations

from gdrcheck.collectors.host_util import HostCtx, listdir_kept
from gdrcheck.model import Fact, unknown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
AMDKFD_PEER_FILES = ("/sys/kernel/mm/memory_peers/amdkfd/version", "/sys/kernel/memory_peers/amdkfd/version",
                     "/sys/memory_peers/amdkfd/version")
BIOS_VERSION = "/sys/devices/virtual/dmi/id/bios_version"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
IOLINK_TYPES = {2: "pcie", 11: "xgmi"}


def properties(text: Optional[str]) -> dict[str, int]:
    """A KFD ``properties`` file: ``name value`` per line, numbers only."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def gfx_name(version: int) -> Optional[str]:
    """``gfx_target_version`` -> the gfx target: 90402 -> gfx942, 90010 -> gfx90a; None for a CPU node (0)."""
    if version <= 0:
        return None
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _bdf(props: dict[str, int]) -> Optional[str]:
    loc = props.get("location_id")
    if not loc:
        return None
    return f"{props.get('domain', 0):04x}:{loc >> 8:02x}:{(loc >> 3) & 0x1f:02x}.{loc & 7:x}"


def kfd_nodes(ctx: HostCtx) -> list[dict]:
    """Each KFD node with a GPU (``simd_count`` > 0): id, bus id, gfx target and links."""
    src = ctx.src
    out = []
    for name in sorted(listdir_kept(src, KFD_NODES), key=lambda n: int(n) if n.isdigit() else 1 << 30):
        if not name.isdigit():
            continue
        props = properties(src.read_text(f"{KFD_NODES}/{name}/properties", 1 << 16))
        if props.get("simd_count", 0) <= 0:
            continue
        links = []
        for link in listdir_kept(src, f"{KFD_NODES}/{name}/io_links"):
            lp = properties(src.read_text(f"{KFD_NODES}/{name}/io_links/{link}/properties", 1 << 16))
            if "node_to" in lp:
                links.append({"to": lp["node_to"], "type": IOLINK_TYPES.get(lp.get("type", -1), str(lp.get("type"))),
                              "weight": lp.get("weight")})
        out.append({"node": int(name), "bdf": _bdf(props), "gfx": gfx_name(props.get("gfx_target_version", 0)),
                    "links": links})
    return out


def xgmi_pairs(nodes: list[dict]) -> list[tuple[str, str, int]]:
    """GPU pairs joined directly by xGMI (weight 15: one hop), each once by bus id, with one link."""
    by_node = {n["node"]: n["bdf"] for n in nodes if n.get("bdf")}
    seen: dict[frozenset, tuple[str, str, int]] = {}
    for n in nodes:
        a = by_node.get(n["node"])
        for link in n["links"]:
            b = by_node.get(link["to"])
            if a and b and a != b and link["type"] == "xgmi" and (link.get("weight") or 15) <= 15:
                seen.setdefault(frozenset((a, b)), (min(a, b), max(a, b), 1))  # one hop: a direct link
    return sorted(seen.values())


def amd_fact(ctx: HostCtx) -> Fact:
    src = ctx.src
    nodes = kfd_nodes(ctx)
    peer = {p: src.exists(p) for p in AMDKFD_PEER_FILES}
    if not nodes and not any(peer.values()) and not src.exists("/sys/class/kfd"):
        return unknown("no AMD GPU driver (amdkfd) in this input", source=KFD_NODES)
    umem: Optional[bool] = None
    if ctx.release:
        text = src.read_text(f"/lib/modules/{ctx.release}/build/include/rdma/ib_umem.h", 1 << 20)
        umem = None if text is None else "ib_umem_get_peer" in text
    value = {
        "peer_files": peer,
        "memory_peers": listdir_kept(src, "/sys/kernel/mm/memory_peers"),
        "ib_umem_get_peer": umem,
        "bios_version": src.read_line(BIOS_VERSION),
        "numa_balancing": src.read_line(NUMA_BALANCING),
        "kfd_nodes": nodes,
        "xgmi": [list(x) for x in xgmi_pairs(nodes)],
    }
    return Fact(value, source=KFD_NODES)
