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

NCCL then flattens the Broadcom switches of the merged tree (:mod:`gdrcheck.rules.nccl.bcm`): a ``<pci>`` of
the file has the ids its ``vendor``, ``device``, ``subsystem_vendor`` and ``subsystem_device`` attributes give
(``topo.cc:521-534``) and the virtual links of its ``<pcilink target>`` children; a switch hung from sysfs has
the node's ids and links. A ``<pci>`` is one of NCCL's PCI nodes when it holds no ``<nic>`` and its ``class``
is a bridge's or none NCCL names otherwise (``kvDictPciClass``, ``topo.cc:538-544``, matched as a prefix).
"""

from __future__ import annotations

from gdrcheck.rules.nccl.core import NEWEST

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.collectors.nccl_topo_file import TopoFile
    from gdrcheck.rules.nccl.core import Version
    Chain = tuple[tuple[str, ...], str, bool]  # PCI switches above the device (nearest first), its CPU, file met


class FileTree:
    """The file's PCI tree as NCCL builds it: the ``<pci>`` elements (by their busid string, as NCCL matches it),
    their parents and CPUs, their ids and which are NCCL's PCI nodes, and the ``<net name>`` elements with the
    ``<pci>`` that holds them. ``parsed``: the file as :func:`gdrcheck.collectors.nccl_topo_file.read_topo_file`
    read it."""

    def __init__(self, parsed: TopoFile) -> None:
        self.parent = parsed.parent
        self.cpu = parsed.cpu
        self.net_pci = parsed.net_pci
        self.net_cpu = parsed.net_cpu
        self.pcilinks = parsed.pcilinks
        self.ids: dict[str, int] = {b: _int_device(attrs) for b, attrs in parsed.ids.items()}
        self.switches: dict[str, int] = {}  # busid of each of NCCL's PCI nodes -> its place in the document
        for busid in parsed.parent:
            if _is_pci_node(parsed.pci_class[busid], busid in parsed.holds_nic):
                self.switches[busid] = len(self.switches)

    def up(self, busid: str) -> tuple[str, ...]:
        out: list[str] = []
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
        from gdrcheck.rules.nccl.bcm import sysfs_steps

        out: list[str] = []
        top = bdf
        for cur in sysfs_steps(topo, bdf):  # ncclTopoGetXmlFromSys, up to a <pci> the file holds
            if cur in self.parent:
                return tuple(out) + (cur,) + self.up(cur), self.cpu[cur], True
            out.append(cur)
            top = cur
        n = topo.numa(top)
        return tuple(out), str(n) if n is not None else "-1", False


def _int_device(attrs: tuple[Optional[str], ...]) -> int:
    """``ncclTopoGetIntDevice`` (v2.30.7 ``topo.cc:521-534``) of a ``<pci>``'s vendor, device, subsystem_vendor
    and subsystem_device attributes as written: each read with ``strtol(s, NULL, 0)``."""
    from gdrcheck.rules.nccl.settings import c_strtol

    out = 0
    for text, shift in zip(attrs, (48, 32, 16, 0)):
        if text is not None:
            out += c_strtol(text)[0] << shift
    return out & ((1 << 64) - 1)


_NOT_PCI = ("0x068000", "0x068001", "0x03", "0x02")  # kvDictPciClass: NVSwitch, CPU, GPU, NIC; else PCI


def _is_pci_node(cls: str, holds_nic: bool) -> bool:
    """``ncclTopoAddPci`` makes a PCI node of a ``<pci>`` of this class: no ``<nic>`` in it, and a PCI class."""
    if holds_nic:
        return False
    return cls.startswith(("0x060400", "0x080100")) or not cls.startswith(_NOT_PCI)


def path_class(a: Chain, b: Chain) -> str:
    """NCCL's PCIe path type between two devices of the merged tree."""
    if a[1] != b[1]:
        return "SYS"
    for i, sw in enumerate(a[0]):
        if sw in b[0]:
            return "PIX" if i + b[0].index(sw) == 0 else "PXB"
    return "PHB"


def pair_classes(tree: FileTree, topo, pairs, version: Version = NEWEST,
                 virtual: Optional[dict[str, object]] = None) -> tuple[dict[tuple[str, str], str], frozenset]:
    """NCCL's PCIe class per GPU-NIC and GPU-GPU pair that the file decides (one end placed by it, or met
    on the way up), once NCCL has flattened the merged tree's Broadcom switches; other pairs keep the node's
    tree. Also the pairs that are PIX only because of that flattening."""
    from gdrcheck.rules.nccl import bcm

    chains: dict[str, Chain] = {}
    for b in topo.of_kind("gpu") + topo.gpudirect_nics():  # NCCL fills its XML with GPUs, then NICs
        chains[b] = tree.chain(topo, b)
    for p in pairs:
        for x in (p.a, p.b):
            if p.kind in ("gpu-nic", "gpu-gpu") and x not in chains:
                chains[x] = tree.chain(topo, x)
    fusion = None
    if any(bcm.is_part(i) for i in tree.ids.values()) or any(
            bcm.is_part(bcm.function_id(topo, n)) for c in chains.values() for n in c[0]):
        nodes: dict[str, tuple[str, ...]] = {x: c[0] for x, c in chains.items()}
        for s in tree.switches:  # the file's switches hold none of the node's devices too
            nodes["<pci " + s + ">"] = (s,) + tree.up(s)
        links = dict(virtual or {})
        for n in tree.switches:
            links[n] = tree.pcilinks.get(n, ())  # the file's switches: its <pcilink>s, never sysfs's

        def ids(n: str) -> int:
            return tree.ids[n] if n in tree.ids else bcm.function_id(topo, n)

        fusion = bcm.build(nodes, ids, links if version >= bcm.LINKS_FROM else {}, version, tree.switches)
    out: dict[tuple[str, str], str] = {}
    flat = set()
    for p in pairs:
        if p.kind not in ("gpu-nic", "gpu-gpu"):
            continue
        ca, cb = chains[p.a], chains[p.b]
        if ca[2] or cb[2]:
            cls = path_class(ca, cb)
            if fusion is not None and cls == "PXB" and fusion.meet(p.a, p.b) == "PIX":
                cls = "PIX"
                flat.add((p.a, p.b))
            out[(p.a, p.b)] = cls
    return out, frozenset(flat)
