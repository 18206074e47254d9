"""``NCCL_GRAPH_DUMP_FILE``'s XML (``<graphs version="1">``): the channels NCCL built for each algorithm.

NCCL writes one ``<graph>`` per search (``ncclTopoGetXmlFromGraphs``, src/graph/search.cc): its ``pattern``
(src/include/graph.h, ``NCCL_TOPO_PATTERN_*``: 1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS,
6 CollNet direct), the channels found and, per channel, the GPUs (``<gpu dev>``, NCCL's GPU rank on the node) and
NICs (``<net dev>``) in order, with the path types it settled for (``typeintra``, ``typeinter``) and the speeds.
It is what NCCL decided, not the machine: it draws no tree and is read as a host fact and a note.
"""

from __future__ import annotations

from gdrcheck.errors import InputError
from gdrcheck.model import Fact

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PATTERNS = {"1": "balanced tree", "2": "split tree", "3": "tree", "4": "ring", "5": "NVLS", "6": "CollNet direct"}


def parse_nccl_graph(text: str, name: str):
    from gdrcheck.collectors.pastes.host_pastes import HostPaste
    from gdrcheck.collectors.pastes.xml_safe import parse_xml_safely

    root, _lines = parse_xml_safely(text, name, allow_doctype=False, what="an NCCL graph dump")
    graphs: list[dict[str, Any]] = []
    for g in root.iter("graph"):
        channels = [[(el.tag, el.get("dev")) for el in ch if el.tag in ("gpu", "net")] for ch in g.iter("channel")]
        graphs.append({"id": g.get("id"), "pattern": PATTERNS.get(g.get("pattern") or "", g.get("pattern")),
                       "nchannels": len(channels), "typeintra": g.get("typeintra"), "typeinter": g.get("typeinter"),
                       "speedintra": g.get("speedintra"), "speedinter": g.get("speedinter"),
                       "crossnic": g.get("crossnic"), "channels": channels})
    if not graphs:
        raise InputError(f"{name}: an NCCL graph dump (<graphs>) without a <graph>")
    said = []
    for g in graphs:
        gpus = sorted({d for ch in g["channels"] for tag, d in ch if tag == "gpu"}, key=lambda d: int(d or 0))
        nets = sorted({d for ch in g["channels"] for tag, d in ch if tag == "net"}, key=lambda d: int(d or 0))
        said.append(f"{g['pattern']}: {g['nchannels']} channel(s) over GPU dev {', '.join(gpus) or 'none'}"
                    + (f" and NIC dev {', '.join(nets)}" if nets else "")
                    + f", intra {g['typeintra']}, inter {g['typeinter']}, {g['speedintra']} GB/s per channel")
    return HostPaste("nccl-graph", {"nccl_graphs": Fact(graphs, source=f"{name} (NCCL_GRAPH_DUMP_FILE)")},
                     ("the channels NCCL built (NCCL_GRAPH_DUMP_FILE; what NCCL decided, not the machine): "
                      + "; ".join(said),))
