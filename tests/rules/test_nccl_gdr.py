"""NCCL's GPU-NIC GPUDirect RDMA decision per version (``gdrcheck.rules.nccl.gdr``; docs/nccl.md, "GDR").

Each case is named after what it holds and sits beside the neighbour NCCL decides the other way.
"""

from __future__ import annotations

import pytest
from support import nccl_nodes as N

G0, G2 = "0000:03:00.0", "0000:83:00.0"
NIC0, NIC1 = "0000:05:00.0", "0000:85:00.0"


def close_pair(tmp_path, name, **kw):
    """One GPU and one ConnectX under one switch: PIX."""
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch")], **kw)


def phb_pair(tmp_path, name, **kw):
    """GPU and NIC on two root ports of one socket: PHB."""
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "root"), ("nic", NIC0, 0, "root")], **kw)


def gdr(root, version="2.30.7", env=None):
    top, pairs = N.decide(root, version, env)
    return pairs[(G0, NIC0)], top


@pytest.mark.parametrize("case,kw,version,env,word", [
    ("peermem-sys-module-2.23", {}, "2.23.4", {}, "enabled"),
    ("peermem-sys-module-2.22", {"flavor": "proprietary"}, "2.22.3", {}, "disabled"),
    ("bnxt-dmabuf-no-peermem", {"peermem": False, "nic_driver": "bnxt_en", "modules": ("bnxt_en", "bnxt_re")},
     "2.30.7", {}, "enabled"),
    ("bnxt-dmabuf-proprietary-driver", {"peermem": False, "nic_driver": "bnxt_en", "flavor": "proprietary",
                                        "modules": ("bnxt_en", "bnxt_re")}, "2.30.7", {}, "disabled"),
    ("dmabuf-enable-false", {"peermem": False}, "2.30.7", {"NCCL_DMABUF_ENABLE": "false"}, "disabled"),
    ("dmabuf-enable-1", {"peermem": False}, "2.30.7", {"NCCL_DMABUF_ENABLE": "1"}, "enabled"),
    ("dmabuf-before-2.13.4", {"peermem": False}, "2.12.12", {}, "disabled"),
    ("dmabuf-old-kernel", {"peermem": False, "kernel": "5.4.0-200-generic"}, "2.30.7", {}, "disabled"),
    ("dmabuf-no-rdma-core-34", {"peermem": False, "libibverbs": "libibverbs.so.1.8.28.0"}, "2.30.7", {},
     "disabled"),
    ("geforce-gpu", {"gpu_name": "NVIDIA GeForce RTX 4090", "cc": (8, 9)}, "2.30.7", {}, "disabled"),
])
def test_nic_and_gpu_flags(tmp_path, case, kw, version, env, word):
    v, _ = gdr(close_pair(tmp_path, case, **kw), version, env)
    assert v["gdr"] == word, (case, v)


@pytest.mark.parametrize("case,env,word", [
    ("gdr-level-upper-phb", {"NCCL_NET_GDR_LEVEL": "PHB"}, "enabled"),
    ("gdr-level-lowercase", {"NCCL_NET_GDR_LEVEL": "phb"}, "disabled"),
    ("gdr-level-legacy-3", {"NCCL_NET_GDR_LEVEL": "3"}, "enabled"),
    ("gdr-level-default", {}, "disabled"),
])
def test_gdr_level(tmp_path, case, env, word):
    v, _ = gdr(phb_pair(tmp_path, case), "2.30.7", env)
    assert v["gdr"] == word, (case, v)


GRACE = {"cpu": "ARM", "port_vendor": 0x10DE, "gpu_name": "NVIDIA GH200 480GB", "cc": (9, 0)}


@pytest.mark.parametrize("case,version,env,word", [
    ("grace-c2c-2.24", "2.24.3", {}, "disabled"),
    ("grace-c2c-2.26", "2.26.2", {}, "disabled"),
    ("grace-c2c-2.26-gdr-c2c-1", "2.26.2", {"NCCL_NET_GDR_C2C": "1"}, "enabled"),
    ("grace-c2c-2.27", "2.27.7", {}, "enabled"),
    ("grace-c2c-2.27-gdr-c2c-0", "2.27.7", {"NCCL_NET_GDR_C2C": "0"}, "disabled"),
    ("grace-c2c-2.30", "2.30.7", {}, "enabled"),
    ("grace-c2c-2.30-gdr-c2c-0", "2.30.7", {"NCCL_NET_GDR_C2C": "0"}, "disabled"),
])
def test_grace_c2c(tmp_path, case, version, env, word):
    v, _ = gdr(phb_pair(tmp_path, case, **GRACE), version, env)
    assert v["gdr"] == word, (case, v)
    if word == "enabled":
        assert v.get("mode") != "PCI"  # C2C/P2C: Default mode


def test_grace_pcie_nic_is_pci_mode(tmp_path):
    v, _ = gdr(close_pair(tmp_path, "grace-pcie-nic", **GRACE), "2.30.7")
    assert v["gdr"] == "enabled" and v["mode"] == "PCI"


def pxn_node(tmp_path, name, **kw):
    """Two GPUs on two sockets over NVSwitch; the only NIC sits under GPU2's switch."""
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "root"), ("gpu", G2, 1, "switch"),
                                             ("nic", NIC1, 1, "switch")], **kw)


@pytest.mark.parametrize("case,kw,version,env,word", [
    ("pxn-nvlinked-peer", {"nvswitch": True}, "2.30.7", {}, "enabled"),
    ("pxn-disabled", {"nvswitch": True}, "2.30.7", {"NCCL_PXN_DISABLE": "1"}, "disabled"),
    ("pxn-disable-2-is-not-1", {"nvswitch": True}, "2.30.7", {"NCCL_PXN_DISABLE": "2"}, "enabled"),
    ("pxn-no-nvlink", {}, "2.30.7", {}, "disabled"),
    ("pxn-before-2.12.7", {"nvswitch": True}, "2.11.4", {}, "disabled"),
])
def test_pxn(tmp_path, case, kw, version, env, word):
    top, pairs = N.decide(pxn_node(tmp_path, case, **kw), version, env)
    v = pairs[(G0, NIC1)]
    assert v["gdr"] == word, (case, v)
    if word == "enabled":
        assert v["via"] == G2 and any(G2 in d for d in v["depends_on"])
        assert top["gpu_nics"][G0] == [{"nic": NIC1, "via": G2}]


# the node's own switch as NCCL dumps it (its PCI tree places the GPU and the NIC where the node has them)
TOPO = ('<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel">'
        '<pci busid="0000:01:00.0" class="0x060400"><pci busid="0000:03:00.0" class="0x030200"><gpu dev="0"/></pci>'
        '<pci busid="0000:05:00.0"><nic><net name="mlx5_0" dev="0" gdr="{gdr}"/></nic></pci></pci></cpu></system>\n')


@pytest.mark.parametrize("case,where,gdr_attr,word", [
    ("topo-file-gdr-0", "/etc/nccl-topo.xml", "0", "disabled"),
    ("topo-file-gdr-1", "/etc/nccl-topo.xml", "1", "enabled"),
    ("topologyd-default-gdr-0", "/var/run/nvidia-topologyd/virtualTopology.xml", "0", "disabled"),
])
def test_topology_file_gdr_attribute(tmp_path, case, where, gdr_attr, word):
    files = {where: TOPO.format(gdr=gdr_attr)}
    if where.startswith("/etc"):
        files["/etc/nccl.conf"] = f"NCCL_TOPO_FILE={where}\n"
    v, top = gdr(close_pair(tmp_path, case, files=files))
    assert v["gdr"] == word, (case, v)
    assert where in top["topology_files"]


@pytest.mark.parametrize("case,env,files,word", [
    ("ib-hca-excludes", {"NCCL_IB_HCA": "^mlx5_0"}, {}, "disabled"),
    ("ib-hca-includes", {"NCCL_IB_HCA": "=mlx5_0:1"}, {}, "enabled"),
    ("ib-disable", {"NCCL_IB_DISABLE": "1"}, {}, "disabled"),
    ("net-socket", {"NCCL_NET": "Socket"}, {}, "disabled"),
    ("net-plugin-present", {}, {"/usr/lib/x86_64-linux-gnu/libnccl-net.so": ""}, "unknown"),
    ("net-plugin-present-net-ib", {"NCCL_NET": "IB"}, {"/usr/lib/x86_64-linux-gnu/libnccl-net.so": ""}, "enabled"),
])
def test_which_network(tmp_path, case, env, files, word):
    v, _ = gdr(close_pair(tmp_path, case, files=files), "2.30.7", env)
    assert v["gdr"] == word, (case, v)
    if word == "unknown":
        assert "plugin" in v["reason"] and v["depends_on"]


@pytest.mark.parametrize("case,kw,version,env,word", [
    ("gdr-read-hopper-2.19", {}, "2.19.3", {}, "enabled"),
    ("gdr-read-hopper-2.18", {}, "2.18.6", {}, "enabled"),  # a single GPU: allowed
    ("gdr-read-volta-2.30", {"gpu_name": "Tesla V100-SXM2-32GB", "cc": (7, 0)}, "2.30.7", {}, "enabled"),
    ("gdr-read-off", {}, "2.30.7", {"NCCL_NET_GDR_READ": "0"}, "disabled"),
])
def test_read_side_single_gpu(tmp_path, case, kw, version, env, word):
    v, _ = gdr(close_pair(tmp_path, case, **kw), version, env)
    assert v["gdr"] == "enabled" and v["gdr_read"] == word, (case, v)


def test_read_side_needs_an_nvlink_peer_before_2_19(tmp_path):
    """gdr-read-2.18-no-nvlink: two GPUs without NVLink, NCCL 2.18: the send side depends on the job."""
    root = N.build(tmp_path / "gdr-read-2.18-no-nvlink",
                   devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"), ("gpu", G2, 1, "root")])
    _, pairs = N.decide(root, "2.18.6")
    assert pairs[(G0, NIC0)]["gdr_read"] == "unknown" and pairs[(G0, NIC0)]["gdr_read_depends_on"]
    _, pairs = N.decide(root, "2.19.3")
    assert pairs[(G0, NIC0)]["gdr_read"] == "enabled"


def bcm_linked_pair(tmp_path, name, link=True):
    """GPU and NIC under Broadcom switches on two sockets (SYS), the switches joined by a virtual link."""
    files = {"/sys/kernel/pci_switch_link/virtual_switch_links/0000:01:00.0/0000:81:00.0": ""} if link else {}
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "switch"), ("nic", NIC1, 1, "switch")], files=files)


@pytest.mark.parametrize("case,link,version,word,path_type", [
    ("bcm-virtual-link-2.30", True, "2.30.7", "enabled", "PXB"),
    ("bcm-virtual-link-2.22.3", True, "2.22.3", "enabled", "PXB"),
    ("bcm-virtual-link-2.21", True, "2.21.5", "disabled", "SYS"),
    ("bcm-no-virtual-link-2.30", False, "2.30.7", "disabled", "SYS"),
])
def test_broadcom_virtual_switch_link(tmp_path, case, link, version, word, path_type):
    """getBcmLinks (v2.22.3 xml.cc:410-429; v2.30.7 os/linux.cc:676-704): two PEX switches joined by a virtual
    link keep NCCL's path on PCI switches (PXB) instead of through the CPUs."""
    _top, pairs = N.decide(bcm_linked_pair(tmp_path, case, link), version, None)
    p = pairs[(G0, NIC1)]
    assert p["gdr"] == word and p["path_type"] == path_type, (case, p)


@pytest.mark.parametrize("case,state,word", [
    ("ib-port-down", "1: DOWN", "disabled"),
    ("ib-port-init", "2: INIT", "disabled"),
    ("ib-port-active", "4: ACTIVE", "enabled"),
])
def test_nccl_uses_only_active_ports(tmp_path, case, state, word):
    """NCCL's IB transport skips ports that are not ACTIVE (v2.30.7 net_ib/init.cc:363)."""
    root = close_pair(tmp_path, case, files={"/sys/class/infiniband/mlx5_0/ports/1/state": state + "\n"})
    p, _top = gdr(root)
    assert p["gdr"] == word, (case, p)
    if word == "disabled":
        assert "ACTIVE" in p["reason"]
