"""Which storage drivers have registered with nvidia-fs (``/proc/driver/nvidia-fs/modules``), so that a GDS
read that will fall back to compatibility mode is said without a probe.

nvidia-fs lists a driver there (``name: version``) once the driver has handed it its DMA operations:
the NVMe driver does so only when it is GDS-enabled (it exports ``nvme_v1_register_nvfs_dma_ops``, or
``nvme_v2_...``: MLNX_OFED's NVMe modules or a kernel carrying NVIDIA's patch). nvidia-fs asks the drivers
when a process opens it (cuFile does, ``nvfs_open``) and lets them go when the last one closes
(``nvfs_close``), so the list is empty whenever no GDS application runs: only a list that names some driver
says which ones could register.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.rules.base import Context, Finding, Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

NVME_KEY = "nvme"
NVME_NOT_REGISTERED = Rule(
    "GDR206", "nvidia-fs-nvme-not-registered", "warning", "pair",
    "nvidia-fs is in use, but the NVMe driver has not registered with it: cuFile reads from local NVMe fall "
    "back to compatibility mode",
    "nvidia-fs moves NVMe data straight into GPU memory only through the DMA operations a GDS-enabled NVMe "
    "driver registers with it. While a GDS application holds nvidia-fs open it lists the drivers that did "
    "(/proc/driver/nvidia-fs/modules); without 'nvme' there, the in-box NVMe driver is in use and every cuFile "
    "read from a local drive is bounced through host memory (unless cuFile's P2PDMA mode is set up).",
    "Install the GDS-enabled NVMe driver (MLNX_OFED with `--with-nvmf`, or the distribution's nvidia-fs "
    "kernel package that patches nvme), reload it (`modprobe -r nvme && modprobe nvme` with no drive mounted, "
    "or reboot), and check `/usr/local/cuda/gds/tools/gdscheck -p` (NVMe: Supported) and "
    "`cat /proc/driver/nvidia-fs/modules` while a cuFile job runs.", origin="nvidia-docs",
    pair_kinds=("gpu-nvme",))
NOTHING_REGISTERED_NOW = Rule(
    "GDR207", "nvidia-fs-idle", "info", "host",
    "No storage driver is registered with nvidia-fs right now",
    "nvidia-fs asks the storage drivers to register when a process opens it and lets them go when the last "
    "closes, so an empty /proc/driver/nvidia-fs/modules is what an idle node shows: whether the NVMe driver "
    "is GDS-enabled is seen only while a GDS application runs.",
    "Run `/usr/local/cuda/gds/tools/gdscheck -p`, or gdrcheck while a cuFile job runs (or `gdrcheck probe "
    "--gds-path DIR`, which reads through cuFile).")


def _check(ctx: Context) -> Iterable[Finding]:
    v = host_record(ctx.snap, "nvidia_fs")
    if not v or not v.get("loaded") or not isinstance(v.get("modules"), dict):
        return
    mods = v["modules"]
    if not mods:
        yield Finding(NOTHING_REGISTERED_NOW.code, "info", ("nvidia-fs",),
                      "/proc/driver/nvidia-fs/modules is empty: no GDS application holds nvidia-fs open, so "
                      "which storage drivers can register is not shown")
        return
    if NVME_KEY in mods:
        return
    pairs = tuple((p.a, p.b) for p in ctx.pairs_of("gpu-nvme"))
    if not pairs:
        return
    listed = ", ".join(f"{k} {val}".strip() for k, val in sorted(mods.items()))
    yield Finding(NVME_NOT_REGISTERED.code, "warning", ("nvidia-fs",),
                  f"nvidia-fs lists {listed} but no NVMe driver: cuFile reads from local NVMe will run in "
                  "compatibility mode (through host memory)", pairs=pairs, effect="degraded",
                  evidence="/proc/driver/nvidia-fs/modules")


CHECKS = (
    (NVME_NOT_REGISTERED, _check),
    (NOTHING_REGISTERED_NOW, None),
)
