"""Host-level facts: kernel, IOMMU, peer memory, p2pdma, GDS, NVIDIA driver parameters, VM.

Each fact records where it came from; one that could not be read is unknown with
the reason and what would settle it. The pieces live in ``host_kernel``,
``host_iommu``, ``host_nvidia``, ``host_peermem`` and ``host_nccl``.
"""

from __future__ import annotations

from gdrcheck.collectors.host_amd import amd_fact
from gdrcheck.collectors.host_iommu import iommu_facts
from gdrcheck.collectors.host_kernel import kernel_facts
from gdrcheck.collectors.host_nccl import (
    bcm_switch_links_fact,
    nccl_conf_fact,
    nccl_env_fact,
    nccl_topo_file_fact,
    nccl_versions_fact,
    rdma_port_rates_fact,
    rdma_port_states_fact,
)
from gdrcheck.collectors.host_netif import ip_interfaces_fact
from gdrcheck.collectors.host_nvidia import nvidia_facts
from gdrcheck.collectors.host_peermem import dmabuf_fact, peermem_fact
from gdrcheck.collectors.host_util import HostCtx
from gdrcheck.io.source import Source
from gdrcheck.model import CollectorStatus, Fact, PciFunction, unknown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Callable

# Every key collect_host returns, in a stable order (rules are written against these names).
HOST_FACT_KEYS = (
    "kernel_release", "kernel_cmdline", "acs_cmdline", "modules_loaded", "p2pdma_config",
    "cpu_vendor", "cpu_family", "cpu_arch", "virtualization", "nvme_multipath",
    "iommu", "iommu_devices",
    "nvidia_driver_version", "nvidia_driver_flavor", "nvidia_params", "nvidia_registry_dwords",
    "peer_mapping_override", "nvidia_fs",
    "peermem", "dmabuf", "nccl_env", "nccl_conf", "nccl_topo_file", "nccl_versions", "rdma_port_rates",
    "bcm_switch_links", "rdma_port_states", "ip_interfaces", "amd_gpu",
)

# what was looked for and may simply not be there (no settings file, no NCCL): never "the host is unreadable"
INVENTORY_KEYS = ("nccl_conf", "nccl_topo_file", "nccl_versions", "rdma_port_rates", "bcm_switch_links",
                  "rdma_port_states", "ip_interfaces", "amd_gpu")


def _guard(name: str, fn: Callable[[], dict[str, Fact]], errors: list[str]) -> dict[str, Fact]:
    """A collector part never raises past the snapshot: its facts become unknown instead."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reported as a collector error, never a traceback
        errors.append(f"{name}: {type(e).__name__}: {e}")
        return {}


def collect_host(src: Source, devices: Sequence[PciFunction]) -> tuple[dict[str, Fact], list[CollectorStatus]]:
    errors: list[str] = []
    ctx = HostCtx.read(src, devices)
    facts: dict[str, Fact] = {}
    facts.update(_guard("kernel", lambda: kernel_facts(ctx), errors))
    facts.update(_guard("iommu", lambda: iommu_facts(ctx), errors))
    facts.update(_guard("nvidia", lambda: nvidia_facts(ctx), errors))
    facts.update(_guard("peermem", lambda: {"peermem": peermem_fact(ctx)}, errors))
    facts.update(_guard("dmabuf", lambda: {"dmabuf": dmabuf_fact(ctx, facts)}, errors))
    facts.update(_guard("nccl_env", lambda: {"nccl_env": nccl_env_fact(ctx)}, errors))
    facts.update(_guard("nccl_conf", lambda: {"nccl_conf": nccl_conf_fact(ctx)}, errors))
    if "nccl_conf" in facts:
        conf = facts["nccl_conf"]
        facts.update(_guard("nccl_topo_file", lambda: {"nccl_topo_file": nccl_topo_file_fact(ctx, conf)}, errors))
    facts.update(_guard("nccl_versions", lambda: {"nccl_versions": nccl_versions_fact(ctx)}, errors))
    facts.update(_guard("rdma_port_rates", lambda: {"rdma_port_rates": rdma_port_rates_fact(ctx)}, errors))
    facts.update(_guard("rdma_port_states", lambda: {"rdma_port_states": rdma_port_states_fact(ctx)}, errors))
    facts.update(_guard("ip_interfaces", lambda: {"ip_interfaces": ip_interfaces_fact(ctx)}, errors))
    facts.update(_guard("bcm_switch_links", lambda: {"bcm_switch_links": bcm_switch_links_fact(ctx)}, errors))
    facts.update(_guard("amd_gpu", lambda: {"amd_gpu": amd_fact(ctx)}, errors))
    for key in HOST_FACT_KEYS:
        if key not in facts:
            facts[key] = unknown("the host collector failed on this fact", source="gdrcheck")
    counted = [k for k in HOST_FACT_KEYS if k not in INVENTORY_KEYS]
    known = sum(1 for k in counted if facts[k].known)
    unknowns = [k for k in counted if not facts[k].known]
    root_needed = sorted(k for k in unknowns if facts[k].settle == "run as root")
    detail = f"{known} of {len(counted)} host facts known"
    if root_needed:
        detail += f"; need root: {', '.join(root_needed)}"
    if errors:
        return facts, [CollectorStatus("host", "error", detail + "; " + "; ".join(errors))]
    if known == 0:
        return facts, [CollectorStatus("host", "unavailable", detail, hint="the input holds no /proc or /sys "
                                                                           "host files")]
    return facts, [CollectorStatus("host", "ok", detail)]
