"""One declared table of host facts (``gdrcheck.host_facts.HOST_FACTS``): every name a collector or paste merge
wrote on the stored inputs is declared with its value's type, every name the code reads is declared, and an
undeclared name is refused."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from support.cli_util import ROOT

from gdrcheck.host_facts import HOST_FACTS, host_record
from gdrcheck.model import Fact

FIXTURES = ROOT / "fixtures"
# one input of each way host facts arrive: a snapshot, NCCL's XML, a job's log, nvidia-smi, gdscheck, lspci
INPUTS = ("nccl-runs-4gpu-vm/snapshot.tar.gz", "h200-x2-vm/snapshot.tar.gz", "nccl-runs-4gpu-vm/nccl-topo-dump.xml",
          "nccl-runs-4gpu-vm/default/nccl.log", "h100-x2-vm/nvidia-smi-topo.txt",
          "nccl-socket-ifname-h200-x1-vm/snapshot.tar.gz")


@pytest.mark.parametrize("rel", INPUTS)
def test_every_name_written_is_declared_with_its_type(rel):
    from gdrcheck.collectors.inputs import load_facts

    snap = load_facts((str(FIXTURES / rel),))
    for name, fact in snap.host.items():
        assert name in HOST_FACTS, (rel, name)
        types, _readers = HOST_FACTS[name]
        assert fact.value is None or isinstance(fact.value, types), (rel, name, type(fact.value))


def test_every_name_read_is_declared():
    reads = re.compile(r"host_(?:record|fact|value)\(\s*[\w.]+,\s*\"(\w+)\"|\.host\.get\(\s*\"(\w+)\"|"
                       r"\.host\[\"(\w+)\"\]|\bvalue\(ctx, \"(\w+)\"|\bval\(\"(\w+)\"")
    missing = []
    for p in sorted((ROOT / "gdrcheck").rglob("*.py")):
        if "probe" in p.relative_to(ROOT).parts:  # the probe's 'host' is a buffer's record, not the node's facts
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            for m in reads.finditer(line):
                name = next(g for g in m.groups() if g)
                if name not in HOST_FACTS:
                    missing.append(f"{p.relative_to(ROOT)}:{n}: {name}")
    assert missing == [], missing


def test_an_undeclared_name_is_refused_and_a_record_read_typed():
    snap = SimpleNamespace(host={"dmabuf": Fact({"possible": True}), "nvidia_fs": Fact(True)})
    assert host_record(snap, "dmabuf") == {"possible": True}
    assert host_record(snap, "nvidia_fs") is None and host_record(snap, "peermem") is None
    with pytest.raises(KeyError):
        host_record(snap, "a_name_no_table_declares")


def test_no_guarded_read_where_the_table_answers():
    """The reads the table replaced stay replaced: a stage outside collectors asks ``host_record`` instead of
    testing a host fact's value for a dict."""
    guard = re.compile(r"host\.get\(\"(nccl_log|dmabuf|rdma_port_states|ip_interfaces|bcm_switch_links|"
                       r"numa_packages|nvidia_fs|acsctl_lines|nccl_topo_file|nccl_cpu|nccl_versions|nccl_conf|"
                       r"nccl_env|rdma_port_rates|cuda_attrs)\"\)")
    done = ("rules/nccl/job_log.py", "rules/nccl/flags.py", "rules/nccl/data_direct.py", "rules/nccl/ib.py",
            "rules/nccl/paths.py", "rules/topology_rules.py", "rules/gds_modules.py", "pcie/topology.py",
            "rules/nccl_log.py", "probe/plan.py", "rules/nccl/cpu.py", "rules/nccl/versions.py", "rules/nccl/node.py",
            "rules/nccl/file_tree.py", "rules/expected.py", "rules/assumed_facts.py", "rules/nccl/gdr.py",
            "rules/rccl/node.py", "rules/rccl/flags.py", "rules/rccl/releases.py", "rules/nvme_gds.py",
            "documents/capabilities.py")
    left = [f"{rel}:{n}" for rel in done for n, line in enumerate((ROOT / "gdrcheck" / rel).read_text().splitlines(), 1)
            if guard.search(line)]
    assert left == [], left


def _outside_collectors():
    for p in sorted((ROOT / "gdrcheck").rglob("*.py")):
        rel = p.relative_to(ROOT / "gdrcheck")
        if rel.parts[0] not in ("collectors", "probe") and rel.name != "host_facts.py":
            yield rel, p.read_text().splitlines()


def test_no_stage_guards_a_host_fact_value_itself():
    """Every host-fact read past the collectors goes through the table: no ``isinstance(<fact>.value, dict)``
    guard and no ``snap.host`` lookup of its own (``Snapshot.fact`` in model.py is the snapshot's own)."""
    guard = re.compile(r"isinstance\([\w.]+\.value, dict\)|\.host\.get\(|\.host\[")
    left = [f"{rel}:{n}" for rel, lines in _outside_collectors() for n, line in enumerate(lines, 1)
            if guard.search(line) and str(rel) != "model.py"]
    assert left == [], left
