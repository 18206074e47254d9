"""Peer-memory registration paths for GPUDirect RDMA: peermem modules and DMA-BUF.

NCCL's own test is existence of a few files, which changed between versions
(``docs/nccl.md``, "GPU-NIC GPUDirect RDMA"); every one of them is recorded so rules can judge per version.
DMA-BUF cannot be probed without rdma-core bindings, so its inputs are reported
as an approximation (the kernel's DMA-BUF importer is ``ib_umem_dmabuf_get()``,
drivers/infiniband/core/umem_dmabuf.c).
"""

from __future__ import annotations

import re

from gdrcheck.collectors.host_util import HostCtx, failed, listdir_kept, version_tuple
from gdrcheck.model import Fact
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

MEMORY_PEERS = "/sys/kernel/mm/memory_peers"
NV_MEM = f"{MEMORY_PEERS}/nv_mem/version"
NV_MEM_NC = f"{MEMORY_PEERS}/nv_mem_nc/version"
NVIDIA_PEERMEM_PEER = f"{MEMORY_PEERS}/nvidia-peermem/version"
SYS_PEERMEM = "/sys/module/nvidia_peermem/version"

# (first (major, minor), last (major, minor) or None, files any one of which NCCL accepts)
NCCL_PEERMEM_FILES: tuple[tuple[tuple[int, int], Optional[tuple[int, int]], tuple[str, ...]], ...] = (
    ((0, 0), (2, 21), (NV_MEM, NVIDIA_PEERMEM_PEER)),
    ((2, 22), (2, 22), (NV_MEM, NV_MEM_NC)),
    ((2, 23), None, (NV_MEM, NV_MEM_NC, SYS_PEERMEM)),
)
ALL_NCCL_PEERMEM_FILES = tuple(dict.fromkeys(p for _a, _b, ps in NCCL_PEERMEM_FILES for p in ps))


def nccl_peermem_paths(nccl_version: Optional[str] = None) -> tuple[str, ...]:
    """The files the given NCCL version tests (the newest rule when None or unparsable)."""
    v = version_tuple(nccl_version)
    if v is None:
        return NCCL_PEERMEM_FILES[-1][2]
    mm = (v + (0, 0))[:2]
    for lo, hi, paths in NCCL_PEERMEM_FILES:
        if mm >= lo and (hi is None or mm <= hi):
            return paths
    return NCCL_PEERMEM_FILES[-1][2]


def nccl_sees_peermem(nccl_files: Mapping[str, bool], nccl_version: Optional[str] = None) -> bool:
    """NCCL's ``access(F_OK)`` test as the given version performs it."""
    return any(nccl_files.get(p, False) for p in nccl_peermem_paths(nccl_version))


def _installed(ctx: HostCtx) -> tuple[Optional[bool], Optional[bool], str]:
    """Whether nvidia-peermem / nv_peer_mem are installed (modules.dep of the running kernel)."""
    if not ctx.release:
        return None, None, ""
    path = f"/lib/modules/{ctx.release}/modules.dep"
    text = ctx.src.read_text(path, 8 << 20)
    if text is None:
        return None, None, path
    peermem = re.search(r"(?:^|/)nvidia[-_]peermem\.ko", text, re.M) is not None
    legacy = re.search(r"(?:^|/)nv_peer_mem\.ko", text, re.M) is not None
    return peermem, legacy, path


def peermem_fact(ctx: HostCtx) -> Fact:
    src = ctx.src
    if not ctx.modules_known:
        return failed(src, "/sys/module", "neither /proc/modules nor /sys/module is readable")
    peers = listdir_kept(src, MEMORY_PEERS)
    files = {p: src.exists(p) for p in ALL_NCCL_PEERMEM_FILES}
    reg_bytes: dict[str, int] = {}
    for client in peers:
        t = src.read_line(f"{MEMORY_PEERS}/{client}/num_reg_bytes")
        if t is not None and t.isdigit():
            reg_bytes[client] = int(t)
    installed, legacy_installed, dep = _installed(ctx)
    value: dict[str, object] = {
        "nvidia_peermem_loaded": ctx.loaded("nvidia_peermem"),
        "nv_peer_mem_loaded": ctx.loaded("nv_peer_mem"),
        "memory_peers": peers,
        "nv_mem_registered": files[NV_MEM] or files[NV_MEM_NC],
        "num_reg_bytes": reg_bytes,
        "nccl_files": files,
        "nccl_sees_peermem": {"<=2.21": nccl_sees_peermem(files, "2.21"),
                              "2.22": nccl_sees_peermem(files, "2.22"),
                              ">=2.23": nccl_sees_peermem(files, "2.23")},
        "nvidia_peermem_installed": installed,
        "nv_peer_mem_installed": legacy_installed,
        "peerdirect_support": src.read_line("/sys/module/nvidia_peermem/parameters/peerdirect_support"),
    }
    sources = [ctx.module_source(), MEMORY_PEERS, SYS_PEERMEM] + ([dep] if dep else [])
    return Fact(value, source=", ".join(sources))


# -- DMA-BUF approximation ------------------------------------------------------

_LIBDIRS = ("/usr/lib64", "/lib64", "/usr/lib", "/lib")
# kernel RDMA drivers that implement ib_device_ops.reg_user_mr_dmabuf (mlx5 since Linux 5.12, efa 5.15,
# bnxt_re and irdma 6.x, ionic 6.17); with none of them loaded the probe's answer is not known
DMABUF_RDMA_DRIVERS = ("mlx5_ib", "efa", "bnxt_re", "irdma", "ionic")
_IBVERBS_RE = lazy_pattern(r"^libibverbs\.so\.1\.(\d+)\.(\d+)((?:\.\d+)*)\S*$")


def _libibverbs(ctx: HostCtx) -> tuple[Optional[str], Optional[tuple[int, int, str]]]:
    """(path of libibverbs.so.1.<abi>.<rdma-core version>, (abi minor, rdma-core major, version))."""
    src = ctx.src
    dirs = list(_LIBDIRS)
    for base in ("/usr/lib", "/lib"):
        dirs.extend(f"{base}/{n}" for n in src.listdir(base) if n.endswith("-linux-gnu"))
    for d in dirs:
        target = src.readlink(f"{d}/libibverbs.so.1")  # a link to the versioned file: cheap to capture
        names = [target.rsplit("/", 1)[-1]] if target else []
        if not names:
            names = [n for n in src.listdir(d) if n.startswith("libibverbs.so.1.")] if src.exists(
                f"{d}/libibverbs.so.1") else []
        for n in names:
            m = _IBVERBS_RE.match(n)
            if m:
                return f"{d}/{n}", (int(m.group(1)), int(m.group(2)), n.split(".", 4)[-1])
    return None, None


def dmabuf_fact(ctx: HostCtx, facts: Mapping[str, Fact]) -> Fact:
    rel = version_tuple(ctx.release)
    flavor = facts.get("nvidia_driver_flavor")
    lib, ver = _libibverbs(ctx)
    p2p = facts.get("p2pdma_config")
    rdma_drivers = {m: ctx.loaded(m) for m in DMABUF_RDMA_DRIVERS}
    implementing = sorted(m for m, v in rdma_drivers.items() if v)
    checks = {
        "kernel_ge_5_12": None if rel is None else rel >= (5, 12),
        "open_driver": None if flavor is None or not flavor.known else flavor.value == "open",
        "ibv_reg_dmabuf_mr": None if ver is None else ver[0] >= 12,  # IBVERBS_1.12 = rdma-core 34
        # NCCL's probe, ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) (v2.30.7 src/transport/net_ib/gdr.cc:45-83),
        # answers "supported" for any RDMA driver that implements dma-buf registration, not only mlx5
        "rdma_driver_dmabuf": True if implementing else None,
    }
    missing: list[str] = [k for k, v in checks.items() if v is False]
    unknowns: list[str] = [k for k, v in checks.items() if v is None]
    possible = False if missing else (None if unknowns else True)
    value: dict[str, object] = dict(checks)
    value.update({
        "mlx5_core_loaded": ctx.loaded("mlx5_core"),
        "rdma_drivers_with_dmabuf": implementing,
        "approximation": True,
        "kernel_release": ctx.release,
        "libibverbs": lib,
        "rdma_core_version": None if ver is None else ver[2],
        "rdma_core_ge_34": None if ver is None else ver[1] >= 34,
        "p2pdma_config": p2p.value if p2p is not None and p2p.known else None,
        "possible": possible,
        "missing": missing,
        "unknown": unknowns,
        "note": ("approximation: NCCL decides by probing ibv_reg_dmabuf_mr and "
                 "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED at run time"),
    })
    src = "/proc/sys/kernel/osrelease, /proc/driver/nvidia/version, " + (lib or "libibverbs.so.1 (not found)")
    return Fact(value, source=src)
