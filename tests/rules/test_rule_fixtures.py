"""Every rule has a case that fires it and one that does not.

Cases are the named scenarios of ``scenarios.py`` (hand-described nodes for what
no captured machine gave us) and real inputs from ../shared/realworld.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli_util import call

from builders import scenarios
from gdrcheck.rules import all_rules
from gdrcheck.status import exit_status

REAL_LSPCI = "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt"
PUGET_LSPCI = "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt"

# code -> (case that fires it, case that does not, extra arguments)
CASES = {
    "GDR001": ("pcie-only-gpus", "nccl-conf-overrides", ()),
    "GDR002": ("nvme-on-root-port", "healthy-gdr-node", ()),
    "GDR003": ("pcie-gpus-p2p-level-sys", "one-socket-node", ()),
    "GDR004": (f"real:{REAL_LSPCI}", "healthy-gdr-node", ()),
    "GDR005": ("single-nic-gdr-level-sys", "healthy-gdr-node", ()),
    "GDR006": ("pcie-only-gpus", "healthy-gdr-node", ()),
    "GDR007": ("p2p-chipset-not-supported", "healthy-gdr-node", ()),
    "GDR008": (f"real:{REAL_LSPCI}", "healthy-gdr-node", ()),
    "GDR009": ("sxm-gpus-without-links", "healthy-gdr-node", ()),
    "GDR016": ("pcie-gpus-p2p-chipset-not-supported", "p2p-chipset-not-supported", ()),
    "GDR020": ("no-peer-memory-module", "healthy-gdr-node", ()),
    "GDR021": (f"real:{REAL_LSPCI}", "healthy-gdr-node", ()),
    "GDR022": ("legacy-nv-peer-mem", "healthy-gdr-node", ()),
    "GDR023": ("inbox-rdma-proprietary-driver", "inbox-rdma-proprietary-driver", ("--nccl-version", "2.21.5")),
    "GDR024": ("no-peer-mapping-override", "healthy-gdr-node", ()),
    "GDR040": ("acs-redirect-on-switch", "healthy-gdr-node", ()),
    "GDR041": ("config-space-not-root", "healthy-gdr-node", ()),
    "GDR042": ("iommu-translating", "healthy-gdr-node", ()),
    "GDR043": (f"real:{REAL_LSPCI}", "healthy-gdr-node", ()),
    "GDR060": ("nvidia-fs-missing-no-p2pdma", "healthy-gdr-node", ()),
    "GDR061": ("nvidia-fs-missing-no-p2pdma", "healthy-gdr-node", ()),
    "GDR062": ("nvidia-fs-missing-with-p2pdma", "healthy-gdr-node", ()),
    "GDR063": ("bare-sysfs-tree", "healthy-gdr-node", ()),
    "GDR080": ("gpu-link-x8", "healthy-gdr-node", ()),
    "GDR081": ("gpu-link-idle-2.5gts", "healthy-gdr-node", ()),
    "GDR082": ("nic-without-rdma-driver", "healthy-gdr-node", ()),
    "GDR083": ("lspci:nic-of-unknown-model", "healthy-gdr-node", ()),
    "GDR120": ("nccl-conf-overrides", "healthy-gdr-node", ()),
    "GDR121": ("kvm-guest", "healthy-gdr-node", ()),
    # the deadline runs out once the PCI tree is read: host facts and NVML are never asked
    "GDR122": ("healthy-gdr-node", "healthy-gdr-node", ("--timeout", "1e-9")),
    "GDR107": ("gpu-missing-from-nvml", "healthy-gdr-node", ()),
    "GDR123": ("snapshot-without-pci-tree", "healthy-gdr-node", ()),
    "GDR124": ("real:aws-g5-48xlarge/nccl-topo.xml", "healthy-gdr-node", ()),
    "GDR160": ("fixture:nvidia-smi-q/h100-sxm-550.txt", "healthy-gdr-node", ()),
    "GDR206": ("nvidia-fs-nvme-unregistered", "nvidia-fs-nvme-registered", ()),
    "GDR207": ("nvidia-fs-idle", "nvidia-fs-nvme-registered", ()),
    "GDR208": ("nccl-socket-ifname-matches-nothing", "nccl-socket-ifname-matches-ipoib", ()),
    "GDR170": ("lspci:geforce-rtx-4090-and-connectx-7", "healthy-gdr-node", ()),
    # AMD nodes judged with RCCL's rules (tests/support/amd_trees.py, tests/rules/test_rccl.py)
    "GDR210": ("amd:no-peer", "amd:peer", ("--nccl-version", "2.18.6")),
    "GDR211": ("amd:peer", "real:rccl-mi300x-8p-8nic/nccl-topo.xml", ()),
    "GDR212": ("amd:no-peer", "amd:peer", ()),
    # the GPU sits on a root port (the stelline machines' layout): no switch for a NIC to share; GDR005 is for
    # a GPU under a switch without a NIC
    "GDR017": ("lspci:h100-pcie-and-connectx-7-on-root-ports", "single-nic-gdr-level-sys",
               ("--env", "NCCL_NET_GDR_LEVEL=SYS")),
}
# the gate's own findings: a requirement of `check --require` that nothing on the node can satisfy
# code -> (case, --require that fires it, --require that does not)
REQUIREMENT_CASES = {
    "GDR010": ("no-gpu-node", "gdr", None),
    "GDR011": ("nic-without-rdma-driver-virtio", "gdr", "p2p"),
    "GDR012": ("one-gpu-node", "p2p", "gdr"),
    "GDR013": ("no-nvme-node", "gds", "gdr,p2p"),
    # 2 RTX 6000 Ada and a ConnectX NIC behind other root ports: every GPU-NIC path is beyond NCCL's GDR level,
    # so GPUDirect RDMA's answer is no
    "GDR014": ("real:stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt", "gdr", "p2p"),
}
# a required capability whose answer the input leaves open: the gate is unknown (exit 3), never a pass
# code -> (case, --require that fires it, --require that does not)
GATE_UNKNOWN_CASES = {
    "GDR015": ("real:stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt", "p2p", "gdr"),
}


# lspci -tv pastes for what no real paste shows
LSPCI_CASES = {
    # a NIC whose model says nothing about RDMA, in an input that has no /sys/class/infiniband
    "nic-of-unknown-model": "-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
                            "           \\-02.0-[02]----00.0  Acme Corp. Ethernet Controller AC100\n",
    # an H100 PCIe and a ConnectX-7, each on a root port of one root complex (no PCIe switch in the server)
    "h100-pcie-and-connectx-7-on-root-ports": "-[0000:00]-+-00.0  Intel Corporation Ice Lake Memory Map/VT-d\n"
                                              "           +-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
                                              "           \\-02.0-[02]----00.0  Mellanox Technologies MT2910 "
                                              "Family [ConnectX-7]\n",
    # a GeForce card beside a ConnectX-7 (drawn by lspci -F from their ids): no GPUDirect RDMA at any distance
    "geforce-rtx-4090-and-connectx-7": "-[0000:00]-+-00.0  Intel Corporation Ice Lake Memory Map/VT-d\n"
                                       "           +-01.0-[01]----00.0  NVIDIA Corporation AD102 [GeForce RTX 4090]\n"
                                       "           \\-02.0-[02]----00.0  Mellanox Technologies MT2910 Family "
                                       "[ConnectX-7]\n",
}


def _input(case, tmp_path, realworld_dir):
    if case.startswith("lspci:"):
        tmp_path.mkdir(parents=True, exist_ok=True)
        path = tmp_path / f"{case[6:]}.txt"
        path.write_text(LSPCI_CASES[case[6:]])
        return path
    if case.startswith("amd:"):
        from support.amd_trees import mi300x_node

        return mi300x_node(tmp_path / case[4:], peer=case == "amd:peer")
    if case.startswith("fixture:"):
        return Path(__file__).resolve().parents[2] / "fixtures" / case[8:]
    if case.startswith("real:"):
        if not realworld_dir.is_dir():
            pytest.skip("../shared/realworld is not present")
        return realworld_dir / case[5:]
    return scenarios.scenario(tmp_path, case)


def _codes(path, extra=()):
    p = call("pairs", "--json", "--from", path, *extra)
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert p.returncode == exit_status(doc["status"]), p.stderr  # the status the document says, not any
    return {f["code"] for f in doc["findings"]}, doc



@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_fires_and_stays_quiet(code, tmp_path):
    from conftest import REALWORLD

    fires, quiet, extra = CASES[code]
    got, _ = _codes(_input(fires, tmp_path, REALWORLD), extra)
    assert code in got, (code, fires, sorted(got))
    quiet_extra = () if fires == quiet else extra
    got, _ = _codes(_input(quiet, tmp_path / "q", REALWORLD), quiet_extra)
    assert code not in got, (code, quiet, sorted(got))


FABRIC_CODES = {"GDR200", "GDR201", "GDR202"}


def test_every_rule_outside_bar1_has_cases():
    from gdrcheck.rules.nccl_log import LOG_CODES  # fire on a job's log: tests/rules/test_nccl_log_reconcile.py
    from gdrcheck.rules.probe_rules import PROBE_CODES  # fire on probe results: tests/probe/test_probe_rules.py

    codes = {r.code for r in all_rules() if not ("GDR100" <= r.code <= "GDR106") and r.code not in PROBE_CODES
             and r.code not in LOG_CODES}
    codes -= FABRIC_CODES  # fire on NVML answers of a captured NVSwitch node: tests/rules/test_fabric.py
    covered = set(CASES) | set(REQUIREMENT_CASES) | set(GATE_UNKNOWN_CASES)
    assert codes <= covered, sorted(codes - covered)


@pytest.mark.parametrize("code", sorted(REQUIREMENT_CASES))
def test_requirement_rule_fails_the_gate_and_stays_quiet(code, tmp_path):
    from conftest import REALWORLD

    case, fires, quiet = REQUIREMENT_CASES[code]
    path = _input(case, tmp_path, REALWORLD)
    for fmt in ("json", "nhc", "npd", "nagios", "prometheus", "text"):
        p = call("check", "--from", path, "--require", fires, "--format", fmt)
        assert p.returncode == {"nagios": 2}.get(fmt, 1), (code, fmt, p.stdout, p.stderr)
        if fmt == "json":
            doc = json.loads(p.stdout)
            assert doc["status"] == "fail" and doc["summary_line"].startswith(code), doc["summary_line"]
            assert any(f["code"] == code and f["severity"] == "error" for f in doc["findings"])
        elif fmt != "prometheus":
            assert code in p.stdout, (fmt, p.stdout)
    if quiet is not None:
        doc = json.loads(call("check", "--from", path, "--require", quiet, "--format", "json").stdout)
        assert code not in {f["code"] for f in doc["findings"]}


@pytest.mark.parametrize("code", sorted(GATE_UNKNOWN_CASES))
def test_open_requirement_keeps_the_gate_unknown(code, tmp_path):
    from conftest import REALWORLD

    case, fires, quiet = GATE_UNKNOWN_CASES[code]
    path = _input(case, tmp_path, REALWORLD)
    p = call("check", "--from", path, "--require", fires, "--format", "json")
    doc = json.loads(p.stdout)
    assert p.returncode == 3 and doc["status"] == "unknown", p.stderr
    assert any(f["code"] == code and f["effect"] == "unknown" for f in doc["findings"])
    doc = json.loads(call("check", "--from", path, "--require", quiet, "--format", "json").stdout)
    assert code not in {f["code"] for f in doc["findings"]}


def test_a_repeated_require_keeps_every_requirement(tmp_path):
    """--require gdr --require p2p on a node with no RDMA NIC fails as --require gdr,p2p does (a repeat used to
    keep only the last, and the gate passed)."""
    path = scenarios.scenario(tmp_path, "nic-without-rdma-driver-virtio")
    listed = call("check", "--from", path, "--require", "gdr,p2p", "--format", "json")
    repeated = call("check", "--from", path, "--require", "p2p", "--require", "gdr", "--format", "json")
    assert repeated.returncode == listed.returncode == 1, repeated.stderr
    assert json.loads(repeated.stdout)["summary_line"] == json.loads(listed.stdout)["summary_line"]


def test_healthy_node_verdicts(tmp_path):
    _, doc = _codes(scenarios.scenario(tmp_path, "healthy-gdr-node"))
    by = {(p["a"], p["b"]): p for p in doc["pairs"]}
    gpu0, nic0, nic1 = scenarios.GPUS[0], scenarios.NICS[0], scenarios.NICS[1]
    assert by[(gpu0, nic0)]["pcie_path"] == "PIX" and by[(gpu0, nic0)]["verdict"] == "ok"
    assert by[(gpu0, nic0)]["nccl"]["gdr"] == "enabled"
    # GPU0's own path to NIC1 is SYS, but GPU2 (NVLinked, under NIC1's switch) relays for it: PXN
    # (NCCL v2.30.7 src/graph/paths.cc:812-843), when GPU2 is in the same communicator
    far = by[(gpu0, nic1)]
    assert far["pcie_path"] == "SYS" and far["nccl"]["gdr"] == "enabled" and far["nccl"]["via"] == scenarios.GPUS[2]
    assert far["nccl"]["depends_on"] and far["nccl"]["within_gdr_level"] is False
    assert by[(gpu0, scenarios.GPUS[2])]["path"] == "NV18" and by[(gpu0, scenarios.GPUS[2])]["pcie_path"] == "SYS"
    assert doc["summary"]["findings"]["error"] == 0 and doc["summary"]["findings"]["warning"] == 0


def test_missing_facts_never_give_ok(tmp_path):
    """A node described by its PCI tree alone: every verdict that needs a missing fact is unknown."""
    _, doc = _codes(scenarios.scenario(tmp_path, "config-space-not-root"))
    for p in doc["pairs"]:
        if p["kind"] != "gpu-gpu" and p["pcie_path"] in ("PIX", "PXB"):
            assert p["verdict"] == "unknown", p
    p = call("pairs", "--from", scenarios.scenario(tmp_path / "b", "config-space-not-root"))
    assert p.returncode == 3 and "GDR041" in p.stderr


def test_exit_status_follows_fail_on(tmp_path):
    path = scenarios.scenario(tmp_path, "gpu-link-x8")
    assert call("pairs", "--from", path).returncode == 0
    assert call("pairs", "--from", path, "--fail-on", "warning").returncode == 1
    assert call("pairs", "--from", scenarios.scenario(tmp_path, "acs-redirect-on-switch")).returncode == 1


# rule family -> (case where its fact is missing, the unknown finding that must say so)
MISSING = {
    "path class (GDR001-003, GDR006)": (f"real:{REAL_LSPCI}", "GDR004"),
    "driver P2P status (GDR007)": ("bare-pcie-gpus", "GDR008"),
    "NVLink (GDR006, GDR007)": ("sxm-gpus-without-links", "GDR009"),
    "peer memory (GDR020, GDR023)": ("bare-sysfs-tree", "GDR021"),
    "ACS (GDR040)": ("config-space-not-root", "GDR041"),
    "IOMMU (GDR042)": (f"real:{REAL_LSPCI}", "GDR043"),
    "GDS (GDR060, GDR062)": ("bare-sysfs-tree", "GDR063"),
    "RDMA NIC (GDR082)": ("lspci:nic-of-unknown-model", "GDR083"),
}


@pytest.mark.parametrize("family", sorted(MISSING))
def test_a_missing_fact_gives_unknown_never_ok(family, tmp_path):
    from conftest import REALWORLD

    case, code = MISSING[family]
    _, doc = _codes(_input(case, tmp_path, REALWORLD))
    hit = [f for f in doc["findings"] if f["code"] == code]
    assert hit and all(f["effect"] == "unknown" for f in hit), (family, code)
    touched = {tuple(p) for f in hit for p in f.get("pairs", [])} or {
        (p["a"], p["b"]) for p in doc["pairs"] if code in p["findings"]}
    verdicts = {(p["a"], p["b"]): p["verdict"] for p in doc["pairs"]}
    assert touched and all(verdicts[k] in ("unknown", "fail") for k in touched), family
