"""Hand-described nodes for cases no captured machine gave us, each named after its case.

``healthy-gdr-node`` is an HGX-like node on which every GPUDirect path works: two
NUMA nodes, per socket one Broadcom Gen5 switch holding two GPUs, one ConnectX-7
(RDMA) and one NVMe drive, ACS off on every port (config space readable, as
root), IOMMU in pass-through, nvidia-peermem and nvidia-fs loaded, the open
driver, NVLink between all GPUs (NVML answers in ``gdrcheck/nvml.json``).
Every other scenario is that node with one thing changed, and each is named
after that one thing.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Callable

from .sysfs_tree import ACS_CR, ACS_RR, BAR_MEM32, BAR_MEM64_PREF, SysfsTree

GPUS = ("0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0")
NICS = ("0000:05:00.0", "0000:85:00.0")
NVMES = ("0000:06:00.0", "0000:86:00.0")
SWITCH_DSP = {0: ("0000:02:00.0", "0000:02:01.0", "0000:02:02.0", "0000:02:03.0"),
              1: ("0000:82:00.0", "0000:82:01.0", "0000:82:02.0", "0000:82:03.0")}


def _write(root: Path, rel: str, text) -> None:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)


def build(root: Path, **change) -> Path:
    """Write the healthy node into ``root`` with the changes named in ``change``."""
    t = SysfsTree(root)
    acs = change.get("acs", 0)
    width = change.get("gpu_width", 16)
    bar1 = change.get("bar1", 256 << 30)
    gpu_bars = ((16 << 20, BAR_MEM32), (bar1, BAR_MEM64_PREF), (32 << 20, BAR_MEM64_PREF))
    sockets = ((0, 0x00, 0x00),) if change.get("one_socket") else ((0, 0x00, 0x00), (1, 0x80, 0x80))
    cfg = {"config_size": 64} if change.get("config64") else {}
    for sock, rootbus, base in sockets:
        t.add_root(0, rootbus, numa=sock)
        rp = t.add(f"0000:{rootbus:02x}:01.0", root=(0, rootbus), cls=0x060400, vendor=0x8086, device=0x352a,
                   iommu_group=f"{10 + sock}", **cfg)
        usp = f"0000:{base + 1:02x}:00.0"
        t.add_switch(usp, SWITCH_DSP[sock], parent=rp, subsystem=(0x1000, 0x0000), acs=acs,
                     iommu_group=f"{10 + sock}", **cfg)
        dsp = SWITCH_DSP[sock]
        g = 2 * sock
        gpus = () if change.get("no_gpu") or (change.get("one_gpu") and sock) else \
            GPUS[g:g + (1 if change.get("one_gpu") else 2)]
        for i, gpu in enumerate(gpus):
            t.add(gpu, dsp[i], driver="nvidia", device=change.get("gpu_device", 0x2335), iommu_group=str(20 + g + i),
                  bars=gpu_bars,
                  link=(change.get("gpu0_speed", "32.0 GT/s PCIe") if g + i == 0 else "32.0 GT/s PCIe",
                        width if (g + i == 0) else 16, "32.0 GT/s PCIe", 16), **cfg)
        name = 1 - sock if change.get("rdma_names_swapped") else sock
        nic_rdma = [] if change.get("nic_not_rdma") else [f"mlx5_{name}"]
        if change.get("nic_virtio"):
            t.add(NICS[sock], dsp[2], cls=0x020000, vendor=0x1AF4, device=0x1041, driver="virtio-pci",
                  iommu_group=str(30 + sock), **cfg)
        elif change.get("qlogic_nic1") and sock == 1:  # a FastLinQ RoCE NIC (qede, RDMA by qedr) beside the CX-7
            t.add(NICS[sock], dsp[2], cls=0x020000, vendor=0x1077, device=0x8070, driver="qede",
                  netdevs=[f"ens{sock}f0"], rdma=["qedr0"], iommu_group=str(30 + sock), **cfg)
        elif not (change.get("single_nic") and sock == 1):
            t.add(NICS[sock], dsp[2], cls=0x020700, vendor=0x15B3, device=0x1021, driver="mlx5_core",
                  netdevs=[f"ibp{sock}s0"], rdma=nic_rdma, iommu_group=str(30 + sock), **cfg)
        if change.get("no_nvme"):
            continue
        nvme_parent = dsp[3]
        if change.get("nvme_on_root_port"):  # the drive on a root port of its own: GPU-NVMe meet at the root
            nvme_parent = t.add(f"0000:{rootbus:02x}:02.0", root=(0, rootbus), cls=0x060400, vendor=0x8086,
                                device=0x352b, iommu_group=f"{50 + sock}", secondary=base + 0x40, **cfg)
        t.add(NVMES[sock] if not change.get("nvme_on_root_port") else f"0000:{base + 0x40:02x}:00.0", nvme_parent,
              cls=0x010802, vendor=0x144D, device=0xA80A, driver="nvme",
              nvme=[f"nvme{sock}"], iommu_group=str(40 + sock), **cfg)
    t.write()
    if change.get("bare"):
        return root
    group_type = change.get("iommu_type", "identity")
    for g in list(range(10, 12)) + list(range(20, 24)) + [30, 31, 40, 41]:
        _write(root, f"/sys/kernel/iommu_groups/{g}/type", group_type + "\n")
    _write(root, "/sys/class/iommu/dmar0/.keep", "")
    release = "6.8.0-49-generic"
    _write(root, "/proc/sys/kernel/osrelease", release + "\n")
    _write(root, "/proc/sys/kernel/hostname", "gpu-node-01\n")
    _write(root, "/proc/cmdline", f"BOOT_IMAGE=/vmlinuz-{release} root=/dev/sda1 ro intel_iommu=on iommu=pt\n")
    flags = "fpu vme de pse" + (" hypervisor" if change.get("vm") else "")
    _write(root, "/proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
                                   f"flags\t\t: {flags}\n\n")
    if change.get("vm"):
        _write(root, "/sys/class/dmi/id/sys_vendor", "QEMU\n")
        _write(root, "/sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    modules = ["nvidia", "nvidia_uvm", "mlx5_core", "mlx5_ib", "ib_core", "nvme", "nvme_core"]
    if not change.get("no_peermem"):
        modules.append("nvidia_peermem")
        _write(root, "/sys/module/nvidia_peermem/version", "580.95.05\n")
    if change.get("nv_peer_mem"):
        modules.append("nv_peer_mem")
        _write(root, "/sys/module/nv_peer_mem/version", "1.3-0\n")
    if not change.get("no_nvidia_fs"):
        modules.append("nvidia_fs")
        _write(root, "/proc/driver/nvidia-fs/version", "version: 2.26\n")
        if change.get("nvfs_modules") is not None:  # the drivers registered with nvidia-fs ("name: version")
            _write(root, "/proc/driver/nvidia-fs/modules", change["nvfs_modules"])
    for m in modules:
        _write(root, f"/sys/module/{m}/initstate", "live\n")
    _write(root, "/proc/modules", "".join(f"{m} 16384 0 - Live 0x0000000000000000\n" for m in modules))
    _write(root, "/sys/module/nvidia/version", "580.95.05\n")
    flavor = "x86_64 Kernel Module" if change.get("proprietary") else "Open Kernel Module for x86_64"
    _write(root, "/proc/driver/nvidia/version",
           f"NVRM version: NVIDIA UNIX {flavor}  580.95.05  Release Build  (dvs-builder@U16)\n"
           "GCC version:  gcc version 12.3.0\n")
    dwords = "" if change.get("no_peer_mapping_override") else "PeerMappingOverride=1;"
    _write(root, "/proc/driver/nvidia/params", f'ResmanDebugLevel: 4294967295\nRegistryDwords: "{dwords}"\n')
    _write(root, f"/boot/config-{release}", "CONFIG_PCI=y\n" + ("# CONFIG_PCI_P2PDMA is not set\n"
                                                              if change.get("no_p2pdma") else "CONFIG_PCI_P2PDMA=y\n"))
    if change.get("nccl_conf"):
        _write(root, "/etc/nccl.conf", change["nccl_conf"])
    _write(root, "/gdrcheck/nvml.json", json.dumps(_nvml(change)))
    _write(root, "/gdrcheck/env.json", "{}")
    if change.get("rdma_core"):  # libibverbs as rdma-core installs it: a link to the versioned file
        lib = root / "usr/lib/x86_64-linux-gnu"
        lib.mkdir(parents=True, exist_ok=True)
        (lib / f"libibverbs.so.{change['rdma_core']}").write_bytes(b"")
        (lib / "libibverbs.so.1").symlink_to(f"libibverbs.so.{change['rdma_core']}")
    if change.get("ip_addr") is not None:  # the interfaces' addresses, as a snapshot keeps them
        _write(root, "/gdrcheck/commands.json", json.dumps({"getifaddrs": {
            "rc": 0, "stdout": change["ip_addr"], "stderr": "", "error": None}}))
    if change.get("no_pci_list"):  # a snapshot whose PCI device list is gone (the driver's answers are kept)
        import shutil

        shutil.rmtree(root / "sys" / "bus" / "pci")
        _write(root, "/gdrcheck/manifest.json", json.dumps({"format": "gdrcheck-snapshot", "host": "gpu-node-01"}))
    return root


def _nvml(change) -> dict:
    bar1 = change.get("bar1", 256 << 30)
    fb = 141 << 30
    gpus = []
    nvlink = not change.get("no_nvlink")
    listed = GPUS[:3] if change.get("gpu_missing_from_nvml") else GPUS
    if change.get("one_socket"):
        listed = GPUS[:2]
    if change.get("one_gpu"):
        listed = GPUS[:1]
    if change.get("no_gpu"):
        listed = ()
    for i, b in enumerate(listed):
        bus = "0000" + b.upper()
        links = [{"link": n, "active": True, "remote_bus_id": "FFFFFFFF:FF:FF.0", "remote_type": 2}
                 for n in range(18)] if nvlink else []
        gpus.append({"index": i, "bus_id": bus, "name": "NVIDIA H200",
                     "uuid": f"GPU-{i:08x}-0000-0000-0000-000000000000",
                     "serial": None, "bar1": {"total": bar1, "used": 2 << 20, "free": bar1 - (2 << 20)},
                     "memory_total": fb, "cuda_compute": [9, 0], "processes": [], "nvlinks": links, "errors": {}})
        if nvlink:  # the NVSwitch fabric as nvidia-smi -q shows it on a healthy node: Completed, Success
            gpus[-1]["fabric"] = {"state": 3, "status": 0, "clique_id": 0,
                                  "cluster_uuid": "00000000-0000-0000-0000-000000000000"}
    p2p = []
    status = change.get("p2p_status", 0)
    for a in listed:
        for b in listed:
            if a != b:
                p2p.append({"a": "0000" + a.upper(), "b": "0000" + b.upper(), "read": status, "write": status,
                            "nvlink": 0 if nvlink else 5, "atomics": 0, "prop": 5})
    return {"version": 1, "init": None, "driver_version": "580.95.05", "count": len(listed), "errors": {},
            "gpus": gpus, "p2p": p2p, "topology": []}


# the healthy node's addresses (name family address): loopback and one IPoIB interface per NIC
IP_ADDR = ("lo inet 127.0.0.1\nibp0s0 inet 10.10.0.11\nibp1s0 inet 10.11.0.11\n"
           "lo inet6 0000:0000:0000:0000:0000:0000:0000:0001\n")

# case name -> changes to the healthy node
CASES: dict[str, dict] = {
    "healthy-gdr-node": {},
    "acs-redirect-on-switch": {"acs": ACS_RR | ACS_CR},
    "iommu-translating": {"iommu_type": "DMA-FQ"},
    "no-peer-memory-module": {"no_peermem": True, "proprietary": True},
    "inbox-rdma-proprietary-driver": {"proprietary": True},
    "one-socket-node": {"one_socket": True},
    "single-nic-node": {"single_nic": True},
    "config-space-not-root": {"config64": True},
    "nvidia-fs-missing-with-p2pdma": {"no_nvidia_fs": True},
    "bare-sysfs-tree": {"bare": True},
    "gpu-link-idle-2.5gts": {"gpu0_speed": "2.5 GT/s PCIe"},
    "kvm-guest": {"vm": True},
    "gpu-missing-from-nvml": {"gpu_missing_from_nvml": True},
    "legacy-nv-peer-mem": {"nv_peer_mem": True},
    "nvidia-fs-missing-no-p2pdma": {"no_nvidia_fs": True, "no_p2pdma": True},
    # nvidia-fs in use (a cuFile process holds it open), NFS over RDMA registered, the NVMe driver not
    "nvidia-fs-nvme-unregistered": {"nvfs_modules": "rpcrdma: 2.26\n"},
    "nvidia-fs-nvme-registered": {"nvfs_modules": "nvme: 2.26\nrpcrdma: 2.26\n"},
    "nvidia-fs-idle": {"nvfs_modules": ""},
    "gpu-link-x8": {"gpu_width": 8},
    "nic-without-rdma-driver": {"nic_not_rdma": True},
    "pcie-only-gpus": {"no_nvlink": True},
    "nic-without-rdma-driver-virtio": {"nic_virtio": True},
    "one-gpu-node": {"one_gpu": True},
    "no-gpu-node": {"no_gpu": True},
    "rdma-names-against-bus-order": {"rdma_names_swapped": True},
    "no-nvme-node": {"no_nvme": True},
    "snapshot-without-pci-tree": {"no_pci_list": True},
    "sxm-gpus-without-links": {"bare": True},
    "bare-pcie-gpus": {"bare": True, "gpu_device": 0x2331},
    "single-nic-gdr-level-sys": {"single_nic": True, "nccl_conf": "NCCL_NET_GDR_LEVEL=SYS\n"},
    "pcie-gpus-p2p-level-sys": {"no_nvlink": True, "nccl_conf": "NCCL_P2P_LEVEL=SYS\n"},
    "nvme-on-root-port": {"nvme_on_root_port": True},
    "p2p-chipset-not-supported": {"p2p_status": 1},
    "pcie-gpus-p2p-chipset-not-supported": {"no_nvlink": True, "p2p_status": 1},
    "nccl-conf-overrides": {"nccl_conf": "# site settings\nNCCL_NET_GDR_LEVEL=SYS\nNCCL_P2P_DISABLE=1\n"},
    "bar1-256mib": {"bar1": 256 << 20},
    # the site's NCCL_SOCKET_IFNAME names an interface the node does not have (NCCL finds none: it does not start)
    "nccl-socket-ifname-matches-nothing": {"nccl_conf": "NCCL_SOCKET_IFNAME=eth9\n", "ip_addr": IP_ADDR},
    # no peer-memory module: GPUDirect RDMA rests on DMA-BUF, which the qedr driver does not register
    "dmabuf-mixed-rdma-drivers": {"no_peermem": True, "qlogic_nic1": True, "rdma_core": "1.14.50.0"},
    "nccl-socket-ifname-matches-ipoib": {"nccl_conf": "NCCL_SOCKET_IFNAME=ibp\n", "ip_addr": IP_ADDR},
    "no-peer-mapping-override": {"no_peer_mapping_override": True},
}


def scenario(tmp_path: Path, case: str) -> Path:
    return build(tmp_path / case, **CASES[case])


def gz(text: str) -> bytes:
    return gzip.compress(text.encode())


BUILDERS: dict[str, Callable] = {}
