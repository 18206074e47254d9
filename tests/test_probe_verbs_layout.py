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
