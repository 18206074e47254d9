"""What RCCL (AMD's fork of NCCL, ``ROCm/rccl``) would decide on a node of AMD GPUs, per RCCL release, following
RCCL's own source, one question a module:

``releases``: the RCCL releases modelled, which one judges and why, and whether the node is RCCL's at all;
``settings``: RCCL's level names and defaults (P2P by CPU, GDR with its Rome/Milan rule); ``flags``: each GPU's
and NIC's GPUDirect RDMA flag (the ``amdkfd`` peer-memory client per release, DMA-BUF); ``decide``: each pair's
P2P and GDR decision; ``node``: the node's view put together, in the shape the documents read.
``docs/rccl.md`` lists every rule with its file and line.
"""
