"""Where a snapshot keeps what the NVIDIA driver answered (NVML's, CUDA's and nvidia-smi's records), and the
statuses said where an input holds none: a leaf the driver's readers and :mod:`gdrcheck.collectors.driver`
both import."""

from __future__ import annotations

from gdrcheck.io.source import COMMANDS_FILE, Source
from gdrcheck.model import CollectorStatus

# where a snapshot keeps what the driver answered: NVML's, CUDA's and the tools' (nvidia-smi's) answers
NVML_FILE = "/gdrcheck/nvml.json"
CUDA_FILE = "/gdrcheck/cuda.json"
DRIVER_RECORDS = (NVML_FILE, CUDA_FILE, COMMANDS_FILE)


def no_driver_records(src: Source) -> bool:
    """An input, not this machine, that holds none of a snapshot's records of the driver: NVML, CUDA and
    nvidia-smi answered nothing in it, so their readers need not even load."""
    return not src.live and not any(src.exists(path) for path in DRIVER_RECORDS)


def nvml_not_recorded(src: Source) -> CollectorStatus:
    """NVML's status where the input holds no NVML answers."""
    hint = ("run gdrcheck on the node itself, or make a snapshot there with 'gdrcheck snapshot'"
            if not src.has_capture() else "the snapshot was made without NVML answers")
    return CollectorStatus("nvml", "unavailable", "NVML not available: not recorded in this input", hint)


def not_captured(argv) -> CollectorStatus:
    """nvidia-smi's status where the input holds no answer of ``argv``."""
    return CollectorStatus("nvidia-smi", "unavailable", f"'{' '.join(argv)}' was not captured in this input",
                           "run gdrcheck on the node itself, or snapshot it with 'gdrcheck snapshot'")
