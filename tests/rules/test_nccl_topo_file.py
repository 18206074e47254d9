"""The PCI tree of NCCL_TOPO_FILE (``gdrcheck.rules.nccl.topo_file``; docs/nccl.md, "NCCL_TOPO_FILE").

NCCL loads the file first and detection fills into it (v2.30.7 ``topo.cc:1774-1808``, ``xml.cc:564-571,
589-880, 1065-1130``): a GPU or NIC the file places keeps the file's place; one it does not place is hung from
the node's sysfs tree onto whatever of the file it meets. Each case is named after what it holds and sits
beside the neighbour NCCL decides the other way.
"""

from __future__ import annotations

import pytest
from support import nccl_nodes as N

G0, G2 = "0000:03:00.0", "0000:83:00.0"
NIC0 = "0000:05:00.0"
TOPO = "/etc/nccl-topo.xml"
GPU = '<pci busid="{bdf}" class="0x030200"><gpu dev="0"/></pci>'
NIC = '<pci busid="0000:05:00.0" class="0x020700"><nic><net name="mlx5_0" dev="0"/></nic></pci>'
SWITCH = '<pci busid="{bdf}" class="0x060400">{inside}</pci>'


def xml(*cpus) -> str:
    """``cpus``: (numaid, inner XML) per <cpu>."""
    body = "".join(f'<cpu numaid="{n}" arch="x86_64" vendor="GenuineIntel">{inner}</cpu>' for n, inner in cpus)
    return f'<system version="1">{body}</system>\n'


def node(tmp_path, name, devices, topo_text, named=True, **kw):
    files = {TOPO: topo_text}
    if named:
        files["/etc/nccl.conf"] = f"NCCL_TOPO_FILE={TOPO}\n"
    return N.build(tmp_path / name, devices=devices, files=files, **kw)


PHB_NODE = [("gpu", G0, 0, "root"), ("nic", NIC0, 0, "root")]  # two root ports of one socket
PIX_NODE = [("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch")]  # one switch (upstream port 0000:01:00.0)
BOTH_UNDER_A_SWITCH = xml((0, SWITCH.format(bdf="0000:aa:00.0", inside=GPU.format(bdf=G0) + NIC)))


@pytest.mark.parametrize("case,devices,text,named,env,word,path_type,from_file", [
    # the file puts the NIC beside the GPU under one switch: PIX, GDR at the default level
    ("topo-file-tree-moves-nic-under-gpu-switch", PHB_NODE, BOTH_UNDER_A_SWITCH, True, {}, "enabled", "PIX", True),
    # the same file, not named by NCCL_TOPO_FILE (nor at nvidia-topologyd's path): the node's PHB
    ("topo-file-not-loaded", PHB_NODE, BOTH_UNDER_A_SWITCH, False, {}, "disabled", "PHB", False),
    # the file places only the NIC, directly on CPU 0; the GPU's switch (0000:01:00.0) is not in it, so the
    # GPU's sysfs walk ends at CPU 0 too: PHB, though the node has both under one switch
    ("topo-file-tree-lacks-device", PIX_NODE, xml((0, NIC)), True, {}, "disabled", "PHB", True),
    # the file holds the node's switch with only the NIC under it: the GPU's walk meets that switch: PIX
    ("topo-file-tree-lacks-device-meets-switch", PIX_NODE, xml((0, SWITCH.format(bdf="0000:01:00.0", inside=NIC))),
     True, {}, "enabled", "PIX", True),
    # the file puts the NIC on CPU 1: SYS, beyond even NCCL_NET_GDR_LEVEL=PHB
    ("topo-file-tree-nic-on-other-cpu", PHB_NODE, xml((0, GPU.format(bdf=G0)), (1, NIC)), True,
     {"NCCL_NET_GDR_LEVEL": "PHB"}, "disabled", "SYS", True),
    ("topo-file-tree-nic-on-same-cpu", PHB_NODE, xml((0, GPU.format(bdf=G0) + NIC)), True,
     {"NCCL_NET_GDR_LEVEL": "PHB"}, "enabled", "PHB", True),
])
def test_topology_file_tree_decides_gpu_nic(tmp_path, case, devices, text, named, env, word, path_type, from_file):
    top, pairs = N.decide(node(tmp_path, case, devices, text, named), "2.30.7", env)
    v = pairs[(G0, NIC0)]
    assert v["gdr"] == word and v["path_type"] == path_type, (case, v)
    assert ("path_tree" in v) == from_file, (case, v)
    if from_file:
        assert TOPO in v["reason"] and "places" in top["topology_files"][TOPO], (case, top["topology_files"])


def test_topology_file_matches_a_nic_by_its_net_name(tmp_path):
    """topo-file-tree-net-name: NCCL finds the NIC by <net name> first (xml.cc:1100), wherever the file's
    <pci busid> for it is: here a busid the node does not have, under the GPU's switch."""
    other = NIC.replace("0000:05:00.0", "0000:ab:00.0")
    text = xml((0, SWITCH.format(bdf="0000:aa:00.0", inside=GPU.format(bdf=G0) + other)))
    _top, pairs = N.decide(node(tmp_path, "topo-file-tree-net-name", PHB_NODE, text), "2.30.7")
    assert pairs[(G0, NIC0)]["gdr"] == "enabled" and pairs[(G0, NIC0)]["path_type"] == "PIX"


TWO_SOCKETS = [("gpu", G0, 0, "root"), ("gpu", G2, 1, "root")]


@pytest.mark.parametrize("case,text,word,path_type", [
    # Intel, NCCL 2.30: P2P up to PXB; the node has the GPUs on two sockets (SYS)
    ("topo-file-tree-gpus-under-one-switch", xml((0, SWITCH.format(bdf="0000:aa:00.0", inside=GPU.format(bdf=G0)
                                                                    + GPU.format(bdf=G2)))), "enabled", "PIX"),
    ("topo-file-tree-gpus-on-two-cpus", xml((0, GPU.format(bdf=G0)), (1, GPU.format(bdf=G2))), "disabled", "SYS"),
])
def test_topology_file_tree_decides_p2p(tmp_path, case, text, word, path_type):
    _top, pairs = N.decide(node(tmp_path, case, TWO_SOCKETS, text), "2.30.7")
    v = pairs[(G0, G2)]
    assert v["p2p"] == word and v["path_type"] == path_type, (case, v)
    assert v["path_tree"] == f"NCCL_TOPO_FILE {TOPO}" and v["within_p2p_level"] == (word == "enabled")


def test_a_file_that_places_nothing_keeps_the_node_tree(tmp_path):
    """topo-file-tree-places-nothing: a file with none of the node's devices changes no pair."""
    text = xml((0, SWITCH.format(bdf="0000:aa:00.0", inside=GPU.format(bdf="0000:ac:00.0"))))
    top, pairs = N.decide(node(tmp_path, "topo-file-tree-places-nothing", PIX_NODE, text), "2.30.7")
    v = pairs[(G0, NIC0)]
    assert v["gdr"] == "enabled" and v["path_type"] == "PIX" and "path_tree" not in v
    assert "places none" in top["topology_files"][TOPO]


BCM = ('<pci busid="{bdf}" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" '
       'subsystem_device="{sub}">{inside}</pci>')


@pytest.mark.parametrize("case,top_sub,word_pix,path_type", [
    # a PEX89xxx in the file: its level-1 switches (0x1000) go into its level-0 one (0x0000): PIX
    ("topo-file-tree-broadcom-flattened", "0x0000", "enabled", "PIX"),
    # the same ids one level lower (two level-1 parts): nothing is fused, PXB
    ("topo-file-tree-broadcom-not-flattened", "0x1000", "disabled", "PXB"),
])
def test_topology_file_tree_flattens_broadcom_switches(tmp_path, case, top_sub, word_pix, path_type):
    """NCCL flattens the merged tree's Broadcom switches with the ids the file's attributes give (topo.cc:521-534,
    195-268); under NCCL_NET_GDR_LEVEL=PIX the GPU and the NIC below two sub switches of one chip keep GDR only
    when NCCL fused them."""
    subs = (BCM.format(bdf="0000:ab:00.0", sub="0x1000", inside=GPU.format(bdf=G0))
            + BCM.format(bdf="0000:ac:00.0", sub="0x1000", inside=NIC))
    text = xml((0, BCM.format(bdf="0000:aa:00.0", sub=top_sub, inside=subs)))
    top, pairs = N.decide(node(tmp_path, case, PHB_NODE, text), "2.30.7", {"NCCL_NET_GDR_LEVEL": "PIX"})
    v = pairs[(G0, NIC0)]
    assert v["path_type"] == path_type and v["gdr"] == word_pix, (case, v)
    assert bool(v.get("broadcom_flattened")) == (path_type == "PIX"), (case, v)
