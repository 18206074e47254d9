"""The RDMA checks, run inside a worker: ``rdma-register`` and ``rdma-loopback``.

``rdma-register`` does what NCCL does at start-up, in its order: the DMA-BUF probe
(``ibv_reg_dmabuf_mr`` with fd -1: EOPNOTSUPP/EPROTONOSUPPORT mean no DMA-BUF,
anything else means support), then ``ibv_reg_mr`` on GPU memory (the peer-memory
path), then the DMA-BUF export of GPU memory and ``ibv_reg_dmabuf_mr`` on it.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any, Dict

from gdrcheck.probe.checks_gpu import Cleanup
from gdrcheck.probe.cuda import Cuda, CudaError
from gdrcheck.probe.verbs import (
    IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE,
    Verbs,
    errno_doc,
    errno_name,
    rdma_device_of,
)

ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
REG_BYTES = 4 << 20


def _open_nic(v: Verbs, params: Dict[str, Any], m: Dict[str, Any]):
    """(name, context) of the NIC's RDMA device, or a skipped/fail result."""
    devs = v.devices()
    m["rdma_devices_found"] = len(devs)
    if not devs:
        return None, {"status": "skipped", "reason": "no RDMA device: ibv_get_device_list returned none",
                      "measured": m, "evidence": {}}
    wanted = rdma_device_of(params["nic"]) or list(params.get("rdma_devices") or ())
    pick = [(n, d) for n, d in devs if n in wanted]
    if not pick:
        return None, {"status": "skipped", "measured": m, "evidence": {"devices": [n for n, _ in devs]},
                      "reason": f"no RDMA device of {params['nic']} among {', '.join(n for n, _ in devs)}"}
    name, dev = pick[0]
    m["rdma_device"] = name
    ctx = v.open_device(dev)
    if not ctx:
        e = v.errno()
        return None, {"status": "fail", "measured": m,
                      "evidence": {"error": f"ibv_open_device({name}) failed: {errno.errorcode.get(e, e)}"}}
    return (name, ctx), None


def _register(v: Verbs, pd: int, call, *args) -> Dict[str, Any]:
    ctypes.set_errno(0)
    mr = call(pd, *args)
    if not mr:
        return errno_doc(v.errno())
    v.dereg_mr(mr)
    return {"ok": True}


def check_rdma_register(params: Dict[str, Any], load_cuda=Cuda) -> Dict[str, Any]:
    m: Dict[str, Any] = {}
    c = Cleanup()
    try:
        v = Verbs()
    except Exception as e:
        return {"status": "skipped", "reason": f"libibverbs.so.1 not usable: {e}", "measured": m, "evidence": {}}
    c.push(v.close)
    try:
        opened, early = _open_nic(v, params, m)
        if early is not None:
            return early
        name, ctx = opened
        c.push(lambda: v.close_device(ctx))
        m["ports"] = v.ports(ctx)
        pd = v.alloc_pd(ctx)
        if not pd:
            return {"status": "fail", "measured": m, "evidence": {"error": "ibv_alloc_pd failed: "
                                                                           + errno.errorcode.get(v.errno(), "?")}}
        c.push(lambda: v.dealloc_pd(pd))
        # 1. NCCL's DMA-BUF probe (ncclIbDmaBufSupport): fd -1
        if v.reg_dmabuf_mr is None:
            m["dmabuf_probe"] = {"ok": False, "error": "ibv_reg_dmabuf_mr not exported (rdma-core older than 34)"}
        else:
            ctypes.set_errno(0)
            mr = v.reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)
            e = v.errno()
            if mr:
                v.dereg_mr(mr)
            supported = e not in (errno.EOPNOTSUPP, errno.EPROTONOSUPPORT)
            m["dmabuf_probe"] = {"ok": supported, "errno": errno_name(e),
                                 "meaning": "DMA-BUF supported by kernel and provider" if supported
                                 else "no DMA-BUF in kernel or provider"}
        # 2. GPU memory
        cu = load_cuda()
        cu.init()
        dev = cu.device_by_bus_id(params["gpu"])
        gctx = cu.retain(dev)
        c.push(lambda: cu.release(dev))
        cu.set_current(gctx)
        size = int(params.get("bytes") or REG_BYTES)
        dptr = cu.mem_alloc(size)
        c.push(lambda: cu.mem_free(dptr))
        try:
            cu.sync_memops(dptr)
        except CudaError:
            pass
        m["reg_mr"] = _register(v, pd, v.reg_mr, ctypes.c_void_p(dptr), size, ACCESS)
        # 3. DMA-BUF export, then registration of the exported buffer
        try:
            fd = cu.dmabuf_fd(dptr, size)
            m["dmabuf_export"] = {"ok": True}
            c.push(lambda: os.close(fd))
            if v.reg_dmabuf_mr is None:
                m["reg_dmabuf_mr"] = {"ok": False, "error": "ibv_reg_dmabuf_mr not exported"}
            else:
                m["reg_dmabuf_mr"] = _register(v, pd, v.reg_dmabuf_mr, 0, size, dptr, fd, ACCESS)
        except CudaError as e:
            m["dmabuf_export"] = {"ok": False, "error": str(e)}
    except CudaError as e:
        c.run()
        return {"status": "fail", "measured": m, "evidence": {"error": str(e), "cuda_result": e.name}}
    finally:
        c.run()
    works = [k for k in ("reg_mr", "reg_dmabuf_mr") if (m.get(k) or {}).get("ok")]
    m["gpu_memory_registers"] = bool(works)
    ev: Dict[str, Any] = {"cleanup_errors": c.errors} if c.errors else {}
    if not works:
        errs = [f"{k}: {(m.get(k) or {}).get('errno') or (m.get(k) or {}).get('error')}"
                for k in ("reg_mr", "reg_dmabuf_mr") if k in m]
        ev["error"] = "GPU memory does not register with the NIC (" + "; ".join(errs) + ")"
        return {"status": "fail", "measured": m, "evidence": ev}
    return {"status": "ok", "measured": m, "evidence": ev}


def check_rdma_loopback(params: Dict[str, Any], load_cuda=Cuda) -> Dict[str, Any]:
    m: Dict[str, Any] = {}
    try:
        v = Verbs()
    except Exception as e:
        return {"status": "skipped", "reason": f"libibverbs.so.1 not usable: {e}", "measured": m, "evidence": {}}
    try:
        opened, early = _open_nic(v, params, m)
        if early is not None:
            return early
        name, ctx = opened
        try:
            m["ports"] = v.ports(ctx)
        finally:
            v.close_device(ctx)
    finally:
        v.close()
    active = [p for p in m["ports"] if p["state"] in ("ACTIVE", "ACTIVE_DEFER")]
    if not active:
        return {"status": "skipped", "measured": m, "evidence": {},
                "reason": f"no ACTIVE port on {m.get('rdma_device')}"}
    return loopback_on(v, params, m, active[0], load_cuda)


def loopback_on(v: Verbs, params: Dict[str, Any], m: Dict[str, Any], port: Dict[str, Any],
                load_cuda) -> Dict[str, Any]:
    """The queue-pair loopback itself: not in this version (the step says so rather than guess)."""
    m["port"] = port["port"]
    return {"status": "unknown", "measured": m, "evidence": {},
            "reason": "RDMA write loopback on an ACTIVE port is not implemented in this gdrcheck version"}

