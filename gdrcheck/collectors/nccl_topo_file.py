"""The topology file NCCL loads before detecting the node (``NCCL_TOPO_FILE``, else nvidia-topologyd's
``virtualTopology.xml``), read as NCCL reads its XML: the ``gdr`` attributes of its ``<gpu>`` and ``<net>``
elements, and its PCI tree (each ``<pci busid>``'s parent, CPU, ids, class and ``<pcilink>`` targets; each
``<net name>``'s ``<pci>``). What NCCL makes of them is the rules' (:mod:`gdrcheck.rules.nccl.topo_file`).

Pure: takes the file's text (``host_nccl.nccl_topo_file_fact`` collected it); damaged or unsafe XML is an
``InputError``.
"""

from __future__ import annotations

from functools import lru_cache

from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

ID_ATTRS = ("vendor", "device", "subsystem_vendor", "subsystem_device")


@record(frozen=True)
class TopoFile:
    """One topology file as NCCL's XML holds it. A ``<pci>`` is known by its busid string, as NCCL matches it;
    the first one in the document is the one NCCL's lookup returns (dicts keep the document's order)."""

    path: str
    gpu_gdr: dict[str, str]  # lower-case busid of a <pci> holding a <gpu gdr> -> that gdr
    net_gdr: dict[str, str]  # <net name> -> its gdr
    parent: dict[str, Optional[str]]  # busid -> the busid of the <pci> above it (None: under its <cpu>)
    cpu: dict[str, str]  # busid -> its <cpu numaid> ("-1" without one)
    ids: dict[str, tuple[Optional[str], ...]]  # busid -> its ID_ATTRS as written
    pci_class: dict[str, str]  # busid -> its class attribute ("" without one)
    holds_nic: frozenset  # busids of the <pci> elements that hold a <nic>
    pcilinks: dict[str, list[str]]  # busid -> its <pcilink target>s, lower-case
    net_pci: dict[str, Optional[str]]  # <net name> -> the busid of the <pci> that holds its <nic>
    net_cpu: dict[str, str]  # <net name> -> its <cpu numaid>
    empty: bool = False  # the root holds no element: no tree to merge the node's into


@lru_cache(maxsize=4)  # one report judges the node at each NCCL version found: the same file each time
def read_topo_file(text: str, path: str) -> TopoFile:
    """The file at ``path`` with this ``text``; ``InputError`` where it is not safe, well-formed XML."""
    from gdrcheck.collectors.pastes.nccl_xml import parse_xml_safely

    root, _lines = parse_xml_safely(text, path, allow_doctype=False, what="an NCCL topology file")
    gpus: dict[str, str] = {}
    nets: dict[str, str] = {}
    for pci in root.iter("pci"):
        for child in pci:
            if child.tag == "gpu" and child.get("gdr") is not None:
                gpus[(pci.get("busid") or "").lower()] = child.get("gdr")
    for net in root.iter("net"):
        if net.get("gdr") is not None and net.get("name"):
            nets[net.get("name")] = net.get("gdr")
    return _tree(root, path, gpus, nets, len(root) == 0)


def _tree(root, path: str, gpus: dict[str, str], nets: dict[str, str], empty: bool) -> TopoFile:
    parent: dict[str, Optional[str]] = {}
    cpus: dict[str, str] = {}
    ids: dict[str, tuple[Optional[str], ...]] = {}
    classes: dict[str, str] = {}
    holds_nic = set()
    pcilinks: dict[str, list[str]] = {}
    net_pci: dict[str, Optional[str]] = {}
    net_cpu: dict[str, str] = {}
    for cpu in root.iter("cpu"):
        numa = cpu.get("numaid") or "-1"
        stack: list[tuple[object, Optional[str]]] = [(c, None) for c in reversed(cpu)]
        while stack:
            el, above = stack.pop()
            if el.tag == "pci":
                busid = el.get("busid") or ""
                if busid and busid not in parent:  # the first one found is the one NCCL's lookup returns
                    parent[busid], cpus[busid] = above, numa
                    ids[busid] = tuple(el.get(a) for a in ID_ATTRS)
                    classes[busid] = el.get("class") or ""
                    if any(c.tag == "nic" for c in el):
                        holds_nic.add(busid)
                    links = [c.get("target") for c in el if c.tag == "pcilink" and c.get("target")]
                    if links:
                        pcilinks[busid] = [t.lower() for t in links]
                stack.extend((c, busid or above) for c in reversed(el))
            elif el.tag == "nic":
                for net in el:
                    name = net.get("name") if net.tag == "net" else None
                    if name and name not in net_pci:
                        net_pci[name], net_cpu[name] = above, numa
    return TopoFile(path, gpus, nets, parent, cpus, ids, classes, frozenset(holds_nic), pcilinks, net_pci, net_cpu,
                    empty)
