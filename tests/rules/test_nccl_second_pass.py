"""NCCL read again: differences where gdrcheck said a definite enabled/disabled that NCCL contradicts.

Each scenario names NCCL's file:line@tag in its name or docstring (docs/nccl.md lists them).
"""

from __future__ import annotations

import pytest
from support import nccl_nodes as N

G0, G1, G2, G3 = "0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0"
NIC0, NIC1 = "0000:05:00.0", "0000:85:00.0"


def two_gpus_one_nic(tmp_path, name, **kw):
    """G0 on socket 0's root port; G2, G3 and the only NIC under socket 1's switch; NVLink G0-G3, G2-G3 (NVB
    between G0 and G2), as on a DGX-1V's cube mesh."""
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "root"), ("gpu", G2, 1, "switch"),
                                             ("nic", NIC1, 1, "switch"), ("gpu", G3, 1, "switch")],
                   nvlinks=[(G0, G3, 2), (G2, G3, 2)], **kw)


def test_pxn_relays_only_through_the_nics_local_gpu(tmp_path):
    """topo.cc:2110-2134@v2.30.7 (ncclTopoGetLocalGpu), paths.cc:812-843@v2.30.7: NIC1's local GPUs are G2
    and G3 (both PIX); the first whose local NIC on the lowest channel is NIC1 is G2, NCCL's one relay. G0 has
    NVLink to G3 only (its path to G2 is NVB, not <= PATH_NVL), so NCCL does not relay: no GDR."""
    top, pairs = N.decide(two_gpus_one_nic(tmp_path, "pxn-local-gpu"), "2.30.7")
    v = pairs[(G0, NIC1)]
    assert v["gdr"] == "disabled" and "via" not in v, v
    assert pairs[(G2, NIC1)]["gdr"] == "enabled"


def test_pxn_local_gpu_before_2_19_is_any_gpu(tmp_path):
    """topo.cc:719-733@v2.18.6: ncclTopoGetLocalGpu walks every GPU; G0's only NIC is NIC1, so G0 (the first
    GPU) is the NIC's 'local' GPU and relays for nobody: no PXN for G0 itself."""
    root = N.build(tmp_path / "pxn-2.18", devices=[("gpu", G0, 0, "root"), ("gpu", G2, 1, "switch"),
                                                    ("nic", NIC1, 1, "switch")], nvswitch=True)
    _, pairs = N.decide(root, "2.18.6")
    assert pairs[(G0, NIC1)]["gdr"] == "disabled", pairs[(G0, NIC1)]
    _, pairs = N.decide(root, "2.19.3")
    assert pairs[(G0, NIC1)]["gdr"] == "enabled" and pairs[(G0, NIC1)]["via"] == G2


def pxn_node(tmp_path, name, **kw):
    """Two GPUs on two sockets over NVSwitch; the only NIC sits under G2's switch."""
    return N.build(tmp_path / name, devices=[("gpu", G0, 0, "root"), ("gpu", G2, 1, "switch"),
                                             ("nic", NIC1, 1, "switch")], nvswitch=True, **kw)


@pytest.mark.parametrize("case,kw,env,word", [
    ("pxn-p2p-on", {}, {}, "enabled"),
    ("pxn-p2p-disable-paths.cc:762-773@v2.30.7", {}, {"NCCL_P2P_DISABLE": "1"}, "disabled"),
    ("pxn-p2p-level-loc-paths.cc:762-773@v2.30.7", {}, {"NCCL_P2P_LEVEL": "LOC"}, "disabled"),
    ("pxn-nvml-refuses-paths.cc:373-412@v2.30.7", {"p2p_status": 2}, {"NCCL_IGNORE_DISABLED_P2P": "1"},
     "disabled"),
])
def test_p2p_off_takes_pxn(tmp_path, case, kw, env, word):
    """paths.cc:762-773@v2.30.7 reroutes a pair whose ncclTopoCheckP2p is 0 through the CPU before the PXN
    loop, whose relay needs paths[GPU][g].type <= PATH_NVL (paths.cc:832)."""
    _, pairs = N.decide(pxn_node(tmp_path, case.split("-paths")[0], **kw), "2.30.7", env)
    assert pairs[(G0, NIC1)]["gdr"] == word, (case, pairs[(G0, NIC1)])


@pytest.mark.parametrize("case,env,word", [
    ("gdr-read-volta-nvlink", {}, "enabled"),
    ("gdr-read-volta-p2p-disable-paths.cc:497-503@v2.30.7", {"NCCL_P2P_DISABLE": "1"}, "unknown"),
])
def test_p2p_off_takes_the_read_sides_nvlink_peer(tmp_path, case, env, word):
    """paths.cc:497-503@v2.30.7: for sm < 80 the send side needs a peer whose path is PATH_NVL, read after
    paths.cc:762-773 rerouted P2P-disabled pairs through the CPU."""
    root = N.build(tmp_path / case.split("-paths")[0], devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"),
                                                                  ("gpu", G1, 0, "switch")],
                   nvlinks=[(G0, G1, 6)], gpu_name="Tesla V100-SXM2-32GB", cc=(7, 0))
    _, pairs = N.decide(root, "2.30.7", env)
    v = pairs[(G0, NIC0)]
    assert v["gdr"] == "enabled" and v["gdr_read"] == word, (case, v)


def test_nvb_pair_skips_the_network_faster_check(tmp_path):
    """p2p.cc:138-141@v2.30.7: p2pCanConnect returns for a path through an intermediate GPU (NVB) before
    ncclTopoCheckNet, so two 400 Gb/s NICs faster than one NVLink each way do not take the pair off P2P."""
    root = N.build(tmp_path / "nvb-net", devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"),
                                                   ("gpu", G1, 0, "switch"), ("gpu", G2, 1, "switch"),
                                                   ("nic", NIC1, 1, "switch")],
                   nvlinks=[(G0, G1, 1), (G1, G2, 1)], rates={"mlx5_0": "400 Gb/sec (4X NDR)",
                                                              "mlx5_1": "400 Gb/sec (4X NDR)"})
    _, pairs = N.decide(root, "2.30.7")
    v = pairs[(G0, G2)]
    assert v["path_type"] == "NVB" and v["p2p"] == "enabled", v


@pytest.mark.parametrize("case,kw,code,effect,severity", [
    ("gdr016-pcie-pair-nvml-cns-paths.cc:373-410@v2.30.7", {}, "GDR016", "degraded", "warning"),
    ("gdr007-nvlink-pair-nvml-cns", {"nvlinks": [(G0, G1, 4)]}, "GDR007", "fail", "error"),
])
def test_gdr007_on_a_pcie_pair_is_degraded(tmp_path, case, kw, code, effect, severity):
    """paths.cc:373-410@v2.30.7: a refusing NVML status aborts init only on a path <= PATH_NVB; on PCIe NCCL
    sets p2p = 0 and the pair runs over shared memory, which is slower, not broken."""
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.rules.base import Options
    from gdrcheck.rules.engine import evaluate

    root = N.build(tmp_path / case.split("-paths")[0], devices=[("gpu", G0, 0, "switch"), ("gpu", G1, 0, "switch")],
                   p2p_status=2, **kw)
    rep = evaluate(load_facts(str(root)), Options(nccl_version="2.30.7"))
    (f,) = [x for x in rep.findings if x.code in ("GDR007", "GDR016")]
    assert (f.code, f.effect, f.severity) == (code, effect, severity), (case, f)
    from gdrcheck.rules import all_rules  # one severity: the finding's is the one `gdrcheck rules` lists

    assert {r.code: r.severity for r in all_rules()}[code] == severity


@pytest.mark.parametrize("case,version,word,path_type", [
    ("nvb-vs-pix-2.30.7-best-type-paths.cc:96-99@v2.30.7", "2.30.7", "enabled", "NVB"),
    ("nvb-vs-pix-2.30.4-fewest-hops-then-bw-paths.cc:80@v2.30.4", "2.30.4", "disabled", "PIX"),
    ("nvb-vs-pix-2.28.9-fewest-hops-then-bw", "2.28.9", "disabled", "PIX"),
])
def test_path_choice_nvb_against_a_pcie_switch(tmp_path, case, version, word, path_type):
    """G0 and G1 under one PCIe switch (Gen5 x16), each with one NVLink to G3: NCCL 2.30.7 keeps the better
    type (NVB); up to 2.30.4 the first path found stays unless one as short is wider, and the switch path (two
    hops, like NVB's) is wider than one NVLink. NCCL_P2P_LEVEL=NVB shows which path NCCL kept."""
    root = N.build(tmp_path / case.split("-paths")[0], devices=[("gpu", G0, 0, "switch"), ("gpu", G1, 0, "switch"),
                                                                  ("gpu", G3, 1, "switch")],
                   nvlinks=[(G0, G3, 1), (G1, G3, 1)])
    _, pairs = N.decide(root, version, {"NCCL_P2P_LEVEL": "NVB"})
    v = pairs[(G0, G1)]
    assert v["p2p"] == word and v["path_type"] == path_type, (case, v)


@pytest.mark.parametrize("case,hca,word", [
    ("ib-hca-other-port-utils.cc:224-243@v2.30.7", "mlx5_0:2", "disabled"),
    ("ib-hca-this-port", "mlx5_0:1", "enabled"),
    ("ib-hca-exclude-other-port", "^mlx5_0:2", "enabled"),
    ("ib-hca-exclude-this-port", "^=mlx5_0:1", "disabled"),
])
def test_ib_hca_port_suffix_selects_ports(tmp_path, case, hca, word):
    """utils.cc:193-215, 224-243@v2.30.7 and net_ib/init.cc:363-367@v2.30.7: ``name:port`` lists one port; a
    device whose only ACTIVE port (1) is not listed (or is excluded) is not used."""
    root = N.build(tmp_path / case.split("-utils")[0], devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch")],
                   files={"/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n"})
    _, pairs = N.decide(root, "2.30.7", {"NCCL_IB_HCA": hca})
    assert pairs[(G0, NIC0)]["gdr"] == word, (case, pairs[(G0, NIC0)])


@pytest.mark.parametrize("case,version,word", [
    ("mlopart-gate-paths.cc:487@v2.30.7", "2.30.7", "disabled"),
    ("mlopart-no-gate-2.30.4", "2.30.4", "enabled"),
    ("mlopart-no-gate-2.30.3", "2.30.3", "enabled"),
])
def test_rules_per_patch_tag_mlopart(tmp_path, case, version, word):
    """paths.cc:466, 487@v2.30.7: the MLOPart gate; v2.30.3 and v2.30.4 paths.cc have no NET_GDR_MLOPART, so a
    partition keeps GDR there. Rules are per tag, not per minor."""
    from test_nccl_gpu_flags import XML

    path = tmp_path / f"{case.split('-paths')[0]}.xml"
    path.write_text(XML.format(mlopart=' mlopart="0"'))
    _, pairs = N.decide(path, version)
    assert pairs[(G0, NIC0)]["gdr"] == word, (case, pairs[(G0, NIC0)])


@pytest.mark.parametrize("case,version,word", [
    ("nvidia-peermem-file-net_ib.cc:223@v2.9.6", "2.9.6", "disabled"),
    ("nvidia-peermem-file-net_ib.cc:224-226@v2.9.8", "2.9.8", "enabled"),
])
def test_nvidia_peermem_file_read_from_2_9_8(tmp_path, case, version, word):
    """net_ib.cc:223@v2.9.6 tests only /sys/kernel/mm/memory_peers/nv_mem/version; v2.9.8 adds
    .../nvidia-peermem/version (net_ib.cc:224-226)."""
    root = N.build(tmp_path / case.split("-net_ib")[0], devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch")],
                   peermem=False, files={"/sys/kernel/mm/memory_peers/nvidia-peermem/version": "1.0\n"})
    _, pairs = N.decide(root, version)
    assert pairs[(G0, NIC0)]["gdr"] == word, (case, pairs[(G0, NIC0)])


def two_socket_nics(tmp_path, name, cpu, rate, cpuinfo=None):
    """Two GPUs on two sockets, each with a NIC of ``rate`` under its own switch (a SYS GPU pair)."""
    files = {"/proc/cpuinfo": cpuinfo} if cpuinfo else None
    return N.build(tmp_path / name, cpu=cpu, devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"),
                                                      ("gpu", G2, 1, "switch"), ("nic", NIC1, 1, "switch")],
                   rates={"mlx5_0": rate, "mlx5_1": rate}, files=files)


BDW = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 79\nflags\t\t: fpu\n\n"


@pytest.mark.parametrize("case,cpu,cpuinfo,rate,version,word", [
    # Sapphire Rapids (model 143): 22 GB/s from 2.26 (topo.cc:80-85@v2.26.2), 10 before: a 100 Gb/s NIC is slower
    ("cpu-bw-spr-2.30-topo.cc:70-74@v2.30.7", "GenuineIntel", None, "100 Gb/sec (4X EDR)", "2.30.7", "enabled"),
    ("cpu-bw-spr-2.25-topo.cc:62-80@v2.25.1", "GenuineIntel", None, "100 Gb/sec (4X EDR)", "2.25.1", "disabled"),
    ("cpu-bw-broadwell-2.30", "GenuineIntel", BDW, "56 Gb/sec (4X FDR)", "2.30.7", "disabled"),
    # AMD: no inter-CPU figure before 2.19 (v2.18.6 topo.cc:62-80: LOC_BW), 16 GB/s after
    ("cpu-bw-amd-2.18-topo.cc:62-80@v2.18.6", "AuthenticAMD", None, "400 Gb/sec (4X NDR)", "2.18.6", "enabled"),
    ("cpu-bw-amd-2.19", "AuthenticAMD", None, "400 Gb/sec (4X NDR)", "2.19.3", "disabled"),
])
def test_cpu_link_bandwidth_per_model_and_version(tmp_path, case, cpu, cpuinfo, rate, version, word):
    """ncclTopoGetInterCpuBw (topo.cc:62-88 at v2.18.6 and v2.26.2): the CPU link that caps a SYS path in the
    network-faster check (ncclTopoCheckNet) depends on the CPU model and the NCCL version."""
    root = two_socket_nics(tmp_path, case.split("-topo")[0], cpu, rate, cpuinfo)
    _, pairs = N.decide(root, version, {"NCCL_P2P_LEVEL": "SYS"})
    assert pairs[(G0, G2)]["p2p"] == word, (case, pairs[(G0, G2)])


GRACE = {"cpu": "ARM", "port_vendor": 0x10DE, "gpu_name": "NVIDIA GH200 480GB", "cc": (9, 0)}
NIC_CPU = "0000:0c:00.0"  # on a root port of the GPU's own Grace CPU


@pytest.mark.parametrize("case,version,word", [
    ("p2c-not-local-nic-paths.cc:703-720@v2.29.2", "2.29.2", "disabled"),
    ("p2c-not-local-nic-2.30.7", "2.30.7", "disabled"),
    ("p2c-every-nic-paths.cc:699-712@v2.28.9", "2.28.9", "enabled"),
])
def test_p2c_only_for_a_gpus_local_nics(tmp_path, case, version, word):
    """paths.cc:703-720@v2.29.2: P2C is set only for the NICs ncclTopoGetLocal gives the GPU (its best: here the
    NIC under its own switch), so a second NIC on the Grace CPU stays PHB, beyond the P2C level; up to 2.28.9
    every such NIC was P2C."""
    root = N.build(tmp_path / case.split("-paths")[0], devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch"),
                                                                  ("nic", NIC_CPU, 0, "root")], **GRACE)
    _, pairs = N.decide(root, version)
    assert pairs[(G0, NIC0)]["gdr"] == "enabled"
    assert pairs[(G0, NIC_CPU)]["gdr"] == word, (case, pairs[(G0, NIC_CPU)])


@pytest.mark.parametrize("case,version,env,word", [
    ("pxn-c2c-default-0-paths.cc:609@v2.27.3", "2.27.7", {}, "disabled"),
    ("pxn-c2c-1-2.27", "2.27.7", {"NCCL_PXN_C2C": "1"}, "enabled"),
    ("pxn-c2c-default-1-paths.cc:620@v2.28.3", "2.28.9", {}, "enabled"),
])
def test_pxn_c2c_in_2_27(tmp_path, case, version, env, word):
    """NCCL_PXN_C2C exists from 2.27.3 (default 0, paths.cc:609@v2.27.3; 1 from v2.28.3 paths.cc:620): with it
    a GPU relays for a NIC it reaches over C2C (P2C). G0 (socket 0) NVLinked to G2, whose Grace CPU holds NIC1."""
    root = N.build(tmp_path / case.split("-paths")[0], devices=[("gpu", G0, 0, "root"), ("gpu", G2, 1, "root"),
                                                                  ("nic", NIC1, 1, "root")], nvswitch=True, **GRACE)
    _, pairs = N.decide(root, version, env)
    assert pairs[(G0, NIC1)]["gdr"] == word, (case, pairs[(G0, NIC1)])


def test_vgpu_profile_gdr_flag_depends_on_the_attribute(tmp_path):
    """net.cc:424-436@v2.30.7 reads cudaDevAttrGPUDirectRDMASupported; a vGPU profile's answer is the vGPU
    configuration's, which its model name cannot tell: unknown, with the attribute in depends_on."""
    root = N.build(tmp_path / "vgpu", devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch")],
                   gpu_name="GRID A100-40C", cc=(8, 0))
    _, pairs = N.decide(root, "2.30.7")
    v = pairs[(G0, NIC0)]
    assert v["gdr"] == "unknown" and any("cudaDevAttrGPUDirectRDMASupported" in d for d in v["depends_on"]), v


def test_gpu_model_from_the_drivers_proc_information(tmp_path):
    """The driver's /proc/driver/nvidia/gpus/<bdf>/information names the model without CUDA or NVML; a GeForce
    part there has cudaDevAttrGPUDirectRDMASupported 0 (net.cc:424-436@v2.30.7)."""
    root = N.build(tmp_path / "proc-model", devices=[("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch")],
                   gpu_name=None, files={f"/proc/driver/nvidia/gpus/{G0}/information":
                                         "Model: \t\t NVIDIA GeForce RTX 4090\nIRQ:   \t\t 41\n"})
    _, pairs = N.decide(root, "2.30.7")
    v = pairs[(G0, NIC0)]
    assert v["gdr"] == "disabled" and "GeForce" in v["reason"], v
