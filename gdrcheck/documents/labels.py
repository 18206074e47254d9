"""One numbering of devices for every output: ``pairs`` (text and JSON), the HTML report, the tree drawings."""

from __future__ import annotations

from gdrcheck.model import bdf_key
from gdrcheck.units import natural_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def device_labels(devices: list[dict[str, Any]]) -> dict[str, str]:
    """Column names as ``nvidia-smi topo -m`` prints them: GPUn by the driver's index, NICn in the
    order of the RDMA devices (NIC0 is ``mlx5_0``; NICs without an RDMA name follow in bus order), and
    NVMen in bus order. A NIC that is not a GPUDirect NIC (``rdma: false``) gets none."""
    out: dict[str, str] = {}
    nics = [d for d in devices if d["kind"] == "nic" and d.get("rdma") is not False]
    nics.sort(key=lambda d: (0, natural_key(d["rdma_devices"][0])) if d.get("rdma_devices") else (1, bdf_key(d["bdf"])))
    for i, d in enumerate(nics):
        out[d["bdf"]] = f"NIC{i}"
    nvmes = [d for d in devices if d["kind"] == "nvme"]
    for i, d in enumerate(nvmes):
        out[d["bdf"]] = f"NVMe{i}"
    for d in devices:
        if d["kind"] == "gpu":
            out[d["bdf"]] = f"GPU{d['gpu_index']}" if "gpu_index" in d else f"GPU {d['bdf']}"
    return out
