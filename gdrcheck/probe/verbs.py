"""``libibverbs.so.1`` through ctypes: only what ``rdma-register`` and ``rdma-loopback`` need.

The structures follow ``<infiniband/verbs.h>`` (rdma-core); a test compiles
``offsetof`` lines against the real header where it is installed. ``ibv_post_send``
and ``ibv_poll_cq`` are inline in the header: they go through the context's ops
table (:class:`IbvContextOps`).
"""

from __future__ import annotations

import ctypes
import errno
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_int,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)

from gdrcheck.probe.libs import bind, load

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass

IBV_ACCESS_LOCAL_WRITE = 1
IBV_ACCESS_REMOTE_WRITE = 1 << 1
IBV_ACCESS_REMOTE_READ = 1 << 2
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
LINK_LAYERS = {0: "unspecified", 1: "InfiniBand", 2: "Ethernet"}


class IbvDeviceAttr(Structure):
    _fields_ = [("fw_ver", c_char * 64), ("node_guid", c_uint64), ("sys_image_guid", c_uint64),
                ("max_mr_size", c_uint64), ("page_size_cap", c_uint64), ("vendor_id", c_uint32),
                ("vendor_part_id", c_uint32), ("hw_ver", c_uint32)] + \
        [(n, c_int) for n in ("max_qp", "max_qp_wr", "device_cap_flags", "max_sge", "max_sge_rd", "max_cq",
                              "max_cqe", "max_mr", "max_pd", "max_qp_rd_atom", "max_ee_rd_atom", "max_res_rd_atom",
                              "max_qp_init_rd_atom", "max_ee_init_rd_atom", "atomic_cap", "max_ee", "max_rdd",
                              "max_mw", "max_raw_ipv6_qp", "max_raw_ethy_qp", "max_mcast_grp",
                              "max_mcast_qp_attach", "max_total_mcast_qp_attach", "max_ah", "max_fmr",
                              "max_map_per_fmr", "max_srq", "max_srq_wr", "max_srq_sge")] + \
        [("max_pkeys", c_uint16), ("local_ca_ack_delay", c_uint8), ("phys_port_cnt", c_uint8)]


class IbvPortAttr(Structure):
    _fields_ = [("state", c_int), ("max_mtu", c_int), ("active_mtu", c_int), ("gid_tbl_len", c_int),
                ("port_cap_flags", c_uint32), ("max_msg_sz", c_uint32), ("bad_pkey_cntr", c_uint32),
                ("qkey_viol_cntr", c_uint32), ("pkey_tbl_len", c_uint16), ("lid", c_uint16), ("sm_lid", c_uint16),
                ("lmc", c_uint8), ("max_vl_num", c_uint8), ("sm_sl", c_uint8), ("subnet_timeout", c_uint8),
                ("init_type_reply", c_uint8), ("active_width", c_uint8), ("active_speed", c_uint8),
                ("phys_state", c_uint8), ("link_layer", c_uint8), ("flags", c_uint8), ("port_cap_flags2", c_uint16),
                ("_reserve", c_uint8 * 64)]  # room for fields a newer provider writes


class IbvMr(Structure):
    _fields_ = [("context", c_void_p), ("pd", c_void_p), ("addr", c_void_p), ("length", c_size_t),
                ("handle", c_uint32), ("lkey", c_uint32), ("rkey", c_uint32)]


class IbvGid(ctypes.Union):
    # union ibv_gid: 16 raw bytes, or two __be64 (which make it, and what holds it, 8-byte aligned)
    _fields_ = [("raw", c_uint8 * 16), ("_global", c_uint64 * 2)]


class IbvGlobalRoute(Structure):
    _fields_ = [("dgid", IbvGid), ("flow_label", c_uint32), ("sgid_index", c_uint8), ("hop_limit", c_uint8),
                ("traffic_class", c_uint8)]


class IbvAhAttr(Structure):
    _fields_ = [("grh", IbvGlobalRoute), ("dlid", c_uint16), ("sl", c_uint8), ("src_path_bits", c_uint8),
                ("static_rate", c_uint8), ("is_global", c_uint8), ("port_num", c_uint8)]


class IbvQpCap(Structure):
    _fields_ = [(n, c_uint32) for n in ("max_send_wr", "max_recv_wr", "max_send_sge", "max_recv_sge",
                                         "max_inline_data")]


class IbvQpInitAttr(Structure):
    _fields_ = [("qp_context", c_void_p), ("send_cq", c_void_p), ("recv_cq", c_void_p), ("srq", c_void_p),
                ("cap", IbvQpCap), ("qp_type", c_int), ("sq_sig_all", c_int)]


class IbvQpAttr(Structure):
    _fields_ = [("qp_state", c_int), ("cur_qp_state", c_int), ("path_mtu", c_int), ("path_mig_state", c_int),
                ("qkey", c_uint32), ("rq_psn", c_uint32), ("sq_psn", c_uint32), ("dest_qp_num", c_uint32),
                ("qp_access_flags", c_uint32), ("cap", IbvQpCap), ("ah_attr", IbvAhAttr),
                ("alt_ah_attr", IbvAhAttr), ("pkey_index", c_uint16), ("alt_pkey_index", c_uint16)] + \
        [(n, c_uint8) for n in ("en_sqd_async_notify", "sq_draining", "max_rd_atomic", "max_dest_rd_atomic",
                                "min_rnr_timer", "port_num", "timeout", "retry_cnt", "rnr_retry", "alt_port_num",
                                "alt_timeout")] + [("rate_limit", c_uint32)]


class IbvQp(Structure):
    # the mutex and condition variable after qp_type are not used here
    _fields_ = [("context", c_void_p), ("qp_context", c_void_p), ("pd", c_void_p), ("send_cq", c_void_p),
                ("recv_cq", c_void_p), ("srq", c_void_p), ("handle", c_uint32), ("qp_num", c_uint32),
                ("state", c_int), ("qp_type", c_int)]


class IbvSge(Structure):
    _fields_ = [("addr", c_uint64), ("length", c_uint32), ("lkey", c_uint32)]


class IbvRdma(Structure):
    _fields_ = [("remote_addr", c_uint64), ("rkey", c_uint32)]


class IbvAtomic(Structure):
    _fields_ = [("remote_addr", c_uint64), ("compare_add", c_uint64), ("swap", c_uint64), ("rkey", c_uint32)]


class IbvWrUnion(ctypes.Union):
    _fields_ = [("rdma", IbvRdma), ("atomic", IbvAtomic)]


class IbvSendWr(Structure):
    pass


IbvSendWr._fields_ = [("wr_id", c_uint64), ("next", POINTER(IbvSendWr)), ("sg_list", POINTER(IbvSge)),
                      ("num_sge", c_int), ("opcode", c_int), ("send_flags", c_uint32), ("imm_data", c_uint32),
                      ("wr", IbvWrUnion), ("qp_type", c_uint32), ("_bind_mw_or_tso", c_uint64 * 6)]


class IbvWc(Structure):
    _fields_ = [("wr_id", c_uint64), ("status", c_int), ("opcode", c_int), ("vendor_err", c_uint32),
                ("byte_len", c_uint32), ("imm_data", c_uint32), ("qp_num", c_uint32), ("src_qp", c_uint32),
                ("wc_flags", c_uint32), ("pkey_index", c_uint16), ("slid", c_uint16), ("sl", c_uint8),
                ("dlid_path_bits", c_uint8)]


IBV_QPT_RC = 2
IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS = 1, 2, 3
IBV_WR_RDMA_WRITE = 0
IBV_SEND_SIGNALED = 1 << 1
QP_STATE, QP_ACCESS_FLAGS, QP_PKEY_INDEX, QP_PORT, QP_AV, QP_PATH_MTU = 1, 1 << 3, 1 << 4, 1 << 5, 1 << 7, 1 << 8
QP_TIMEOUT, QP_RETRY_CNT, QP_RNR_RETRY, QP_RQ_PSN, QP_MAX_QP_RD_ATOMIC = 1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13
QP_MIN_RNR_TIMER, QP_SQ_PSN, QP_MAX_DEST_RD_ATOMIC, QP_DEST_QPN = 1 << 15, 1 << 16, 1 << 17, 1 << 20
WC_STATUS = ("SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
             "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
             "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
             "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR")
WC_MEANING = {
    "LOC_PROT_ERR": "local protection error: the NIC could not reach the registered memory (ACS redirect or an "
                    "IOMMU between NIC and GPU)",
    "REM_ACCESS_ERR": "remote access error: the target buffer's key or range was refused",
    "LOC_ACCESS_ERR": "local access error",
    "RETRY_EXC_ERR": "transport retries exceeded: the port does not reach itself (link, GID or LID)",
    "WR_FLUSH_ERR": "flushed: an earlier error put the queue pair in the error state",
}


def wc_status_name(code: int) -> str:
    return WC_STATUS[code] if 0 <= code < len(WC_STATUS) else str(code)


OPS_NAMES = ("_compat_query_device", "_compat_query_port", "_compat_alloc_pd", "_compat_dealloc_pd",
             "_compat_reg_mr", "_compat_rereg_mr", "_compat_dereg_mr", "alloc_mw", "bind_mw", "dealloc_mw",
             "_compat_create_cq", "poll_cq", "req_notify_cq", "_compat_cq_event", "_compat_resize_cq",
             "_compat_destroy_cq", "_compat_create_srq", "_compat_modify_srq", "_compat_query_srq",
             "_compat_destroy_srq", "post_srq_recv", "_compat_create_qp", "_compat_query_qp", "_compat_modify_qp",
             "_compat_destroy_qp", "post_send", "post_recv", "_compat_create_ah", "_compat_destroy_ah",
             "_compat_attach_mcast", "_compat_detach_mcast", "_compat_async_event")


class IbvContextOps(Structure):
    _fields_ = [(n, c_void_p) for n in OPS_NAMES]


class IbvContext(Structure):
    # pthread_mutex_t (40 bytes on x86_64/aarch64 glibc) and abi_compat are not used here
    _fields_ = [("device", c_void_p), ("ops", IbvContextOps), ("cmd_fd", c_int), ("async_fd", c_int),
                ("num_comp_vectors", c_int)]


ERRNO_MEANING = {
    errno.EFAULT: "no peer-memory client took the GPU address (nvidia-peermem not loaded or not working)",
    errno.EOPNOTSUPP: "no DMA-BUF support in the kernel or the RDMA provider",
    errno.EPROTONOSUPPORT: "no DMA-BUF support in the kernel or the RDMA provider",
    errno.ENOMEM: "out of memory: BAR1 or the NIC's translation tables exhausted, or the locked-memory limit",
    errno.EINVAL: "invalid argument (the provider refused the address, length or flags)",
    errno.EPERM: "not permitted (locked-memory limit: ulimit -l)",
    errno.EACCES: "access denied",
    errno.EBADF: "bad file descriptor (DMA-BUF supported: the probe's fd -1 was looked at)",
}


def errno_name(code: int) -> str:
    """The errno's name as the man pages spell it (EOPNOTSUPP, not its alias ENOTSUP)."""
    if code == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"
    return errno.errorcode.get(code, str(code))


def errno_doc(code: int) -> dict[str, object]:
    name = errno_name(code)
    return {"ok": False, "errno": name, "meaning": ERRNO_MEANING.get(code, os.strerror(code) if code else "")}


class Verbs:
    def __init__(self) -> None:
        lib = load("libibverbs.so.1", use_errno=True)
        self._lib = lib
        self.get_device_list = bind(lib, "ibv_get_device_list", POINTER(c_void_p), POINTER(c_int))
        self.free_device_list = bind(lib, "ibv_free_device_list", None, POINTER(c_void_p))
        self.get_device_name = bind(lib, "ibv_get_device_name", c_char_p, c_void_p)
        self.open_device = bind(lib, "ibv_open_device", c_void_p, c_void_p)
        self.close_device = bind(lib, "ibv_close_device", c_int, c_void_p)
        self.query_device = bind(lib, "ibv_query_device", c_int, c_void_p, POINTER(IbvDeviceAttr))
        self.query_port = bind(lib, "ibv_query_port", c_int, c_void_p, c_uint8, POINTER(IbvPortAttr))
        self.alloc_pd = bind(lib, "ibv_alloc_pd", c_void_p, c_void_p)
        self.dealloc_pd = bind(lib, "ibv_dealloc_pd", c_int, c_void_p)
        self.reg_mr = bind(lib, "ibv_reg_mr", POINTER(IbvMr), c_void_p, c_void_p, c_size_t, c_int)
        self.reg_dmabuf_mr = bind(lib, "ibv_reg_dmabuf_mr", POINTER(IbvMr), c_void_p, c_uint64, c_size_t,
                                  c_uint64, c_int, c_int, optional=True)
        self.dereg_mr = bind(lib, "ibv_dereg_mr", c_int, POINTER(IbvMr))
        self.create_cq = bind(lib, "ibv_create_cq", c_void_p, c_void_p, c_int, c_void_p, c_void_p, c_int)
        self.destroy_cq = bind(lib, "ibv_destroy_cq", c_int, c_void_p)
        self.create_qp = bind(lib, "ibv_create_qp", POINTER(IbvQp), c_void_p, POINTER(IbvQpInitAttr))
        self.modify_qp = bind(lib, "ibv_modify_qp", c_int, POINTER(IbvQp), POINTER(IbvQpAttr), c_int)
        self.destroy_qp = bind(lib, "ibv_destroy_qp", c_int, POINTER(IbvQp))
        self.query_gid = bind(lib, "ibv_query_gid", c_int, c_void_p, c_uint8, c_int, POINTER(IbvGid))

    @staticmethod
    def errno() -> int:
        return ctypes.get_errno()

    def devices(self) -> list[tuple[str, int]]:
        """(name, ibv_device pointer) of every RDMA device; the list stays allocated until :meth:`close`."""
        n = c_int(0)
        ctypes.set_errno(0)
        lst = self.get_device_list(ctypes.byref(n))
        if not lst:
            self._list = None
            return []
        self._list = lst
        out = []
        for i in range(n.value):
            dev = lst[i]
            name = self.get_device_name(dev)
            out.append((name.decode() if isinstance(name, bytes) else str(name), dev))
        return out

    def close(self) -> None:
        lst = getattr(self, "_list", None)
        if lst:
            self.free_device_list(lst)
            self._list = None

    def ports(self, ctx: int) -> list[dict[str, object]]:
        attr = IbvDeviceAttr()
        if self.query_device(ctx, ctypes.byref(attr)) != 0:
            return []
        out = []
        for port in range(1, attr.phys_port_cnt + 1):
            pa = IbvPortAttr()
            if self.query_port(ctx, port, ctypes.byref(pa)) != 0:
                continue
            out.append({"port": port, "state": PORT_STATES.get(pa.state, str(pa.state)),
                        "link_layer": LINK_LAYERS.get(pa.link_layer, str(pa.link_layer)), "lid": pa.lid,
                        "active_mtu": pa.active_mtu, "gid_tbl_len": pa.gid_tbl_len})
        return out


def data_direct_sysfs_path(ctx: int) -> dict[str, object]:
    """NCCL's question to an mlx5 device (v2.30.7 ``net_ib/init.cc:378-392``, ``misc/mlx5dvwrap.cc:61-70``):
    ``mlx5dv_get_data_direct_sysfs_path`` (libmlx5, ``MLX5_1.25``). ``ok`` True with ``path``: NCCL lists the
    device as ``<dev>_dma`` on that function's PCI path; False with ``ENODEV``: no data-direct function."""
    try:
        lib = load("libmlx5.so.1")
    except Exception as e:  # noqa: BLE001 - a missing provider library is an answer, not a crash
        return {"ok": None, "error": f"libmlx5.so.1 not usable: {e}"}
    f = bind(lib, "mlx5dv_get_data_direct_sysfs_path", c_int, c_void_p, c_char_p, c_size_t, optional=True)
    if f is None:
        return {"ok": None, "error": "this libmlx5 has no mlx5dv_get_data_direct_sysfs_path (MLX5_1.25)"}
    buf = ctypes.create_string_buffer(4096)
    rc = f(ctx, buf, ctypes.sizeof(buf))
    if rc == 0:
        return {"ok": True, "path": "/sys" + buf.value.decode(errors="replace")}
    return {"ok": False, "errno": errno_name(rc), "meaning": "no data-direct function for this device"
            if rc == errno.ENODEV else os.strerror(rc) if rc > 0 else ""}


def rdma_device_of(bdf: str, sysfs: str = "/sys/class/infiniband") -> list[str]:
    """The RDMA device names whose PCI function is ``bdf`` (from sysfs)."""
    out = []
    try:
        names = sorted(os.listdir(sysfs))
    except OSError:
        return out
    for name in names:
        try:
            if os.path.basename(os.path.realpath(os.path.join(sysfs, name, "device"))) == bdf:
                out.append(name)
        except OSError:
            continue
    return out


def ops_function(ctx: int, name: str, restype, *argtypes):
    """An inline verb (ibv_post_send, ibv_poll_cq): the provider's function from the context's ops table."""
    c = IbvContext.from_address(ctx)
    addr = getattr(c.ops, name)
    if not addr:
        return None
    return CFUNCTYPE(restype, *argtypes)(addr)


