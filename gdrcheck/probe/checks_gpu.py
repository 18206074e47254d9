"""The GPU checks, run inside a worker: ``cuda``, ``host-bandwidth``, ``p2p``.

Each takes the driver API object and the step's parameters and returns
``{"status", "measured", "evidence", "reason"}``. Everything allocated is freed in
``finally`` blocks; the worker's exit releases whatever a crash left.
"""

from __future__ import annotations

import ctypes
import time

from gdrcheck.probe.cuda import CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, Cuda, CudaError, version_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

PATTERN_BYTES = 1 << 20
SMALL_BYTES = 4096
REPS = 8


def _libc():
    libc = ctypes.CDLL(None)
    libc.memcmp.restype = ctypes.c_int
    libc.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return libc


_BLOCKS: dict[int, bytes] = {}


def pattern_block(seed: int) -> bytes:
    """1 MiB whose byte i is (131 i + 17 seed + i // 256) mod 256: every 256-byte row is the first row shifted
    by its index, built by translating that row (a few ms, where a byte-wise loop takes a tenth of a second)."""
    got = _BLOCKS.get(seed)
    if got is None:
        row = bytes((i * 131) & 0xFF for i in range(256))
        shifted = [row.translate(bytes((x + c) & 0xFF for x in range(256))) for c in range(256)]
        got = _BLOCKS[seed] = b"".join(shifted[(j + seed * 17) & 0xFF] for j in range(PATTERN_BYTES // 256))
    return got


def fill_pattern(addr: int, size: int, seed: int) -> None:
    """A pattern that differs per MiB and per seed (so a stale or shifted copy is caught)."""
    block = pattern_block(seed)
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
        self.undo: list[Callable[[], Any]] = []
        self.errors: list[str] = []

    def push(self, fn: Callable[[], Any]) -> None:
        self.undo.append(fn)

    def run(self) -> None:
        while self.undo:
            fn = self.undo.pop()
            try:
                fn()
            except Exception as e:  # report, keep undoing
                self.errors.append(str(e))


def current_on(cu, bus_id: str, c: Cleanup) -> int:
    """Initialise CUDA, make the GPU at ``bus_id``'s primary context current (released by ``c``): its device."""
    cu.init()
    dev = cu.device_by_bus_id(bus_id)
    ctx = cu.retain(dev)
    c.push(lambda: cu.release(dev))
    cu.set_current(ctx)
    return dev


def _fail(e: Exception, **measured) -> dict[str, Any]:
    ev: dict[str, Any] = {"error": str(e)}
    if isinstance(e, CudaError):
        ev.update({"call": e.call, "cuda_result": e.name})
    return {"status": "fail", "measured": measured, "evidence": ev}


def check_cuda(cu: Cuda, params: dict[str, Any]) -> dict[str, Any]:
    m: dict[str, Any] = {}
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


def dmabuf_export(cu: Cuda, size: int = 2 << 20) -> dict[str, Any]:
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


def read_link(bdf: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in ("current_link_speed", "current_link_width"):
        try:
            with open(f"/sys/bus/pci/devices/{bdf}/{k}") as f:
                out[k] = f.read().strip()
        except OSError:
            pass
    return out


def _host_pair(cu: Cuda, c: Cleanup, n: int, pinned: Optional[Callable[[int], tuple[int, int]]]) -> tuple[int, int]:
    """Two pinned host buffers of ``n`` bytes: the worker's own, kept for its life (``pinned``: pinning a
    quarter GiB costs about a tenth of a second, once per NUMA node rather than per step), or this step's."""
    if pinned is not None:
        return pinned(n)
    a = cu.host_alloc(n)
    c.push(lambda: cu.host_free(a))
    b = cu.host_alloc(n)
    c.push(lambda: cu.host_free(b))
    return a, b


def check_host_bandwidth(cu: Cuda, params: dict[str, Any],
                         pinned: Optional[Callable[[int], tuple[int, int]]] = None) -> dict[str, Any]:
    n = int(params.get("bytes") or (256 << 20))
    reps = int(params.get("reps") or REPS)
    exp = params.get("expected") or {}
    m: dict[str, Any] = {"bytes": n, "reps": reps}
    c = Cleanup()
    try:
        current_on(cu, params["gpu"], c)
        src, back = _host_pair(cu, c, n, pinned)
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
    ev: dict[str, Any] = {}
    if c.errors:
        ev["cleanup_errors"] = c.errors
    if m.get("verified") is False:
        return {"status": "fail", "measured": m, "evidence": ev}
    low = exp.get("degraded_below_gb_per_s")
    status = "ok"
    if low is not None and min(m["h2d_gb_per_s"], m["d2h_gb_per_s"]) < low:
        status = "degraded"
    return {"status": status, "measured": m, "evidence": ev}


P2P_REPS = 8
VERIFY_CHUNK = 32 << 20  # pinned host staging for the pattern and its read-back


def _fill_device(cu: Cuda, dptr: int, n: int, host: int, v: int) -> None:
    """``n`` bytes of device memory from the host pattern of ``v`` bytes, each chunk marked by its index."""
    for k, off in enumerate(range(0, n, v)):
        ctypes.memset(host, (k * 7 + 1) & 0xFF, 1)
        cu.call("cuMemcpyHtoD_v2", dptr + off, host, min(v, n - off))


def _check_device(cu: Cuda, dptr: int, n: int, host: int, back: int, v: int) -> str:
    """'' when device memory holds what :func:`_fill_device` wrote, else where it first differs."""
    for k, off in enumerate(range(0, n, v)):
        size = min(v, n - off)
        ctypes.memset(back, 0, size)
        cu.call("cuMemcpyDtoH_v2", back, dptr + off, size)
        ctypes.memset(host, (k * 7 + 1) & 0xFF, 1)
        if not same(host, back, size):
            return f"in the chunk at byte {off}: " + first_difference(host, back, size)
    return ""


def check_p2p(cu: Cuda, params: dict[str, Any], harmless_only: bool = False,
              pinned: Optional[Callable[[int], tuple[int, int]]] = None) -> dict[str, Any]:
    """Peer access both ways; a verified copy each way; the rate each way and both at once, with copies of
    ``bytes`` (256 MiB by default: on four NVSwitch H200s the one-way rate of single copies reaches 97% of
    its 1 GiB value at 256 MiB and 88% at 64 MiB, and here ``reps`` copies are queued back to back); the copy
    staged through pinned host memory beside it; all held to the link's expected rate (``expected``)."""
    a_bdf, b_bdf = params["gpus"]
    n = int(params.get("bytes") or (256 << 20))
    reps = int(params.get("reps") or P2P_REPS)
    v = min(n, VERIFY_CHUNK)
    m: dict[str, Any] = {}
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
        pair = _PeerPair(cu, c, a, b, n, m)
        host, back = _host_pair(cu, c, v, pinned)
        from gdrcheck.probe.stages import stage

        stage(f"peer copies {a_bdf} <-> {b_bdf}")
        if not _verify_each_way(pair, (a_bdf, b_bdf), n, host, back, v, m):
            return {"status": "fail", "measured": m, "evidence": {}}
        _peer_rates(pair, n, reps, m)
        m["staged_gb_per_s"] = _staged_rate(pair, n, host, v)
        m["bytes"], m["reps"] = n, reps
    except CudaError as e:
        c.run()
        return _fail(e, **m)
    finally:
        c.run()
    return _p2p_verdict(m, params.get("expected") or {}, c)


class _PeerPair:
    """Two GPUs (``a`` and ``b``) whose contexts reach each other: peer access enabled both ways, a source and
    a destination buffer of ``n`` bytes and a stream on each; everything undone by ``c``."""

    other = {"a": "b", "b": "a"}

    def __init__(self, cu: Cuda, c: Cleanup, a: int, b: int, n: int, m: dict[str, Any]) -> None:
        self.cu = cu
        ca = cu.retain(a)
        c.push(lambda: cu.release(a))
        cb = cu.retain(b)
        c.push(lambda: cu.release(b))
        for mine, other in ((ca, cb), (cb, ca)):
            cu.set_current(mine)
            try:
                cu.call("cuCtxEnablePeerAccess", other, 0)
            except CudaError as e:
                if e.code != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
                    m["enable_peer_access_error"] = e.name
                    raise
            c.push(lambda mine=mine, other=other: (cu.set_current(mine), cu.call("cuCtxDisablePeerAccess", other)))
        self.bufs: dict[str, int] = {}
        self.streams: dict[str, int] = {}
        for side, ctx in (("a", ca), ("b", cb)):
            cu.set_current(ctx)
            for kind in ("src", "dst"):
                p = self.bufs[side + kind] = cu.mem_alloc(n)
                c.push(lambda ctx=ctx, p=p: (cu.set_current(ctx), cu.mem_free(p)))
            s = self.streams[side] = cu.stream()
            c.push(lambda ctx=ctx, s=s: (cu.set_current(ctx), cu.call("cuStreamDestroy_v2", s)))
        self.ctx_of = {"a": ca, "b": cb}

    def peer(self, frm: str, size: int) -> Callable[[], None]:
        """A peer copy of ``size`` bytes from ``frm``'s source to the other side's destination, on ``frm``'s
        stream (queued, not waited for)."""
        to, cu, bufs, ctx_of = self.other[frm], self.cu, self.bufs, self.ctx_of
        return lambda: cu.call("cuMemcpyPeerAsync", bufs[to + "dst"], ctx_of[to], bufs[frm + "src"],
                               ctx_of[frm], size, self.streams[frm])


def _verify_each_way(pair: _PeerPair, bdfs: tuple[str, str], n: int, host: int, back: int, v: int,
                     m: dict[str, Any]) -> bool:
    """Each way a page, then the whole buffer, copied and read back against the pattern; False (with where
    it differs in ``m``) at the first copy that comes back different."""
    cu, bufs, ctx_of = pair.cu, pair.bufs, pair.ctx_of
    for frm, seed in (("a", 7), ("b", 11)):
        to = pair.other[frm]
        fill_pattern(host, v, seed=seed)
        cu.set_current(ctx_of[frm])
        _fill_device(cu, bufs[frm + "src"], n, host, v)
        for size, key in ((SMALL_BYTES, "small_verified"), (n, "verified")):
            cu.set_current(ctx_of[to])
            cu.memset(bufs[to + "dst"], 0x5A, n)
            cu.call("cuCtxSynchronize")
            cu.set_current(ctx_of[frm])
            pair.peer(frm, size)()
            cu.call("cuStreamSynchronize", pair.streams[frm])
            cu.set_current(ctx_of[to])
            bad = _check_device(cu, bufs[to + "dst"], size, host, back, v)
            m[key] = m.get(key, True) and not bad
            if bad:
                a_bdf, b_bdf = bdfs
                m["mismatch"] = f"{a_bdf if frm == 'a' else b_bdf} -> {b_bdf if frm == 'a' else a_bdf}: {bad}"
                m["verified"] = False
                return False
    return True


def _peer_rates(pair: _PeerPair, n: int, reps: int, m: dict[str, Any]) -> None:
    """The rate each way (after a warm-up copy), both ways at once, and the slower way's."""
    cu = pair.cu
    for frm, key in (("a", "a_to_b_gb_per_s"), ("b", "b_to_a_gb_per_s")):
        cu.set_current(pair.ctx_of[frm])
        pair.peer(frm, n)()  # warm-up
        cu.call("cuStreamSynchronize", pair.streams[frm])
        m[key] = _gbps(n, reps, _timed(cu, pair.streams[frm], pair.peer(frm, n), reps))
    m["bidir_gb_per_s"] = _bidir(cu, pair.ctx_of, pair.streams, pair.peer, n, reps)
    m["p2p_gb_per_s"] = min(m["a_to_b_gb_per_s"], m["b_to_a_gb_per_s"])


def _staged_rate(pair: _PeerPair, n: int, host: int, v: int) -> float:
    """GB/s of the same copy staged through pinned host memory, chunk by chunk, a to b."""
    cu, ca, cb = pair.cu, pair.ctx_of["a"], pair.ctx_of["b"]
    staged_reps = 2
    t0 = time.perf_counter()
    for _ in range(staged_reps):
        for off in range(0, n, v):
            size = min(v, n - off)
            cu.set_current(ca)
            cu.call("cuMemcpyDtoH_v2", host, pair.bufs["asrc"] + off, size)
            cu.set_current(cb)
            cu.call("cuMemcpyHtoD_v2", pair.bufs["bdst"] + off, host, size)
    dt = time.perf_counter() - t0
    return round(n * staged_reps / dt / 1e9, 1) if dt > 0 else 0.0


def _p2p_verdict(m: dict[str, Any], exp: dict[str, Any], c: Cleanup) -> dict[str, Any]:
    """Degraded when peer copies are slower than staged ones, or below the link's expected rate."""
    status = "degraded" if m["p2p_gb_per_s"] < m["staged_gb_per_s"] else "ok"
    want = exp.get("gb_per_s")
    if isinstance(want, (int, float)) and want > 0:
        m["expected_gb_per_s"] = want
        m["of_expected"] = round(m["p2p_gb_per_s"] / want, 3)
        low = exp.get("degraded_below_gb_per_s")
        if isinstance(low, (int, float)) and m["p2p_gb_per_s"] < low:
            m["below_expected"] = (f"{m['p2p_gb_per_s']} GB/s the slower way, below {low} GB/s "
                                   f"({int(DEGRADED_BELOW * 100)}% of the {want} GB/s {exp.get('link') or 'link'} "
                                   "should carry)")
            status = "degraded"
    return {"status": status, "measured": m, "evidence": {"cleanup_errors": c.errors} if c.errors else {}}


DEGRADED_BELOW = 0.75


def _bidir(cu: Cuda, ctx_of, streams, peer, n: int, reps: int) -> float:
    """Total GB/s with both ways copying at once: each side's stream waits on one start event, the first
    waits on the second's end, so one pair of events on the first stream spans both."""
    cu.set_current(ctx_of["a"])
    start, end = cu.event(), cu.event()
    cu.set_current(ctx_of["b"])
    mid = cu.event()
    try:
        cu.set_current(ctx_of["a"])
        cu.call("cuEventRecord", start, streams["a"])
        cu.call("cuStreamWaitEvent", streams["b"], start, 0)
        for _ in range(reps):
            peer("a", n)()
        cu.set_current(ctx_of["b"])
        for _ in range(reps):
            peer("b", n)()
        cu.call("cuEventRecord", mid, streams["b"])
        cu.set_current(ctx_of["a"])
        cu.call("cuStreamWaitEvent", streams["a"], mid, 0)
        cu.call("cuEventRecord", end, streams["a"])
        cu.call("cuEventSynchronize", end)
        return _gbps(2 * n, reps, cu.elapsed_ms(start, end))
    finally:
        for e in (start, end, mid):
            cu.call("cuEventDestroy_v2", e)
