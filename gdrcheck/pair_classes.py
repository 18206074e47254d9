"""The pairs' two small vocabularies, defined once: the PCIe path classes as nvidia-smi prints them (nearest
first) and the pair kind each capability is about."""

from __future__ import annotations

PCIE_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")  # nearest first
PCIE_RANK = {c: i for i, c in enumerate(PCIE_CLASSES)}  # class -> its place, 0 the nearest
PAIR_KIND = {"gdr": "gpu-nic", "p2p": "gpu-gpu", "gds": "gpu-nvme"}  # capability -> the pairs it is about
