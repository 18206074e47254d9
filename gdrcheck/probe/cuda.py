"""The CUDA driver API (``libcuda.so.1``) through ctypes: only what the checks need.

Versioned entry points (``cuMemAlloc_v2``, ``cuMemcpyHtoDAsync_v2``,
``cuDevicePrimaryCtxRelease_v2``...), the primary context (never ``cuCtxCreate``),
every function's argument and return types declared, features gated by
``cuDriverGetVersion``.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_char, c_char_p, c_float, c_int, c_size_t, c_uint, c_uint64, c_ulonglong, c_void_p

from gdrcheck.cuda_attr import ATTR
from gdrcheck.probe.libs import bind, load

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

CUresult = c_int
CUdevice = c_int
CUdeviceptr = c_ulonglong
CUcontext = c_void_p
CUstream = c_void_p
CUevent = c_void_p

CU_MEMHOSTALLOC_PORTABLE = 0x01
CU_EVENT_DEFAULT = 0
CU_STREAM_NON_BLOCKING = 0x1
CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6
CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1
CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
DMABUF_MIN_DRIVER = 11070  # cuMemGetHandleForAddressRange: CUDA 11.7
ERROR_NAMES = {0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
               3: "CUDA_ERROR_NOT_INITIALIZED", 35: "CUDA_ERROR_INSUFFICIENT_DRIVER", 100: "CUDA_ERROR_NO_DEVICE",
               101: "CUDA_ERROR_INVALID_DEVICE", 201: "CUDA_ERROR_INVALID_CONTEXT",
               217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
               700: "CUDA_ERROR_ILLEGAL_ADDRESS",
               CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
               705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", 801: "CUDA_ERROR_NOT_SUPPORTED",
               803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 999: "CUDA_ERROR_UNKNOWN"}


class CudaError(Exception):
    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__(f"{call}: {name} ({code})")
        self.call, self.code, self.name = call, code, name


class Cuda:
    """The driver API of one process. Every call raises :class:`CudaError` on a non-zero CUresult."""

    def __init__(self) -> None:
        lib = load("libcuda.so.1")
        b = lambda name, *args, **kw: bind(lib, name, CUresult, *args, **kw)  # noqa: E731
        self._f = {
            "cuInit": b("cuInit", c_uint),
            "cuDriverGetVersion": b("cuDriverGetVersion", POINTER(c_int)),
            "cuGetErrorName": b("cuGetErrorName", CUresult, POINTER(c_char_p), optional=True),
            "cuDeviceGetCount": b("cuDeviceGetCount", POINTER(c_int)),
            "cuDeviceGet": b("cuDeviceGet", POINTER(CUdevice), c_int),
            "cuDeviceGetByPCIBusId": b("cuDeviceGetByPCIBusId", POINTER(CUdevice), c_char_p),
            "cuDeviceGetName": b("cuDeviceGetName", POINTER(c_char), c_int, CUdevice),
            "cuDeviceGetAttribute": b("cuDeviceGetAttribute", POINTER(c_int), c_int, CUdevice),
            "cuDeviceCanAccessPeer": b("cuDeviceCanAccessPeer", POINTER(c_int), CUdevice, CUdevice),
            "cuDevicePrimaryCtxRetain": b("cuDevicePrimaryCtxRetain", POINTER(CUcontext), CUdevice),
            "cuDevicePrimaryCtxRelease_v2": b("cuDevicePrimaryCtxRelease_v2", CUdevice),
            "cuCtxSetCurrent": b("cuCtxSetCurrent", CUcontext),
            "cuCtxSynchronize": b("cuCtxSynchronize"),
            "cuCtxEnablePeerAccess": b("cuCtxEnablePeerAccess", CUcontext, c_uint),
            "cuCtxDisablePeerAccess": b("cuCtxDisablePeerAccess", CUcontext),
            "cuMemAlloc_v2": b("cuMemAlloc_v2", POINTER(CUdeviceptr), c_size_t),
            "cuMemFree_v2": b("cuMemFree_v2", CUdeviceptr),
            "cuMemHostAlloc": b("cuMemHostAlloc", POINTER(c_void_p), c_size_t, c_uint),
            "cuMemFreeHost": b("cuMemFreeHost", c_void_p),
            "cuMemsetD8_v2": b("cuMemsetD8_v2", CUdeviceptr, ctypes.c_ubyte, c_size_t),
            "cuMemcpyHtoD_v2": b("cuMemcpyHtoD_v2", CUdeviceptr, c_void_p, c_size_t),
            "cuMemcpyDtoH_v2": b("cuMemcpyDtoH_v2", c_void_p, CUdeviceptr, c_size_t),
            "cuMemcpyHtoDAsync_v2": b("cuMemcpyHtoDAsync_v2", CUdeviceptr, c_void_p, c_size_t, CUstream),
            "cuMemcpyDtoHAsync_v2": b("cuMemcpyDtoHAsync_v2", c_void_p, CUdeviceptr, c_size_t, CUstream),
            "cuMemcpyPeerAsync": b("cuMemcpyPeerAsync", CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, c_size_t,
                                   CUstream),
            "cuStreamCreate": b("cuStreamCreate", POINTER(CUstream), c_uint),
            "cuStreamDestroy_v2": b("cuStreamDestroy_v2", CUstream),
            "cuStreamSynchronize": b("cuStreamSynchronize", CUstream),
            "cuEventCreate": b("cuEventCreate", POINTER(CUevent), c_uint),
            "cuEventRecord": b("cuEventRecord", CUevent, CUstream),
            "cuEventSynchronize": b("cuEventSynchronize", CUevent),
            "cuStreamWaitEvent": b("cuStreamWaitEvent", CUstream, CUevent, c_uint),
            "cuEventElapsedTime": b("cuEventElapsedTime", POINTER(c_float), CUevent, CUevent),
            "cuEventDestroy_v2": b("cuEventDestroy_v2", CUevent),
            "cuPointerSetAttribute": b("cuPointerSetAttribute", c_void_p, c_int, CUdeviceptr),
            "cuMemGetHandleForAddressRange": b("cuMemGetHandleForAddressRange", c_void_p, CUdeviceptr, c_size_t,
                                               c_int, c_uint64, optional=True),
        }
        self.version: Optional[int] = None
        self._retained: dict[int, int] = {}
        self.held: dict[int, int] = {}  # primary contexts kept open for the worker's life

    # --- plumbing
    def error_name(self, code: int) -> str:
        f = self._f.get("cuGetErrorName")
        if f is not None:
            s = c_char_p()
            try:
                if f(code, byref(s)) == 0 and s.value:
                    return s.value.decode()
            except Exception:
                pass
        return ERROR_NAMES.get(code, f"CUresult {code}")

    def call(self, name: str, *args) -> None:
        f = self._f.get(name)
        if f is None:
            raise CudaError(name, -1, "not exported by this libcuda.so.1")
        rc = f(*args)
        if rc != 0:
            raise CudaError(name, rc, self.error_name(rc))

    # --- the calls the checks use
    def init(self) -> int:
        self.call("cuInit", 0)
        v = c_int()
        self.call("cuDriverGetVersion", byref(v))
        self.version = v.value
        return v.value

    def device_by_bus_id(self, bdf: str) -> int:
        d = CUdevice()
        self.call("cuDeviceGetByPCIBusId", byref(d), bdf.encode())
        return d.value

    def device_name(self, dev: int) -> str:
        buf = (c_char * 256)()
        self.call("cuDeviceGetName", buf, 256, dev)
        return buf.value.decode(errors="replace")

    def attribute(self, dev: int, name: str) -> Optional[int]:
        v = c_int()
        try:
            self.call("cuDeviceGetAttribute", byref(v), ATTR[name], dev)
        except CudaError:
            return None
        return v.value

    def retain(self, dev: int) -> int:
        ctx = CUcontext()
        self.call("cuDevicePrimaryCtxRetain", byref(ctx), dev)
        self._retained[dev] = ctx.value or 0
        return ctx.value or 0

    def hold(self, dev: int) -> int:
        """Retain a primary context for as long as the process lives (the checks' own retain and release
        then cost nothing: the context is not created and destroyed per step)."""
        ctx = CUcontext()
        self.call("cuDevicePrimaryCtxRetain", byref(ctx), dev)
        self.held[dev] = ctx.value or 0
        return ctx.value or 0

    def release(self, dev: int) -> None:
        if self._retained.pop(dev, None) is not None:
            self.call("cuDevicePrimaryCtxRelease_v2", dev)

    def set_current(self, ctx: int) -> None:
        self.call("cuCtxSetCurrent", ctx)

    def can_access_peer(self, a: int, b: int) -> bool:
        v = c_int()
        self.call("cuDeviceCanAccessPeer", byref(v), a, b)
        return bool(v.value)

    def mem_alloc(self, size: int) -> int:
        p = CUdeviceptr()
        self.call("cuMemAlloc_v2", byref(p), size)
        return p.value

    def mem_free(self, ptr: int) -> None:
        self.call("cuMemFree_v2", ptr)

    def host_alloc(self, size: int) -> int:
        p = c_void_p()
        self.call("cuMemHostAlloc", byref(p), size, CU_MEMHOSTALLOC_PORTABLE)
        return p.value or 0

    def host_free(self, ptr: int) -> None:
        self.call("cuMemFreeHost", ptr)

    def memset(self, dptr: int, value: int, size: int) -> None:
        self.call("cuMemsetD8_v2", dptr, value, size)

    def stream(self) -> int:
        s = CUstream()
        self.call("cuStreamCreate", byref(s), CU_STREAM_NON_BLOCKING)
        return s.value or 0

    def event(self) -> int:
        e = CUevent()
        self.call("cuEventCreate", byref(e), CU_EVENT_DEFAULT)
        return e.value or 0

    def elapsed_ms(self, start: int, end: int) -> float:
        ms = c_float()
        self.call("cuEventElapsedTime", byref(ms), start, end)
        return ms.value

    def sync_memops(self, dptr: int) -> None:
        """What NCCL sets on GPU buffers it registers with a NIC (CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)."""
        one = c_int(1)
        self.call("cuPointerSetAttribute", byref(one), CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr)

    def dmabuf_fd(self, dptr: int, size: int) -> int:
        """Export GPU memory as a DMA-BUF file descriptor (driver API 11.7+)."""
        if self.version is not None and self.version < DMABUF_MIN_DRIVER:
            raise CudaError("cuMemGetHandleForAddressRange", -1,
                            f"driver API {self.version} is older than {DMABUF_MIN_DRIVER}")
        fd = c_int(-1)
        self.call("cuMemGetHandleForAddressRange", byref(fd), dptr, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)
        return fd.value


def version_text(v: Optional[int]) -> Optional[str]:
    return None if v is None else f"{v // 1000}.{(v % 1000) // 10}"

