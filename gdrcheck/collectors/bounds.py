"""What no real node exceeds: an input beyond it is refused in one line (exit 2) before any work on it.

The largest GPU servers have some hundreds of PCI functions and at most a few dozen GPUs; these bounds leave
room for composable chassis and big virtual machines, and keep every run on any input of the accepted size
within about a GiB of memory and a minute (``pairs`` holds a document per GPU pair).
"""

from __future__ import annotations

from gdrcheck.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gdrcheck.model import Snapshot

MAX_FUNCTIONS = 4096
MAX_GPUS = 512
#: GPU-GPU, GPU-NIC and GPU-NVMe pairs: 512 GPUs alone, or 256 GPUs with 256 NICs
MAX_PAIRS = 131_072


def too_many_functions(label: str, count: int) -> InputError:
    return InputError(f"{label}: more than {MAX_FUNCTIONS} PCI functions ({count} so far), more than any "
                      "real node has")


def check_functions(label: str, count: int) -> None:
    """For a parser counting the functions as it reads them: refuse as soon as there are too many."""
    if count > MAX_FUNCTIONS:
        raise too_many_functions(label, count)


def check_gpus(label: str, count: int) -> None:
    if count > MAX_GPUS:
        raise InputError(f"{label}: {count} GPUs, more than any real node has (at most {MAX_GPUS})")


def check_matrix(label: str, header) -> None:
    """A ``nvidia-smi topo -m`` header: its GPUs, and a cell per pair of columns (NIC-NIC included)."""
    check_gpus(label, sum(1 for h in header if h.startswith("GPU")))
    if len(header) > 2 * MAX_GPUS:
        raise InputError(f"{label}: a matrix of {len(header)} columns, more than any real node has "
                         f"(at most {2 * MAX_GPUS})")


def check_snapshot(snap: Snapshot, label: str) -> Snapshot:
    """``snap`` when it is within what a real node has; otherwise the one-line refusal."""
    from gdrcheck.pcie.kinds import base_kind

    devices = snap.devices
    if len(devices) > MAX_FUNCTIONS:
        raise InputError(f"{label}: {len(devices)} PCI functions, more than any real node has "
                         f"(at most {MAX_FUNCTIONS})")
    counts = {"gpu": 0, "nic": 0, "nvme": 0}
    for d in devices:
        k = base_kind(d)
        if k in counts:
            counts[k] += 1
    gpus = max(counts["gpu"], len(snap.gpus))
    check_gpus(label, gpus)
    pairs = gpus * (gpus - 1) // 2 + gpus * (counts["nic"] + counts["nvme"])
    if pairs > MAX_PAIRS:
        raise InputError(f"{label}: {gpus} GPUs with {counts['nic']} NICs and {counts['nvme']} NVMe drives make "
                         f"{pairs} pairs, more than any real node has (at most {MAX_PAIRS})")
    return snap
