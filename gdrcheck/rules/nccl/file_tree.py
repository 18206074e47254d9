"""NCCL_TOPO_FILE as NCCL applies it: the ``gdr`` attributes it keeps and the pairs whose path type its PCI tree
decides (:mod:`gdrcheck.rules.nccl.topo_file`), and what the node's report says about them.

Pure: each function takes the snapshot, settings and topology it reads.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.rules.nccl.core import NEWEST, nccl_type, within
from gdrcheck.rules.nccl.decision import cause
from gdrcheck.rules.nccl.paths import bcm_virtual_links

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.collectors.nccl_topo_file import TopoFile
    from gdrcheck.rules.nccl.core import Version
    from gdrcheck.rules.nccl.settings import NcclSettings


def topo_file_attrs(snap, st: NcclSettings) \
        -> tuple[dict[str, str], dict[str, str], dict[str, str], Optional[TopoFile]]:
    """``<gpu gdr>`` by GPU busid and ``<net gdr>`` by NIC name from the topology file NCCL loads first
    (NCCL_TOPO_FILE, else /var/run/nvidia-topologyd/virtualTopology.xml from 2.10.3; v2.30.7
    ``src/graph/topo.cc:1765-1790``), what was applied from it, and the file as read (its PCI tree). Its
    attributes are not overwritten by detection (``xmlInitAttr*`` only fills missing ones)."""
    f = host_record(snap, "nccl_topo_file")
    if f is None:
        return {}, {}, {}, None
    files = f.get("files") or {}
    path = st.env.get("NCCL_TOPO_FILE")
    if not path and st.version >= (2, 10, 3):
        path = "/var/run/nvidia-topologyd/virtualTopology.xml"
    text = files.get(path) if path else None
    if not text:
        return {}, {}, {}, None
    from gdrcheck.collectors.nccl_topo_file import read_topo_file
    from gdrcheck.errors import InputError

    try:
        parsed = read_topo_file(text, path)
    except InputError as e:
        return {}, {}, {path: f"not applied: {e}"}, None
    gpus, nets = dict(parsed.gpu_gdr), dict(parsed.net_gdr)
    applied = [f"gdr of {len(gpus)} GPU(s) and {len(nets)} NIC(s)"] if (gpus or nets) else ["no gdr attributes"]
    return gpus, nets, {path: "applied: " + ", ".join(applied)}, parsed


def topo_file_classes(parsed: TopoFile, topo, pairs, applied: dict[str, str], version: Version = NEWEST) \
        -> tuple[dict[tuple[str, str], str], frozenset]:
    """NCCL's PCIe class of each pair the topology file's PCI tree decides (``gdrcheck.rules.nccl.topo_file``),
    and the pairs among them that are PIX because NCCL fused Broadcom switches of that tree; ``applied``
    (``nccl.topology_files``) says which devices the file places and which tree decided."""
    if parsed.empty:
        return {}, frozenset()
    from gdrcheck.rules.nccl import topo_file

    ft = topo_file.FileTree(parsed)
    placed = [f"{b} ({how})" for b in topo.of_kind("gpu", "nic") if (how := ft.placed(topo, b))]
    classes, flat = topo_file.pair_classes(ft, topo, pairs, version, bcm_virtual_links(topo))
    path = parsed.path
    if placed:
        applied[path] += (f"; its PCI tree places {', '.join(placed)}: NCCL keeps the file's place for these and "
                          f"hangs the rest from the node's sysfs tree onto it, so {len(classes)} pair(s) take "
                          "their path type from the file's tree, the others from the node's")
    else:
        applied[path] += ("; its PCI tree places none of the node's GPUs and NICs" +
                          (f", but {len(classes)} pair(s) meet it on the way up and take their path type from it"
                           if classes else ": every pair keeps the node's tree"))
    return classes, flat


def say_file_tree(node, path: str, types, file_cls, pairs) -> None:
    """The pairs whose path type the topology file's tree gave: the type, which tree, and the level check, in a
    new decision for each."""
    for p in pairs:
        key = (p.a, p.b)
        if key not in file_cls:
            continue
        views = node.gdr_view if p.kind == "gpu-nic" else node.p2p_view
        view = views.get(key)
        if view is None:
            continue
        t = types[key][0]
        if t in (None, "NVL", "NVB"):
            continue  # NVLink decides, not the PCI tree
        facts: dict[str, object] = {"path_type": t, "path_tree": f"NCCL_TOPO_FILE {path}"}
        if p.kind == "gpu-gpu":
            facts["within_p2p_level"] = within(t, node.st.p2p_check_level, node.version)
        elif not view.get("distance"):
            facts["within_gdr_level"] = within(t, node.st.gdr_level, node.version)
        said = cause("file_tree", path_type=t, path=path, node_says=nccl_type(p.pcie_path, None))
        views[key] = view.with_facts(**facts).plus(said)
