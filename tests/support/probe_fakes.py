"""Scripted stand-ins for libcuda.so.1, libibverbs.so.1 and libcufile.so.0, at the ctypes boundary.

A probe worker started with ``GDRCHECK_PROBE_LIBS=probe_fakes`` loads these instead of
the node's libraries. ``GDRCHECK_FAKE`` names what goes wrong (comma-separated):

- ``no-cuda``: libcuda.so.1 is missing; ``cuinit-no-device``: cuInit answers CUDA_ERROR_NO_DEVICE
- ``h2d-corrupt``: host-to-device copies flip a byte; ``p2p-zeros``: peer copies leave the destination untouched
- ``hang``: stream and event synchronisation never return (the worker must be killed); ``open-hang``: opening
  the contexts in the worker's threads never returns (a step's own retain, on its main thread, does)
- ``slow-link``: copies take 10x as long as a Gen5 x16 link would
- ``no-peer``: cuDeviceCanAccessPeer answers 0; ``p2p-slow``: peer copies slower than staged ones
- ``verbs-real``: the real libibverbs.so.1 (Debian's, with no device), not the fake
- ``reg-efault``, ``reg-enomem``: ibv_reg_mr on GPU memory fails so; ``dmabuf-eopnotsupp``: no DMA-BUF
  anywhere; ``export-fail``: cuMemGetHandleForAddressRange answers CUDA_ERROR_NOT_SUPPORTED
- ``no-cufile``: libcufile.so.0 is missing; ``cufile-corrupt``: cuFileRead delivers a changed byte;
  ``cufile-short``: cuFileRead returns fewer bytes than asked

GPUs are the bus ids in ``GDRCHECK_FAKE_GPUS`` (comma-separated); the fake NIC's RDMA device
is ``mlx5_0``. Device memory is real host memory, so copies and checks are real.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
import time

GEN5_X16 = 53.5e9  # bytes per second a healthy link reaches
DEVICE_MEMORY = set()  # addresses cuMemAlloc handed out: what ibv_reg_mr's scripted EFAULT refuses


def _fake() -> set:
    return {x for x in os.environ.get("GDRCHECK_FAKE", "").split(",") if x}


def _set(ref, value) -> None:
    obj = getattr(ref, "_obj", ref)
    if hasattr(obj, "value"):
        obj.value = value
    else:
        obj.contents.value = value


def _addr(x) -> int:
    if isinstance(x, int):
        return x
    if hasattr(x, "value"):
        return x.value or 0
    return ctypes.cast(x, ctypes.c_void_p).value or 0


def _hanging() -> None:
    """Says the worker has reached its hang: the file GDRCHECK_FAKE_HANGING names (when set) is made, so a
    test acts once the hang has begun, not after a time."""
    mark = os.environ.get("GDRCHECK_FAKE_HANGING")
    if mark:
        with open(mark, "w"):
            pass


class FakeCuda:
    def __init__(self, faults: set) -> None:
        self.f = faults
        self.gpus = [g for g in os.environ.get("GDRCHECK_FAKE_GPUS", "").split(",") if g]
        self.buffers = {}
        self._tl = threading.local()  # simulated seconds of copying, for events: one clock per thread
        self.events = {}
        self.next_handle = 0x1000

    @property
    def clock(self) -> float:
        return getattr(self._tl, "clock", 0.0)

    @clock.setter
    def clock(self, v: float) -> None:
        self._tl.clock = v

    def _handle(self) -> int:
        self.next_handle += 0x10
        return self.next_handle

    # --- init and devices
    def cuInit(self, flags):
        return 100 if "cuinit-no-device" in self.f else 0

    def cuDriverGetVersion(self, ref):
        _set(ref, 12080)
        return 0

    def cuGetErrorName(self, code, ref):
        return 1

    def cuDeviceGetCount(self, ref):
        _set(ref, len(self.gpus))
        return 0

    def cuDeviceGet(self, ref, i):
        _set(ref, i)
        return 0

    def cuDeviceGetByPCIBusId(self, ref, bus):
        b = bus.decode() if isinstance(bus, bytes) else bus
        if b not in self.gpus:
            return 101
        _set(ref, self.gpus.index(b))
        return 0

    def cuDeviceGetName(self, buf, n, dev):
        ctypes.memmove(buf, b"Fake H100\0", 10)
        return 0

    def cuDeviceGetAttribute(self, ref, attr, dev):
        _set(ref, {75: 9, 76: 0}.get(attr, 1))
        return 0

    def cuDeviceCanAccessPeer(self, ref, a, b):
        _set(ref, 0 if "no-peer" in self.f else 1)
        return 0

    def cuDevicePrimaryCtxRetain(self, ref, dev):
        if "open-hang" in self.f and threading.current_thread() is not threading.main_thread():
            time.sleep(3600)  # the worker's opening of every context (one thread each) never returns
        _set(ref, 0x100 + dev)
        return 0

    def cuDevicePrimaryCtxRelease_v2(self, dev):
        return 0

    def cuCtxSetCurrent(self, ctx):
        return 0

    def cuCtxSynchronize(self):
        return 0

    def cuCtxEnablePeerAccess(self, ctx, flags):
        return 0

    def cuCtxDisablePeerAccess(self, ctx):
        return 0

    # --- memory
    def _alloc(self, size) -> int:
        buf = ctypes.create_string_buffer(size)
        a = ctypes.addressof(buf)
        self.buffers[a] = buf
        return a

    def cuMemAlloc_v2(self, ref, size):
        a = self._alloc(size)
        DEVICE_MEMORY.add(a)
        _set(ref, a)
        return 0

    def cuMemFree_v2(self, p):
        self.buffers.pop(_addr(p), None)
        return 0

    def cuMemHostAlloc(self, ref, size, flags):
        _set(ref, self._alloc(size))
        return 0

    def cuMemFreeHost(self, p):
        self.buffers.pop(_addr(p), None)
        return 0

    def cuMemsetD8_v2(self, d, value, size):
        ctypes.memset(_addr(d), value, size)
        return 0

    def _copy(self, dst, src, n, kind) -> int:
        if kind == "peer" and "p2p-zeros" in self.f:
            pass
        else:
            ctypes.memmove(_addr(dst), _addr(src), n)
        if kind == "h2d" and "h2d-corrupt" in self.f:
            ctypes.memset(_addr(dst) + n // 2, 0xEE, 1)
        rate = GEN5_X16 / (10 if "slow-link" in self.f else 1)
        if kind == "peer":
            rate = 0.05e9 if "p2p-slow" in self.f else 500e9  # far below / above any staged copy here
        self.clock += n / rate
        return 0

    def cuMemcpyHtoD_v2(self, d, h, n):
        return self._copy(d, h, n, "h2d")

    def cuMemcpyDtoH_v2(self, h, d, n):
        return self._copy(h, d, n, "d2h")

    def cuMemcpyHtoDAsync_v2(self, d, h, n, s):
        return self._copy(d, h, n, "h2d")

    def cuMemcpyDtoHAsync_v2(self, h, d, n, s):
        return self._copy(h, d, n, "d2h")

    def cuMemcpyPeerAsync(self, dst, dctx, src, sctx, n, s):
        return self._copy(dst, src, n, "peer")

    # --- streams and events
    def cuStreamCreate(self, ref, flags):
        _set(ref, self._handle())
        return 0

    def cuStreamDestroy_v2(self, s):
        return 0

    def cuStreamSynchronize(self, s):
        if "hang" in self.f:
            _hanging()
            time.sleep(3600)
        return 0

    def cuEventCreate(self, ref, flags):
        _set(ref, self._handle())
        return 0

    def cuEventRecord(self, e, s):
        self.events[_addr(e)] = self.clock
        return 0

    def cuEventSynchronize(self, e):
        if "hang" in self.f:
            _hanging()
            time.sleep(3600)
        return 0

    def cuEventElapsedTime(self, ref, a, b):
        _set(ref, (self.events[_addr(b)] - self.events[_addr(a)]) * 1e3)
        return 0

    def cuStreamWaitEvent(self, s, e, flags):
        return 0

    def cuEventDestroy_v2(self, e):
        return 0

    def cuPointerSetAttribute(self, value, attr, p):
        return 0

    def cuMemGetHandleForAddressRange(self, ref, d, size, kind, flags):
        if "export-fail" in self.f:
            return 801
        fd = os.open("/dev/null", os.O_RDONLY)
        _set(ref, fd)
        return 0


class FakeMr(ctypes.Structure):
    _fields_ = [("context", ctypes.c_void_p), ("pd", ctypes.c_void_p), ("addr", ctypes.c_void_p),
                ("length", ctypes.c_size_t), ("handle", ctypes.c_uint32), ("lkey", ctypes.c_uint32),
                ("rkey", ctypes.c_uint32)]


class FakeVerbs:
    """One RDMA device, mlx5_0, port 1 DOWN (``port-active``: ACTIVE, InfiniBand LID 7).

    Its context has an ops table whose post_send copies at once and whose poll_cq hands the
    completion back (``loopback-prot-err``: GPU writes complete with a local protection error;
    ``loopback-hang``: they never complete; ``loopback-garbage``: they succeed and copy nothing).
    """

    def __init__(self, faults: set) -> None:
        from gdrcheck.probe import verbs

        self.v = verbs
        self.f = faults
        self.registered = 0  # bytes registered at once (for reg-enomem-after-N)
        self.lengths = {}
        self.names = (ctypes.c_char_p * 1)(b"mlx5_0")
        self.list = (ctypes.c_void_p * 2)(0xD0, None)
        self.mrs = []
        self.qps = []
        self.done = []
        self.writes = 0
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        self._post = proto(self._post_send)
        self._poll = proto(self._poll_cq)
        self.ctx = verbs.IbvContext()
        self.ctx.ops.post_send = ctypes.cast(self._post, ctypes.c_void_p).value
        self.ctx.ops.poll_cq = ctypes.cast(self._poll, ctypes.c_void_p).value

    def _post_send(self, qp, wr_addr, bad):
        wr = ctypes.cast(wr_addr, ctypes.POINTER(self.v.IbvSendWr)).contents
        sge = wr.sg_list[0]
        self.writes += 1
        gpu = self.writes > 1  # the first write is the host baseline
        status = 0
        if gpu and "loopback-prot-err" in self.f:
            status = 4
        elif not (gpu and "loopback-garbage" in self.f):
            ctypes.memmove(wr.wr.rdma.remote_addr, sge.addr, sge.length)
        if not (gpu and "loopback-hang" in self.f):
            self.done.append((wr.wr_id, status))
        return 0

    def _poll_cq(self, cq, n, wc_addr):
        if not self.done:
            return 0
        wr_id, status = self.done.pop(0)
        wc = ctypes.cast(wc_addr, ctypes.POINTER(self.v.IbvWc)).contents
        wc.wr_id, wc.status = wr_id, status
        return 1

    def ibv_create_cq(self, ctx, cqe, cq_ctx, channel, vector):
        return 0xCC

    def ibv_destroy_cq(self, cq):
        return 0

    def ibv_create_qp(self, pd, init):
        qp = self.v.IbvQp(qp_num=0x11)
        self.qps.append(qp)
        return ctypes.pointer(qp)

    def ibv_modify_qp(self, qp, attr, mask):
        return 0

    def ibv_destroy_qp(self, qp):
        return 0

    def ibv_query_gid(self, ctx, port, index, gid):
        return 0

    def ibv_get_device_list(self, ref):
        _set(ref, 1)
        return self.list

    def ibv_free_device_list(self, lst):
        return None

    def ibv_get_device_name(self, dev):
        return b"mlx5_0"

    def ibv_open_device(self, dev):
        return ctypes.addressof(self.ctx)

    def ibv_close_device(self, ctx):
        return 0

    def ibv_query_device(self, ctx, ref):
        ref._obj.phys_port_cnt = 1
        return 0

    def ibv_query_port(self, ctx, port, ref):
        ref._obj.state = 4 if "port-active" in self.f else 1
        ref._obj.link_layer = 1
        ref._obj.lid = 7 if "port-active" in self.f else 0
        ref._obj.active_mtu = 5
        return 0

    def ibv_alloc_pd(self, ctx):
        return 0xB0

    def ibv_dealloc_pd(self, pd):
        return 0

    def _mr(self, addr=0):
        mr = FakeMr(addr=addr, lkey=0x100 + len(self.mrs), rkey=0x200 + len(self.mrs))
        self.mrs.append(mr)
        return ctypes.pointer(mr)

    def _fail(self, code):
        ctypes.set_errno(code)
        return ctypes.POINTER(FakeMr)()

    def ibv_reg_mr(self, pd, addr, length, access):
        if "reg-efault" in self.f and _addr(addr) in DEVICE_MEMORY:
            return self._fail(errno.EFAULT)
        if "reg-enomem" in self.f:
            return self._fail(errno.ENOMEM)
        # ``reg-enomem-after-N``: registrations succeed until N MiB are registered at once (BAR1 runs out)
        limit = [int(f.rsplit("-", 1)[1]) << 20 for f in self.f if f.startswith("reg-enomem-after-")]
        if limit and self.registered + int(length) > limit[0]:
            return self._fail(errno.ENOMEM)
        self.registered += int(length)
        mr = self._mr(_addr(addr))
        self.lengths[ctypes.addressof(mr.contents)] = int(length)
        return mr

    def ibv_reg_dmabuf_mr(self, pd, offset, length, iova, fd, access):
        if "dmabuf-eopnotsupp" in self.f:
            return self._fail(errno.EOPNOTSUPP)
        if fd < 0:
            return self._fail(errno.EBADF)
        if "reg-enomem" in self.f:
            return self._fail(errno.ENOMEM)
        return self._mr(iova)

    def ibv_dereg_mr(self, mr):
        try:
            self.registered -= self.lengths.pop(ctypes.addressof(mr.contents), 0)
        except (ValueError, TypeError):
            pass
        return 0


class FakeCuFile:
    """cuFile over POSIX reads into (host-backed) device memory, as compatibility mode does."""

    def __init__(self, faults: set) -> None:
        from gdrcheck.probe.checks_gds import CUfileError

        self.f = faults
        self.ok = CUfileError(0, 0)
        self.fds = {}

    def cuFileDriverOpen(self):
        return self.ok

    def cuFileDriverClose(self):
        return self.ok

    def cuFileHandleRegister(self, fh_ref, descr_ref):
        fd = descr_ref._obj.fd
        h = 0x5000 + fd
        self.fds[h] = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)  # without O_DIRECT: pread into any buffer
        _set(fh_ref, h)
        return self.ok

    def cuFileHandleDeregister(self, fh):
        fd = self.fds.pop(_addr(fh), None)
        if fd is not None:
            os.close(fd)

    def cuFileBufRegister(self, p, n, flags):
        return self.ok

    def cuFileBufDeregister(self, p):
        return self.ok

    def cuFileRead(self, fh, dptr, n, off, doff):
        data = os.pread(self.fds[_addr(fh)], n, off)
        if "cufile-short" in self.f:
            data = data[: n // 2]
        ctypes.memmove(_addr(dptr) + doff, data, len(data))
        if "cufile-corrupt" in self.f:
            ctypes.memset(_addr(dptr) + doff + 7, 0xEE, 1)
        return len(data)


def load(soname: str):
    faults = _fake()
    if soname == "libcuda.so.1":
        return None if "no-cuda" in faults else FakeCuda(faults)
    if soname == "libibverbs.so.1":
        if "verbs-real" in faults:
            return ctypes.CDLL("libibverbs.so.1", use_errno=True)
        return FakeVerbs(faults)
    if soname == "libcufile.so.0":
        return None if "no-cufile" in faults else FakeCuFile(faults)
    return None
