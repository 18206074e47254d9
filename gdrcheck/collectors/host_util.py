"""Shared reading helpers of the host collectors: what is loaded, and why a read failed."""

from __future__ import annotations

import re

from gdrcheck.io.source import Source
from gdrcheck.model import Fact, PciFunction, unknown
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional

PROC_MODULES = "/proc/modules"
SYS_MODULE = "/sys/module"
ROOT_SETTLE = "run as root"
# modules whose /sys/module/<name> is looked at even when built in (no /proc/modules line)
WATCHED_MODULES = ("nvidia", "nvidia_peermem", "nv_peer_mem", "nvidia_fs", "nvme_core", "nvme",
                   "mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs")


def failed(src: Source, path: str, missing_reason: str = "", settle: str = "") -> Fact:
    """An unknown fact for a read of ``path`` that failed, saying why."""
    why = src.why(path)
    if why == "permission denied":
        return unknown(f"{path}: permission denied", settle=ROOT_SETTLE, source=path)
    if why == "missing":
        return unknown(missing_reason or f"{path} not present", settle=settle, source=path)
    return unknown(f"{path}: {why}", settle=settle, source=path)


def listdir_kept(src: Source, path: str) -> list[str]:
    """``src.listdir`` that also touches each entry, so a recording snapshot keeps the
    names (a recorded directory otherwise replays with only the entries read below it)."""
    names = src.listdir(path)
    if src.recording:
        for n in names:
            src.exists(f"{path}/{n}")
    return names


def version_tuple(text: Optional[str]) -> Optional[tuple[int, ...]]:
    """Leading numeric part of a version string: ``6.8.0-45-generic`` -> (6, 8, 0)."""
    if not text:
        return None
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))


@record
class HostCtx:
    """What several host facts need, read once."""

    src: Source
    devices: Sequence[PciFunction] = ()
    proc_modules: Optional[set[str]] = None  # None: /proc/modules unreadable
    sys_modules: Optional[set[str]] = None  # None: /sys/module unreadable
    release: Optional[str] = None
    cmdline: Optional[str] = None
    facts: dict[str, Fact] = field(default_factory=dict)

    @classmethod
    def read(cls, src: Source, devices: Sequence[PciFunction]) -> HostCtx:
        ctx = cls(src, devices)
        text = src.read_text(PROC_MODULES)
        if text is not None:
            ctx.proc_modules = {ln.split()[0] for ln in text.splitlines() if ln.split()}
        names = src.listdir(SYS_MODULE)
        if names:  # a real /sys/module is never empty: empty means not readable or not captured
            ctx.sys_modules = set(names)
            if src.recording:  # keep built-in modules' directories in a snapshot
                for m in WATCHED_MODULES:
                    if m in ctx.sys_modules:
                        src.exists(f"{SYS_MODULE}/{m}")
        ctx.release = src.read_line("/proc/sys/kernel/osrelease") or None
        line = src.read_line("/proc/cmdline")
        ctx.cmdline = line if line is not None else None
        return ctx

    @property
    def modules_known(self) -> bool:
        return self.proc_modules is not None or self.sys_modules is not None

    def loaded(self, name: str) -> Optional[bool]:
        """Loaded (or built in) by /proc/modules or /sys/module/<name>; None when neither is readable."""
        if (self.proc_modules and name in self.proc_modules) or (self.sys_modules and name in self.sys_modules):
            return True
        if not self.modules_known:
            return None
        return False

    def module_source(self) -> str:
        parts = [p for p, v in ((PROC_MODULES, self.proc_modules), (SYS_MODULE, self.sys_modules)) if v is not None]
        return ", ".join(parts) or f"{PROC_MODULES}, {SYS_MODULE}"

    def cmdline_tokens(self) -> list[str]:
        return (self.cmdline or "").split()
