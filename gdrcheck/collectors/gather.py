"""Run the collectors over one source and freeze what they found into a Snapshot."""

from __future__ import annotations

import json
import os

from gdrcheck.collectors.clip import HOST_NAME_MAX, clip_name
from gdrcheck.io.source import Source
from gdrcheck.model import CollectorStatus, Fact, Snapshot, frozen_map, unknown
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

_NODE_RE = lazy_pattern(r"^node(\d+)$")


def _numa_nodes(src: Source) -> Fact:
    nodes = sorted(int(m.group(1)) for n in src.listdir("/sys/devices/system/node")
                   if (m := _NODE_RE.match(n)))
    if not nodes:
        return unknown("no /sys/devices/system/node", source="/sys/devices/system/node")
    return Fact(nodes, source="/sys/devices/system/node")


def _hostname(src: Source) -> Optional[str]:
    if src.live and os.environ.get("NODE_NAME"):
        return os.environ["NODE_NAME"]
    if src.has_capture():
        text = src.read_text("/gdrcheck/manifest.json")
        try:
            host = json.loads(text or "{}").get("host")
        except ValueError:
            host = None
        if isinstance(host, str) and host:
            return clip_name(host, HOST_NAME_MAX)
    name = src.read_line("/proc/sys/kernel/hostname")
    return clip_name(name, HOST_NAME_MAX) or None


def _out_of_time(dl, what: str, statuses: list[CollectorStatus]) -> bool:
    """True (and the collector marked not run) when the --timeout has run out before it starts."""
    if dl is None or not dl.expired():
        return False
    dl.miss(what)
    statuses.append(CollectorStatus(what, "unavailable", f"not read: the --timeout of {dl.seconds:g} s ran out",
                                    "raise --timeout (a full run usually takes well under a second)"))
    return True


def gather(src: Source, *, want_driver: bool = True, endpoint_config: bool = True, want_names: bool = True,
           progress: Optional[Callable[[str], None]] = None,
           while_waiting: Optional[Callable[[], None]] = None, cpulists: bool = True) -> Snapshot:
    """All facts of one machine (live, a ``--from`` tree or an unpacked snapshot). ``while_waiting`` runs
    just before a live run waits for NVML's answers: the caller's own work (loading what judges the facts)
    then overlaps the driver's, whose calls release the GIL. ``cpulists``: each PCI function's
    ``local_cpulist`` (:func:`gdrcheck.collectors.sysfs_pci.collect_sysfs_pci`)."""
    from gdrcheck.collectors.sysfs_pci import collect_sysfs_pci

    say = progress or (lambda _msg: None)
    statuses: list[CollectorStatus] = []
    pending_nvml = None
    if want_driver and src.live:
        from gdrcheck.collectors.nvml import begin_nvml

        pending_nvml = begin_nvml(src)  # the driver answers while sysfs is read
    say("reading PCI devices")
    devices, root_numa, st, pci_notes = collect_sysfs_pci(src, endpoint_config=endpoint_config,
                                                                 cpulists=cpulists)
    statuses.append(st)
    if want_names:
        devices = _named(src, devices)
    host = _host_facts(src, devices, statuses, say)
    drv = None
    if want_driver and not _out_of_time(src.deadline, "nvml", statuses):
        drv = _driver_facts(src, devices, pending_nvml, while_waiting, host, statuses, say)
        devices = drv.renumber(devices)
    dl = src.deadline
    if dl is not None and dl.missed:
        host["run_deadline"] = Fact({"seconds": dl.seconds, "missed": list(dl.missed)}, source="--timeout")
    roots = tuple(sorted(set(root_numa) | {d.root for d in devices}))
    shows, links = (drv.shows_nvlink, tuple(drv.nvlinks)) if drv else (False, ())
    xgmi = _kfd_xgmi(host, devices)
    if xgmi is not None:  # an AMD node: the KFD topology shows its xGMI links (and so their absence)
        shows, links = True, links + xgmi
    return Snapshot(
        input_kind=_kind(src),
        label=src.label,
        devices=devices,
        roots=roots,
        root_numa=frozen_map(root_numa),
        numa_known=True,
        shows_nvlink=shows,
        nvlinks=links,
        gpus=tuple(drv.gpus) if drv else (),
        p2p_status=frozen_map(drv.p2p_status if drv else {}),
        host=frozen_map(host),
        collectors=tuple(statuses),
        hostname=_hostname(src),
        notes=pci_notes,
    )


def _kfd_xgmi(host, devices):
    """The xGMI links of the KFD topology (``host_amd``) between GPUs the PCI tree shows; None without one."""
    from gdrcheck.model import NvLink

    f = host.get("amd_gpu")
    if f is None or not f.known or not f.value.get("kfd_nodes"):
        return None
    shown = {d.bdf for d in devices}
    return tuple(NvLink(a, b, n, source="xgmi") for a, b, n in f.value.get("xgmi", ()) if a in shown and b in shown)


def _named(src: Source, devices):
    """The devices, each without a name given the one ``pci.ids`` has for it."""
    from gdrcheck.collectors.names import collect_names
    from gdrcheck.record import replace

    names = collect_names(src, devices)
    if names:
        devices = tuple(replace(d, name=names[d.bdf]) if d.bdf in names and not d.name else d for d in devices)
    return devices


def _host_facts(src: Source, devices, statuses: list[CollectorStatus], say) -> dict[str, Fact]:
    """The host facts: NUMA nodes and their sockets, then the kernel's and the driver's state."""
    from gdrcheck.collectors.host import collect_host

    host: dict[str, Fact] = {"numa_nodes": _numa_nodes(src)}
    if isinstance(host["numa_nodes"].value, list) and len(host["numa_nodes"].value) > 1:
        from gdrcheck.collectors.host_sockets import numa_packages

        host["numa_packages"] = numa_packages(src)
    if not _out_of_time(src.deadline, "host", statuses):
        say("reading kernel and driver state")
        facts, host_statuses = collect_host(src, devices)
        host.update(facts)
        statuses.extend(host_statuses)
    return host


def _driver_facts(src: Source, devices, pending_nvml, while_waiting, host: dict[str, Fact],
                  statuses: list[CollectorStatus], say):
    """What the NVIDIA driver says (NVML, nvidia-smi), and the CUDA attributes a snapshot recorded."""
    from gdrcheck.collectors.driver import collect_driver
    from gdrcheck.collectors.driver_records import no_driver_records

    say("asking the NVIDIA driver (NVML, nvidia-smi)")
    if pending_nvml is not None and while_waiting is not None:
        while_waiting()
    drv = collect_driver(src, devices, nvml=pending_nvml)
    statuses.extend(drv.statuses)
    if (src.live and not src.recording) or no_driver_records(src):
        return drv  # CUDA is asked by `gdrcheck snapshot` only, and replayed from its record
    from gdrcheck.collectors.cuda_attrs import collect_cuda_attrs

    cuda_fact, cuda_st = collect_cuda_attrs(src)
    if cuda_fact is not None:
        host["cuda_attrs"] = cuda_fact
    if cuda_st is not None:
        statuses.append(cuda_st)
    return drv


def _kind(src: Source) -> str:
    if src.live:
        return "live"
    return "snapshot" if src.has_capture() else "sysfs"
