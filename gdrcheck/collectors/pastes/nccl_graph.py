"""``NCCL_GRAPH_DUMP_FILE``'s XML (``<graphs version="1">``): the channels NCCL built for each algorithm.

As NCCL v2.30.7 writes it: ``ncclTopoDumpGraphs`` (src/graph/search.cc:1353-1361, called with the five graphs at
src/init.cc:1225) writes ``<graphs version="1">`` (``NCCL_GRAPH_XML_VERSION``, src/graph/xml.h:53;
search.cc:1024-1033) and one ``<graph>`` per algorithm (search.cc:1002-1022) with its ``id`` (0 ring, 1 tree,
2 CollNet chain, 3 NVLS, 4 CollNet direct: src/init.cc:1174, 1182, 1190, 1210, 1197), its ``pattern``
(``NCCL_TOPO_PATTERN_*``, src/include/graph.h:160-169: 1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS,
6 CollNet direct), ``nchannels``, ``speedintra``/``speedinter`` (GB/s per channel), ``typeintra``/``typeinter``
(the path types it settled for) and ``crossnic``. Each ``<channel>`` (search.cc:967-1000) holds, in order, a
``<net dev>`` (the NIC the channel enters by, only when the node has a network), each GPU as ``<gpu dev rank>``
(``dev`` is ``NCCL_TOPO_ID(systemId, CUDA device)``, src/graph/topo.h:93: the CUDA device on a single system;
the NVLS graph lists only its first GPU, search.cc:995) and the ``<net dev>`` it leaves by.
It is what NCCL decided, not the machine: it draws no tree and is read as a host fact and a note.
"""

from __future__ import annotations

from gdrcheck.errors import InputError
from gdrcheck.model import Fact

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PATTERNS = {"1": "balanced tree", "2": "split tree", "3": "tree", "4": "ring", "5": "NVLS", "6": "CollNet direct"}
ALGORITHMS = {"0": "ring", "1": "tree", "2": "CollNet chain", "3": "NVLS", "4": "CollNet direct"}
_LOCAL_ID = (1 << 56) - 1  # NCCL_TOPO_ID_LOCAL_ID_MASK, src/graph/topo.h:89


def _dev(text):
    """A channel's ``dev``: the local id (the CUDA device, or the NIC's index) of NCCL_TOPO_ID; as written if not
    a number."""
    try:
        return str(int(text) & _LOCAL_ID)
    except (TypeError, ValueError):
        return text


def parse_nccl_graph(text: str, name: str):
    from gdrcheck.collectors.pastes.host_pastes import HostPaste
    from gdrcheck.collectors.pastes.xml_safe import parse_xml_safely

    root, _lines = parse_xml_safely(text, name, allow_doctype=False, what="an NCCL graph dump")
    graphs: list[dict[str, Any]] = []
    for g in root.iter("graph"):
        channels = [[(el.tag, _dev(el.get("dev"))) for el in ch if el.tag in ("gpu", "net")]
                    for ch in g.iter("channel")]
        graphs.append({"id": g.get("id"), "algorithm": ALGORITHMS.get(g.get("id") or ""),
                       "pattern": PATTERNS.get(g.get("pattern") or "", g.get("pattern")),
                       "nchannels": len(channels), "typeintra": g.get("typeintra"), "typeinter": g.get("typeinter"),
                       "speedintra": g.get("speedintra"), "speedinter": g.get("speedinter"),
                       "crossnic": g.get("crossnic"), "channels": channels})
    if not graphs:
        raise InputError(f"{name}: an NCCL graph dump (<graphs>) without a <graph>")
    said = []
    for g in graphs:
        gpus = sorted({d for ch in g["channels"] for tag, d in ch if tag == "gpu"}, key=lambda d: int(d or 0))
        nets = sorted({d for ch in g["channels"] for tag, d in ch if tag == "net"}, key=lambda d: int(d or 0))
        algo = str(g["pattern"]) if g.get("algorithm") in (None, g["pattern"]) else \
            f"{g['algorithm']} (pattern {g['pattern']})"
        said.append(f"{algo}: {g['nchannels']} channel(s) over GPU dev {', '.join(gpus) or 'none'}"
                    + (f" and NIC dev {', '.join(nets)}" if nets else "")
                    + f", intra {g['typeintra']}, inter {g['typeinter']}, {g['speedintra']} GB/s per channel")
    return HostPaste("nccl-graph", {"nccl_graphs": Fact(graphs, source=f"{name} (NCCL_GRAPH_DUMP_FILE)")},
                     ("the channels NCCL built (NCCL_GRAPH_DUMP_FILE; what NCCL decided, not the machine): "
                      + "; ".join(said),))
