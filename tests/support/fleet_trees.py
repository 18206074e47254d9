"""Node trees for fleet tests: the scenarios' node with one fault planted, and the same board renumbered.

The fleet's healthy node is ``one-socket-node`` (two GPUs, one ConnectX-7, one NVMe
behind one switch), the scenario whose report has no finding at all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from builders import scenarios
from builders.sysfs_tree import ACS_CR, ACS_RR

BASE = {"one_socket": True}
NIC = scenarios.NICS[0]


def healthy(root: Path) -> Path:
    return scenarios.build(root, **BASE)


def acs_redirect(root: Path) -> Path:
    return scenarios.build(root, **BASE, acs=ACS_RR | ACS_CR)


def peermem_unloaded(root: Path) -> Path:
    return scenarios.build(root, **BASE, **scenarios.CASES["no-peer-memory-module"])


def nic_missing(root: Path) -> Path:
    """The NIC fell off the bus: its device directory and every link to it are gone."""
    scenarios.build(root, **BASE)
    drop_device(root, NIC)
    return root


def renumbered(root: Path, shift: int = 0x10) -> Path:
    """The same board with the switch's buses numbered ``shift`` higher (another BIOS or slot)."""
    with _shifted(shift):
        return scenarios.build(root, **BASE)


def drop_device(root: Path, bdf: str) -> None:
    link = root / "sys/bus/pci/devices" / bdf
    target = Path(os.path.realpath(link))
    shutil.rmtree(target)
    for dirpath, dirnames, filenames in os.walk(root / "sys"):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            if p.is_symlink() and not p.exists():
                p.unlink()


def _shift(bdf: str, shift: int) -> str:
    dom, bus, rest = bdf.split(":")
    return f"{dom}:{int(bus, 16) + shift:02x}:{rest}"


@contextmanager
def _shifted(shift: int) -> Iterator[None]:
    saved: dict[str, object] = {k: getattr(scenarios, k) for k in ("GPUS", "NICS", "NVMES", "SWITCH_DSP")}
    try:
        scenarios.GPUS = tuple(_shift(b, shift) for b in scenarios.GPUS)
        scenarios.NICS = tuple(_shift(b, shift) for b in scenarios.NICS)
        scenarios.NVMES = tuple(_shift(b, shift) for b in scenarios.NVMES)
        scenarios.SWITCH_DSP = {k: tuple(_shift(b, shift) for b in v) for k, v in scenarios.SWITCH_DSP.items()}
        yield
    finally:
        for k, v in saved.items():
            setattr(scenarios, k, v)


VARIANTS = {"healthy": healthy, "acs-redirect": acs_redirect, "peermem-unloaded": peermem_unloaded,
            "nic-missing": nic_missing, "renumbered": renumbered}
