"""``gds-read``, run inside a worker: an O_DIRECT read through cuFile into GPU memory, verified.

A cuFile that opens without nvidia-fs (and without the kernel's P2PDMA mode) reads in
compatibility mode, bounced through host memory: that is reported as such, never as GDS.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
from ctypes import POINTER, Structure, c_int, c_size_t, c_ssize_t, c_void_p

from gdrcheck.probe.checks_gpu import Cleanup, current_on, fill_pattern, first_difference, same
from gdrcheck.probe.cuda import Cuda, CudaError
from gdrcheck.probe.libs import LibraryMissing, bind, load

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

READ_BYTES = 16 << 20
NVFS_STATS = "/proc/driver/nvidia-fs/stats"
NVFS_VERSION = "/proc/driver/nvidia-fs/version"
CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1


class CUfileError(Structure):
    _fields_ = [("err", c_int), ("cu_err", c_int)]


class CUfileDescr(Structure):
    # enum type; union { int fd; void *handle; } (at offset 8); const CUfileFSOps_t *fs_ops
    _fields_ = [("type", c_int), ("_pad", c_int), ("fd", c_int), ("_pad2", c_int), ("fs_ops", c_void_p)]


def nvfs_reads() -> Optional[int]:
    try:
        with open(NVFS_STATS) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"^Reads\s*:\s*n=(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def cufile_config(path: Optional[str] = None) -> dict[str, Any]:
    """What /etc/cufile.json (or CUFILE_ENV_PATH_JSON) says about compatibility and P2PDMA modes."""
    path = path or os.environ.get("CUFILE_ENV_PATH_JSON") or "/etc/cufile.json"
    try:
        with open(path) as f:
            text = re.sub(r"(?m)^\s*//.*$", "", f.read())  # cufile.json carries // comments
        doc = json.loads(text)
    except (OSError, ValueError):
        return {"path": path, "readable": False}
    props = doc.get("properties") or {}
    return {"path": path, "readable": True, "allow_compat_mode": props.get("allow_compat_mode"),
            "use_pci_p2pdma": props.get("use_pci_p2pdma")}


def gds_mode(cfg: dict[str, Any]) -> dict[str, Any]:
    forced = os.environ.get("CUFILE_FORCE_COMPAT_MODE", "").lower() in ("1", "true", "yes")
    nvfs = os.path.exists(NVFS_VERSION)
    if forced:
        return {"mode": "compat", "mode_reason": "CUFILE_FORCE_COMPAT_MODE is set"}
    if nvfs:
        return {"mode": "gds", "mode_reason": "nvidia-fs loaded"}
    if cfg.get("use_pci_p2pdma"):
        return {"mode": "p2pdma", "mode_reason": f"use_pci_p2pdma in {cfg['path']}"}
    return {"mode": "compat", "mode_reason": "cuFile opened without nvidia-fs and without P2PDMA mode"}


class CuFile:
    def __init__(self) -> None:
        lib = load("libcufile.so.0")
        self.driver_open = bind(lib, "cuFileDriverOpen", CUfileError)
        self.driver_close = bind(lib, "cuFileDriverClose", CUfileError)
        self.handle_register = bind(lib, "cuFileHandleRegister", CUfileError, POINTER(c_void_p),
                                    POINTER(CUfileDescr))
        self.handle_deregister = bind(lib, "cuFileHandleDeregister", None, c_void_p)
        self.buf_register = bind(lib, "cuFileBufRegister", CUfileError, c_void_p, c_size_t, c_int)
        self.buf_deregister = bind(lib, "cuFileBufDeregister", CUfileError, c_void_p)
        self.read = bind(lib, "cuFileRead", c_ssize_t, c_void_p, c_void_p, c_size_t, ctypes.c_longlong,
                         ctypes.c_longlong)


ERROR_NAMES = {5001: "CU_FILE_DRIVER_NOT_INITIALIZED", 5007: "CU_FILE_PLATFORM_NOT_SUPPORTED",
               5008: "CU_FILE_IO_NOT_SUPPORTED", 5009: "CU_FILE_DEVICE_NOT_SUPPORTED",
               5010: "CU_FILE_NVFS_DRIVER_ERROR", 5011: "CU_FILE_CUDA_DRIVER_ERROR",
               5018: "CU_FILE_INVALID_FILE_TYPE", 5019: "CU_FILE_INVALID_FILE_OPEN_FLAG", 5020: "CU_FILE_DIO_NOT_SET",
               5022: "CU_FILE_INVALID_VALUE", 5025: "CU_FILE_PERMISSION_DENIED",
               5027: "CU_FILE_HANDLE_NOT_REGISTERED", 5029: "CU_FILE_DEVICE_NOT_FOUND",
               5030: "CU_FILE_INTERNAL_ERROR", 5033: "CU_FILE_NVFS_SETUP_ERROR", 5034: "CU_FILE_IO_DISABLED"}


def _err(call: str, e: CUfileError) -> Optional[str]:
    if e.err == 0:
        return None
    return (f"{call}: {ERROR_NAMES.get(e.err, 'cuFile error')} ({e.err})"
            + (f" (CUresult {e.cu_err})" if e.cu_err else ""))


def check_gds_read(params: dict[str, Any], load_cuda=Cuda) -> dict[str, Any]:
    d = params.get("gds_path")
    if not d:
        return {"status": "skipped", "reason": "no --gds-path DIR given", "measured": {}, "evidence": {}}
    m: dict[str, Any] = {}
    cfg = cufile_config()
    m.update(gds_mode(cfg))
    m["cufile_json"] = cfg
    log = None
    if not os.environ.get("CUFILE_LOGFILE_PATH"):  # cuFile's own reasons, for the evidence
        import tempfile

        fd, log = tempfile.mkstemp(prefix="gdrcheck-cufile-", suffix=".log")
        os.close(fd)
        os.environ["CUFILE_LOGFILE_PATH"] = log
    result: dict[str, Any] = {"status": "unknown", "measured": m, "evidence": {}}
    try:
        result = _read(params, d, m, load_cuda)
    finally:
        if log:
            lines = cufile_errors(log)
            if lines:
                result.setdefault("evidence", {})["cufile_log"] = lines
            try:
                os.unlink(log)
            except OSError:
                pass
    return result


def cufile_errors(path: str, keep: int = 4) -> list:
    """The ERROR lines of a cuFile log (time stamps and thread ids cut), the last few."""
    try:
        with open(path, errors="replace") as f:
            lines = [ln.split("ERROR", 1)[1].strip() for ln in f if " ERROR " in ln]
    except OSError:
        return []
    return lines[-keep:]


def _read(params: dict[str, Any], d: str, m: dict[str, Any], load_cuda) -> dict[str, Any]:
    try:
        cf = CuFile()
    except LibraryMissing as e:
        return {"status": "skipped", "measured": m, "evidence": {"error": str(e)},
                "reason": "libcufile.so.0 is not installed (GDS user-space library: package libcufile or "
                          "nvidia-gds)"}
    n = int(params.get("bytes") or READ_BYTES)
    c = Cleanup()
    try:
        host = ctypes.create_string_buffer(n)
        fill_pattern(ctypes.addressof(host), n, seed=3)
        path = _write_test_file(d, host, c)
        handle, failed = _open_for_cufile(cf, path, d, m, c)
        if failed:
            return failed
        cu, dptr = _gpu_buffer(cf, load_cuda, params["gpu"], n, m, c)
        failed = _read_and_verify(cf, cu, handle[0], dptr, host, n, m)
        if failed:
            return failed
    except (CudaError, OSError) as e:
        c.run()
        m["error"] = str(e)
        return {"status": "fail", "measured": m, "evidence": {"error": str(e)}}
    finally:
        c.run()
    return {"status": "degraded" if m["mode"] == "compat" else "ok", "measured": m, "evidence": {}}


def _write_test_file(d: str, host, c: Cleanup) -> str:
    """The pattern in a new file in ``d``, on disk; removed by ``c``."""
    import tempfile

    # a new file of a name no one could plant a link at (O_EXCL, random, 0600): DIR may be world-writable
    wfd, path = tempfile.mkstemp(prefix=".gdrcheck-probe-", dir=d)
    c.push(lambda: os.unlink(path))
    with os.fdopen(wfd, "wb") as f:
        f.write(host.raw)
        f.flush()
        os.fsync(f.fileno())
    return path


def _open_for_cufile(cf: CuFile, path: str, d: str, m: dict[str, Any], c: Cleanup):
    """cuFile's driver open, the file opened with O_DIRECT and registered with cuFile: ((handle, its
    descriptor), None), or (None, the failed result)."""
    e = _err("cuFileDriverOpen", cf.driver_open())
    if e:
        return None, {"status": "fail", "measured": m, "evidence": {"error": e}}
    c.push(cf.driver_close)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError as e:
        m["error"] = f"open with O_DIRECT on {d}: {e.strerror} (GDS reads need a filesystem with O_DIRECT)"
        return None, {"status": "fail", "measured": m, "evidence": {"error": m["error"]}}
    c.push(lambda: os.close(fd))
    descr = CUfileDescr(type=CU_FILE_HANDLE_TYPE_OPAQUE_FD, fd=fd)
    fh = c_void_p()
    e = _err("cuFileHandleRegister", cf.handle_register(ctypes.byref(fh), ctypes.byref(descr)))
    if e:
        m["error"] = e
        return None, {"status": "fail", "measured": m, "evidence": {"error": e}}
    c.push(lambda: cf.handle_deregister(fh))
    return (fh, descr), None


def _gpu_buffer(cf: CuFile, load_cuda, gpu: str, n: int, m: dict[str, Any], c: Cleanup):
    """(the driver API, ``n`` zeroed bytes of the GPU's memory), the buffer registered with cuFile where it
    takes it (else why not, in ``m``)."""
    cu = load_cuda()
    current_on(cu, gpu, c)
    dptr = cu.mem_alloc(n)
    c.push(lambda: cu.mem_free(dptr))
    cu.memset(dptr, 0, n)
    e = _err("cuFileBufRegister", cf.buf_register(dptr, n, 0))
    if not e:
        c.push(lambda: cf.buf_deregister(dptr))
    else:
        m["buf_register"] = e
    return cu, dptr


def _read_and_verify(cf: CuFile, cu, fh, dptr: int, host, n: int, m: dict[str, Any]) -> Optional[dict[str, Any]]:
    """cuFileRead of the file into GPU memory, read back and compared with the pattern, nvidia-fs's read
    counter around it; None when it arrived whole, else the failed result."""
    before = nvfs_reads()
    got = cf.read(fh, dptr, n, 0, 0)
    after = nvfs_reads()
    if got != n:
        m["error"] = f"cuFileRead returned {got} of {n} bytes"
        return {"status": "fail", "measured": m, "evidence": {"error": m["error"]}}
    back = ctypes.create_string_buffer(n)
    cu.call("cuMemcpyDtoH_v2", ctypes.addressof(back), dptr, n)
    m["verified"] = same(ctypes.addressof(host), ctypes.addressof(back), n)
    if before is not None and after is not None:
        m["nvidia_fs_reads_delta"] = after - before
        if m["mode"] == "gds" and after == before:
            m["mode"], m["mode_reason"] = "compat", "nvidia-fs loaded but its read counter did not move"
    if not m["verified"]:
        m["error"] = first_difference(ctypes.addressof(host), ctypes.addressof(back), n)
        return {"status": "fail", "measured": m, "evidence": {"error": m["error"]}}
    return None
