"""mlx5 Data Direct (``NCCL_IB_DATA_DIRECT``, 2.27+): a data-direct DMA function whose PCI path NCCL may judge
GPUDirect RDMA on, instead of the NIC's own.

Pure: each function takes the snapshot and values it reads.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.reach import nccl_own_tree
from gdrcheck.rules.nccl.core import version_str

TYPE_CHECKING = False
if TYPE_CHECKING:

    from gdrcheck.rules.nccl.core import Version

DATA_DIRECT_FROM = (2, 27, 0)


def data_direct(version: Version, st, fns: list[str], snap, nic) -> str:
    """Why NCCL may judge this mlx5 NIC on a data-direct DMA function's PCI path instead of its own, or ''.

    NCCL asks ``mlx5dv_get_data_direct_sysfs_path`` for each mlx5 device whose DMA-BUF probe passes
    (v2.30.7 ``net_ib/init.cc:13, 152-170, 374-427``; v2.27.3 ``net_ib.cc:128, 650-660``): with an answer it
    lists the device as ``<dev>_dma`` with the data-direct function's PCI path (2.27: beside the device itself;
    from 2.28.3 instead of it unless ``NCCL_IB_DATA_DIRECT=2``). Which function serves which NIC is known
    only to a process that opens the device (no sysfs file shows it). ``fns``: the node's data-direct
    functions (:func:`gdrcheck.rules.nccl.flags.data_direct_functions`); ``nic``: the NIC's flags
    (:class:`gdrcheck.rules.nccl.flags.NicInfo`)."""
    v = version
    if v < DATA_DIRECT_FROM or not fns:
        return ""
    if not (nic.driver == "mlx5_core" or any(r.startswith("mlx5") for r in nic.rdma)):
        return ""
    if nccl_own_tree(snap) or nic.bdf in fns or any(r.endswith("_dma") for r in nic.rdma):
        return ""  # NCCL's own dump lists the devices it chose, a `_dma` one where it did
    value = st.param("NCCL_IB_DATA_DIRECT", 1)
    if (value == 0) if v < (2, 28, 3) else (value <= 0):
        return ""
    d = host_record(snap, "dmabuf") or {}
    if d.get("kernel_ge_5_12") is False or d.get("ibv_reg_dmabuf_mr") is False:
        return ""  # ncclMlx5dvDmaBufCapable fails: no data direct (net_ib/init.cc:152-170, 378)
    names = "/".join(nic.rdma) or nic.bdf
    how = ("lists it a second time as " if v < (2, 28, 3) or value == 2 else "lists it only as ") + f"{names}_dma"
    return (f"the node has a Data Direct DMA function ({', '.join(fns)}, Linux mlx5_data_direct) and "
            f"NCCL_IB_DATA_DIRECT={st.env.get('NCCL_IB_DATA_DIRECT') or '1 (default)'}: if {names} answers "
            f"mlx5dv_get_data_direct_sysfs_path, NCCL {version_str(v)} {how} with that function's PCI path and "
            "judges GDR on it (net_ib/init.cc:374-427)")
