"""What NCCL would decide on this node, per NCCL version, following NCCL's own source.

``settings``: how NCCL reads its settings (environment, settings files, level names, numbers);
``versions``: which NCCL versions the node carries and which one judges; ``cpu``: the CPU vendor
NCCL keys its P2P default on; ``p2p`` and ``gdr``: the per-pair decisions; ``core``: path types and
switch flattening shared by all. ``docs/nccl.md`` lists every NCCL input with its file and line.
"""

from gdrcheck.rules.nccl.core import (
                                ALL_PEERMEM_FILES,
                                HONOURED_ENV,
                                LEGACY_LEVELS,
                                NEWEST,
                                OLDEST,
                                PATH_TYPES,
                                RANK,
                                nccl_type,
                                parse_version,
                                peermem_files,
                                version_str,
                                within,
)
from gdrcheck.rules.nccl.settings import NcclSettings, parse_level, settings

__all__ = ["ALL_PEERMEM_FILES", "HONOURED_ENV", "LEGACY_LEVELS", "NEWEST", "OLDEST", "PATH_TYPES", "RANK",
           "NcclSettings", "nccl_type", "parse_level", "parse_version", "peermem_files", "settings",
           "version_str", "within"]
