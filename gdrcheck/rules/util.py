"""Small helpers the rule families share: fact lookup and human labels."""

from __future__ import annotations

from functools import lru_cache

from gdrcheck.host_facts import host_value
from gdrcheck.model import address_known

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def value(ctx, name: str, key: Optional[str] = None) -> Any:
    """A host fact's value (or one key of a dict value); None when unknown (:func:`gdrcheck.host_facts.host_value`)."""
    return host_value(ctx.snap, name, key)


def label(ctx, bdf: str) -> str:
    """``GPU0 (0000:00:06.0)``, ``NIC mlx5_0 (0000:21:00.0)``, ``NVMe nvme0 (...)``."""
    return _label(ctx.topo, bdf)


@lru_cache(maxsize=16384)  # a large node asks per pair: each device's label worked out once
def _label(topo, bdf: str) -> str:
    d = topo.by_bdf.get(bdf)
    if d is None:
        return bdf
    kind = topo.device_kind.get(bdf)
    made_up = not address_known(d)  # a topo -m device without a bus id: its name only
    if kind == "gpu":
        if made_up and d.gpu_index is not None:
            return f"GPU{d.gpu_index}"
        return f"GPU{d.gpu_index} ({bdf})" if d.gpu_index is not None else f"GPU {bdf}"
    if kind == "nic":
        names = d.rdma_devices or d.netdevs
        if made_up:
            return f"NIC {names[0]}" if names else (d.name or "NIC").split(" of ")[0]
        return f"NIC {names[0]} ({bdf})" if names else f"NIC {bdf}"
    if kind == "nvme":
        return f"NVMe {d.nvme_names[0]} ({bdf})" if d.nvme_names else f"NVMe {bdf}"
    return f"{kind} {bdf}"


def pair_label(ctx, pair) -> str:
    return f"{label(ctx, pair.a)} and {label(ctx, pair.b)}"
