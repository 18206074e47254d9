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
import time

from gdrcheck.probe import verbs
from gdrcheck.probe.checks_gpu import Cleanup, current_on
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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
REG_BYTES = 4 << 20
SWEEP_CHUNK = 64 << 20  # the registration sweep pins GPU memory in chunks of this size ...
SWEEP_BYTES = 1 << 30   # ... up to this much (or --pin-bytes), then releases every chunk


def _open_nic(v: Verbs, params: dict[str, Any], m: dict[str, Any]):
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


def _register(v: Verbs, pd: int, call, *args) -> dict[str, Any]:
    ctypes.set_errno(0)
    mr = call(pd, *args)
    if not mr:
        return errno_doc(v.errno())
    v.dereg_mr(mr)
    return {"ok": True}


def _pin_sweep(v: Verbs, pd: int, cu, target: int, chunk: int = SWEEP_CHUNK) -> dict[str, Any]:
    """How much GPU memory registers with the NIC at once: chunks allocated and registered until ``target``
    or the first refusal (ENOMEM: BAR1 or the NIC's translation tables ran out), then all released."""
    held = []
    total = 0
    stopped = None
    try:
        while total + chunk <= target:
            try:
                d = cu.mem_alloc(chunk)
            except CudaError as e:
                stopped = f"cuMemAlloc {e.name}"
                break
            held.append((cu.mem_free, d))
            ctypes.set_errno(0)
            mr = v.reg_mr(pd, ctypes.c_void_p(d), chunk, ACCESS)
            if not mr:
                stopped = errno_name(v.errno())
                break
            held.append((v.dereg_mr, mr))
            total += chunk
    finally:
        for release, h in reversed(held):
            release(h)
    return {"ok": stopped is None, "target_mib": target >> 20, "registered_mib": total >> 20,
            "chunk_mib": chunk >> 20, **({"stopped_by": stopped} if stopped else {})}


def _nic_session(params: dict[str, Any], step, finish=None) -> dict[str, Any]:
    """libibverbs opened, the NIC opened and its ports read, ``step(v, name, ctx, m, c)`` run, and everything
    released whatever happens; a CUDA error is the step's failure. ``step`` returns the result, or None to
    have ``finish(m, c)`` decide it once everything is released (it sees the cleanup's errors)."""
    m: dict[str, Any] = {}
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
        result = step(v, name, ctx, m, c)
    except CudaError as e:
        c.run()
        return {"status": "fail", "measured": m, "evidence": {"error": str(e), "cuda_result": e.name}}
    finally:
        c.run()
    return result if result is not None else finish(m, c)


def check_rdma_register(params: dict[str, Any], load_cuda=Cuda) -> dict[str, Any]:
    def step(v: Verbs, name: str, ctx: int, m: dict[str, Any], c: Cleanup):
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
            if supported and name.startswith("mlx5"):  # NCCL 2.27+ asks only then (net_ib/init.cc:378)
                m["data_direct"] = verbs.data_direct_sysfs_path(ctx)
        # 2. GPU memory
        cu = load_cuda()
        current_on(cu, params["gpu"], c)
        size = int(params.get("bytes") or REG_BYTES)
        dptr = cu.mem_alloc(size)
        c.push(lambda: cu.mem_free(dptr))
        try:
            cu.sync_memops(dptr)
        except CudaError:
            pass
        m["reg_mr"] = _register(v, pd, v.reg_mr, ctypes.c_void_p(dptr), size, ACCESS)
        if m["reg_mr"].get("ok"):
            m["pin_sweep"] = _pin_sweep(v, pd, cu, int(params.get("pin_bytes") or SWEEP_BYTES))
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
        return None

    return _nic_session(params, step, _register_verdict)


def _register_verdict(m: dict[str, Any], c: Cleanup) -> dict[str, Any]:
    works = [k for k in ("reg_mr", "reg_dmabuf_mr") if (m.get(k) or {}).get("ok")]
    m["gpu_memory_registers"] = bool(works)
    ev: dict[str, Any] = {"cleanup_errors": c.errors} if c.errors else {}
    sweep = m.get("pin_sweep") or {}
    if works and sweep.get("stopped_by") == "ENOMEM":
        ev["error"] = (f"registration ran out of memory after {sweep['registered_mib']} MiB of the "
                       f"{sweep['target_mib']} MiB asked for")
        return {"status": "degraded", "measured": m, "evidence": ev}
    if not works:
        errs = [f"{k}: {(m.get(k) or {}).get('errno') or (m.get(k) or {}).get('error')}"
                for k in ("reg_mr", "reg_dmabuf_mr") if k in m]
        ev["error"] = "GPU memory does not register with the NIC (" + "; ".join(errs) + ")"
        return {"status": "fail", "measured": m, "evidence": ev}
    return {"status": "ok", "measured": m, "evidence": ev}


def check_rdma_loopback(params: dict[str, Any], load_cuda=Cuda) -> dict[str, Any]:
    def step(v: Verbs, name: str, ctx: int, m: dict[str, Any], c: Cleanup):
        active = [p for p in m["ports"] if p["state"] in ("ACTIVE", "ACTIVE_DEFER")]
        if not active:
            return {"status": "skipped", "measured": m, "evidence": {}, "reason": f"no ACTIVE port on {name}"}
        return _loopback(v, ctx, active[0], params, m, c, load_cuda)

    return _nic_session(params, step)


class LoopbackError(Exception):
    pass


def _connect_to_itself(v: Verbs, ctx: int, pd: int, port: dict[str, Any], c: Cleanup):
    """A reliable-connection queue pair whose destination is itself, in RTS; and its completion queue."""
    cq = v.create_cq(ctx, 16, None, None, 0)
    if not cq:
        raise LoopbackError(f"ibv_create_cq: {errno_name(v.errno())}")
    c.push(lambda: v.destroy_cq(cq))
    init = verbs.IbvQpInitAttr(send_cq=cq, recv_cq=cq, qp_type=verbs.IBV_QPT_RC, sq_sig_all=1)
    init.cap.max_send_wr, init.cap.max_recv_wr, init.cap.max_send_sge, init.cap.max_recv_sge = 4, 1, 1, 1
    qp = v.create_qp(pd, ctypes.byref(init))
    if not qp:
        raise LoopbackError(f"ibv_create_qp: {errno_name(v.errno())}")
    c.push(lambda: v.destroy_qp(qp))
    n = port["port"]
    a = verbs.IbvQpAttr(qp_state=verbs.IBV_QPS_INIT, pkey_index=0, port_num=n, qp_access_flags=ACCESS)
    _modify(v, qp, a, verbs.QP_STATE | verbs.QP_PKEY_INDEX | verbs.QP_PORT | verbs.QP_ACCESS_FLAGS, "INIT")
    a = verbs.IbvQpAttr(qp_state=verbs.IBV_QPS_RTR, path_mtu=port.get("active_mtu") or 3,
                        dest_qp_num=qp.contents.qp_num, rq_psn=0, max_dest_rd_atomic=1, min_rnr_timer=12)
    a.ah_attr.dlid, a.ah_attr.port_num = port.get("lid") or 0, n
    if port.get("link_layer") == "Ethernet":  # RoCE: address by GID
        gid = verbs.IbvGid()
        if v.query_gid(ctx, n, int(port.get("gid_index") or 0), ctypes.byref(gid)) != 0:
            raise LoopbackError("ibv_query_gid failed")
        a.ah_attr.is_global, a.ah_attr.grh.dgid = 1, gid
        a.ah_attr.grh.sgid_index, a.ah_attr.grh.hop_limit = int(port.get("gid_index") or 0), 1
    _modify(v, qp, a, verbs.QP_STATE | verbs.QP_AV | verbs.QP_PATH_MTU | verbs.QP_DEST_QPN | verbs.QP_RQ_PSN
            | verbs.QP_MAX_DEST_RD_ATOMIC | verbs.QP_MIN_RNR_TIMER, "RTR")
    a = verbs.IbvQpAttr(qp_state=verbs.IBV_QPS_RTS, timeout=14, retry_cnt=7, rnr_retry=7, sq_psn=0,
                        max_rd_atomic=1)
    _modify(v, qp, a, verbs.QP_STATE | verbs.QP_TIMEOUT | verbs.QP_RETRY_CNT | verbs.QP_RNR_RETRY
            | verbs.QP_SQ_PSN | verbs.QP_MAX_QP_RD_ATOMIC, "RTS")
    return cq, qp


def _modify(v: Verbs, qp, attr, mask: int, state: str) -> None:
    rc = v.modify_qp(qp, ctypes.byref(attr), mask)
    if rc != 0:
        raise LoopbackError(f"ibv_modify_qp to {state}: {errno_name(rc if rc > 0 else v.errno())}")


def _reg_any(v: Verbs, pd: int, cu, addr: int, size: int, gpu: bool, c: Cleanup):
    """An MR over ``addr``: ibv_reg_mr, else (GPU memory) DMA-BUF. (mr, how) or raises."""
    ctypes.set_errno(0)
    mr = v.reg_mr(pd, ctypes.c_void_p(addr), size, ACCESS)
    how = "ibv_reg_mr"
    if not mr and gpu and v.reg_dmabuf_mr is not None:
        first = errno_name(v.errno())
        fd = cu.dmabuf_fd(addr, size)
        c.push(lambda: os.close(fd))
        mr = v.reg_dmabuf_mr(pd, 0, size, addr, fd, ACCESS)
        how = f"ibv_reg_dmabuf_mr (ibv_reg_mr: {first})"
    if not mr:
        raise LoopbackError(f"registering {'GPU' if gpu else 'host'} memory: {errno_name(v.errno())}")
    c.push(lambda: v.dereg_mr(mr))
    return mr.contents, how


def _write_and_wait(v: Verbs, ctx: int, qp, cq, src, dst, size: int, timeout_s: float) -> dict[str, Any]:
    post = verbs.ops_function(ctx, "post_send", ctypes.c_int, ctypes.POINTER(verbs.IbvQp),
                              ctypes.POINTER(verbs.IbvSendWr), ctypes.POINTER(ctypes.POINTER(verbs.IbvSendWr)))
    poll = verbs.ops_function(ctx, "poll_cq", ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                              ctypes.POINTER(verbs.IbvWc))
    if post is None or poll is None:
        raise LoopbackError("the provider's ops table has no post_send/poll_cq")
    sge = verbs.IbvSge(addr=src.addr or 0, length=size, lkey=src.lkey)
    wr = verbs.IbvSendWr(wr_id=1, sg_list=ctypes.pointer(sge), num_sge=1, opcode=verbs.IBV_WR_RDMA_WRITE,
                         send_flags=verbs.IBV_SEND_SIGNALED)
    wr.wr.rdma.remote_addr, wr.wr.rdma.rkey = dst.addr or 0, dst.rkey
    bad = ctypes.POINTER(verbs.IbvSendWr)()
    t0 = time.perf_counter()
    rc = post(qp, ctypes.byref(wr), ctypes.byref(bad))
    if rc != 0:
        raise LoopbackError(f"ibv_post_send: {errno_name(rc)}")
    wc = verbs.IbvWc()
    while True:
        got = poll(cq, 1, ctypes.byref(wc))
        if got < 0:
            raise LoopbackError("ibv_poll_cq failed")
        if got:
            break
        if time.perf_counter() - t0 > timeout_s:
            return {"completed": False, "error": f"no completion within {timeout_s:g} s"}
    dt = time.perf_counter() - t0
    name = verbs.wc_status_name(wc.status)
    out: dict[str, Any] = {"completed": True, "wc_status": name}
    if wc.status != 0:
        out["vendor_err"] = wc.vendor_err
        out["meaning"] = verbs.WC_MEANING.get(name, "")
    else:
        out["gb_per_s"] = round(size / dt / 1e9, 2) if dt > 0 else None
    return out


def _loopback(v: Verbs, ctx: int, port: dict[str, Any], params: dict[str, Any], m: dict[str, Any], c: Cleanup,
              load_cuda) -> dict[str, Any]:
    size = int(params.get("bytes") or REG_BYTES)
    m["port"] = port["port"]
    pd = v.alloc_pd(ctx)
    if not pd:
        return {"status": "fail", "measured": m, "evidence": {"error": "ibv_alloc_pd: " + errno_name(v.errno())}}
    c.push(lambda: v.dealloc_pd(pd))
    try:
        link = _SelfLink(v, ctx, pd, port, c)
        # host memory first: the baseline that needs no GPUDirect
        hs, hd, host, wait = _host_write(link, size, params, c)  # held here: both are registered
        m["host"] = host
        if host.get("wc_status") != "SUCCESS":
            return {"status": "fail", "measured": {**m, "wc_status": host.get("wc_status") or host.get("error")},
                    "evidence": {"error": "RDMA write between host buffers failed: "
                                          + str(host.get("meaning") or host.get("error") or host.get("wc_status"))}}
        cu, gd, gpu = _gpu_write(link, load_cuda, params["gpu"], hs, size, wait, m, c)
    except LoopbackError as e:
        return {"status": "fail", "measured": m, "evidence": {"error": str(e)}}
    return _gpu_verdict(cu, hs, gd, gpu, size, m)


class _SelfLink:
    """A reliable-connection queue pair connected to itself on one port, its protection domain and its
    completion queue: memory registers with it, and an RDMA write goes from one buffer to another."""

    def __init__(self, v: Verbs, ctx: int, pd: int, port: dict[str, Any], c: Cleanup) -> None:
        self.v, self.ctx, self.pd = v, ctx, pd
        self.cq, self.qp = _connect_to_itself(v, ctx, pd, port, c)

    def register(self, cu, addr: int, size: int, gpu: bool, c: Cleanup):
        return _reg_any(self.v, self.pd, cu, addr, size, gpu, c)

    def write(self, src, dst, size: int, timeout_s: float) -> dict[str, Any]:
        return _write_and_wait(self.v, self.ctx, self.qp, self.cq, src, dst, size, timeout_s)


def _host_write(link: _SelfLink, size: int, params: dict[str, Any], c: Cleanup):
    """An RDMA write between two host buffers, the source holding the pattern: (source, destination, what
    the write did, the completion timeout)."""
    from gdrcheck.probe.checks_gpu import fill_pattern, same

    hs = ctypes.create_string_buffer(size)
    hd = ctypes.create_string_buffer(size)
    fill_pattern(ctypes.addressof(hs), size, seed=5)
    src, _ = link.register(None, ctypes.addressof(hs), size, False, c)
    dst, _ = link.register(None, ctypes.addressof(hd), size, False, c)
    wait = float(params.get("completion_timeout_s") or 10.0)
    host = link.write(src, dst, size, wait)
    host["verified"] = host.get("wc_status") == "SUCCESS" and same(ctypes.addressof(hs), ctypes.addressof(hd), size)
    return hs, hd, host, wait


def _gpu_write(link: _SelfLink, load_cuda, gpu_bdf: str, hs, size: int, wait: float, m: dict[str, Any],
               c: Cleanup):
    """The pattern copied into one GPU buffer, written by RDMA to another, zeroed one: (the driver API, the
    destination, what the write did); how the GPU memory registered, and the write, in ``m``."""
    cu = load_cuda()
    current_on(cu, gpu_bdf, c)
    gs, gd = cu.mem_alloc(size), cu.mem_alloc(size)
    c.push(lambda: cu.mem_free(gs))
    c.push(lambda: cu.mem_free(gd))
    cu.call("cuMemcpyHtoD_v2", gs, ctypes.addressof(hs), size)
    cu.memset(gd, 0, size)
    cu.call("cuCtxSynchronize")
    for p in (gs, gd):
        try:
            cu.sync_memops(p)
        except CudaError:
            pass
    src, how = link.register(cu, gs, size, True, c)
    dst, _ = link.register(cu, gd, size, True, c)
    m["registered_by"] = how
    gpu = link.write(src, dst, size, wait)
    m["gpu"] = gpu
    return cu, gd, gpu


def _gpu_verdict(cu, hs, gd: int, gpu: dict[str, Any], size: int, m: dict[str, Any]) -> dict[str, Any]:
    """Whether the GPU-to-GPU write completed and the destination holds the pattern."""
    from gdrcheck.probe.checks_gpu import first_difference, same

    if gpu.get("wc_status") != "SUCCESS":
        m["wc_status"] = gpu.get("wc_status") or gpu.get("error")
        return {"status": "fail", "measured": m,
                "evidence": {"error": "RDMA write GPU to GPU: " + str(gpu.get("meaning") or gpu.get("error")
                                                                      or gpu.get("wc_status"))}}
    back = ctypes.create_string_buffer(size)
    cu.call("cuMemcpyDtoH_v2", ctypes.addressof(back), gd, size)
    gpu["verified"] = same(ctypes.addressof(hs), ctypes.addressof(back), size)
    m["verified"] = gpu["verified"]
    if not gpu["verified"]:
        m["error"] = m["wc_status"] = "data differs: " + first_difference(ctypes.addressof(hs),
                                                                          ctypes.addressof(back), size)
        return {"status": "fail", "measured": m, "evidence": {"error": m["error"]}}
    return {"status": "ok", "measured": m, "evidence": {}}
