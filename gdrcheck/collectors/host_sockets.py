"""Which CPU package (socket) each NUMA node belongs to: ``/sys/devices/system/node/node<N>/cpulist`` and
``/sys/devices/system/cpu/cpu<C>/topology/physical_package_id``. Two NUMA nodes of one socket (AMD NPS2/NPS4,
Intel SNC) are not two sockets; without this fact an input can say "different NUMA nodes", never "sockets"."""

from __future__ import annotations

from gdrcheck.collectors.sysfs_pci import parse_cpulist, parse_int
from gdrcheck.io.source import Source
from gdrcheck.model import Fact, unknown
from gdrcheck.patterns import lazy_pattern

_NODE_RE = lazy_pattern(r"^node(\d+)$")
NODE_DIR = "/sys/devices/system/node"


def numa_packages(src: Source) -> Fact:
    """``{NUMA node: package id}`` for the nodes that have CPUs (a node of memory only has no socket)."""
    out = {}
    for name in src.listdir(NODE_DIR):
        m = _NODE_RE.match(name)
        if not m:
            continue
        cpus = parse_cpulist(src.read_line(f"{NODE_DIR}/{name}/cpulist"))
        if not cpus:
            continue
        pkg = parse_int(src.read_line(f"/sys/devices/system/cpu/cpu{min(cpus)}/topology/physical_package_id"))
        if pkg is not None and pkg >= 0:
            out[str(int(m.group(1)))] = pkg
    if not out:
        return unknown("no CPU package ids in /sys/devices/system/cpu", source="/sys/devices/system/cpu")
    return Fact(out, source="/sys/devices/system/cpu/cpu*/topology/physical_package_id")
