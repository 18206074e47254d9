"""Readers of what people paste (lspci, nvidia-smi -q, nvidia-smi topo -m, NCCL and hwloc XML) and their merge."""
