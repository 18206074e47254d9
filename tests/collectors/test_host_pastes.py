"""The files admins send first, each its own input kind (issue 40): read alone, beside the tree, and used.

Real data: the two stelline machines of ../shared/realworld carry plain nvidia-smi, numactl --hardware,
gdscheck -p, gdsio, ibv_devinfo and /etc/default/grub beside their lspci -tv and topo -m; azure-ncv4 carries
NCCL_GRAPH_DUMP_FILE's XML. No machine of ours gave lscpu, /proc/cpuinfo, a BAR1 grep or nccl-tests' rank
lines: those cases are hand-written in the tools' public formats and named so.
"""

from __future__ import annotations

import json

import pytest
from support.cli_util import call

from gdrcheck.collectors.input_kinds import sniff
from gdrcheck.status import exit_status

ASUS = "stelline-asus-esc8000a-e12-4xrtx6000ada"
PUGET = "stelline-puget-wrx90-2xrtx6000ada"
REAL_KINDS = (
    (ASUS, "nvidia-smi.txt", "nvidia-smi"), (PUGET, "nvidia-smi.txt", "nvidia-smi"),
    (ASUS, "numactl-hardware.txt", "numactl"), (PUGET, "numactl-hardware.txt", "numactl"),
    (ASUS, "gdscheck-p.txt", "gdscheck"), (PUGET, "gdscheck-p.txt", "gdscheck"),
    (ASUS, "gdsio.txt", "gdsio"), (PUGET, "gdsio.txt", "gdsio"),
    (ASUS, "ibv_devinfo.txt", "ibv_devinfo"), (PUGET, "ibv_devinfo.txt", "ibv_devinfo"),
    (ASUS, "etc-default-grub.txt", "grub"), (PUGET, "etc-default-grub.txt", "grub"),
    ("azure-ncv4", "nccl-graph.xml", "nccl-graph"),
)


def _doc(*paths):
    args = [a for p in paths for a in ("--from", p)]
    p = call("pairs", "--json", *args)
    assert "Traceback" not in p.stderr, p.stderr
    doc = json.loads(p.stdout)
    assert p.returncode == exit_status(doc["status"]), (p.returncode, doc["status"], p.stderr)
    return doc


@pytest.mark.parametrize("machine,name,kind", REAL_KINDS)
def test_each_real_file_is_its_kind_and_read_alone(realworld, machine, name, kind):
    f = realworld / machine / name
    assert sniff(f.read_text()) == kind
    _doc(f)


def test_every_real_file_is_read_alone_or_refused_as_a_part(realworld):
    """The goal of issue 40: of every file in ../shared/realworld, only ACSCtl lines without their tree are
    refused, and they say they are a part needing its whole."""
    refused = {}
    for f in sorted(realworld.rglob("*")):
        if f.is_file() and f.suffix != ".md":
            p = call("pairs", "--from", f)
            if p.returncode == 2:
                refused[f.relative_to(realworld).as_posix()] = p.stderr
    assert sorted(refused) == [f"{ASUS}/lspci-vvv-grep-ACSCtl.txt", f"{PUGET}/lspci-vvv-grep-ACSCtl.txt"]
    assert all("beside the tree" in e for e in refused.values())


def test_stelline_support_files_settle_what_the_tree_leaves_open(realworld):
    """puget's lspci -tv with gdscheck -p, grub, numactl, ibv_devinfo and nvidia-smi beside it: the IOMMU is
    settled (gdscheck: disabled, GDR043 gone), NUMA is one node, the GPUs carry nvidia-smi's indexes and every
    GPU-NIC pair's GDR is off because no port of the NICs is ACTIVE (ibv_devinfo: PORT_DOWN)."""
    d = realworld / PUGET
    alone = _doc(d / "lspci-tv.txt")
    assert "GDR043" in {f["code"] for f in alone["findings"]}
    files = (d / "lspci-tv.txt", d / "nvidia-smi.txt", d / "gdscheck-p.txt", d / "etc-default-grub.txt",
             d / "numactl-hardware.txt", d / "ibv_devinfo.txt", d / "gdsio.txt")
    doc = _doc(*files)
    codes = {f["code"] for f in doc["findings"]}
    assert "GDR043" not in codes and "iommu" not in doc["not_in_input"]
    p = call("pairs", "--json", "--env", "NCCL_NET_GDR_LEVEL=SYS", *[a for f in files for a in ("--from", f)])
    gn = [x for x in json.loads(p.stdout)["pairs"] if x["kind"] == "gpu-nic"]
    assert gn and all(x["nccl"]["gdr"] == "disabled" and "is ACTIVE" in x["nccl"]["reason"] for x in gn)
    assert any("mlx5_0=0000:21:00.0" in n for n in doc["notes"])
    gpus = {x["bdf"]: x for x in doc["devices"] if x.get("kind") == "gpu"}
    assert sorted(gpus) == ["0000:c1:00.0", "0000:c2:00.0"]
    said = " ".join(doc["notes"])
    assert "1 NUMA node(s): 0" in said and "nvidia_fs 2.24" in said and "XferType GPUD ran" in said


def test_gdscheck_is_kept_over_the_configured_grub_line(realworld):
    """asus: gdscheck -p (IOMMU: disabled, as the running node sees it) is read before /etc/default/grub (what the
    next boot asks for); they agree here, so no note says they differ."""
    d = realworld / ASUS
    doc = _doc(d / "lspci-tv.txt", d / "etc-default-grub.txt", d / "gdscheck-p.txt")
    assert not any("differs" in n for n in doc["notes"])
    assert "GDR043" not in {f["code"] for f in doc["findings"]}


LSCPU_EPYC = """Architecture:             x86_64
  CPU op-mode(s):         32-bit, 64-bit
CPU(s):                   192
Vendor ID:                AuthenticAMD
  Model name:             AMD EPYC 9654 96-Core Processor
    CPU family:           25
"""
CPUINFO_SPR = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
               "model name\t: Intel(R) Xeon(R) Platinum 8480+\n")


@pytest.mark.parametrize("case,text,level", [
    ("lscpu-epyc-two-gpus-p2p-level-sys", LSCPU_EPYC, "P2P level SYS"),
    ("proc-cpuinfo-sapphire-rapids-p2p-level-pxb", CPUINFO_SPR, "P2P level PXB"),
])
def test_the_cpu_vendor_forks_nccls_p2p_level(tmp_path, case, text, level):
    """Hand-written in lscpu's and /proc/cpuinfo's formats: beside a two-GPU matrix (h200-x2-vm), the CPU vendor
    settles NCCL's P2P level (v2.30.7 src/graph/paths.cc: SYS on AMD with at most two GPUs, else PXB)."""
    from support.cli_util import ROOT

    f = tmp_path / f"{case}.txt"
    f.write_text(text)
    p = call("pairs", "--from", ROOT / "fixtures" / "h200-x2-vm" / "nvidia-smi-topo.txt", "--from", f)
    assert p.returncode == 0, p.stderr  # the H200 guest's capture settles every verdict
    assert level in p.stdout and "the CPU vendor is not shown" not in p.stdout


def test_bar1_grep_fragment_gives_bar1_per_index(tmp_path):
    """Hand-written in nvidia-smi -q's format ('nvidia-smi -q | grep -A3 -i bar' of two 128 GiB BAR1 GPUs): beside
    plain nvidia-smi of two GPUs (puget), the BAR1 sizes land on the GPUs by index."""
    pad = " " * 29
    block = (f"    BAR1 Memory Usage\n        Total{pad}: 131072 MiB\n        Used{pad} : 1 MiB\n"
             f"        Free{pad} : 131071 MiB\n")
    f = tmp_path / "bar.txt"
    f.write_text(block + "--\n" + block)
    assert sniff(f.read_text()) == "bar1-grep"
    from support.cli_util import ROOT

    smi = ROOT.parent / "shared" / "realworld" / PUGET / "nvidia-smi.txt"
    if not smi.exists():
        pytest.skip("../shared/realworld is not present")
    p = call("bar1", "--json", "--from", smi, "--from", f)
    assert p.returncode == exit_status(json.loads(p.stdout)["status"]), p.stderr
    assert "137438953472" in p.stdout or "128 GiB" in p.stdout or "131072" in p.stdout


def test_nccl_tests_rank_lines_name_each_cuda_devices_bus_id(tmp_path):
    """Hand-written in nccl-tests' format (src/common.cu prints '[0x%02x]', newer '[%04x:%02x:%02x]'): the GPUs are
    placed at their bus ids with their names, and the note says the number is CUDA's."""
    f = tmp_path / "all_reduce_perf.txt"
    f.write_text("# Using devices\n"
                 "#  Rank  0 Group  0 Pid  40263 on     node01 device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
                 "#  Rank  1 Group  0 Pid  40264 on     node01 device  1 [0000:43:00] NVIDIA H100 80GB HBM3\n")
    assert sniff(f.read_text()) == "nccl-tests"
    doc = _doc(f)
    gpus = sorted(x["bdf"] for x in doc["devices"] if x.get("kind") == "gpu")
    assert gpus == ["0000:1b:00.0", "0000:43:00.0"]
    assert any("CUDA device 0=0000:1b:00.0" in n and "domain 0000 and device 00 assumed" in n for n in doc["notes"])


def test_an_nccl_xml_cut_short_is_read_up_to_where_it_ends(realworld, tmp_path):
    """azure-ndv5's nccl-topo.xml cut after 2,500 bytes, mid-attribute (as a post's excerpt ends): read up to its
    last complete tag, the open elements closed, and a note says where it ends; a tag that does not match is
    still damaged XML."""
    text = (realworld / "azure-ndv5" / "nccl-topo.xml").read_text()
    cut = tmp_path / "cut.xml"
    cut.write_text(text[:2500])
    p = call("topology", "--json", "--from", cut)
    assert p.returncode == 0, p.stderr  # topology always passes
    doc = json.loads(p.stdout)
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    assert 0 < len(gpus) < 8
    assert any("cut short: it ends at line 27" in n for n in doc["notes"])
    bad = tmp_path / "bad.xml"
    bad.write_text(text[:2500].rsplit("<pci", 1)[0] + "</cpu></pci>")
    assert call("topology", "--from", bad).returncode == 2


def test_nccl_xml_link_and_pci_id_are_shown(realworld):
    """ibm-cloud-gx3d's real dump: link_speed/link_width are printed (as the maximum NCCL read, not '? x?'), and
    a GPU the XML names only by its PCI id [10de:2330] is shown as the H100 SXM5 its id names."""
    p = call("topology", "--from", realworld / "ibm-cloud-gx3d-h100x8-vsi" / "nccl-topo.xml")
    assert "? x?" not in p.stdout and "max 32GT/s" in p.stdout
    assert "[10de:2330] H100 SXM5" in p.stdout
    doc = json.loads(call("topology", "--json", "--from", realworld / "ibm-cloud-gx3d-h100x8-vsi" / "nccl-topo.xml")
                     .stdout)
    assert {d.get("model") for d in doc["devices"] if d["kind"] == "gpu"} == {"H100 SXM5 80GB"}


def test_a_gpu_on_a_root_port_gets_a_fix_that_fits(realworld):
    """puget (lspci -tv and topo -m): each RTX 6000 Ada sits on a root port. With NCCL_NET_GDR_LEVEL=SYS (GDR001
    no longer speaks), the GPU without a NIC under its switch is GDR017 (no switch: nothing to reseat), not
    GDR005's 'check that every NIC is seated'."""
    d = realworld / PUGET
    p = call("pairs", "--json", "--env", "NCCL_NET_GDR_LEVEL=SYS", "--from", d / "lspci-tv.txt", "--from",
            d / "nvidia-smi-topo-m.txt")
    doc = json.loads(p.stdout)
    codes = {f["code"] for f in doc["findings"]}
    assert "GDR017" in codes and "GDR005" not in codes
    assert "seated" not in doc["rules"]["GDR017"]["fix"]


def test_gdscheck_settles_the_iommu_and_gds_beside_the_tree(realworld):
    """puget's lspci -tv alone leaves the IOMMU (GDR043) and GDS (GDR063) open; gdscheck -p beside it settles both
    (IOMMU: disabled; nvidia_fs 2.24), and says nothing of BAR1 use (still not in this input)."""
    d = realworld / PUGET
    alone = {f["code"] for f in _doc(d / "lspci-tv.txt")["findings"]}
    doc = _doc(d / "lspci-tv.txt", d / "gdscheck-p.txt")
    both = {f["code"] for f in doc["findings"]}
    assert {"GDR043", "GDR063"} <= alone and not {"GDR043", "GDR063"} & both
    assert "bar1" in doc["not_in_input"] and "iommu" not in doc["not_in_input"]


def test_gdscheck_peerdirect_is_said_where_peer_memory_stays_open(realworld):
    """asus: gdscheck -p prints `--Mellanox PeerDirect : Enabled`. That is nvidia-fs built on MLNX_OFED's
    peer-memory API, not nvidia-peermem loaded (what NCCL tests), so GDR021 stays open and says what the paste
    showed and what it does not."""
    d = realworld / ASUS
    doc = _doc(d / "lspci-tv.txt", d / "nvidia-smi.txt", d / "gdscheck-p.txt")
    why = [f["message"] for f in doc["findings"] if f["code"] == "GDR021"]
    assert why and all("Mellanox PeerDirect Enabled" in w and "not whether nvidia-peermem" in w for w in why)
    alone = _doc(d / "lspci-tv.txt", d / "nvidia-smi.txt")
    assert not any("PeerDirect" in f["message"] for f in alone["findings"])


def test_gdscheck_bar1_is_given_to_the_driver_gpus_when_all_sizes_agree(realworld):
    """asus: gdscheck -p lists BAR1 by CUDA index (65536 MiB on each of 4 GPUs); beside plain nvidia-smi (4 GPUs
    by bus id) every GPU gets it, since one size for all makes CUDA's order irrelevant; GDR106 (BAR1 unread) is
    gone. Beside the tree alone the sizes stay a note."""
    d = realworld / ASUS
    both = _doc(d / "lspci-tv.txt", d / "nvidia-smi.txt", d / "gdscheck-p.txt")
    assert any("BAR1 65536 MiB on each of its 4 GPU(s)" in n for n in both["notes"])
    assert "GDR106" not in {f["code"] for f in both["findings"]}
    paths = [a for f in ("lspci-tv.txt", "nvidia-smi.txt", "gdscheck-p.txt") for a in ("--from", d / f)]
    bar1 = json.loads(call("bar1", "--json", *paths).stdout)
    assert {g["source"] for g in bar1["gpus"]} == {"gdscheck -p"}
    tree = _doc(d / "lspci-tv.txt", d / "gdscheck-p.txt")
    assert any("not matched to the driver's GPUs" in n for n in tree["notes"])


def test_gdsio_is_cited_in_the_gds_capability(realworld):
    """puget: gdsio ran XferType GPUD on CUDA devices 0 and 1 (25.0-25.1 GiB/s) and gdscheck -p shows cuFile's
    use_compat_mode false; the gds capability's why cites both with their files, and its answer is the rules'."""
    d = realworld / PUGET
    doc = _doc(d / "lspci-tv.txt", d / "nvidia-smi.txt", d / "gdscheck-p.txt", d / "gdsio.txt")
    why = doc["capabilities"]["gds"]["why"]
    assert "gdsio ran XferType GPUD 2 time(s) on CUDA device(s) 0, 1, 25.0-25.1 GiB/s (gdsio.txt" in why
    assert "use_compat_mode false (gdscheck-p.txt" in why
    without = _doc(d / "lspci-tv.txt", d / "nvidia-smi.txt", d / "gdscheck-p.txt")["capabilities"]["gds"]
    assert "measured" not in without["why"] and without["answer"] == doc["capabilities"]["gds"]["answer"]


def test_a_port_down_is_the_gdr_capabilitys_why(realworld):
    """puget: ibv_devinfo shows mlx5_0 and mlx5_1 port 1 PORT_DOWN. At NCCL's default level every path is also
    beyond NCCL_NET_GDR_LEVEL, but a NIC NCCL does not list comes first: the gdr capability's why names the
    ports and NCCL's line; without ibv_devinfo it stays the level."""
    d = realworld / PUGET
    base = (d / "lspci-tv.txt", d / "nvidia-smi.txt", d / "numactl-hardware.txt")
    gdr = _doc(*base, d / "ibv_devinfo.txt")["capabilities"]["gdr"]
    assert gdr["answer"] == "no"
    assert "no RDMA port is ACTIVE (mlx5_0 port 1 (DOWN), mlx5_1 port 1 (DOWN))" in gdr["why"]
    assert "net_ib/init.cc:363" in gdr["why"]
    assert "beyond NCCL_NET_GDR_LEVEL" in _doc(*base)["capabilities"]["gdr"]["why"]


def test_ibv_devinfo_link_layer_ethernet_is_said_as_roce(realworld):
    """asus: every mlx5 port's link layer is Ethernet: the note says RoCE, not InfiniBand, and what NCCL needs to
    reach a RoCE port (a GID: NCCL_IB_GID_INDEX or the RoCE v2 GID of the netdev's IP address)."""
    d = realworld / ASUS
    notes = _doc(d / "lspci-tv.txt", d / "ibv_devinfo.txt")["notes"]
    roce = [n for n in notes if "link layer Ethernet, so RoCE, not InfiniBand" in n]
    assert len(roce) == 1 and "mlx5_0 port 1" in roce[0] and "NCCL_IB_GID_INDEX" in roce[0]
    assert "net_ib/connect.cc:317-333" in roce[0]


VM_BUS_00_RANKS = "".join(
    f"#  Rank  {i} Group  0 Pid   {999 + i} on         vm device  {i} [0x00] NVIDIA H200\n" for i in range(4))


def test_nccl_tests_bus_only_lines_on_one_bus_name_the_matrix_gpus(tmp_path):
    """Hand-written in nccl-tests' older format ('[0x%02x]', the bus number only) for the 4-GPU VM of
    fixtures/nccl-runs-4gpu-vm, whose GPUs all sit on bus 00 (0000:00:06.0-09.0): the bus number tells none apart,
    so no GPU is placed by it (it was one GPU at 0000:00:00.0, and the matrix then matched none). Beside that VM's
    topo -m and NCCL log (which give the bus ids), the one model name is every GPU's."""
    from support.cli_util import ROOT

    f = tmp_path / "all_reduce_perf.txt"
    f.write_text("# Using devices\n" + VM_BUS_00_RANKS)
    vm = ROOT / "fixtures" / "nccl-runs-4gpu-vm"
    doc = _doc(vm / "smi" / "topo-m.txt", vm / "default" / "nccl.log", f)
    gpus = {x["bdf"]: x["name"] for x in doc["devices"] if x.get("kind") == "gpu"}
    assert gpus == {f"0000:00:0{i}.0": "NVIDIA H200" for i in range(6, 10)}
    assert any("not placed by it" in n for n in doc["notes"])
    alone = _doc(f)
    assert len([x for x in alone["devices"] if x.get("kind") == "gpu"]) == 4
    assert "GDR010" not in {x["code"] for x in alone["findings"]}


@pytest.mark.parametrize("fname", ["gdscheck-p.txt", "numactl-hardware.txt", "ibv_devinfo.txt"])
def test_a_host_paste_alone_is_not_a_node_without_gpus(realworld, fname):
    """puget's host-wide pastes alone (and azure-ncv4's NCCL graph dump) cannot show GPUs: `check` was FAIL with
    GDR010 "no GPU in this input"; it is unknown (exit 3) with GPUs not in this input (GDR160)."""
    for f in (realworld / PUGET / fname, realworld / "azure-ncv4" / "nccl-graph.xml"):
        p = call("check", "--from", f)
        assert p.returncode == 3, p.stdout
        assert "GDR010" not in p.stdout and "GPUs: not in this input" in p.stdout


def test_nccl_graph_names_each_graphs_algorithm(realworld):
    """azure-ncv4's NCCL_GRAPH_DUMP_FILE: graph ids 0, 1, 2 are ring, tree and CollNet chain (NCCL v2.30.7
    src/init.cc:1174-1190), whose patterns are ring, balanced tree and tree (src/include/graph.h:160-169)."""
    doc = _doc(realworld / "azure-ncv4" / "nccl-topo.xml", realworld / "azure-ncv4" / "nccl-graph.xml")
    said = next(n for n in doc["notes"] if "the channels NCCL built" in n)
    assert "ring: 2 channel(s)" in said and "tree (pattern balanced tree): 4 channel(s)" in said
    assert "CollNet chain (pattern tree)" in said
