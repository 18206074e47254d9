"""The GPU checks, run inside a worker: ``cuda``, ``host-bandwidth``, ``p2p``.

Each takes the driver API object and the step's parameters and returns
``{"status", "measured", "evidence", "reason"}``. Everything allocated is freed in
``finally`` blocks; the worker's exit releases whatever a crash left.
"""

from __future__ import annotations

import ctypes
import time

from gdrcheck.probe.cuda import Cuda, CudaError, version_text

TYPE_CHECKING = False  # typing names are for annotations only: see README, "Speed"
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List

PATTERN_BYTES = 1 << 20
SMALL_BYTES = 4096
REPS = 8


def _libc():
    libc = ctypes.CDLL(None)
    libc.memcmp.restype = ctypes.c_int
    libc.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return libc


def fill_pattern(addr: int, size: int, seed: int) -> None:
    """A pattern that differs per MiB and per seed (so a stale or shifted copy is caught)."""
    block = bytes(((i * 131 + seed * 17 + (i >> 8)) & 0xFF) for i in range(PATTERN_BYTES))
    off = 0
    n = 0
    while off < size:
        chunk = min(PATTERN_BYTES, size - off)
        ctypes.memmove(addr + off, block, chunk)
        ctypes.memset(addr + off, (n + seed) & 0xFF, 1)
        off += chunk
        n += 1


def same(a: int, b: int, size: int) -> bool:
    return _libc().memcmp(a, b, size) == 0


def first_difference(a: int, b: int, size: int) -> str:
    step = 1 << 16
    for off in range(0, size, step):
        n = min(step, size - off)
        if ctypes.string_at(a + off, n) != ctypes.string_at(b + off, n):
            x, y = ctypes.string_at(a + off, n), ctypes.string_at(b + off, n)
            i = next(i for i in range(n) if x[i] != y[i])
            zeros = y.count(0) == n
            return f"first difference at byte {off + i}" + (" (destination block all zeros)" if zeros else "")
    return "no difference"


class Cleanup:
    """Undo actions run in reverse order, each whatever the others did."""

    def __init__(self) -> None:
        self.undo: List[Callable[[], Any]] = []
        self.errors: List[str] = []

    def push(self, fn: Callable[[], Any]) -> None:
        self.undo.append(fn)

    def run(self) -> None:
        while self.undo:
            fn = self.undo.pop()
            try:
                fn()
            except Exception as e:  # report, keep undoing
                self.errors.append(str(e))


def _fail(e: Exception, **measured) -> Dict[str, Any]:
    ev: Dict[str, Any] = {"error": str(e)}
    if isinstance(e, CudaError):
        ev.update({"call": e.call, "cuda_result": e.name})
    return {"status": "fail", "measured": measured, "evidence": ev}


def check_cuda(cu: Cuda, params: Dict[str, Any]) -> Dict[str, Any]:
    m: Dict[str, Any] = {}
    try:
        v = cu.init()
        m["driver_api_version"] = version_text(v)
        dev = cu.device_by_bus_id(params["gpu"])
        m["cuda_device"] = dev
        m["name"] = cu.device_name(dev)
        for k in ("compute_capability_major", "compute_capability_minor", "gpu_direct_rdma_supported",
                  "gpu_direct_rdma_flush_writes_options", "gpu_direct_rdma_writes_ordering", "dma_buf_supported",
                  "unified_addressing"):
            m[k] = cu.attribute(dev, k)
        ctx = cu.retain(dev)
        try:
            cu.set_current(ctx)
            m["primary_context"] = True
            if m.get("dma_buf_supported"):
                m["dmabuf_export"] = dmabuf_export(cu)
        finally:
            cu.release(dev)
    except CudaError as e:
        return _fail(e, **m)
    return {"status": "ok", "measured": m, "evidence": {}}


def dmabuf_export(cu: Cuda, size: int = 2 << 20) -> Dict[str, Any]:
    """Export a small GPU allocation as a DMA-BUF file descriptor (what NCCL registers with a NIC), then close."""
    import os

    d = cu.mem_alloc(size)
    try:
        fd = cu.dmabuf_fd(d, size)
        os.close(fd)
        return {"ok": True, "bytes": size}
    except CudaError as e:
        return {"ok": False, "error": str(e)}
    finally:
        cu.mem_free(d)


def _timed(cu: Cuda, stream: int, what: Callable[[], None], reps: int) -> float:
    """Milliseconds for ``reps`` runs of ``what`` on ``stream``, by CUDA events."""
    start, end = cu.event(), cu.event()
    try:
        cu.call("cuEventRecord", start, stream)
        for _ in range(reps):
            what()
        cu.call("cuEventRecord", end, stream)
        cu.call("cuEventSynchronize", end)
        return cu.elapsed_ms(start, end)
    finally:
        cu.call("cuEventDestroy_v2", start)
        cu.call("cuEventDestroy_v2", end)


def _gbps(size: int, reps: int, ms: float) -> float:
    return round(size * reps / (ms / 1e3) / 1e9, 1) if ms > 0 else 0.0


def read_link(bdf: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k in ("current_link_speed", "current_link_width"):
        try:
            with open(f"/sys/bus/pci/devices/{bdf}/{k}") as f:
                out[k] = f.read().strip()
        except OSError:
            pass
    return out


def check_host_bandwidth(cu: Cuda, params: Dict[str, Any]) -> Dict[str, Any]:
    n = int(params.get("bytes") or (256 << 20))
    reps = int(params.get("reps") or REPS)
    exp = params.get("expected") or {}
    m: Dict[str, Any] = {"bytes": n, "reps": reps}
    c = Cleanup()
    try:
        cu.init()
        dev = cu.device_by_bus_id(params["gpu"])
        ctx = cu.retain(dev)
        c.push(lambda: cu.release(dev))
        cu.set_current(ctx)
        src = cu.host_alloc(n)
        c.push(lambda: cu.host_free(src))
        back = cu.host_alloc(n)
        c.push(lambda: cu.host_free(back))
        d = cu.mem_alloc(n)
        c.push(lambda: cu.mem_free(d))
        s = cu.stream()
        c.push(lambda: cu.call("cuStreamDestroy_v2", s))
        fill_pattern(src, n, seed=1)
        ctypes.memset(back, 0, n)
        cu.memset(d, 0xA5, n)
        cu.call("cuCtxSynchronize")
        h2d = lambda: cu.call("cuMemcpyHtoDAsync_v2", d, src, n, s)  # noqa: E731
        d2h = lambda: cu.call("cuMemcpyDtoHAsync_v2", back, d, n, s)  # noqa: E731
        from gdrcheck.probe.stages import stage

        stage(f"host copies of {n >> 20} MiB on {params['gpu']}")
        h2d()  # warm-up; also the data that is verified below
        cu.call("cuStreamSynchronize", s)
        m["h2d_gb_per_s"] = _gbps(n, reps, _timed(cu, s, h2d, reps))
        m["d2h_gb_per_s"] = _gbps(n, reps, _timed(cu, s, d2h, reps))
        m["link_under_load"] = read_link(params["gpu"])
        cu.call("cuStreamSynchronize", s)
        m["verified"] = same(src, back, n)
        if not m["verified"]:
            m["mismatch"] = first_difference(src, back, n)
    except CudaError as e:
        c.run()
        return _fail(e, **m)
    finally:
        c.run()
    ev: Dict[str, Any] = {}
    if c.errors:
        ev["cleanup_errors"] = c.errors
    if m.get("verified") is False:
        return {"status": "fail", "measured": m, "evidence": ev}
    low = exp.get("degraded_below_gb_per_s")
    status = "ok"
    if low is not None and min(m["h2d_gb_per_s"], m["d2h_gb_per_s"]) < low:
        status = "degraded"
    return {"status": status, "measured": m, "evidence": ev}


def check_p2p(cu: Cuda, params: Dict[str, Any], harmless_only: bool = False) -> Dict[str, Any]:
    a_bdf, b_bdf = params["gpus"]
    n = int(params.get("bytes") or (64 << 20))
    reps = int(params.get("reps") or 4)
    m: Dict[str, Any] = {}
    c = Cleanup()
    try:
        cu.init()
        a, b = cu.device_by_bus_id(a_bdf), cu.device_by_bus_id(b_bdf)
        ab, ba = cu.can_access_peer(a, b), cu.can_access_peer(b, a)
        m["can_access_peer_ab"], m["can_access_peer_ba"] = ab, ba
        m["can_access_peer"] = ab and ba
        if harmless_only:
            return {"status": "skipped", "measured": m, "evidence": {}}
        if not (ab and ba):
            return {"status": "fail", "measured": m, "evidence": {"error": "cuDeviceCanAccessPeer answered 0"}}
        ca = cu.retain(a)
        c.push(lambda: cu.release(a))
        cb = cu.retain(b)
        c.push(lambda: cu.release(b))
        for mine, other in ((ca, cb), (cb, ca)):
            cu.set_current(mine)
            try:
                cu.call("cuCtxEnablePeerAccess", other, 0)
            except CudaError as e:
                if e.code != 704:  # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
                    m["enable_peer_access_error"] = e.name
                    raise
            c.push(lambda mine=mine, other=other: (cu.set_current(mine), cu.call("cuCtxDisablePeerAccess", other)))
        cu.set_current(ca)
        src = cu.mem_alloc(n)
        c.push(lambda: (cu.set_current(ca), cu.mem_free(src)))
        host = cu.host_alloc(n)
        c.push(lambda: cu.host_free(host))
        back = cu.host_alloc(n)
        c.push(lambda: cu.host_free(back))
        s = cu.stream()
        c.push(lambda: (cu.set_current(ca), cu.call("cuStreamDestroy_v2", s)))
        cu.set_current(cb)
        dst = cu.mem_alloc(n)
        c.push(lambda: (cu.set_current(cb), cu.mem_free(dst)))
        cu.set_current(ca)
        fill_pattern(host, n, seed=7)
        cu.call("cuMemcpyHtoD_v2", src, host, n)
        from gdrcheck.probe.stages import stage

        stage(f"peer copies {a_bdf} -> {b_bdf}")
        for size, key in ((SMALL_BYTES, "small_verified"), (n, "verified")):
            cu.set_current(cb)
            cu.memset(dst, 0x5A, n)
            cu.call("cuCtxSynchronize")
            cu.set_current(ca)
            cu.call("cuMemcpyPeerAsync", dst, cb, src, ca, size, s)
            cu.call("cuStreamSynchronize", s)
            ctypes.memset(back, 0, n)
            cu.set_current(cb)
            cu.call("cuMemcpyDtoH_v2", back, dst, size)
            ok = same(host, back, size)
            m[key] = ok
            if not ok:
                m["mismatch"] = first_difference(host, back, size)
                m["verified"] = False
                return {"status": "fail", "measured": m, "evidence": {}}
        cu.set_current(ca)
        peer = lambda: cu.call("cuMemcpyPeerAsync", dst, cb, src, ca, n, s)  # noqa: E731
        m["p2p_gb_per_s"] = _gbps(n, reps, _timed(cu, s, peer, reps))
        t0 = time.perf_counter()
        for _ in range(reps):
            cu.set_current(ca)
            cu.call("cuMemcpyDtoH_v2", host, src, n)
            cu.set_current(cb)
            cu.call("cuMemcpyHtoD_v2", dst, host, n)
        dt = time.perf_counter() - t0
        m["staged_gb_per_s"] = round(n * reps / dt / 1e9, 1) if dt > 0 else 0.0
        m["bytes"] = n
    except CudaError as e:
        c.run()
        return _fail(e, **m)
    finally:
        c.run()
    status = "degraded" if m["p2p_gb_per_s"] < m["staged_gb_per_s"] else "ok"
    return {"status": status, "measured": m, "evidence": {"cleanup_errors": c.errors} if c.errors else {}}
