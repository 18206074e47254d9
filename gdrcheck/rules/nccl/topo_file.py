"""The PCI tree of the topology file NCCL loads before detecting the node (``NCCL_TOPO_FILE``).

NCCL reads the file into its XML first (v2.30.7 ``src/graph/topo.cc:1774-1781``), then fills it from the
node: each GPU through ``ncclTopoFillGpu`` (``src/graph/xml.cc:1065-1073``) and each NIC through
``ncclTopoFillNet`` (``xml.cc:1098-1130``). Both find the device's ``<pci busid>`` with
``ncclTopoGetPciNode`` (``xml.cc:564-571``: an exact string match, else a new node without a parent); a NIC
is first looked up by its ``<net name>`` (``xml.cc:1100``). ``ncclTopoGetXmlFromSys`` (``xml.cc:589-880``)
only walks sysfs for a node without a parent: it goes up two path components at a time (one PCI switch per
step) and stops at a ``<pci>`` the XML already holds, or at the root complex, where it joins the ``<cpu>`` of
the device's ``numa_node`` (the file's, when it has one with that ``numaid``). So a device the file places
keeps the file's place, and one it does not is hung from the sysfs tree onto whatever of the file it meets.

NCCL's path type in the merged tree (v2.30.7 ``src/graph/paths.cc:38-100``, ``ncclTopoSetPaths``, ``:88-90``):
one PCI switch between the two devices is PIX, more are PXB, through one CPU PHB, across CPUs SYS. The same
walk and lookups are in v2.10.3 and v2.18.1 too (``xml.cc:443-450, 525-560, 733``).

The Broadcom switch flattening and virtual links are not applied to a pair the file decides.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple
    Chain = Tuple[Tuple[str, ...], str, bool]  # PCI switches above the device (nearest first), its CPU, file met


class FileTree:
    """The file's ``<pci>`` elements (by their busid string, as NCCL matches it), their parents and CPUs, and
    the ``<net name>`` elements with the ``<pci>`` that holds them."""

    def __init__(self, root) -> None:
        self.parent: Dict[str, Optional[str]] = {}
        self.cpu: Dict[str, str] = {}
        self.net_pci: Dict[str, Optional[str]] = {}
        self.net_cpu: Dict[str, str] = {}
        for cpu in root.iter("cpu"):
            numa = cpu.get("numaid") or "-1"
            stack: List[Tuple[object, Optional[str]]] = [(c, None) for c in cpu]
            while stack:
                el, above = stack.pop()
                if el.tag == "pci":
                    busid = el.get("busid") or ""
                    if busid and busid not in self.parent:  # the first one found is the one NCCL's lookup returns
                        self.parent[busid] = above
                        self.cpu[busid] = numa
                    stack.extend((c, busid or above) for c in el)
                elif el.tag == "nic":
                    for net in el:
                        name = net.get("name") if net.tag == "net" else None
                        if name and name not in self.net_pci:
                            self.net_pci[name] = above
                            self.net_cpu[name] = numa

    def up(self, busid: str) -> Tuple[str, ...]:
        out: List[str] = []
        p = self.parent.get(busid)
        while p is not None and p not in out:
            out.append(p)
            p = self.parent.get(p)
        return tuple(out)

    def placed(self, topo, bdf: str) -> Optional[str]:
        """How the file places a GPU or NIC of the node, or None."""
        for name in topo.by_bdf[bdf].rdma_devices if topo.device_kind.get(bdf) == "nic" else ():
            if name in self.net_pci:
                return f"its <net name=\"{name}\">"
        return f"<pci busid=\"{bdf}\">" if bdf in self.parent else None

    def chain(self, topo, bdf: str) -> Chain:
        """The switches NCCL puts above a GPU or NIC of the node, its CPU's numaid, and whether the file
        decided any of it."""
        if topo.device_kind.get(bdf) == "nic":
            for name in topo.by_bdf[bdf].rdma_devices:
                if name in self.net_pci:
                    at = self.net_pci[name]
                    if at is None:
                        return (), self.net_cpu[name], True
                    return self.up(at), self.cpu[at], True  # `at` holds the <nic>: the NIC itself
        if bdf in self.parent:
            return self.up(bdf), self.cpu[bdf], True
        out: List[str] = []
        cur = bdf
        while True:  # ncclTopoGetXmlFromSys: two path components up per step
            anc = topo.ancestors(cur)
            if len(anc) < 2:
                n = topo.numa(cur)
                return tuple(out), str(n) if n is not None else "-1", False
            cur = anc[1]
            if cur in self.parent:
                return tuple(out) + (cur,) + self.up(cur), self.cpu[cur], True
            out.append(cur)


def path_class(a: Chain, b: Chain) -> str:
    """NCCL's PCIe path type between two devices of the merged tree."""
    if a[1] != b[1]:
        return "SYS"
    for i, sw in enumerate(a[0]):
        if sw in b[0]:
            return "PIX" if i + b[0].index(sw) == 0 else "PXB"
    return "PHB"


def pair_classes(tree: FileTree, topo, pairs) -> Dict[Tuple[str, str], str]:
    """NCCL's PCIe class per GPU-NIC and GPU-GPU pair that the file decides (one end placed by it, or met
    on the way up); other pairs keep the node's tree."""
    chains: Dict[str, Chain] = {}
    out: Dict[Tuple[str, str], str] = {}
    for p in pairs:
        if p.kind not in ("gpu-nic", "gpu-gpu"):
            continue
        for x in (p.a, p.b):
            if x not in chains:
                chains[x] = tree.chain(topo, x)
        ca, cb = chains[p.a], chains[p.b]
        if ca[2] or cb[2]:
            out[(p.a, p.b)] = path_class(ca, cb)
    return out
