"""NVIDIA driver facts: version, open or proprietary, active parameters, nvidia-fs (GDS)."""

from __future__ import annotations

import re

from gdrcheck.collectors.host_util import HostCtx, failed
from gdrcheck.model import Fact, norm_bdf, unknown
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Union

PROC_VERSION = "/proc/driver/nvidia/version"
SYS_VERSION = "/sys/module/nvidia/version"
PARAMS = "/proc/driver/nvidia/params"
NVFS = "/proc/driver/nvidia-fs"

_VER_RE = lazy_pattern(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)*)")
_NOT_LOADED = "NVIDIA driver not loaded (no /sys/module/nvidia, no /proc/driver/nvidia/version)"


def flavor_from_version_line(line: str) -> Optional[str]:
    """``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64 ...`` -> open;
    ``NVRM version: NVIDIA UNIX x86_64 Kernel Module ...`` -> proprietary."""
    if "Open Kernel Module" in line:
        return "open"
    if "Kernel Module" in line:
        return "proprietary"
    return None


def parse_params(text: str) -> dict[str, Union[int, str]]:
    """``/proc/driver/nvidia/params``: ``Name: value`` lines; decimal values become int, quotes are dropped."""
    out: dict[str, Union[int, str]] = {}
    for line in text.splitlines():
        name, sep, val = line.partition(":")
        name = name.strip()
        if not sep or not name or " " in name:
            continue
        val = val.strip()
        if len(val) >= 2 and val[0] == val[-1] == '"':
            out[name] = val[1:-1]
        elif re.fullmatch(r"-?\d+", val):
            out[name] = int(val)
        else:
            out[name] = val
    return out


def parse_registry_dwords(text: str) -> dict[str, Union[int, str]]:
    """``"PeerMappingOverride=1;RMForceStaticBar1=1"`` -> {name: int or raw string}."""
    out: dict[str, Union[int, str]] = {}
    for item in re.split(r"[;,]", text.strip().strip('"')):
        name, sep, val = item.partition("=")
        name = name.strip()
        if not sep or not name:
            continue
        val = val.strip()
        try:
            out[name] = int(val, 0)
        except ValueError:
            out[name] = val
    return out


def nvidia_facts(ctx: HostCtx) -> dict[str, Fact]:
    src = ctx.src
    out: dict[str, Fact] = {}
    loaded = ctx.loaded("nvidia")
    sys_ver = src.read_line(SYS_VERSION)
    proc_text = src.read_text(PROC_VERSION)
    first = proc_text.splitlines()[0] if proc_text else ""
    m = _VER_RE.search(first)
    if sys_ver:
        out["nvidia_driver_version"] = Fact(sys_ver, source=SYS_VERSION)
    elif m:
        out["nvidia_driver_version"] = Fact(m.group(1), source=PROC_VERSION)
    elif loaded is False and proc_text is None:
        out["nvidia_driver_version"] = unknown(_NOT_LOADED, settle="load the NVIDIA driver", source=SYS_VERSION)
    else:
        out["nvidia_driver_version"] = failed(src, PROC_VERSION)

    flavor = flavor_from_version_line(first)
    taint = src.read_line("/sys/module/nvidia/taint")
    if flavor:
        out["nvidia_driver_flavor"] = Fact(flavor, source=PROC_VERSION)
    elif taint and ("P" in taint or "O" in taint):
        # the proprietary module taints the kernel P; the open one (Dual MIT/GPL) only O/E
        out["nvidia_driver_flavor"] = Fact("proprietary" if "P" in taint else "open",
                                           source="/sys/module/nvidia/taint")
    elif loaded is False and proc_text is None:
        out["nvidia_driver_flavor"] = unknown(_NOT_LOADED, settle="load the NVIDIA driver", source=PROC_VERSION)
    else:
        out["nvidia_driver_flavor"] = failed(src, PROC_VERSION)

    text = src.read_text(PARAMS)
    if text is None:
        f = (unknown(_NOT_LOADED, settle="load the NVIDIA driver", source=PARAMS)
             if loaded is False and src.why(PARAMS) == "missing" else failed(src, PARAMS))
        out["nvidia_params"] = out["nvidia_registry_dwords"] = out["peer_mapping_override"] = f
    else:
        params = parse_params(text)
        out["nvidia_params"] = Fact(params, source=PARAMS)
        dwords = parse_registry_dwords(str(params.get("RegistryDwords", "")))
        out["nvidia_registry_dwords"] = Fact(dwords, source=f"{PARAMS} (RegistryDwords)")
        out["peer_mapping_override"] = Fact(dwords.get("PeerMappingOverride") == 1,
                                            source=f"{PARAMS} (RegistryDwords)")
    out["nvidia_fs"] = _nvidia_fs(ctx)
    out["nvidia_gpu_models"] = _gpu_models(ctx)
    return out


GPUS_DIR = "/proc/driver/nvidia/gpus"
_MODEL = lazy_pattern(r"^Model:\s*(.*?)\s*$", re.M)


def _gpu_models(ctx: HostCtx) -> Fact:
    """``{bus id: model}`` from the driver's ``/proc/driver/nvidia/gpus/*/information`` (no CUDA, no NVML):
    the GPU's model where NVML does not answer (rules/nccl/node.py, the GPU's GPUDirect RDMA flag)."""
    out: dict[str, str] = {}
    for bus in ctx.src.listdir(GPUS_DIR):
        m = _MODEL.search(ctx.src.read_text(f"{GPUS_DIR}/{bus}/information", 4096) or "")
        if m and m.group(1):
            out[norm_bdf(bus) or bus.lower()] = m.group(1)
    return Fact(out, source=f"{GPUS_DIR}/*/information")


def _nvidia_fs(ctx: HostCtx) -> Fact:
    src = ctx.src
    ver_text = src.read_text(f"{NVFS}/version")
    loaded = ctx.loaded("nvidia_fs")
    if ver_text is None and not loaded:
        if src.why(f"{NVFS}/version") == "permission denied":
            return failed(src, f"{NVFS}/version")
        if loaded is False:
            return Fact(False, source=f"{ctx.module_source()}, {NVFS}/version")
        return failed(src, f"{NVFS}/version", "nvidia_fs state not readable (no /proc/modules, /sys/module)")
    value: dict[str, object] = {"loaded": True, "version": None, "bridges": None, "modules": None,
                                "devcount": None, "peerdirect": None, "rw_stats_enabled": None}
    if ver_text is not None:
        line = ver_text.strip().splitlines()[0] if ver_text.strip() else ""
        value["version"] = line.split(":", 1)[1].strip() if ":" in line else (line or None)
    btext = src.read_text(f"{NVFS}/bridges")
    if btext is not None:
        bridges: list[str] = []
        for ln in btext.split():
            try:
                bridges.append(norm_bdf(ln))
            except ValueError:
                continue
        value["bridges"] = bridges
    mtext = src.read_text(f"{NVFS}/modules")
    if mtext is not None:
        mods: dict[str, str] = {}
        for ln in mtext.splitlines():
            name, _, ver = ln.partition(":")
            if name.strip():
                mods[name.strip()] = ver.strip()
        value["modules"] = mods
    dc = src.read_line(f"{NVFS}/devcount")
    if dc is not None and dc.isdigit():
        value["devcount"] = int(dc)
    stats = src.read_text(f"{NVFS}/stats", 65536)
    if stats is not None:
        sm = re.search(r"Mellanox PeerDirect Supported:\s*(True|False)", stats)
        if sm:
            value["peerdirect"] = sm.group(1) == "True"
    rw = src.read_line("/sys/module/nvidia_fs/parameters/rw_stats_enabled")
    if rw is not None and rw.strip() in ("0", "1"):
        value["rw_stats_enabled"] = rw.strip() == "1"
    return Fact(value, source=NVFS)
