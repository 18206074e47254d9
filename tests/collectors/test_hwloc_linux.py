"""hwloc's own Linux regression captures, read by gdrcheck and by real lstopo: the same tree, the same NUMA nodes.

``../shared/hwloc-linux`` holds the sysfs captures of real machines from hwloc's test suite that carry PCI
devices (its SOURCE.md says what each is). Each is unpacked and read twice: by ``gdrcheck topology --json
--from DIR`` and by ``HWLOC_FSROOT=DIR HWLOC_COMPONENTS=-x86 lstopo-no-graphics --whole-io --of xml``.
gdrcheck's parent of every function and its NUMA node must be hwloc's, and so must the path class of every pair
wherever hwloc's tree decides it.

lstopo runs without the ``env:`` lines of the captures' ``.test`` files: ``HWLOC_PCI_LOCALITY`` overrides
what the machine says, and gdrcheck reads what the machine says.

Where the two may differ, for a reason named here and checked on the capture:
* Debian's hwloc is built without 32-bit PCI domains (``10000:00``) and drops those functions, saying so;
* hwloc drops a bridge whose config space shows impossible bus numbers (``pci-common.c``
  ``hwloc_pcidisc_find_bridge_buses`` at hwloc-2.9.0); the kernel listed it, and gdrcheck keeps it;
* hwloc never reads ``numa_node``: it places a whole root bus by its first function's ``local_cpus``. A
  function whose own ``numa_node`` names a node keeps it in gdrcheck (the kernel's word, and what NCCL reads);
  those functions are listed in ``OWN_NUMA_NODE``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

import pytest
from support.cli_util import call
from support.shared_unpack import unpacked_once

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.collectors.pastes.hwloc_xml import parse_hwloc_xml
from gdrcheck.model import bdf_key, norm_bdf
from gdrcheck.pcie.topology import Topology

HWLOC_LINUX = Path(__file__).resolve().parents[2].parent / "shared" / "hwloc-linux"
LSTOPO = shutil.which("lstopo-no-graphics")
CAPTURES = sorted(p.name[: -len(".tar.bz2")] for p in HWLOC_LINUX.glob("*.tar.bz2")) if HWLOC_LINUX.is_dir() else []

# functions whose own numa_node file names a node while the functions directly on their root bus say -1 and
# local_cpus of every CPU (hwloc: no NUMA node for that bus)
OWN_NUMA_NODE = {"40intel64-2g2n4c+pcilocality": {"0000:43:00.0": 2}}

pytestmark = [
    pytest.mark.skipif(not HWLOC_LINUX.is_dir(), reason="../shared/hwloc-linux is not present"),
    pytest.mark.skipif(LSTOPO is None, reason="lstopo-no-graphics (hwloc) is not installed"),
]


class Capture:
    """One unpacked capture and both readings of it."""

    def __init__(self, name: str, root: Path, xml: str, lstopo_stderr: str, doc: dict) -> None:
        self.name, self.root, self.xml, self.lstopo_stderr, self.doc = name, root, xml, lstopo_stderr, doc
        self.devices = {d["bdf"]: d for d in doc["devices"]}
        self.hwloc = hwloc_functions(xml)

    def sysfs(self, bdf: str, attr: str) -> Optional[str]:
        for name in os.listdir(self.root / "sys/bus/pci/devices"):
            if norm_bdf(name) == bdf:
                p = self.root / "sys/bus/pci/devices" / name / attr
                return p.read_text() if p.is_file() else None
        return None


_CACHE: dict[str, Capture] = {}


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    def get(name: str) -> Capture:
        if name not in _CACHE:
            root = unpacked_once(HWLOC_LINUX / f"{name}.tar.bz2", tmp_path_factory)
            env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
            env.update(HWLOC_FSROOT=str(root), HWLOC_COMPONENTS="-x86")
            p = subprocess.run([LSTOPO, "--whole-io", "--of", "xml"], check=False, capture_output=True, text=True,
                               env=env, timeout=120)
            assert p.returncode == 0, p.stderr
            g = call("topology", "--json", "--from", root)
            assert g.returncode == 0, g.stderr
            _CACHE[name] = Capture(name, root, p.stdout, p.stderr, json.loads(g.stdout))
        return _CACHE[name]

    yield get
    _CACHE.clear()


# ---------------------------------------------------------------------------
# lstopo's XML, read here on its own terms (not through gdrcheck's hwloc reader)


_IO = ("Bridge", "PCIDev", "OSDev", "Misc")


def _bits(mask: Optional[str]) -> set[int]:
    value = 0
    for word in (mask or "").split(","):
        word = word.strip().lower().removeprefix("0x")
        value = (value << 32) | (int(word, 16) if word else 0)
    return {i for i in range(value.bit_length()) if value >> i & 1}


def hwloc_functions(xml: str) -> dict[str, tuple[Optional[str], Optional[int]]]:
    """bdf -> (parent bridge, NUMA node) as lstopo placed each PCI function: the parent is the nearest
    bridge above with a bus id (none below a host bridge); the NUMA node is the one node of the CPU-side
    object the I/O tree hangs from, or the machine's only node."""
    top = ET.fromstring(xml)
    numa = [int(el.get("os_index")) for el in top.iter("object") if el.get("type") == "NUMANode"]
    out: dict[str, tuple[Optional[str], Optional[int]]] = {}
    stack: list[tuple[ET.Element, set[int], Optional[str]]] = [(top, set(numa), None)]
    while stack:
        el, nodes, parent = stack.pop()
        typ = el.get("type")
        if el.tag == "object" and typ not in _IO and el.get("nodeset") is not None:
            nodes = _bits(el.get("nodeset"))
        if typ in ("Bridge", "PCIDev"):
            busid = el.get("pci_busid")
            if busid:
                bdf = norm_bdf(busid)
                out[bdf] = (parent, next(iter(nodes)) if len(nodes) == 1 else None)
                parent = bdf
            else:  # a host bridge: what hangs below it sits on a root bus
                parent = None
        stack.extend((c, nodes, parent) for c in el if c.tag == "object")
    return out


def hwloc_skips_bridge(cap: Capture, bdf: str) -> bool:
    """hwloc drops a bridge whose config space gives secondary <= bus, subordinate <= bus or
    secondary > subordinate (pci-common.c hwloc_pcidisc_find_bridge_buses at hwloc-2.9.0)."""
    d = cap.devices[bdf]
    if not (d["class"] or "").startswith("0x0604"):
        return False
    for name in os.listdir(cap.root / "sys/bus/pci/devices"):
        if norm_bdf(name) == bdf:
            cfg = (cap.root / "sys/bus/pci/devices" / name / "config").read_bytes()
            bus = int(bdf.split(":")[1], 16)
            sec, sub = cfg[0x19], cfg[0x1A]
            return sec <= bus or sub <= bus or sec > sub
    return False


# ---------------------------------------------------------------------------
# Every capture: the same functions, parents, NUMA nodes and path classes


@pytest.mark.parametrize("name", CAPTURES)
def test_gdrcheck_lists_what_hwloc_lists(unpacked, name):
    cap = unpacked(name)
    gd, hw = set(cap.devices), set(cap.hwloc)
    assert hw <= gd, sorted(hw - gd)
    for bdf in sorted(gd - hw):
        if int(bdf.split(":")[0], 16) > 0xFFFF:
            assert "non-16bit domain" in cap.lstopo_stderr, bdf
            continue
        assert hwloc_skips_bridge(cap, bdf), bdf
        assert not [d for d in cap.devices.values() if d["parent"] == bdf], bdf  # nothing hangs below it


@pytest.mark.parametrize("name", CAPTURES)
def test_parents_are_hwlocs(unpacked, name):
    cap = unpacked(name)
    wrong = {b: (cap.devices[b]["parent"], parent) for b, (parent, _n) in cap.hwloc.items()
             if cap.devices[b]["parent"] != parent}
    assert not wrong, wrong  # bdf: (gdrcheck's parent, hwloc's)


@pytest.mark.parametrize("name", CAPTURES)
def test_numa_nodes_are_hwlocs(unpacked, name):
    cap = unpacked(name)
    own = OWN_NUMA_NODE.get(name, {})
    wrong = {}
    for b, (_p, node) in cap.hwloc.items():
        want = own.get(b, node)
        if cap.devices[b]["numa_node"] != want:
            wrong[b] = (cap.devices[b]["numa_node"], node)
    assert not wrong, wrong  # bdf: (gdrcheck's node, hwloc's)
    for b, node in own.items():  # each exception is the function's own numa_node file, and hwloc's differs
        assert int(cap.sysfs(b, "numa_node")) == node != cap.hwloc[b][1]


@pytest.mark.parametrize("name", CAPTURES)
def test_root_bus_numa_nodes_are_hwlocs(unpacked, name):
    cap = unpacked(name)
    roots = {r["root"]: r["numa_node"] for r in cap.doc["roots"]}
    for b, d in cap.devices.items():
        if b in cap.hwloc and d["parent"] is None and b not in OWN_NUMA_NODE.get(name, {}):
            assert roots[d["root"]] == cap.hwloc[b][1], (d["root"], b)


@pytest.mark.parametrize("name", CAPTURES)
def test_path_classes_follow_hwlocs_tree(unpacked, name):
    """Every pair of functions both read: where hwloc's tree decides the class (PIX, PXB, PHB, NODE, SYS),
    gdrcheck's is the same; where it cannot (a bus with no NUMA node), gdrcheck's is one of the candidates."""
    cap = unpacked(name)
    th = Topology(parse_hwloc_xml(cap.xml, "lstopo.xml"))
    ts = Topology(load_facts(str(cap.root)))
    common = sorted(set(th.by_bdf) & set(ts.by_bdf), key=bdf_key)
    assert len(common) == len(cap.hwloc)
    wrong = {}
    for i, a in enumerate(common):
        for b in common[i + 1:]:
            (hc, hcand), (sc, scand) = th.pcie_class(a, b), ts.pcie_class(a, b)
            if hc is not None and (sc, scand) != (hc, hcand):
                wrong[(a, b)] = (sc, hc)
            elif hc is None and sc not in (None, *hcand):
                wrong[(a, b)] = (sc, hcand)
    assert not wrong, dict(list(wrong.items())[:10])


@pytest.mark.parametrize("name", CAPTURES)
def test_unlisted_hops_are_on_the_sysfs_path_and_said(unpacked, name):
    cap = unpacked(name)
    listed = set(cap.devices)
    for b, d in cap.devices.items():
        hops = d.get("unlisted_upstream", [])
        if not hops:
            continue
        link = next(n for n in os.listdir(cap.root / "sys/bus/pci/devices") if norm_bdf(n) == b)
        path = [norm_bdf(c) for c in os.readlink(cap.root / "sys/bus/pci/devices" / link).split("/")
                if c.count(":") == 2]
        assert path[-1] == b
        chain = path[path.index(d["parent"]) + 1: -1] if d["parent"] else path[:-1]
        assert chain == hops and not set(hops) & listed, (b, hops, path)
        assert any(b in n and all(h in n for h in hops) for n in cap.doc.get("notes", [])), b


@pytest.mark.parametrize("name", CAPTURES)
def test_topology_documents_validate(unpacked, name):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(call("schema", "topology").stdout)
    jsonschema.validate(unpacked(name).doc, schema)


# ---------------------------------------------------------------------------
# The two cases hwloc's suite shows, named


def test_bridge_missing_from_the_listing_keeps_the_real_chain(unpacked):
    """8 NEC Vector Engines behind PCIe switches: the Lewisburg NIC 0000:60:00.x sits below 0000:5f:03.0, on
    its sysfs path but not in /sys/bus/pci/devices. It hangs from 0000:5e:00.0, as in hwloc, not from the root bus."""
    cap = unpacked("32intel64-2p8co2t+8ve")
    for b in ("0000:60:00.0", "0000:60:00.1"):
        d = cap.devices[b]
        assert (d["parent"], d["root"], d["unlisted_upstream"]) == ("0000:5e:00.0", "0000:5d", ["0000:5f:03.0"])
        assert cap.hwloc[b][0] == "0000:5e:00.0"
    assert "0000:5f:03.0" not in cap.devices
    ts = Topology(load_facts(str(cap.root)))
    assert ts.pcie_class("0000:60:00.0", "0000:60:00.1") == ("PIX", ())  # two functions of one device, not PHB
    assert ts.ancestors("0000:60:00.0") == ("0000:5e:00.0", "0000:5d:02.0")
    text = call("topology", "--all", "--from", cap.root, env={"COLUMNS": "200"}).stdout
    assert "0000:5f:03.0" in text and "does not list" in text


def test_trimmed_to_the_endpoints_hangs_them_on_the_root_bus(unpacked, tmp_path):
    """The same capture trimmed further (named case ``trimmed-to-endpoints``): the listing loses the root port
    and the bridge above the NIC as well. The NIC's functions then sit on root bus 0000:5d, as hwloc puts them,
    with all three hops said; nothing else moves."""
    cap = unpacked("32intel64-2p8co2t+8ve")
    root = tmp_path / "trimmed"
    shutil.copytree(cap.root, root, symlinks=True)
    for b in ("0000:5d:02.0", "0000:5e:00.0"):
        (root / "sys/bus/pci/devices" / b).unlink()
    g = call("topology", "--json", "--from", root)
    assert g.returncode == 0, g.stderr
    doc = json.loads(g.stdout)
    devs = {d["bdf"]: d for d in doc["devices"]}
    for b in ("0000:60:00.0", "0000:60:00.1"):
        assert (devs[b]["parent"], devs[b]["root"]) == (None, "0000:5d")
        assert devs[b]["unlisted_upstream"] == ["0000:5d:02.0", "0000:5e:00.0", "0000:5f:03.0"]
    assert {b: d["parent"] for b, d in devs.items()} == {
        b: d["parent"] for b, d in cap.devices.items() if b not in ("0000:5d:02.0", "0000:5e:00.0", "0000:60:00.0",
                                                                    "0000:60:00.1")} | {"0000:60:00.0": None,
                                                                                        "0000:60:00.1": None}
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    env.update(HWLOC_FSROOT=str(root), HWLOC_COMPONENTS="-x86")
    p = subprocess.run([LSTOPO, "--whole-io", "--of", "xml"], check=False, capture_output=True, text=True,
                       env=env, timeout=120)
    hw = hwloc_functions(p.stdout)
    assert {b: parent for b, (parent, _n) in hw.items()} == {b: d["parent"] for b, d in devs.items()}
    assert {b: n for b, (_p, n) in hw.items()} == {b: d["numa_node"] for b, d in devs.items()}
    ts, th = Topology(load_facts(str(root))), Topology(parse_hwloc_xml(p.stdout, "lstopo.xml"))
    assert ts.pcie_class("0000:60:00.0", "0000:60:00.1") == th.pcie_class("0000:60:00.0", "0000:60:00.1")
    assert any("placed on the root bus" in n and "0000:5d:02.0, 0000:5e:00.0, 0000:5f:03.0" in n
               for n in doc["notes"])


def test_numa_node_from_local_cpus_without_numa_node_files(unpacked):
    """IBM POWER9 with six V100s (trimmed: class and local_cpus only, no numa_node): CPUs 0-15 are node 0's,
    88-103 node 8's, so the GPUs are on nodes 0, 0, 0, 8, 8, 8 and a pair across the two is SYS."""
    cap = unpacked("nvidiagpunumanodes")
    assert cap.sysfs("0004:05:00.0", "numa_node") is None
    got = {b: d["numa_node"] for b, d in cap.devices.items()}
    assert got == {"0004:05:00.0": 0, "0004:06:00.0": 0, "0006:00:00.0": 0,
                   "0007:00:00.0": 8, "0035:04:00.0": 8, "0035:05:00.0": 8}
    assert {r["root"]: r["numa_node"] for r in cap.doc["roots"]} == {
        "0004:05": 0, "0004:06": 0, "0006:00": 0, "0007:00": 8, "0035:04": 8, "0035:05": 8}
    ts = Topology(load_facts(str(cap.root)))
    assert ts.pcie_class("0004:05:00.0", "0006:00:00.0") == ("NODE", ())
    assert ts.pcie_class("0004:05:00.0", "0035:05:00.0") == ("SYS", ())
    assert any("local_cpus" in n and "0035:05:00.0 -> 8" in n for n in cap.doc["notes"])


def test_a_root_bus_is_placed_by_its_own_functions(unpacked):
    """Root bus 0000:40: every function on it says numa_node -1 with local_cpus of all 40 CPUs of 4 nodes; one
    NIC further down says 2. The bus has no NUMA node (hwloc: attached to the machine); the NIC keeps its own."""
    cap = unpacked("40intel64-2g2n4c+pcilocality")
    roots = {r["root"]: r["numa_node"] for r in cap.doc["roots"]}
    assert roots["0000:40"] is None and cap.devices["0000:40:01.0"]["numa_node"] is None
    assert cap.devices["0000:43:00.0"]["numa_node"] == 2


# ---------------------------------------------------------------------------
# A snapshot of such a directory replays to the same bytes

# What a snapshot and a bare directory are told apart by, on purpose: a snapshot comes from a live node, where
# a missing /sys/class/iommu means no IOMMU ("off"), while a bare capture may simply not hold it ("unknown"), and
# the collectors' hints name the kind of input. Everything read from the PCI tree must replay to the same bytes.
KIND_DEPENDENT = ("collectors", "host_facts", "fingerprint")


@pytest.mark.parametrize("name", CAPTURES)
def test_snapshot_of_the_directory_replays_byte_for_byte(unpacked, name, tmp_path, monkeypatch):
    from gdrcheck.collectors import capture as snapshot
    from gdrcheck.io.source import Source

    cap = unpacked(name)
    monkeypatch.setattr(snapshot, "Source", lambda _root, **kw: Source(str(cap.root), live=False, **kw))
    src, manifest = snapshot.capture()
    out = tmp_path / f"{name}.tar.gz"
    snapshot.write_archive(src, manifest, str(out))
    for cmd in ("topology", "pairs"):
        direct = call(cmd, "--json", "--from", cap.root)
        replay = call(cmd, "--json", "--from", out)
        assert replay.returncode == direct.returncode, (cmd, replay.stderr)
        a, b = json.loads(direct.stdout), json.loads(replay.stdout)
        for k in KIND_DEPENDENT:
            a.pop(k, None)
            b.pop(k, None)
        assert json.dumps(b, sort_keys=True) == json.dumps(a, sort_keys=True), cmd
        if cmd == "topology":
            assert len(b["devices"]) == len(cap.devices)
