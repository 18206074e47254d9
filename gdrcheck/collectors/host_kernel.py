"""Kernel-side host facts: release, command line, modules, CONFIG_PCI_P2PDMA, CPU, VM, NVMe multipath."""

from __future__ import annotations

import re

from gdrcheck.collectors.host_util import WATCHED_MODULES, HostCtx, failed
from gdrcheck.model import Fact, unknown
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

CONFIG_LIMIT = 16 << 20  # a kernel .config is some 250 KB; proc/config.gz is read up to this, decompressed

_ARM_IMPLEMENTERS = {0x41: "Arm", 0x42: "Broadcom", 0x43: "Cavium", 0x46: "Fujitsu", 0x48: "HiSilicon",
                     0x4E: "NVIDIA", 0x50: "APM", 0x51: "Qualcomm", 0x61: "Apple", 0xC0: "Ampere"}

# DMI strings of virtual machines (sys_vendor or product_name), case-insensitive
_VM_DMI = lazy_pattern(r"\bqemu\b|\bkvm\b|vmware|virtualbox|innotek|^xen$|\bhvm domu\b|bochs|bhyve|parallels|"
                     r"openstack|google compute engine|alibaba cloud ecs|cloud hypervisor|firecracker|"
                     r"standard pc \(|\bahv\b|virtual machine", re.I)


def kernel_facts(ctx: HostCtx) -> dict[str, Fact]:
    src = ctx.src
    out: dict[str, Fact] = {}
    out["kernel_release"] = (Fact(ctx.release, source="/proc/sys/kernel/osrelease") if ctx.release
                             else failed(src, "/proc/sys/kernel/osrelease"))
    out["kernel_cmdline"] = (Fact(ctx.cmdline, source="/proc/cmdline") if ctx.cmdline is not None
                             else failed(src, "/proc/cmdline"))
    out["acs_cmdline"] = _acs_cmdline(ctx)
    out["modules_loaded"] = _modules_loaded(ctx)
    out["p2pdma_config"] = _p2pdma_config(ctx)
    out.update(_cpu(ctx))
    out["virtualization"] = _virtualization(ctx, out.get("cpu_hypervisor_flag"))
    out.pop("cpu_hypervisor_flag", None)
    out["nvme_multipath"] = _nvme_multipath(ctx)
    return out


def _modules_loaded(ctx: HostCtx) -> Fact:
    if not ctx.modules_known:
        return failed(ctx.src, "/proc/modules", "neither /proc/modules nor /sys/module is readable")
    names = set(ctx.proc_modules or ())
    names.update(m for m in WATCHED_MODULES if ctx.sys_modules and m in ctx.sys_modules)
    return Fact(sorted(names), source=ctx.module_source())


def _unquote(text: str) -> str:
    return text.replace('"', "").replace("'", "")


def _acs_cmdline(ctx: HostCtx) -> Fact:
    """``pci=disable_acs_redir=``, ``pci=config_acs=`` (``;``-separated specs) and the
    out-of-tree ``pcie_acs_override=`` (a patch some distribution kernels carry; the in-tree
    parameters are in Documentation/admin-guide/kernel-parameters.txt)."""
    if ctx.cmdline is None:
        return failed(ctx.src, "/proc/cmdline")
    out: dict[str, list[str]] = {"disable_acs_redir": [], "config_acs": [], "pcie_acs_override": []}
    for tok in ctx.cmdline_tokens():
        tok = _unquote(tok)
        if tok.startswith("pci="):
            for opt in tok[4:].split(","):
                name, _, val = opt.partition("=")
                if name in ("disable_acs_redir", "config_acs") and val:
                    out[name].extend(v for v in val.split(";") if v)
        elif tok.startswith("pcie_acs_override="):
            out["pcie_acs_override"].extend(v for v in tok.split("=", 1)[1].split(",") if v)
    return Fact(out, source="/proc/cmdline")


# -- CONFIG_PCI_P2PDMA ----------------------------------------------------------


def config_option(text: str, name: str) -> Optional[str]:
    """Value of ``name`` in a kernel .config: "y"/"m"/... ; "n" when "is not set" or absent."""
    # str.find, not a multi-line regex over the whole file: a kernel .config is some 250 KB
    at = 0 if text.startswith(f"{name}=") else text.find(f"\n{name}=") + 1
    if at == 0 and not text.startswith(f"{name}="):
        return "n"
    m = re.match(rf"{name}=(\S+)", text[at:at + len(name) + 256])
    return m.group(1).strip('"') if m else "n"


def config_paths(release: Optional[str]) -> list[str]:
    """Where a kernel's .config may be, in the order tried: the distributions' copy beside the kernel
    (``/boot``; Fedora and RHEL also under ``/lib/modules``), the kernel's own (``CONFIG_IKCONFIG_PROC``),
    the build tree's."""
    if not release:
        return ["/proc/config.gz"]
    return [f"/boot/config-{release}", "/proc/config.gz", f"/lib/modules/{release}/config",
            f"/lib/modules/{release}/build/.config"]


def _p2pdma_config(ctx: HostCtx) -> Fact:
    """CONFIG_PCI_P2PDMA from the kernel's .config, else ``True`` where a device offers p2pmem (only such a
    kernel makes that directory), else unknown. The symbol table (``/proc/kallsyms``) is never read: it
    holds the kernel's addresses, which a snapshot handed on must not carry."""
    src = ctx.src
    tried: list[str] = []
    denied = False
    paths = config_paths(ctx.release)
    if not ctx.release:
        configs = [n for n in src.listdir("/boot") if n.startswith("config-")]
        if len(configs) == 1:
            paths.insert(0, f"/boot/{configs[0]}")
    for path in paths:
        data = src.read_bytes(path, 16 << 20)
        if data is None:
            denied |= src.why(path) == "permission denied"
            tried.append(path)
            continue
        if path.endswith(".gz"):
            from gdrcheck.io.bounded import TooLarge, gunzip

            try:
                data = gunzip(data, CONFIG_LIMIT)
            except TooLarge:
                tried.append(f"{path} (decompresses to more than {CONFIG_LIMIT >> 20} MiB)")
                continue
            if data is None:
                tried.append(f"{path} (not gzip)")
                continue
        text = data.decode("utf-8", "replace")
        if "CONFIG_" not in text:
            tried.append(f"{path} (not a kernel config)")
            continue
        return Fact(config_option(text, "CONFIG_PCI_P2PDMA") == "y", source=path)
    for d in ctx.devices:
        if src.exists(f"/sys/bus/pci/devices/{d.bdf}/p2pmem"):
            return Fact(True, source=f"/sys/bus/pci/devices/{d.bdf}/p2pmem")
    return unknown("CONFIG_PCI_P2PDMA: no kernel config readable (tried " + ", ".join(tried) + ")",
                   settle="run as root" if denied else
                   f"provide /boot/config-{ctx.release or '<release>'} or /proc/config.gz",
                   source=", ".join(paths))


# -- CPU and virtualisation ----------------------------------------------------


CPUINFO_HEAD = 32 << 10  # bytes of /proc/cpuinfo read: a few processors' blocks


def _cpuinfo_fields(text: str) -> dict[str, str]:
    """First value of each key in /proc/cpuinfo (the first processor's block wins)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key and key not in out:
            out[key] = val.strip()
    return out


def _cpu(ctx: HostCtx) -> dict[str, Fact]:
    src = ctx.src
    path = "/proc/cpuinfo"
    # the first processor's block decides; the kernel writes the file one CPU at a time as it is read, and on
    # a large node the whole of it (hundreds of CPUs, each asked its clock) costs tens of milliseconds
    text = src.read_text(path, CPUINFO_HEAD)
    if text is None:
        f = failed(src, path)
        return {"cpu_vendor": f, "cpu_family": f, "cpu_arch": f, "cpu_hypervisor_flag": f}
    fields = _cpuinfo_fields(text)
    out: dict[str, Fact] = {}
    if "vendor_id" in fields:
        out["cpu_vendor"] = Fact(fields["vendor_id"], source=path)
        out["cpu_arch"] = Fact("x86_64", source=path)
        fam = fields.get("cpu family", "")
        out["cpu_family"] = (Fact(int(fam), source=path) if fam.isdigit()
                             else unknown("no 'cpu family' in /proc/cpuinfo", source=path))
        mod = fields.get("model", "")  # NCCL's inter-CPU bandwidth keys on it (rules/nccl/cpu.py)
        out["cpu_model"] = (Fact(int(mod), source=path) if mod.isdigit()
                            else unknown("no 'model' in /proc/cpuinfo", source=path))
        flags = fields.get("flags")
        out["cpu_hypervisor_flag"] = (Fact("hypervisor" in flags.split(), source=path) if flags is not None
                                      else unknown("no flags line", source=path))
        return out
    if "cpu implementer" in fields:
        try:
            impl = int(fields["cpu implementer"], 0)
        except ValueError:
            impl = -1
        out["cpu_vendor"] = Fact("ARM", source=path)
        out["cpu_arch"] = Fact("aarch64", source=path)
        out["cpu_implementer"] = Fact(_ARM_IMPLEMENTERS.get(impl, f"0x{impl:02x}" if impl >= 0 else "unknown"),
                                      source=path)
    elif "power" in fields.get("cpu", "").lower() or "powernv" in fields.get("platform", "").lower():
        out["cpu_vendor"] = Fact("IBM", source=path)
        out["cpu_arch"] = Fact("ppc64le", source=path)
    else:
        f = unknown("CPU vendor not recognised in /proc/cpuinfo", source=path)
        out["cpu_vendor"] = f
        out["cpu_arch"] = f
    out["cpu_family"] = unknown("not an x86 CPU (no 'cpu family')", source=path)
    out["cpu_hypervisor_flag"] = unknown("no x86 flags line", source=path)
    return out


def _virtualization(ctx: HostCtx, flag: Optional[Fact]) -> Fact:
    src = ctx.src
    dmi = {k: src.read_line(f"/sys/class/dmi/id/{k}") for k in ("sys_vendor", "product_name")}
    value: dict[str, object] = {"sys_vendor": dmi["sys_vendor"], "product_name": dmi["product_name"],
                                "hypervisor_flag": flag.value if flag is not None else None}
    sources: list[str] = ["/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name"]
    hits: list[tuple[bool, str]] = []
    if flag is not None and flag.known:
        sources.insert(0, "/proc/cpuinfo")
        if flag.value:
            hits.append((True, "cpu flag 'hypervisor' (/proc/cpuinfo)"))
    hv = src.read_line("/sys/hypervisor/type")
    if hv:
        hits.append((True, f"/sys/hypervisor/type: {hv}"))
        sources.append("/sys/hypervisor/type")
    vendor, product = (dmi["sys_vendor"] or ""), (dmi["product_name"] or "")
    if vendor == "Amazon EC2":
        if product.endswith(".metal") or ".metal-" in product:
            hits.append((False, f"DMI: Amazon EC2 bare-metal instance ({product})"))
        else:
            hits.append((True, f"DMI: Amazon EC2 instance ({product or 'unknown type'})"))
    else:
        for s in (vendor, product):
            if s and _VM_DMI.search(s):
                hits.append((True, f"DMI {s!r}"))
                break
    if hits:
        virtual = any(v for v, _ in hits)
        value.update(virtual=virtual, how="; ".join(h for v, h in hits if v == virtual))
        return Fact(value, source=", ".join(sources))
    if (flag is not None and flag.known) or vendor or product:
        value.update(virtual=False, how="no hypervisor flag or VM signature in DMI")
        return Fact(value, source=", ".join(sources))
    return unknown("neither /proc/cpuinfo nor DMI readable", source=", ".join(sources))


def _nvme_multipath(ctx: HostCtx) -> Fact:
    path = "/sys/module/nvme_core/parameters/multipath"
    val = ctx.src.read_line(path)
    if val is not None:
        if val.upper() in ("Y", "1"):
            return Fact(True, source=path)
        if val.upper() in ("N", "0"):
            return Fact(False, source=path)
        return unknown(f"unexpected value {val!r}", source=path)
    if ctx.src.why(path) == "permission denied":
        return failed(ctx.src, path)
    loaded = ctx.loaded("nvme_core")
    if loaded:
        # nvme_core without the parameter: built without CONFIG_NVME_MULTIPATH
        return Fact(False, source=f"{path} (absent: nvme_core built without multipath)")
    if loaded is False:
        return unknown("nvme_core not loaded", source=path)
    return failed(ctx.src, path)
