"""The CUDA driver's own GPUDirect flags per GPU, read by ``gdrcheck snapshot`` only.

NCCL takes a GPU's GPUDirect RDMA flag from ``cudaDevAttrGPUDirectRDMASupported`` (v2.30.7
``src/plugin/net.cc:424-436``, CUDA driver >= 11.3) and the GPU side of DMA-BUF from
``CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`` (v2.30.7 ``src/init.cc:401-420``, CUDA driver >= 11.7); it
marks a GPU as an MLOPart partition when the CUDA device name holds ``MLOPart`` (``src/init.cc:722-723``).
This collector asks ``libcuda.so.1`` the same (``cuInit(0)``, ``cuDeviceGetAttribute`` 116 and 124,
``cuDeviceGetName``) for every CUDA device, matched to its GPU by PCI bus id.

``cuInit`` can take hundreds of milliseconds, so only a recording source (``gdrcheck snapshot``) asks;
the answers go into the archive as ``/gdrcheck/cuda.json`` and a replay (``--from snapshot.tar.gz``)
reads them back. A live ``pairs``/``check`` never loads libcuda, and an input without the record (or whose
record says libcuda could not be asked) shows no such fact: the rules then decide from the model and say so.
"""

from __future__ import annotations

import json

from gdrcheck.collectors.driver_records import CUDA_FILE
from gdrcheck.cuda_attr import ATTR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

RECORD_VERSION = 1
ATTR_GDR = ATTR["gpu_direct_rdma_supported"]
ATTR_DMABUF = ATTR["dma_buf_supported"]
ATTR_PCI = (("domain", ATTR["pci_domain_id"]), ("bus", ATTR["pci_bus_id"]), ("device", ATTR["pci_device_id"]))
SOURCE = "libcuda cuDeviceGetAttribute, read by gdrcheck snapshot"


class CudaUnavailable(Exception):
    """libcuda could not be loaded or initialised: the one-line reason."""


def _load_libcuda():
    """``libcuda.so.1`` as a ctypes library (tests replace this function)."""
    import ctypes

    try:
        return ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_LOCAL)
    except OSError as e:
        raise CudaUnavailable(f"libcuda.so.1 not loaded ({e})") from None


def _ask(lib) -> dict[str, Any]:
    """One record of every CUDA device's flags; a call that fails leaves its field ``None``."""
    import ctypes

    def call(name: str, *args) -> int:
        f = getattr(lib, name)
        try:
            f.restype = ctypes.c_int
        except (AttributeError, TypeError):  # a scripted stand-in
            pass
        return int(f(*args))

    rc = call("cuInit", ctypes.c_uint(0))
    if rc != 0:
        raise CudaUnavailable(f"cuInit(0) returned CUresult {rc}")
    ver = ctypes.c_int(0)
    driver = ver.value if call("cuDriverGetVersion", ctypes.byref(ver)) == 0 else None
    count = ctypes.c_int(0)
    if call("cuDeviceGetCount", ctypes.byref(count)) != 0:
        raise CudaUnavailable("cuDeviceGetCount failed")
    devices: list[dict[str, Any]] = []
    for i in range(count.value):
        dev = ctypes.c_int(0)
        if call("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(i)) != 0:
            devices.append({"index": i, "error": "cuDeviceGet failed"})
            continue

        def attr(code: int) -> Optional[int]:
            v = ctypes.c_int(0)
            return v.value if call("cuDeviceGetAttribute", ctypes.byref(v), ctypes.c_int(code), dev) == 0 else None

        pci = {k: attr(code) for k, code in ATTR_PCI}
        bus_id = None
        if None not in pci.values():
            bus_id = f"{pci['domain']:04x}:{pci['bus']:02x}:{pci['device']:02x}.0"
        buf = ctypes.create_string_buffer(256)
        name = buf.value.decode(errors="replace") if call("cuDeviceGetName", buf, ctypes.c_int(256), dev) == 0 \
            else None
        devices.append({"index": i, "bus_id": bus_id, "name": name,
                        "gpu_direct_rdma_supported": attr(ATTR_GDR), "dma_buf_supported": attr(ATTR_DMABUF)})
    return {"version": RECORD_VERSION, "init": None, "driver_version": driver, "devices": devices}


def _live_record() -> dict[str, Any]:
    try:
        return _ask(_load_libcuda())
    except CudaUnavailable as e:
        return {"version": RECORD_VERSION, "init": str(e), "devices": []}
    except Exception as e:  # noqa: BLE001 - whatever the driver library does, never a traceback
        return {"version": RECORD_VERSION, "init": f"{type(e).__name__}: {e}", "devices": []}


def facts_from_record(rec: dict[str, Any]):
    """(the ``cuda_attrs`` fact or None, the collector's status line)."""
    from gdrcheck.model import CollectorStatus, Fact, norm_bdf

    if not isinstance(rec, dict) or rec.get("init"):
        why = rec.get("init") if isinstance(rec, dict) else "not a record"
        return None, CollectorStatus("cuda", "unavailable", f"CUDA driver attributes not read: {why}",
                                     "run 'gdrcheck snapshot' on the node with the NVIDIA driver's libcuda.so.1")
    gpus: dict[str, dict[str, Any]] = {}
    for d in rec.get("devices") or ():
        if not isinstance(d, dict) or not isinstance(d.get("bus_id"), str):
            continue
        try:
            bdf = norm_bdf(d["bus_id"])
        except ValueError:
            continue
        g = gpus.setdefault(bdf, {"gdr": None, "dmabuf": None, "names": []})
        for key, field in (("gdr", "gpu_direct_rdma_supported"), ("dmabuf", "dma_buf_supported")):
            v = d.get(field)
            if isinstance(v, int) and not isinstance(v, bool) and g[key] is None:
                g[key] = v
        if isinstance(d.get("name"), str):
            g["names"].append(d["name"])
    drv = rec.get("driver_version")
    value = {"driver_version": drv if isinstance(drv, int) else None, "gpus": gpus}
    return Fact(value, source=SOURCE), CollectorStatus("cuda", "ok", f"{len(gpus)} GPU(s): GPUDirect RDMA and "
                                                                     "DMA-BUF attributes")


def collect_cuda_attrs(src) -> tuple[Optional[Any], Optional[Any]]:
    """(fact, status), or (None, None) where nothing is asked: a live run that records nothing, or an input
    made without the record."""
    if src.live:
        if not src.recording:
            return None, None
        dl = src.deadline
        rec = dl.call("cuda", _live_record) if dl is not None else _live_record()
        if rec is None:  # cuInit did not answer within the --timeout: a wedged driver does not hold the run
            rec = {"version": RECORD_VERSION, "init": f"cuInit did not answer within the --timeout of "
                                                      f"{dl.seconds:g} s", "devices": []}
        src.recorded[CUDA_FILE] = ("f", json.dumps(rec, indent=1, sort_keys=True).encode())
        return facts_from_record(rec)
    text = src.read_text(CUDA_FILE, 1 << 20)
    if text is None:
        return None, None
    try:
        rec = json.loads(text)
    except ValueError:
        return None, None
    fact, _st = facts_from_record(rec)
    # the snapshot's manifest says what the CUDA driver answered when it was made; a replay lists the collectors
    # a live run lists (a live run never asks CUDA), so its documents are the live run's
    return (fact, None) if fact is not None else (None, None)
