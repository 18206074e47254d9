"""What NCCL would decide on this node, per NCCL version, following NCCL's own source, one question a module:

``versions``: which NCCL versions the node carries, which one judges and the settings in force for it;
``settings``: how NCCL reads its settings (environment, settings files, level names, numbers); ``cpu``: the
CPU vendor NCCL keys its P2P default on; ``flags`` and ``data_direct``: each GPU's and NIC's flags; ``paths``
(with ``bcm``, ``file_tree`` and ``topo_file``): each pair's path type; ``gdr`` and ``gdr_pairs``, ``p2p`` and
``p2p_pairs`` (with ``pxn``): the per-pair decisions; ``speed``: bandwidths; ``node``: the node's view put
together; ``core``: path types and version numbers shared by all. ``docs/nccl.md`` lists every NCCL input
with its file and line.
"""

from gdrcheck.rules.nccl.core import (
                                ALL_PEERMEM_FILES,
                                HONOURED_ENV,
                                LEGACY_LEVELS,
                                NEWEST,
                                OLDEST,
                                PATH_TYPES,
                                RANK,
                                Version,
                                nccl_type,
                                parse_version,
                                peermem_files,
                                version_str,
                                within,
)
from gdrcheck.rules.nccl.settings import NcclSettings, parse_level, settings

__all__ = ["ALL_PEERMEM_FILES", "HONOURED_ENV", "LEGACY_LEVELS", "NEWEST", "OLDEST", "PATH_TYPES", "RANK",
           "NcclSettings", "Version", "nccl_type", "parse_level", "parse_version", "peermem_files", "settings",
           "version_str", "within"]
