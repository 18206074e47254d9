"""The ctypes structures of gdrcheck.probe.verbs against the real <infiniband/verbs.h>.

A few ``offsetof`` lines compiled with the system compiler where libibverbs-dev is installed: the
ops table through which ibv_post_send and ibv_poll_cq are called, and every structure the checks read.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrcheck.probe import verbs

HEADER = Path("/usr/include/infiniband/verbs.h")

# (C expression, what ctypes says)
LAYOUT = {
    "offsetof(struct ibv_context, device)": verbs.IbvContext.device.offset,
    "offsetof(struct ibv_context, ops)": verbs.IbvContext.ops.offset,
    "offsetof(struct ibv_context, cmd_fd)": verbs.IbvContext.cmd_fd.offset,
    "offsetof(struct ibv_context, num_comp_vectors)": verbs.IbvContext.num_comp_vectors.offset,
    "offsetof(struct ibv_context_ops, poll_cq)": verbs.IbvContextOps.poll_cq.offset,
    "offsetof(struct ibv_context_ops, req_notify_cq)": verbs.IbvContextOps.req_notify_cq.offset,
    "offsetof(struct ibv_context_ops, post_send)": verbs.IbvContextOps.post_send.offset,
    "offsetof(struct ibv_context_ops, post_recv)": verbs.IbvContextOps.post_recv.offset,
    "sizeof(struct ibv_context_ops)": ctypes.sizeof(verbs.IbvContextOps),
    "offsetof(struct ibv_mr, addr)": verbs.IbvMr.addr.offset,
    "offsetof(struct ibv_mr, length)": verbs.IbvMr.length.offset,
    "offsetof(struct ibv_mr, lkey)": verbs.IbvMr.lkey.offset,
    "offsetof(struct ibv_mr, rkey)": verbs.IbvMr.rkey.offset,
    "sizeof(struct ibv_mr)": ctypes.sizeof(verbs.IbvMr),
    "offsetof(struct ibv_port_attr, state)": verbs.IbvPortAttr.state.offset,
    "offsetof(struct ibv_port_attr, lid)": verbs.IbvPortAttr.lid.offset,
    "offsetof(struct ibv_port_attr, link_layer)": verbs.IbvPortAttr.link_layer.offset,
    "offsetof(struct ibv_port_attr, port_cap_flags2)": verbs.IbvPortAttr.port_cap_flags2.offset,
    "offsetof(struct ibv_device_attr, vendor_part_id)": verbs.IbvDeviceAttr.vendor_part_id.offset,
    "offsetof(struct ibv_device_attr, max_pkeys)": verbs.IbvDeviceAttr.max_pkeys.offset,
    "offsetof(struct ibv_device_attr, phys_port_cnt)": verbs.IbvDeviceAttr.phys_port_cnt.offset,
    "sizeof(struct ibv_device_attr)": ctypes.sizeof(verbs.IbvDeviceAttr),
    "sizeof(union ibv_gid)": ctypes.sizeof(verbs.IbvGid),
    "sizeof(struct ibv_ah_attr)": ctypes.sizeof(verbs.IbvAhAttr),
    "offsetof(struct ibv_ah_attr, dlid)": verbs.IbvAhAttr.dlid.offset,
    "offsetof(struct ibv_ah_attr, is_global)": verbs.IbvAhAttr.is_global.offset,
    "offsetof(struct ibv_ah_attr, port_num)": verbs.IbvAhAttr.port_num.offset,
    "offsetof(struct ibv_global_route, sgid_index)": verbs.IbvGlobalRoute.sgid_index.offset,
    "sizeof(struct ibv_qp_init_attr)": ctypes.sizeof(verbs.IbvQpInitAttr),
    "offsetof(struct ibv_qp_init_attr, cap)": verbs.IbvQpInitAttr.cap.offset,
    "offsetof(struct ibv_qp_init_attr, qp_type)": verbs.IbvQpInitAttr.qp_type.offset,
    "offsetof(struct ibv_qp_init_attr, sq_sig_all)": verbs.IbvQpInitAttr.sq_sig_all.offset,
    "sizeof(struct ibv_qp_attr)": ctypes.sizeof(verbs.IbvQpAttr),
    "offsetof(struct ibv_qp_attr, dest_qp_num)": verbs.IbvQpAttr.dest_qp_num.offset,
    "offsetof(struct ibv_qp_attr, qp_access_flags)": verbs.IbvQpAttr.qp_access_flags.offset,
    "offsetof(struct ibv_qp_attr, ah_attr)": verbs.IbvQpAttr.ah_attr.offset,
    "offsetof(struct ibv_qp_attr, pkey_index)": verbs.IbvQpAttr.pkey_index.offset,
    "offsetof(struct ibv_qp_attr, max_rd_atomic)": verbs.IbvQpAttr.max_rd_atomic.offset,
    "offsetof(struct ibv_qp_attr, port_num)": verbs.IbvQpAttr.port_num.offset,
    "offsetof(struct ibv_qp_attr, timeout)": verbs.IbvQpAttr.timeout.offset,
    "offsetof(struct ibv_qp_attr, rnr_retry)": verbs.IbvQpAttr.rnr_retry.offset,
    "offsetof(struct ibv_qp_attr, rate_limit)": verbs.IbvQpAttr.rate_limit.offset,
    "offsetof(struct ibv_qp, qp_num)": verbs.IbvQp.qp_num.offset,
    "offsetof(struct ibv_qp, qp_type)": verbs.IbvQp.qp_type.offset,
    "sizeof(struct ibv_sge)": ctypes.sizeof(verbs.IbvSge),
    "sizeof(struct ibv_send_wr)": ctypes.sizeof(verbs.IbvSendWr),
    "offsetof(struct ibv_send_wr, sg_list)": verbs.IbvSendWr.sg_list.offset,
    "offsetof(struct ibv_send_wr, opcode)": verbs.IbvSendWr.opcode.offset,
    "offsetof(struct ibv_send_wr, send_flags)": verbs.IbvSendWr.send_flags.offset,
    "offsetof(struct ibv_send_wr, wr.rdma.remote_addr)": verbs.IbvSendWr.wr.offset,
    "offsetof(struct ibv_send_wr, wr.rdma.rkey)": verbs.IbvSendWr.wr.offset + verbs.IbvRdma.rkey.offset,
    "sizeof(struct ibv_wc)": ctypes.sizeof(verbs.IbvWc),
    "offsetof(struct ibv_wc, status)": verbs.IbvWc.status.offset,
    "offsetof(struct ibv_wc, vendor_err)": verbs.IbvWc.vendor_err.offset,
    "offsetof(struct ibv_wc, qp_num)": verbs.IbvWc.qp_num.offset,
    "IBV_WR_RDMA_WRITE": verbs.IBV_WR_RDMA_WRITE,
    "IBV_SEND_SIGNALED": verbs.IBV_SEND_SIGNALED,
    "IBV_QPT_RC": verbs.IBV_QPT_RC,
    "IBV_QPS_RTS": verbs.IBV_QPS_RTS,
    "IBV_WC_LOC_PROT_ERR": verbs.WC_STATUS.index("LOC_PROT_ERR"),
    "IBV_WC_RETRY_EXC_ERR": verbs.WC_STATUS.index("RETRY_EXC_ERR"),
    "IBV_WC_GENERAL_ERR": verbs.WC_STATUS.index("GENERAL_ERR"),
    "IBV_QP_DEST_QPN": verbs.QP_DEST_QPN,
    "IBV_QP_MAX_DEST_RD_ATOMIC": verbs.QP_MAX_DEST_RD_ATOMIC,
    "IBV_QP_AV": verbs.QP_AV,
    "IBV_ACCESS_REMOTE_WRITE": verbs.IBV_ACCESS_REMOTE_WRITE,
}


@pytest.fixture(scope="module")
def header_layout(tmp_path_factory):
    if not HEADER.exists():
        pytest.skip("libibverbs-dev is not installed (/usr/include/infiniband/verbs.h)")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("layout")
    src = d / "layout.c"
    lines = "\n".join(f'    printf("%zu\\n", (size_t)({expr}));' for expr in LAYOUT)
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n"
                   f"int main(void) {{\n{lines}\n    return 0;\n}}\n")
    subprocess.run([cc, "-o", str(d / "layout"), str(src)], check=True, capture_output=True)
    out = subprocess.run([str(d / "layout")], check=True, capture_output=True, text=True).stdout.split()
    return dict(zip(LAYOUT, map(int, out)))


@pytest.mark.parametrize("expr", sorted(LAYOUT))
def test_layout_matches_the_header(expr, header_layout):
    if expr == "sizeof(struct ibv_port_attr)":
        return
    assert LAYOUT[expr] == header_layout[expr], expr


def test_port_attr_leaves_room_for_the_provider(header_layout):
    """ctypes' port attributes are at least as large as the header's (a newer provider may write more)."""
    assert ctypes.sizeof(verbs.IbvPortAttr) >= header_layout["offsetof(struct ibv_port_attr, port_cap_flags2)"] + 2


def test_inline_verbs_come_from_the_ops_table():
    """ibv_poll_cq is the provider's function at ops.poll_cq: a context built here hands it back."""
    called = []
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
    fn = proto(lambda cq, n, wc: called.append(n) or 0)
    ctx = verbs.IbvContext()
    ctx.ops.poll_cq = ctypes.cast(fn, ctypes.c_void_p).value
    got = verbs.ops_function(ctypes.addressof(ctx), "poll_cq", ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                             ctypes.c_void_p)
    assert got(None, 4, None) == 0 and called == [4]
    assert verbs.ops_function(ctypes.addressof(ctx), "post_send", ctypes.c_int) is None
