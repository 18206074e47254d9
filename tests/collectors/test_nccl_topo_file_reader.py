"""The NCCL topology file as read (``gdrcheck.collectors.nccl_topo_file``): its gdr attributes and PCI tree as
NCCL's XML holds them; damaged XML is refused. What NCCL makes of it: tests/rules/test_nccl_topo_file.py."""

from __future__ import annotations

import pytest

from gdrcheck.collectors.nccl_topo_file import read_topo_file
from gdrcheck.errors import InputError

TEXT = ('<system version="1"><cpu numaid="1">'
        '<pci busid="0000:AA:00.0" class="0x060400" vendor="0x1000" device="0xc030">'
        '<pcilink target="0000:BB:00.0"/>'
        '<pci busid="0000:03:00.0" class="0x030200"><gpu dev="0" gdr="1"/></pci>'
        '<pci busid="0000:05:00.0" class="0x020700"><nic><net name="mlx5_0" gdr="0"/></nic></pci>'
        '</pci><pci busid="0000:03:00.0" class="0x030200"/></cpu></system>\n')


def test_tree_and_gdr_attributes_as_nccl_holds_them():
    f = read_topo_file(TEXT, "/etc/nccl-topo.xml")
    assert f.path == "/etc/nccl-topo.xml" and not f.empty
    assert f.gpu_gdr == {"0000:03:00.0": "1"} and f.net_gdr == {"mlx5_0": "0"}
    # the first <pci> of a busid is the one NCCL's lookup returns; document order kept
    assert list(f.parent) == ["0000:AA:00.0", "0000:03:00.0", "0000:05:00.0"]
    assert f.parent["0000:03:00.0"] == "0000:AA:00.0" and f.parent["0000:AA:00.0"] is None
    assert set(f.cpu.values()) == {"1"}
    assert f.ids["0000:AA:00.0"] == ("0x1000", "0xc030", None, None)
    assert f.holds_nic == frozenset({"0000:05:00.0"}) and f.pci_class["0000:AA:00.0"] == "0x060400"
    assert f.pcilinks == {"0000:AA:00.0": ["0000:bb:00.0"]}
    assert f.net_pci == {"mlx5_0": "0000:05:00.0"} and f.net_cpu == {"mlx5_0": "1"}


def test_an_empty_root_and_damaged_xml():
    assert read_topo_file('<system version="1"/>', "/x.xml").empty
    with pytest.raises(InputError):
        read_topo_file("<system><cpu>", "/x.xml")
