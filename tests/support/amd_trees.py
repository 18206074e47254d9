"""A generated AMD node laid out like ``/``: four MI300X (1002:74a1, class 0x120000, amdgpu) and two ConnectX-7,
one GPU pair and one NIC per switch per socket, an AMD EPYC CPU, the KFD topology (``/sys/class/kfd``: GPU
nodes with ``gfx_target_version`` and ``location_id``, xGMI ``io_links`` of weight 15) and, unless asked
otherwise, the ``amdkfd`` peer-memory client (``/sys/kernel/mm/memory_peers/amdkfd/version``).
"""

from __future__ import annotations

from pathlib import Path

from builders.sysfs_tree import SysfsTree

GPUS = ("0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0")
NICS = ("0000:05:00.0", "0000:85:00.0")
RELEASE = "6.8.0-49-generic"


def _write(root: Path, path: str, text: str) -> None:
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def mi300x_node(root: Path, *, peer: bool = True, xgmi: bool = True, cpu: str = "AuthenticAMD",
                family: int = 25, model: int = 17, bios: str = "1.8", numa_balancing: str = "0") -> Path:
    t = SysfsTree(root)
    for sock, base in ((0, 0x00), (1, 0x80)):
        t.add_root(0, base, numa=sock)
        rp = t.add(f"0000:{base:02x}:01.0", root=(0, base), cls=0x060400, vendor=0x1022, device=0x14ab)
        dsp = t.add_switch(f"0000:{base + 1:02x}:00.0", [f"0000:{base + 2:02x}:0{i}.0" for i in range(3)], rp,
                           vendor=0x15B3, device=0x1979)
        for i in range(2):
            t.add(GPUS[2 * sock + i], dsp[i], cls=0x120000, vendor=0x1002, device=0x74A1, driver="amdgpu",
                  link=("32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16))
        t.add(NICS[sock], dsp[2], cls=0x020700, vendor=0x15B3, device=0x1021, driver="mlx5_core",
              netdevs=[f"ibp{sock}s0"], rdma=[f"mlx5_{sock}"])
    t.write()
    _write(root, "/proc/sys/kernel/osrelease", RELEASE + "\n")
    _write(root, "/proc/cpuinfo", f"processor\t: 0\nvendor_id\t: {cpu}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                                  "flags\t\t: fpu\n\n")
    _write(root, "/proc/modules", "amdgpu 1 0 - Live 0x0\nmlx5_ib 1 0 - Live 0x0\nmlx5_core 1 0 - Live 0x0\n"
                                  "ib_core 1 0 - Live 0x0\n")
    _write(root, "/sys/devices/virtual/dmi/id/bios_version", bios + "\n")
    _write(root, "/proc/sys/kernel/numa_balancing", numa_balancing + "\n")
    if peer:
        _write(root, "/sys/kernel/mm/memory_peers/amdkfd/version", "1.0\n")
    _kfd(root, xgmi)
    return root


def _kfd(root: Path, xgmi: bool) -> None:
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    for cpu in (0, 1):
        _write(root, f"{nodes}/{cpu}/properties", "cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\n"
                                                  "location_id 0\ndomain 0\n")
    for i, bdf in enumerate(GPUS):
        node = i + 2
        bus, devfn = int(bdf[5:7], 16), 0
        _write(root, f"{nodes}/{node}/properties", f"cpu_cores_count 0\nsimd_count 1216\ngfx_target_version 90402\n"
                                                   f"location_id {bus << 8 | devfn}\ndomain 0\n")
        links = [(0 if i < 2 else 1, 2, 20)]  # PCIe to the local CPU
        if xgmi:
            links += [(j + 2, 11, 15) for j in range(len(GPUS)) if j != i]
        for k, (to, kind, weight) in enumerate(links):
            _write(root, f"{nodes}/{node}/io_links/{k}/properties", f"type {kind}\nversion_major 0\nnode_from {node}\n"
                                                                    f"node_to {to}\nweight {weight}\n")


def root_port_pair(root: Path, *, cpu: str = "AuthenticAMD", family: int = 25, model: int = 1) -> Path:
    """One MI300X and one ConnectX-7, each on its own root port of root bus 0x40 (bus 0x41 and 0x42: one 0x10
    block), amdkfd peer memory present: RCCL's Rome/Milan PHB rule decides GDR."""
    t = SysfsTree(root)
    t.add_root(0, 0x40, numa=0)
    gp = t.add("0000:40:01.1", root=(0, 0x40), cls=0x060400, vendor=0x1022, device=0x14ab, secondary=0x41)
    np_ = t.add("0000:40:01.2", root=(0, 0x40), cls=0x060400, vendor=0x1022, device=0x14ab, secondary=0x42)
    t.add("0000:41:00.0", gp, cls=0x120000, vendor=0x1002, device=0x74A1, driver="amdgpu")
    t.add("0000:42:00.0", np_, cls=0x020700, vendor=0x15B3, device=0x1021, driver="mlx5_core",
          netdevs=["ibp66s0"], rdma=["mlx5_0"])
    t.write()
    _write(root, "/proc/sys/kernel/osrelease", RELEASE + "\n")
    _write(root, "/proc/cpuinfo", f"processor\t: 0\nvendor_id\t: {cpu}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                                  "flags\t\t: fpu\n\n")
    _write(root, "/sys/kernel/mm/memory_peers/amdkfd/version", "1.0\n")
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    _write(root, f"{nodes}/1/properties", "simd_count 1216\ngfx_target_version 90402\nlocation_id 16640\ndomain 0\n")
    return root
