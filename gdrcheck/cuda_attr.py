"""The ``CUdevice_attribute`` numbers gdrcheck asks the CUDA driver for (``cuda.h``), shared by the snapshot's
collector and the probe."""

ATTR = {
    "pci_bus_id": 33, "pci_device_id": 34, "pci_domain_id": 50, "unified_addressing": 41,
    "compute_capability_major": 75, "compute_capability_minor": 76,
    "gpu_direct_rdma_supported": 116, "gpu_direct_rdma_flush_writes_options": 117,
    "gpu_direct_rdma_writes_ordering": 118, "dma_buf_supported": 124,
}
