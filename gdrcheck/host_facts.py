"""The host facts: one declared table of the names a snapshot's ``host`` holds, each value's type and what reads it.

Collectors and the paste merges write ``Snapshot.host`` (name -> :class:`gdrcheck.model.Fact`); the other
stages read it through :func:`host_record` (a fact whose value is a mapping) or :func:`host_fact`, which refuse
a name the table does not declare. ``tests/base/test_host_facts.py`` holds both ends: every name the stored
inputs carry is declared, and every name read in the code is.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from gdrcheck.model import Fact

# name -> (the value's types where known, what reads it)
HOST_FACTS: dict[str, tuple[tuple[type, ...], str]] = {
    "acs_cmdline": ((dict,), "rules.acs_iommu (pci=disable_acs_redir and friends)"),
    "acsctl_lines": ((dict,), "pcie.topology (lspci -vvv | grep ACSCtl without addresses)"),
    "amd_gpu": ((dict,), "rules.rccl (the amdgpu driver and its peer-memory path)"),
    "bcm_switch_links": ((dict,), "rules.nccl.paths (Broadcom PEX switch links)"),
    "cpu_arch": ((str,), "documents.topology, rules.nccl.cpu"),
    "cpu_family": ((int,), "rules.nccl.cpu (NCCL's CPU model)"),
    "cpu_hypervisor_flag": ((bool,), "collectors (virtualisation)"),
    "cpu_implementer": ((str, int), "rules.nccl.cpu (ARM)"),
    "cpu_model": ((int,), "rules.nccl.cpu (NCCL's CPU model)"),
    "cpu_vendor": ((str,), "rules.nccl.cpu, documents"),
    "cuda_attrs": ((dict,), "rules.nccl.flags (CUDA device attributes read by a snapshot)"),
    "dmabuf": ((dict,), "rules.nccl.flags, rules.nccl.data_direct, rules.nccl.gdr (DMA-BUF)"),
    "iommu": ((dict,), "rules.acs_iommu, documents.topology (the IOMMU mode)"),
    "iommu_devices": ((dict,), "rules.acs_iommu (each device's IOMMU group type)"),
    "ip_interfaces": ((dict,), "rules.nccl.ib (NCCL_SOCKET_IFNAME)"),
    "kernel_cmdline": ((str,), "rules (the kernel's command line)"),
    "kernel_release": ((str,), "documents.topology"),
    "modules_loaded": ((list,), "pcie.topology, rules (loaded kernel modules)"),
    "nccl_conf": ((dict,), "rules.nccl.versions (the NCCL settings files)"),
    "nccl_cpu": ((dict,), "rules.nccl.cpu (NCCL's own CPU record in its XML)"),
    "nccl_env": ((dict,), "rules.nccl.versions (the environment capture)"),
    "nccl_log": ((dict,), "rules.nccl.job_log (a job's NCCL_DEBUG=INFO log)"),
    "nccl_topo_file": ((dict,), "rules.nccl.file_tree, rules.nccl_log (NCCL_TOPO_FILE's files)"),
    "nccl_versions": ((dict,), "rules.nccl.versions, rules.nccl_log (NCCL libraries on the node)"),
    "numa_nodes": ((list,), "documents.topology, rules"),
    "numa_packages": ((dict,), "rules.topology_rules (each NUMA node's CPU packages)"),
    "nvidia_driver_flavor": ((str,), "documents.topology, rules.nccl.gdr"),
    "nvidia_driver_version": ((str,), "documents.topology, rules.nccl.gdr"),
    "nvidia_fs": ((dict, bool), "rules.gds_modules, rules.nvme_gds (nvidia-fs)"),
    "nvidia_gpu_models": ((dict,), "rules (the driver's GPU models)"),
    "nvidia_params": ((dict,), "rules (the NVIDIA module's parameters)"),
    "nvidia_registry_dwords": ((dict,), "rules (the NVIDIA module's RegistryDwords)"),
    "nvme_multipath": ((bool, str), "rules.nvme_gds"),
    "p2p_status_from_log": ((dict,), "rules.nccl_log (pairs whose P2P status a job's log settled)"),
    "p2pdma_config": ((bool,), "rules.nvme_gds (CONFIG_PCI_P2PDMA)"),
    "peer_mapping_override": ((bool,), "rules (the driver's PeerMappingOverride)"),
    "gds_measured": ((dict,), "rules.capabilities (a gdsio measurement beside the input)"),
    "peerdirect": ((dict,), "rules.peermem (gdscheck -p's Mellanox PeerDirect line)"),
    "peermem": ((dict,), "rules.peermem, rules.nccl.flags, probe.plan (nvidia-peermem)"),
    "rdma_link_layers": ((dict,), "documents (ibv_devinfo's link layer of each RDMA port)"),
    "rdma_port_rates": ((dict,), "rules.nccl.speed (each RDMA port's rate)"),
    "rdma_port_states": ((dict,), "rules.nccl.ib (each RDMA port's state)"),
    "run_deadline": ((dict,), "rules.decisions (--timeout)"),
    "virtualization": ((dict,), "pcie.topology, documents.topology"),
}


def _declared(name: str) -> str:
    if name not in HOST_FACTS:
        raise KeyError(f"host fact {name!r} is not declared in gdrcheck.host_facts.HOST_FACTS")
    return name


def host_fact(snap, name: str) -> Optional[Fact]:
    """The host fact ``name`` (declared) as the input gave it, or None where it is not in the input."""
    return snap.host.get(_declared(name))


def host_record(snap, name: str, known_only: bool = False) -> Optional[dict[str, Any]]:
    """The value of the host fact ``name`` where it is a record (a mapping); None where the input has no such
    fact, its value is not a record, or (``known_only``) the fact is unknown."""
    f = snap.host.get(_declared(name))
    if f is None or (known_only and not getattr(f, "known", False)) or not isinstance(f.value, dict):
        return None
    return f.value


def host_value(snap, name: str, key: Optional[str] = None) -> Any:
    """The value of the host fact ``name`` (or, with ``key``, one key of a record); None where it is unknown, not
    in the input, or not a record that has the key."""
    f = snap.host.get(_declared(name))
    if f is None or f.value is None:
        return None
    if key is None:
        return f.value
    return f.value.get(key) if isinstance(f.value, dict) else None
