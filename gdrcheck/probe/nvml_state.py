"""What NVML says around each probe step, asked from the command's own process (NVML, never CUDA).

Before the plan: compute mode and MIG (a busy node is refused). Around each step:
BAR1 in use, the PCIe replay counter, and the peer-memory client's registered bytes
(``/sys/kernel/mm/memory_peers/*/num_reg_bytes``), so that what a step pinned or
registered is seen to be released.
"""

from __future__ import annotations

import glob

from gdrcheck.model import norm_bdf

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}


class NvmlState:
    def __init__(self) -> None:
        self.nv = None
        self.handles: dict[str, Any] = {}
        self.error = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                bus = pynvml.nvmlDeviceGetPciInfo(h).busId
                self.handles[norm_bdf(bus.decode() if isinstance(bus, bytes) else bus)] = h
        except Exception as e:  # no NVML, no driver: the steps say so themselves
            self.nv = None
            self.error = f"{type(e).__name__}: {e}"

    def close(self) -> None:
        if self.nv is not None:
            try:
                self.nv.nvmlShutdown()
            except Exception:
                pass

    def _ask(self, fn, *args) -> Optional[Any]:
        try:
            return fn(*args)
        except Exception:
            return None

    def busy_state(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if self.nv is None:
            return out
        for bdf, h in self.handles.items():
            st: dict[str, Any] = {}
            mode = self._ask(self.nv.nvmlDeviceGetComputeMode, h)
            st["compute_mode"] = COMPUTE_MODES.get(mode, mode) if mode is not None else None
            mig = self._ask(self.nv.nvmlDeviceGetMigMode, h)
            st["mig_enabled"] = bool(mig[0]) if isinstance(mig, (list, tuple)) and mig else False
            procs = self._ask(self.nv.nvmlDeviceGetComputeRunningProcesses, h) or []
            st["processes"] = len(procs)
            out[bdf] = st
        return out

    def sample(self, bdf: str) -> dict[str, Any]:
        """BAR1 used (bytes) and the replay counter of one GPU, as far as NVML answers."""
        out: dict[str, Any] = {}
        h = self.handles.get(bdf)
        if self.nv is not None and h is not None:
            bar1 = self._ask(self.nv.nvmlDeviceGetBAR1MemoryInfo, h)
            if bar1 is not None:
                out["bar1_used_bytes"] = int(bar1.bar1Used)
            rc = self._ask(self.nv.nvmlDeviceGetPcieReplayCounter, h)
            if rc is not None:
                out["replay_counter"] = int(rc)
        return out


def peer_reg_bytes() -> Optional[int]:
    """Bytes registered through peer-memory clients (MLNX_OFED's memory_peers), None where not shown."""
    total, seen = 0, False
    for p in glob.glob("/sys/kernel/mm/memory_peers/*/num_reg_bytes"):
        try:
            with open(p) as f:
                total += int(f.read().split()[0])
            seen = True
        except (OSError, ValueError, IndexError):
            continue
    return total if seen else None


def left_behind(before: dict[str, Any], after: dict[str, Any], tolerance: int = 2 << 20) -> str:
    """What did not return to where it was: '' when everything did (BAR1 within ``tolerance``)."""
    out = []
    b, a = before.get("bar1_used_bytes"), after.get("bar1_used_bytes")
    if b is not None and a is not None and a > b + tolerance:
        out.append(f"BAR1 used {b >> 20} MiB before, {a >> 20} MiB after")
    b, a = before.get("peer_reg_bytes"), after.get("peer_reg_bytes")
    if b is not None and a is not None and a > b:
        out.append(f"peer-memory registered bytes {b} before, {a} after")
    return "; ".join(out)


KERNEL_WORDS = ("NVRM", "Xid", "DMAR", "AER", "iommu", "IOMMU", "nvidia", "mlx5", "infiniband", "peer_mem",
                "nvidia-fs", "nvidia_fs", "pcieport")


class KernelLog:
    """New kernel log lines about the GPU, the NIC or the IOMMU while a step ran (/dev/kmsg, where readable)."""

    def __init__(self, path: str = "/dev/kmsg") -> None:
        import os

        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:  # not root (dmesg_restrict), or no /dev/kmsg in the container
            self.fd = None
        self.mark()

    @property
    def readable(self) -> bool:
        return self.fd is not None

    def mark(self) -> None:
        import os

        if self.fd is not None:
            try:
                os.lseek(self.fd, 0, os.SEEK_END)  # /dev/kmsg: from the next record on
            except OSError:
                pass

    def new_lines(self, keep: int = 8) -> list:
        import os

        out = []
        while self.fd is not None:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError:  # EPIPE: records overwritten while we read; go on from there
                continue
            if not rec:
                break
            for line in rec.decode("utf-8", "replace").splitlines():
                if not line[:1].isdigit() or ";" not in line:
                    continue  # continuation lines (" SUBSYSTEM=pci") carry no message
                msg = line.split(";", 1)[1]
                if any(w in msg for w in KERNEL_WORDS):
                    out.append(msg)
        return out[-keep:]

    def close(self) -> None:
        import os

        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
