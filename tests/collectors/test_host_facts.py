"""Host facts from hand-built filesystem roots: known true, known false and unknown for each."""

from __future__ import annotations

import gzip
import json
import os
from typing import Optional, Union

import pytest
from support.replay import replay_tree

from gdrcheck.collectors.host import HOST_FACT_KEYS, collect_host
from gdrcheck.collectors.host_nccl import parse_nccl_conf
from gdrcheck.collectors.host_nvidia import parse_params, parse_registry_dwords
from gdrcheck.collectors.host_peermem import nccl_peermem_paths, nccl_sees_peermem
from gdrcheck.io.source import Source
from gdrcheck.model import PciFunction

OPEN_VERSION = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
                "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n"
                "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
PROP_VERSION = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
                "GCC version:  gcc version 11.4.0\n")
PROC_MODULES = ("nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
                "nvidia_uvm 4956160 0 - Live 0x0000000000000000 (POE)\n"
                "nvidia 54337536 2 nvidia_peermem,nvidia_uvm, Live 0x0000000000000000 (POE)\n"
                "mlx5_ib 446464 0 - Live 0x0000000000000000 (OE)\n"
                "mlx5_core 2396160 1 mlx5_ib, Live 0x0000000000000000 (OE)\n"
                "ib_core 434176 2 nvidia_peermem,mlx5_ib, Live 0x0000000000000000 (OE)\n")
AMD_CPUINFO = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
               "flags\t\t: fpu vme de pse sse sse2 ht\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\n")
Files = dict[str, Union[str, bytes, None]]


def make_tree(root, files: Files) -> Source:
    """``files``: path -> text/bytes; a path ending in ``/`` is an empty directory."""
    for rel, content in files.items():
        p = root / rel.lstrip("/")
        if rel.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content or "")
    return Source(str(root), live=False)


def facts_of(tmp_path, files: Files, devices=()):
    facts, statuses = collect_host(make_tree(tmp_path, files), list(devices))
    return facts, statuses


def base_host(**extra) -> Files:
    files: Files = {
        "proc/sys/kernel/osrelease": "6.8.0-45-generic\n",
        "proc/cmdline": "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=/dev/sda1 ro iommu=pt\n",
        "proc/modules": PROC_MODULES,
        "proc/cpuinfo": AMD_CPUINFO,
        "proc/driver/nvidia/version": OPEN_VERSION,
        "proc/driver/nvidia/params": 'ResmanDebugLevel: 4294967295\nEnableMSI: 1\nRegistryDwords: ""\n',
        "sys/module/nvidia/version": "550.54.15\n",
        "sys/module/nvidia_peermem/version": "550.54.15\n",
        "sys/module/mlx5_core/version": "24.01\n",
        "sys/module/nvme_core/parameters/multipath": "N\n",
        "sys/class/dmi/id/sys_vendor": "Supermicro\n",
        "sys/class/dmi/id/product_name": "SYS-821GE-TNHR\n",
        "sys/class/iommu/": None,
        "boot/config-6.8.0-45-generic": "CONFIG_PCI=y\nCONFIG_PCI_P2PDMA=y\n",
    }
    files.update(extra)
    return files


# ---------------------------------------------------------------------------
# whole collector


def test_every_key_present_json_serialisable_and_sourced(tmp_path):
    facts, statuses = facts_of(tmp_path, base_host())
    assert set(HOST_FACT_KEYS) <= set(facts)
    for key in HOST_FACT_KEYS:
        f = facts[key]
        json.dumps(f.value)
        assert f.source, key
    assert statuses[0].name == "host" and statuses[0].status == "ok"


def test_empty_tree_is_unknown_not_false(tmp_path):
    facts, statuses = facts_of(tmp_path, {})
    for key in ("kernel_release", "kernel_cmdline", "modules_loaded", "p2pdma_config", "cpu_vendor",
                "virtualization", "iommu", "peermem", "nvidia_fs", "nvidia_driver_flavor"):
        assert not facts[key].known, key
    assert facts["nccl_env"].value == {}
    assert statuses[0].status == "ok"


# ---------------------------------------------------------------------------
# kernel


def test_kernel_release_and_cmdline(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    assert facts["kernel_release"].value == "6.8.0-45-generic"
    assert facts["kernel_release"].source == "/proc/sys/kernel/osrelease"
    assert "iommu=pt" in facts["kernel_cmdline"].value


def test_kernel_release_missing(tmp_path):
    files = base_host()
    del files["proc/sys/kernel/osrelease"]
    facts, _ = facts_of(tmp_path, files)
    assert not facts["kernel_release"].known
    assert "osrelease" in facts["kernel_release"].reason


def test_acs_cmdline(tmp_path):
    cmd = 'ro pci=noaer,disable_acs_redir="0000:01:00.0;0000:02:00.0",config_acs=10x@pci:0:0 x\n'
    facts, _ = facts_of(tmp_path, base_host(**{"proc/cmdline": cmd}))
    v = facts["acs_cmdline"].value
    assert v["disable_acs_redir"] == ["0000:01:00.0", "0000:02:00.0"]
    assert v["config_acs"] == ["10x@pci:0:0"]
    facts, _ = facts_of(tmp_path / "b", base_host(**{"proc/cmdline": "ro quiet\n"}))
    assert facts["acs_cmdline"].value["disable_acs_redir"] == []


def test_modules_loaded(tmp_path):
    files = base_host(**{"sys/module/nvme_core/parameters/io_timeout": "30\n"})
    facts, _ = facts_of(tmp_path, files)
    mods = facts["modules_loaded"].value
    assert "nvidia_peermem" in mods and "mlx5_core" in mods
    assert "nvme_core" in mods  # built in: only /sys/module shows it
    assert "nvidia_fs" not in mods


def test_modules_unknown_without_proc_or_sys(tmp_path):
    facts, _ = facts_of(tmp_path, {"proc/sys/kernel/osrelease": "6.8.0\n"})
    assert not facts["modules_loaded"].known
    assert not facts["peermem"].known


@pytest.mark.parametrize("content,expected", [
    ("CONFIG_PCI_P2PDMA=y\n", True),
    ("# CONFIG_PCI_P2PDMA is not set\n", False),
    ("CONFIG_PCI=y\n", False),  # not offered at all (no ZONE_DEVICE, 32-bit, old kernel)
])
def test_p2pdma_from_boot_config(tmp_path, content, expected):
    facts, _ = facts_of(tmp_path, base_host(**{"boot/config-6.8.0-45-generic": content}))
    assert facts["p2pdma_config"].value is expected
    assert facts["p2pdma_config"].source == "/boot/config-6.8.0-45-generic"


def test_p2pdma_from_config_gz(tmp_path):
    files = base_host(**{"proc/config.gz": gzip.compress(b"CONFIG_X=y\nCONFIG_PCI_P2PDMA=y\n")})
    del files["boot/config-6.8.0-45-generic"]
    facts, _ = facts_of(tmp_path, files)
    assert facts["p2pdma_config"].value is True
    assert facts["p2pdma_config"].source == "/proc/config.gz"


def test_p2pdma_from_the_config_under_lib_modules(tmp_path):
    """Fedora and RHEL install the .config as /lib/modules/<release>/config too."""
    files = base_host(**{"lib/modules/6.8.0-45-generic/config": "CONFIG_PCI_P2PDMA=y\n"})
    del files["boot/config-6.8.0-45-generic"]
    facts, _ = facts_of(tmp_path, files)
    assert facts["p2pdma_config"].value is True
    assert facts["p2pdma_config"].source == "/lib/modules/6.8.0-45-generic/config"


def test_p2pdma_never_reads_the_symbol_table(tmp_path):
    """/proc/kallsyms holds the kernel's addresses: a broken config.gz is unknown, not a look at the symbols
    (which a snapshot would then carry)."""
    files = base_host(**{"proc/config.gz": b"not gzip at all",
                         "proc/kallsyms": "ffffffffa1000000 T _text\nffffffffa1234560 d p2pdma_pgmap_ops\n"})
    del files["boot/config-6.8.0-45-generic"]
    make_tree(tmp_path, files)
    src = Source(str(tmp_path), live=False, record=True)
    facts, _ = collect_host(src, [])
    f = facts["p2pdma_config"]
    assert not f.known and "/proc/config.gz (not gzip)" in f.reason and "kallsyms" not in f.reason + f.source
    assert not any("kallsyms" in p for p in src.recorded)


def test_p2pdma_p2pmem_dir_proves_it(tmp_path):
    files = base_host(**{"sys/bus/pci/devices/0000:05:00.0/p2pmem/size": "1048576\n"})
    del files["boot/config-6.8.0-45-generic"]
    dev = PciFunction("0000:05:00.0", "0000:00")
    facts, _ = facts_of(tmp_path, files, [dev])
    assert facts["p2pdma_config"].value is True


def test_p2pdma_unknown_when_nothing_readable(tmp_path):
    files = base_host()
    del files["boot/config-6.8.0-45-generic"]
    facts, _ = facts_of(tmp_path, files)
    f = facts["p2pdma_config"]
    assert not f.known and "CONFIG_PCI_P2PDMA" in f.reason


class DenyingSource(Source):
    """A source on which some paths fail with 'permission denied' (tests may run as root)."""

    def __init__(self, root, denied):
        super().__init__(root, live=False)
        self.denied = set(denied)

    def read_bytes(self, path, limit=1 << 20):
        if path in self.denied:
            self._errors[path] = "permission denied"
            return None
        return super().read_bytes(path, limit)


def test_permission_denied_says_run_as_root(tmp_path):
    make_tree(tmp_path, base_host(**{"proc/kallsyms": "x"}))
    src = DenyingSource(str(tmp_path), {"/boot/config-6.8.0-45-generic", "/proc/kallsyms",
                                        "/proc/driver/nvidia/params", "/proc/cpuinfo"})
    facts, statuses = collect_host(src, [])
    assert facts["p2pdma_config"].settle == "run as root"
    assert facts["nvidia_params"].settle == "run as root"
    assert facts["cpu_vendor"].settle == "run as root"
    assert "need root" in statuses[0].detail


# ---------------------------------------------------------------------------
# CPU and virtualisation


def test_cpu_amd(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    assert facts["cpu_vendor"].value == "AuthenticAMD"
    assert facts["cpu_family"].value == 25
    assert facts["cpu_arch"].value == "x86_64"


def test_cpu_arm_has_no_family(tmp_path):
    cpuinfo = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
    facts, _ = facts_of(tmp_path, base_host(**{"proc/cpuinfo": cpuinfo}))
    assert facts["cpu_vendor"].value == "ARM"
    assert not facts["cpu_family"].known
    assert facts["cpu_implementer"].value == "Arm"


def test_cpu_missing(tmp_path):
    files = base_host()
    del files["proc/cpuinfo"]
    facts, _ = facts_of(tmp_path, files)
    assert not facts["cpu_vendor"].known and not facts["cpu_family"].known


def test_bare_metal(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    v = facts["virtualization"].value
    assert v["virtual"] is False and v["hypervisor_flag"] is False


def test_vm_by_hypervisor_flag(tmp_path):
    cpuinfo = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nflags\t\t: fpu sse2 hypervisor\n"
    facts, _ = facts_of(tmp_path, base_host(**{"proc/cpuinfo": cpuinfo}))
    v = facts["virtualization"].value
    assert v["virtual"] is True and "hypervisor" in v["how"]


def test_vm_by_dmi(tmp_path):
    cpuinfo = "processor\t: 0\nCPU implementer\t: 0x41\n"
    facts, _ = facts_of(tmp_path, base_host(**{"proc/cpuinfo": cpuinfo, "sys/class/dmi/id/sys_vendor": "QEMU\n",
                                               "sys/class/dmi/id/product_name": "KVM Virtual Machine\n"}))
    assert facts["virtualization"].value["virtual"] is True


def test_aws_metal_is_not_virtual(tmp_path):
    facts, _ = facts_of(tmp_path, base_host(**{"sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
                                               "sys/class/dmi/id/product_name": "p4d.24xlarge\n"}))
    assert facts["virtualization"].value["virtual"] is True
    facts, _ = facts_of(tmp_path / "m", base_host(**{"sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
                                                     "sys/class/dmi/id/product_name": "c5.metal\n"}))
    assert facts["virtualization"].value["virtual"] is False


def test_virtualization_unknown(tmp_path):
    files = base_host()
    for k in ("proc/cpuinfo", "sys/class/dmi/id/sys_vendor", "sys/class/dmi/id/product_name"):
        del files[k]
    facts, _ = facts_of(tmp_path, files)
    assert not facts["virtualization"].known


# ---------------------------------------------------------------------------
# NVIDIA driver


def test_open_driver(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    assert facts["nvidia_driver_version"].value == "550.54.15"
    assert facts["nvidia_driver_version"].source == "/sys/module/nvidia/version"
    assert facts["nvidia_driver_flavor"].value == "open"


def test_proprietary_driver_version_from_proc(tmp_path):
    files = base_host(**{"proc/driver/nvidia/version": PROP_VERSION})
    del files["sys/module/nvidia/version"]
    facts, _ = facts_of(tmp_path, files)
    assert facts["nvidia_driver_flavor"].value == "proprietary"
    assert facts["nvidia_driver_version"].value == "535.104.05"
    assert facts["nvidia_driver_version"].source == "/proc/driver/nvidia/version"


def test_flavor_from_taint(tmp_path):
    files = base_host(**{"sys/module/nvidia/taint": "POE\n"})
    del files["proc/driver/nvidia/version"]
    facts, _ = facts_of(tmp_path, files)
    assert facts["nvidia_driver_flavor"].value == "proprietary"
    assert facts["nvidia_driver_flavor"].source == "/sys/module/nvidia/taint"


def test_no_driver(tmp_path):
    files = base_host(**{"proc/modules": "mlx5_core 1 0 - Live 0x0\n"})
    for k in ("proc/driver/nvidia/version", "proc/driver/nvidia/params", "sys/module/nvidia/version",
              "sys/module/nvidia_peermem/version"):
        del files[k]
    facts, _ = facts_of(tmp_path, files)
    for key in ("nvidia_driver_version", "nvidia_driver_flavor", "nvidia_params", "peer_mapping_override"):
        assert not facts[key].known, key
        assert "not loaded" in facts[key].reason
    assert facts["peermem"].value["nvidia_peermem_loaded"] is False


def test_params_and_peer_mapping_override(tmp_path):
    params = ('EnableMSI: 1\nRegistryDwords: "PeerMappingOverride=1;RMForceStaticBar1=0x1"\n'
              'GrdmaPciTopoCheckOverride: 0\nTemporaryFilePath: ""\n')
    facts, _ = facts_of(tmp_path, base_host(**{"proc/driver/nvidia/params": params}))
    p = facts["nvidia_params"].value
    assert p["EnableMSI"] == 1 and p["GrdmaPciTopoCheckOverride"] == 0 and p["TemporaryFilePath"] == ""
    assert facts["peer_mapping_override"].value is True
    assert facts["nvidia_registry_dwords"].value == {"PeerMappingOverride": 1, "RMForceStaticBar1": 1}
    facts, _ = facts_of(tmp_path / "b", base_host())
    assert facts["peer_mapping_override"].value is False
    assert facts["nvidia_registry_dwords"].value == {}


def test_parse_helpers():
    assert parse_params("A: 1\nB: \"x y\"\nnot a line\nC: on\n") == {"A": 1, "B": "x y", "C": "on"}
    assert parse_registry_dwords('"PeerMappingOverride=0"') == {"PeerMappingOverride": 0}
    assert parse_registry_dwords("") == {}


# ---------------------------------------------------------------------------
# peer memory


def test_peermem_inbox_rdma_only_new_nccl_sees_it(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    p = facts["peermem"].value
    assert p["nvidia_peermem_loaded"] is True and p["nv_peer_mem_loaded"] is False
    assert p["memory_peers"] == []
    assert p["nccl_files"]["/sys/module/nvidia_peermem/version"] is True
    assert p["nccl_files"]["/sys/kernel/mm/memory_peers/nv_mem/version"] is False
    assert p["nccl_sees_peermem"] == {"<=2.21": False, "2.22": False, ">=2.23": True}
    assert nccl_sees_peermem(p["nccl_files"], "2.21.5") is False
    assert nccl_sees_peermem(p["nccl_files"], "2.23.4") is True


def test_peermem_registered_with_mlnx_ofed(tmp_path):
    files = base_host(**{"sys/kernel/mm/memory_peers/nv_mem/version": "1.3\n",
                         "sys/kernel/mm/memory_peers/nv_mem/num_reg_bytes": "67108864\n",
                         "lib/modules/6.8.0-45-generic/modules.dep":
                             "updates/dkms/nvidia-peermem.ko.zst: updates/dkms/nvidia.ko.zst\n"})
    facts, _ = facts_of(tmp_path, files)
    p = facts["peermem"].value
    assert p["memory_peers"] == ["nv_mem"] and p["nv_mem_registered"] is True
    assert p["num_reg_bytes"] == {"nv_mem": 67108864}
    assert all(p["nccl_sees_peermem"].values())
    assert p["nvidia_peermem_installed"] is True and p["nv_peer_mem_installed"] is False


def test_peermem_not_loaded(tmp_path):
    files = base_host(**{"proc/modules": "nvidia 1 0 - Live 0x0\n",
                         "lib/modules/6.8.0-45-generic/modules.dep": "kernel/foo.ko:\n"})
    del files["sys/module/nvidia_peermem/version"]
    facts, _ = facts_of(tmp_path, files)
    p = facts["peermem"].value
    assert p["nvidia_peermem_loaded"] is False
    assert not any(p["nccl_files"].values())
    assert p["nvidia_peermem_installed"] is False


def test_nccl_peermem_paths_per_version():
    assert "/sys/kernel/mm/memory_peers/nvidia-peermem/version" in nccl_peermem_paths("2.18.3")
    assert "/sys/module/nvidia_peermem/version" not in nccl_peermem_paths("2.22.3")
    assert "/sys/module/nvidia_peermem/version" in nccl_peermem_paths("2.30.7")
    assert nccl_peermem_paths(None) == nccl_peermem_paths("2.23")


def test_dmabuf_likely(tmp_path):
    make_tree(tmp_path, base_host())
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libibverbs.so.1.14.50.0").write_text("")
    os.symlink("libibverbs.so.1.14.50.0", lib / "libibverbs.so.1")
    facts, _ = collect_host(Source(str(tmp_path), live=False), [])
    d = facts["dmabuf"].value
    assert d["approximation"] is True
    assert d["kernel_ge_5_12"] and d["open_driver"] and d["ibv_reg_dmabuf_mr"] and d["mlx5_core_loaded"]
    assert d["rdma_core_version"] == "50.0" and d["rdma_core_ge_34"] is True
    assert d["possible"] is True and d["missing"] == []


def test_dmabuf_not_with_proprietary_driver(tmp_path):
    files = base_host(**{"proc/driver/nvidia/version": PROP_VERSION})
    facts, _ = facts_of(tmp_path, files)
    d = facts["dmabuf"].value
    assert d["open_driver"] is False and d["possible"] is False and "open_driver" in d["missing"]


def test_dmabuf_unknown_without_rdma_core(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    d = facts["dmabuf"].value
    assert d["libibverbs"] is None and d["possible"] is None and "ibv_reg_dmabuf_mr" in d["unknown"]


# ---------------------------------------------------------------------------
# nvidia-fs


def test_nvidia_fs_loaded(tmp_path):
    files = base_host(**{
        "proc/modules": PROC_MODULES + "nvidia_fs 262144 0 - Live 0x0 (OE)\n",
        "proc/driver/nvidia-fs/version": "version: 2.17\n",
        "proc/driver/nvidia-fs/bridges": "0000:3A:00.0\n0000:5d:02.0\n",
        "proc/driver/nvidia-fs/modules": "nvme: 1.0\nnvme_rdma: 1.0\n",
        "proc/driver/nvidia-fs/devcount": "8\n",
        "proc/driver/nvidia-fs/stats": "GDS Version: 1.7\nMellanox PeerDirect Supported: True\n",
    })
    facts, _ = facts_of(tmp_path, files)
    v = facts["nvidia_fs"].value
    assert v["loaded"] is True and v["version"] == "2.17"
    assert v["bridges"] == ["0000:3a:00.0", "0000:5d:02.0"]
    assert v["modules"] == {"nvme": "1.0", "nvme_rdma": "1.0"}
    assert v["devcount"] == 8 and v["peerdirect"] is True


def test_nvidia_fs_not_loaded_and_unknown(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    assert facts["nvidia_fs"].value is False
    facts, _ = facts_of(tmp_path / "b", {"proc/sys/kernel/osrelease": "6.8.0\n"})
    assert not facts["nvidia_fs"].known


def test_nvidia_fs_empty_bridges(tmp_path):
    facts, _ = facts_of(tmp_path, base_host(**{"proc/driver/nvidia-fs/version": "version: 2.28\n",
                                               "proc/driver/nvidia-fs/bridges": ""}))
    assert facts["nvidia_fs"].value["bridges"] == []


# ---------------------------------------------------------------------------
# IOMMU

DEVS = [PciFunction("0000:17:00.0", "0000:16", "0000:16:01.0", iommu_group="3"),
        PciFunction("0000:18:00.0", "0000:16", "0000:16:02.0", iommu_group="4"),
        PciFunction("0000:19:00.0", "0000:16", "0000:16:03.0")]


def _groups(types: dict[str, Optional[str]]) -> Files:
    files: Files = {"sys/class/iommu/dmar0/": None}
    for g, t in types.items():
        files[f"sys/kernel/iommu_groups/{g}/devices/"] = None
        if t is not None:
            files[f"sys/kernel/iommu_groups/{g}/type"] = t + "\n"
    return files


def test_iommu_off(tmp_path):
    facts, _ = facts_of(tmp_path, base_host(), DEVS)
    i = facts["iommu"].value
    assert i["mode"] == "off" and i["units"] == [] and i["groups_present"] is False
    assert i["cmdline_hints"] == ["iommu=pt"]
    assert facts["iommu_devices"].value == {d.bdf: "off" for d in DEVS}


def test_iommu_passthrough_per_device(tmp_path):
    facts, _ = facts_of(tmp_path, base_host(**_groups({"3": "identity", "4": "identity"})), DEVS)
    i = facts["iommu"].value
    assert i["mode"] == "passthrough" and i["units"] == ["dmar0"] and i["unit_kind"] == "intel-vt-d"
    assert facts["iommu_devices"].value == {"0000:17:00.0": "passthrough", "0000:18:00.0": "passthrough",
                                            "0000:19:00.0": "no-group"}


def test_iommu_translated_and_mixed(tmp_path):
    facts, _ = facts_of(tmp_path, base_host(**_groups({"3": "DMA-FQ", "4": "DMA"})), DEVS)
    assert facts["iommu"].value["mode"] == "translated"
    assert facts["iommu"].value["group_types"] == {"DMA": 1, "DMA-FQ": 1}
    facts, _ = facts_of(tmp_path / "b", base_host(**_groups({"3": "identity", "4": "DMA", "9": "unmanaged"})),
                        DEVS)
    assert facts["iommu"].value["mode"] == "mixed"
    assert facts["iommu_devices"].value["0000:18:00.0"] == "translated"


def test_iommu_group_membership_from_group_dirs(tmp_path):
    files = base_host(**_groups({"7": "unmanaged"}))
    files["sys/kernel/iommu_groups/7/devices/0000:19:00.0"] = ""
    facts, _ = facts_of(tmp_path, files, DEVS)
    assert facts["iommu_devices"].value["0000:19:00.0"] == "unmanaged"
    assert facts["iommu"].value["mode"] == "unmanaged"


def test_iommu_old_kernel_infers_from_cmdline(tmp_path):
    facts, _ = facts_of(tmp_path, base_host(**_groups({"3": None, "4": None})), DEVS)
    i = facts["iommu"].value
    assert i["mode"] == "passthrough" and i["inferred"] is True
    facts, _ = facts_of(tmp_path / "b", base_host(**{"proc/cmdline": "ro intel_iommu=on\n"},
                                                  **_groups({"3": None})), DEVS)
    assert facts["iommu"].value["mode"] == "translated"


def test_iommu_unknown_when_tree_lacks_it(tmp_path):
    files = base_host()
    del files["sys/class/iommu/"]
    facts, _ = facts_of(tmp_path, files, DEVS)
    assert not facts["iommu"].known and not facts["iommu_devices"].known


# ---------------------------------------------------------------------------
# NVMe multipath


def test_nvme_multipath(tmp_path):
    facts, _ = facts_of(tmp_path, base_host())
    assert facts["nvme_multipath"].value is False
    facts, _ = facts_of(tmp_path / "y", base_host(**{"sys/module/nvme_core/parameters/multipath": "Y\n"}))
    assert facts["nvme_multipath"].value is True


def test_nvme_multipath_not_loaded(tmp_path):
    files = base_host()
    del files["sys/module/nvme_core/parameters/multipath"]
    facts, _ = facts_of(tmp_path, files)
    assert not facts["nvme_multipath"].known and "not loaded" in facts["nvme_multipath"].reason


# ---------------------------------------------------------------------------
# NCCL settings


def test_nccl_conf_parsing():
    text = "# comment\nNCCL_P2P_LEVEL=PHB\nNCCL_P2P_LEVEL=SYS\nNCCL_NET_GDR_LEVEL = PXB\nnoequals\n"
    assert parse_nccl_conf(text) == {"NCCL_P2P_LEVEL": "PHB", "NCCL_NET_GDR_LEVEL ": " PXB"}


def test_nccl_env_from_tree_conf_and_captured_env(tmp_path):
    files = base_host(**{"etc/nccl.conf": "#NCCL_P2P_DISABLE=1\nNCCL_TOPO_FILE=/old/topo.xml\n"
                                          "NCCL_NET_GDR_LEVEL=SYS\nNCCL_DEBUG=INFO\n",
                         "gdrcheck/env.json": json.dumps({"NCCL_NET_GDR_LEVEL": "PHB", "PATH": "/bin"})})
    facts, _ = facts_of(tmp_path, files)
    env = facts["nccl_env"].value
    assert env["NCCL_TOPO_FILE"] == {"value": "/old/topo.xml", "source": "/etc/nccl.conf"}
    assert env["NCCL_NET_GDR_LEVEL"]["value"] == "PHB"
    assert env["NCCL_NET_GDR_LEVEL"]["source"].startswith("captured environment")
    assert env["NCCL_NET_GDR_LEVEL"]["shadowed"] == [{"value": "SYS", "source": "/etc/nccl.conf"}]
    assert "NCCL_P2P_DISABLE" not in env and "NCCL_DEBUG" not in env


def test_nccl_env_tree_ignores_this_process_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    facts, _ = facts_of(tmp_path, base_host())
    assert facts["nccl_env"].value == {}


def test_nccl_env_live_environment_wins(tmp_path, monkeypatch):
    make_tree(tmp_path, base_host(**{"etc/nccl.conf": "NCCL_P2P_LEVEL=SYS\nNCCL_DMABUF_ENABLE=0\n",
                                     "home/u/.nccl.conf": "NCCL_DMABUF_ENABLE=1\n"}))
    monkeypatch.setenv("NCCL_P2P_LEVEL", "PIX")
    monkeypatch.delenv("NCCL_CONF_FILE", raising=False)
    monkeypatch.setenv("HOME", "/home/u")
    facts, _ = collect_host(Source(str(tmp_path), live=True), [])
    env = facts["nccl_env"].value
    assert env["NCCL_P2P_LEVEL"]["value"] == "PIX" and env["NCCL_P2P_LEVEL"]["source"] == "environment"
    assert env["NCCL_P2P_LEVEL"]["shadowed"] == [{"value": "SYS", "source": "/etc/nccl.conf"}]
    assert env["NCCL_DMABUF_ENABLE"] == {"value": "1", "source": "/home/u/.nccl.conf",
                                         "shadowed": [{"value": "0", "source": "/etc/nccl.conf"}]}


def test_nccl_env_replay_reads_the_captured_home_like_the_live_run(tmp_path, monkeypatch):
    """Seen on a two-GPU H100 node: /root/.nccl.conf set NCCL_NVLS_ENABLE, and the snapshot's replay listed
    only /etc/nccl.conf as read, because the snapshot did not say where $HOME was."""
    from gdrcheck.collectors.capture import captured_env

    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.setenv("NCCL_P2P_LEVEL", "PIX")
    env = captured_env()
    assert env["HOME"] == "/home/u" and env["NCCL_P2P_LEVEL"] == "PIX" and "GDRCHECK_PW_DIR" in env
    assert not [k for k in env if k not in ("HOME", "GDRCHECK_PW_DIR") and not k.startswith("NCCL_")]
    tree = base_host(**{"etc/nccl.conf": "NCCL_DMABUF_ENABLE=0\n", "home/u/.nccl.conf": "NCCL_DMABUF_ENABLE=1\n",
                        "gdrcheck/env.json": json.dumps({"HOME": "/home/u", "GDRCHECK_PW_DIR": "/home/u"})})
    facts, _ = facts_of(tmp_path, tree)
    assert facts["nccl_env"].value["NCCL_DMABUF_ENABLE"] == {
        "value": "1", "source": "/home/u/.nccl.conf", "shadowed": [{"value": "0", "source": "/etc/nccl.conf"}]}


# ---------------------------------------------------------------------------
# a recording source keeps what the facts need, so a snapshot replays them


def test_recorded_reads_replay_to_the_same_facts(tmp_path):
    files = base_host(**_groups({"3": "identity", "4": "DMA"}))
    files.update({"sys/kernel/mm/memory_peers/nv_mem/version": "1.3\n",
                  "sys/module/nvme_core/parameters/io_timeout": "30\n",
                  "etc/nccl.conf": "NCCL_P2P_LEVEL=SYS\n"})
    make_tree(tmp_path / "live", files)
    rec = Source(str(tmp_path / "live"), live=False, record=True)
    first, _ = collect_host(rec, DEVS)
    again, _ = collect_host(replay_tree(rec, tmp_path / "replay"), DEVS)
    for key in HOST_FACT_KEYS:
        assert again[key].value == first[key].value, key
    assert again["iommu"].value["units"] == ["dmar0"]
    assert "nvme_core" in again["modules_loaded"].value


def test_a_replay_looks_for_nccl_in_the_site_directories_the_live_run_used(tmp_path, monkeypatch):
    """The interpreter's own site directories (a venv's, /opt/...) are not among the standard bases: a snapshot
    records which ones the live run looked in, so its replay finds the same NCCL versions (an H100 VM's
    PyTorch in /opt/torch/.venv showed 2.28.9 live and 2.28.3 replayed before)."""
    import sys

    from gdrcheck.collectors.host_nccl import SITE_DIRS_FILE, nccl_versions_fact
    from gdrcheck.collectors.host_util import HostCtx

    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    (site / "torch-2.11.0.dist-info").mkdir(parents=True)
    (site / "torch-2.11.0.dist-info" / "METADATA").write_text("Requires-Dist: nvidia-nccl-cu13==2.28.9\n")
    monkeypatch.setattr(sys, "path", [str(site)])
    live = Source("/", record=True)
    found = nccl_versions_fact(HostCtx(live, ())).value["found"]
    assert ("2.28.9", "PyTorch 2.11.0 requirement") in {(e["version"], e["kind"]) for e in found}
    # the replay: the recorded site list, and the listing and METADATA the capture keeps
    replay_root = tmp_path / "replay"
    (replay_root / "gdrcheck").mkdir(parents=True)
    (replay_root / SITE_DIRS_FILE.lstrip("/")).write_bytes(live.recorded[SITE_DIRS_FILE][1])
    copied = replay_root / str(site).lstrip("/") / "torch-2.11.0.dist-info"
    copied.mkdir(parents=True)
    (copied / "METADATA").write_text("Requires-Dist: nvidia-nccl-cu13==2.28.9\n")
    again = nccl_versions_fact(HostCtx(Source(str(replay_root), live=False), ())).value["found"]
    torch = [(e["version"], e["kind"]) for e in found if str(e["kind"]).startswith("PyTorch")]
    assert [(e["version"], e["kind"]) for e in again if str(e["kind"]).startswith("PyTorch")] == torch
