"""Hand-described nodes for NCCL decisions no captured machine gave us (tests/rules/test_nccl_*.py).

A node has one or two sockets; on each, GPUs and NICs sit under one PCIe switch ("switch") or on root ports
of their own ("root"). Everything NCCL reads can be changed: the CPU vendor (or no /proc/cpuinfo), the
root ports' vendor, NVLinks (direct GPU-GPU bundles, or every GPU to the NVSwitch fabric), NVML's P2P status,
peer-memory files, the driver flavour, RDMA drivers, port rates, settings files and topology files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from builders.sysfs_tree import SysfsTree
from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate

CPUINFO = {"GenuineIntel": "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n",
           "AuthenticAMD": "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n",
           "  Shanghai  ": "vendor_id\t:   Shanghai  \ncpu family\t: 7\nmodel\t\t: 91\n",
           "ARM": "CPU implementer\t: 0x41\nCPU architecture: 8\n"}
GEN5 = "32.0 GT/s PCIe"


def build(root: Path, *, devices: Sequence[tuple[str, str, int, str]], cpu: Optional[str] = "GenuineIntel",
          port_vendor: int = 0x8086, nvlinks: Sequence[tuple[str, str, int]] = (), nvswitch: bool = False,
          p2p_status: int = 0, peermem: bool = True, flavor: str = "open", gpu_name: str = "NVIDIA H100 80GB HBM3",
          cc: tuple[int, int] = (9, 0), modules: Sequence[str] = ("mlx5_core", "mlx5_ib"),
          nic_driver: str = "mlx5_core", rates: Optional[dict[str, str]] = None,
          files: Optional[dict[str, str]] = None, kernel: str = "6.8.0-49-generic",
          libibverbs: Optional[str] = "libibverbs.so.1.14.50.0",
          below: Sequence[tuple[int, str, Sequence[str], str, tuple[int, int], int]] = ()) -> Path:
    """``devices``: (kind "gpu"|"nic"|"data-direct", bdf, socket, "switch"|"root"|a downstream port of
    ``below``); "data-direct" is a ConnectX-8 Data Direct DMA function (15b3:2100, Linux mlx5_data_direct).
    ``below``: more switches under a socket's switch, (socket, upstream port, downstream ports, the port above,
    subsystem ids, device id), in order."""
    t = SysfsTree(root)
    sockets = sorted({d[2] for d in devices})
    switches: dict[int, tuple[str, list]] = {}
    free_port = {s: 1 for s in sockets}
    for s in sockets:
        bus = 0x80 * s
        t.add_root(0, bus, numa=s)
        if any(d[2] == s and d[3] == "switch" for d in devices) or any(b[0] == s for b in below):
            rp = t.add(f"0000:{bus:02x}:01.0", root=(0, bus), cls=0x060400, vendor=port_vendor, device=0x1234)
            free_port[s] = 2
            dsps = [f"0000:{bus + 2:02x}:{i:02x}.0" for i in range(8)]
            t.add_switch(f"0000:{bus + 1:02x}:00.0", dsps, parent=rp, subsystem=(0x1000, 0x0000))
            switches[s] = (rp, list(dsps))
    for _s, usp, dsps, above, subsystem, device in below:
        t.add_switch(usp, dsps, parent=above, subsystem=subsystem, device=device)
    gpu_bdfs = []
    for kind, bdf, s, where in devices:
        bus = 0x80 * s
        if where == "switch":
            parent = switches[s][1].pop(0)
        elif where != "root":
            parent = where
        else:
            port = free_port[s]
            free_port[s] += 1
            parent = t.add(f"0000:{bus:02x}:{port:02x}.0", root=(0, bus), cls=0x060400, vendor=port_vendor,
                           device=0x1234)
        if kind == "gpu":
            t.add(bdf, parent, driver="nvidia", link=(GEN5, 16, GEN5, 16))
            gpu_bdfs.append(bdf)
        elif kind == "data-direct":
            t.add(bdf, parent, cls=0x020000, vendor=0x15B3, device=0x2100, driver="mlx5_data_direct",
                  link=(GEN5, 16, GEN5, 16))
        else:
            n = len([x for x in devices[:devices.index((kind, bdf, s, where))] if x[0] == "nic"])
            t.add(bdf, parent, cls=0x020700, vendor=0x15B3, device=0x1021, driver=nic_driver,
                  netdevs=[f"ib{n}"], rdma=[f"mlx5_{n}"], link=(GEN5, 16, GEN5, 16))
    t.write()
    w = {}
    if cpu is not None:
        w["/proc/cpuinfo"] = "processor\t: 0\n" + CPUINFO[cpu] + "flags\t\t: fpu\n\n"
    else:  # an input without /proc/cpuinfo (SysfsTree writes one)
        (root / "proc/cpuinfo").unlink()
    w["/proc/sys/kernel/osrelease"] = kernel + "\n"
    mods = ["nvidia", "ib_core"] + list(modules) + (["nvidia_peermem"] if peermem else [])
    w["/proc/modules"] = "".join(f"{m} 16384 0 - Live 0x0000000000000000\n" for m in mods)
    for m in mods:
        w[f"/sys/module/{m}/initstate"] = "live\n"
    if peermem:
        w["/sys/module/nvidia_peermem/version"] = "580.95.05\n"
    w["/sys/module/nvidia/version"] = "580.95.05\n"
    fl = "Open Kernel Module for x86_64" if flavor == "open" else "x86_64 Kernel Module"
    w["/proc/driver/nvidia/version"] = f"NVRM version: NVIDIA UNIX {fl}  580.95.05  Release Build\n"
    if libibverbs:
        w[f"/usr/lib/x86_64-linux-gnu/{libibverbs}"] = ""
    for dev, rate in (rates or {}).items():
        w[f"/sys/class/infiniband/{dev}/ports/1/rate"] = rate + "\n"
    w["/gdrcheck/env.json"] = "{}"
    w["/gdrcheck/nvml.json"] = json.dumps(_nvml(gpu_bdfs, nvlinks, nvswitch, p2p_status, gpu_name, cc))
    w.update(files or {})
    for rel, text in w.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if text.startswith("->"):  # a symbolic link, as ldconfig keeps libnccl.so.2
            p.symlink_to(text[2:])
        else:
            p.write_text(text)
    if libibverbs:
        link = root / "usr/lib/x86_64-linux-gnu/libibverbs.so.1"
        if not link.exists():
            link.symlink_to(libibverbs)
    return root


def _nvml(gpus, nvlinks, nvswitch, status, name, cc) -> dict:
    out = []
    for i, b in enumerate(gpus):
        links = []
        if nvswitch:
            links = [{"link": n, "active": True, "remote_bus_id": "FFFFFFFF:FF:FF.0", "remote_type": 2}
                     for n in range(18)]
        for a, c, count in nvlinks:
            if b in (a, c):
                other = c if b == a else a
                links += [{"link": len(links) + k, "active": True, "remote_bus_id": "0000" + other.upper(),
                           "remote_type": 0} for k in range(count)]
        out.append({"index": i, "bus_id": "0000" + b.upper(), "name": name, "uuid": f"GPU-{i:08x}",
                    "serial": None, "memory_total": 80 << 30, "cuda_compute": list(cc), "processes": [],
                    "bar1": {"total": 128 << 30, "used": 2 << 20, "free": (128 << 30) - (2 << 20)},
                    "nvlinks": links, "errors": {}})
    p2p = [{"a": "0000" + a.upper(), "b": "0000" + b.upper(), "read": status, "write": status,
            "nvlink": 0, "atomics": 0, "prop": 5} for a in gpus for b in gpus if a != b]
    return {"version": 1, "init": None, "driver_version": "580.95.05", "count": len(gpus), "errors": {},
            "gpus": out, "p2p": p2p, "topology": []}


def decide(root: Path, version: Optional[str] = None, env: Optional[dict[str, str]] = None):
    """(the pairs document's ``nccl`` object, {(a, b): pair's ``nccl``})."""
    snap = load_facts(str(root))
    doc = pairs_doc(evaluate(snap, Options(nccl_version=version, env=env or {})))
    return doc["nccl"], {(p["a"], p["b"]): p["nccl"] for p in doc["pairs"]}
