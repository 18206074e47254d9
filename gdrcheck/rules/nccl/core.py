"""NCCL's path types per version, version numbers, and the PCIe facts every decision shares.

Sources (``NVIDIA/nccl`` tags; line numbers at the tag named):
* path type names: ``topoPathTypeStr`` v2.8.4 ``src/graph/topo.cc:24`` (LOC NVL NVB PIX PXB PHB SYS),
  v2.12.7 ``topo.cc:24`` (+PXN), v2.26.2 ``topo.cc:26`` (+C2C), v2.27.3 ``topo.cc:24`` (+P2C after PXN),
  v2.27.5 ``topo.cc:24`` (P2C before PXN), v2.30.7 ``topo.cc:34``.
* peer-memory files: v2.9.6 ``src/transport/net_ib.cc:223`` (``nv_mem`` only), v2.9.8 ``net_ib.cc:224-226``
  (+ ``nvidia-peermem``), v2.21.5 ``src/transport/net_ib.cc:558-568``, v2.22.3 ``net_ib.cc:610-620``,
  v2.23.4 ``net_ib.cc:690-704``, v2.30.7 ``src/transport/net_ib/gdr.cc:14-29``.
* Broadcom flattening: v2.30.7 ``src/graph/topo.cc:195-268``, taken step for step in ``bcm.py``.
"""

from __future__ import annotations

from functools import cache

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


class Version(tuple):
    """An NCCL release, ``(major, minor, patch)``: compared and hashed as that tuple (so it compares with one),
    and written as NCCL writes it (``2.21.5``) by ``str()``, the one place a version is formatted."""

    __slots__ = ()

    def __new__(cls, major: int, minor: int = 0, patch: int = 0) -> Version:
        return tuple.__new__(cls, (int(major), int(minor), int(patch)))

    def __str__(self) -> str:
        return f"{self[0]}.{self[1]}.{self[2]}"

    def __repr__(self) -> str:
        return f"Version({self[0]}, {self[1]}, {self[2]})"

    def __getnewargs__(self) -> tuple:
        return tuple(self)


# NCCL 2.27.5+ numbering; gdrcheck compares types with the order of the version judged (path_order)
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
RANK = {name: i for i, name in enumerate(PATH_TYPES)}
LEGACY_LEVELS = {0: "LOC", 1: "PIX", 2: "PXB", 3: "PHB", 4: "SYS", 5: "SYS"}  # levelsOldToNew
NEWEST = Version(2, 30, 7)
OLDEST = Version(2, 8, 3)  # the first tag whose path types (v2.8.3 graph.h) gdrcheck models

# files NCCL tests with access(F_OK) to decide that a peer-memory module is loaded
# (docs/nccl.md, "GPU-NIC GPUDirect RDMA")
PEERMEM_FILES = (
    ((0, 0, 0), (2, 9, 7), ("/sys/kernel/mm/memory_peers/nv_mem/version",)),  # v2.9.6 net_ib.cc:223
    ((2, 9, 8), (2, 21, 99), ("/sys/kernel/mm/memory_peers/nv_mem/version",
                              "/sys/kernel/mm/memory_peers/nvidia-peermem/version")),
    ((2, 22, 0), (2, 22, 99), ("/sys/kernel/mm/memory_peers/nv_mem/version",
                               "/sys/kernel/mm/memory_peers/nv_mem_nc/version")),
    ((2, 23, 0), (9, 99, 99), ("/sys/kernel/mm/memory_peers/nv_mem/version",
                               "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
                               "/sys/module/nvidia_peermem/version")),
)
ALL_PEERMEM_FILES = tuple(sorted({f for _, _, files in PEERMEM_FILES for f in files}))
HONOURED_ENV = ("NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_NET_GDR_READ",
                "NCCL_TOPO_FILE", "NCCL_IGNORE_DISABLED_P2P", "NCCL_DMABUF_ENABLE", "NCCL_NET_GDR_C2C",
                "NCCL_NVB_DISABLE", "NCCL_PXN_DISABLE", "NCCL_PXN_C2C", "NCCL_NET_DISABLE_INTRA",
                "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_IB_MERGE_VFS",
                "NCCL_IB_DATA_DIRECT", "NCCL_NET_GDR_MLOPART", "NCCL_P2P_USE_CUDA_MEMCPY",
                "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY")


def version_str(v: tuple) -> str:
    """A version (a :class:`Version`, or a tuple of its three numbers) as NCCL writes it."""
    return str(v if isinstance(v, Version) else Version(*v))


# An NCCL release as NCCL and its packages write it: ``2.21.5`` (nccl.h, libnccl.so.2.21.5, the pip wheel),
# ``2.21.5+cuda12.4`` (the ``NCCL version`` line of an NCCL_DEBUG=INFO log, init.cc), ``2.21.5-1`` (the deb and
# rpm package revision), ``v2.21.5`` (the git tag); ``2.21`` is ``2.21.0``.
_VERSION = lazy_pattern(r"\s*v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?(?:-\d+|\+cuda\d+(?:\.\d+)*)?\s*")


def parse_version(text: Optional[str], floor: bool = True) -> Version:
    """The one reading of an NCCL version string (``--nccl-version``, the versions found on the node, a job's
    log); None is the newest release gdrcheck knows. ValueError, in one line, when ``text`` is not one or (with
    ``floor``) is older than the oldest release modelled."""
    if text is None:
        return NEWEST
    m = _VERSION.fullmatch(text)
    if not m:
        raise ValueError(f"not an NCCL version: {text[:40]!r} (expected e.g. 2.21.5)")
    v = Version(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    if floor and v < OLDEST:
        raise ValueError(f"NCCL {version_str(v)} is older than the oldest rules gdrcheck models "
                         f"({version_str(OLDEST)})")
    return v


def path_order(version: Version) -> tuple[str, ...]:
    """``topoPathTypeStr`` of that version, up to SYS: the names ``ncclGetLevel`` accepts, in rank order."""
    if version >= (2, 27, 5):
        return ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
    if version >= (2, 27, 0):
        return ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS")
    if version >= (2, 26, 0):
        return ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS")
    if version >= (2, 12, 0):
        return ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS")
    return ("LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS")


@cache
def rank_in(version: Version) -> dict[str, int]:
    """Path type -> its rank at this version (cached: asked per pair; callers only read it)."""
    return {name: i for i, name in enumerate(path_order(version))}


def peermem_files(version: Version) -> tuple[str, ...]:
    for lo, hi, files in PEERMEM_FILES:
        if lo <= version <= hi:
            return files
    return PEERMEM_FILES[-1][2]


def nccl_type(pcie_path: Optional[str], nvlinks: Optional[int], flattened: bool = False) -> Optional[str]:
    """nvidia-smi class -> NCCL path type. NODE folds into PHB; Broadcom flattening turns PXB into PIX."""
    if nvlinks:
        return "NVL"
    if pcie_path is None:
        return None
    if pcie_path == "NODE":
        return "PHB"
    if pcie_path == "PXB" and flattened:
        return "PIX"
    return pcie_path


def within(path_type: Optional[str], level: Optional[str], version: Version = NEWEST) -> Optional[bool]:
    if path_type is None or level is None:
        return None
    order = rank_in(version)
    if path_type in order and level in order:
        return order[path_type] <= order[level]
    return RANK[path_type] <= RANK[level]
