"""Answers worked out once and shared give what asking for each pair gives: NCCL's path type of pairs alike
(``pair_types``), a pair's NVLinks through the link index, and a GPU's best NIC kept across its GPU pairs."""

from __future__ import annotations

from functools import lru_cache, partial
from pathlib import Path

import pytest
from conftest import REALWORLD

from builders import scenarios
from builders.servers import build
from gdrcheck.collectors.inputs import load_facts
from gdrcheck.pcie.topology import Topology
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import build_pairs, evaluate, nccl_node
from gdrcheck.rules.nccl import p2p_pairs, paths

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _inputs(tmp_path, realworld=None):
    build(tmp_path / "dgx", gpus=8, nics=8, nvme=8, sockets=2, nested=True)
    out = [tmp_path / "dgx",
           scenarios.scenario(tmp_path, "healthy-gdr-node"), scenarios.scenario(tmp_path, "pcie-only-gpus"),
           FIXTURES / "h200-x4-vm" / "snapshot.tar.gz", FIXTURES / "nccl-dump-h100-x2-vm" / "nccl-topo.xml"]
    if realworld is not None:
        out += [realworld / "azure-ncv4" / "nccl-topo.xml", realworld / "rccl-mi300x-8p-8nic" / "nccl-topo.xml",
                realworld / "hwloc-nvidia-dgx2h" / "hwloc.xml"]
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The inputs, built once for the module's tests, which only read them."""
    return _inputs(tmp_path_factory.mktemp("inputs"), REALWORLD if REALWORLD.is_dir() else None)


def _fresh_relays(node, snap, topo, pairs):
    """NCCL's relay choice made afresh for the node; None for RCCL's view of the node, which has none."""
    from gdrcheck.rules.nccl.pxn import Relays

    return Relays(node, snap, topo, pairs, node.types) if hasattr(node, "relays") else None


def _judged(path):
    """An input's topology, pairs and NCCL view, as evaluate builds them."""
    snap = load_facts(str(path))
    topo = Topology(snap)
    pairs = build_pairs(topo)
    return topo, pairs, nccl_node(snap, topo, pairs, Options())


def test_pair_types_shared_by_class_match_each_pair(inputs):
    for path in inputs:
        topo, pairs, node = _judged(path)
        for p in pairs:
            fc = node.file_classes.get((p.a, p.b))
            assert node.types[(p.a, p.b)] == paths.pair_type(topo, p, node.version, node.st, fc), (path, p)


def _scan_count(topo, a, b):
    """A pair's NVLinks as a scan of every link says them (what the link index stands for)."""
    if not topo.snap.shows_nvlink:
        return None
    direct, fabric = 0, {}
    for link in topo.snap.nvlinks:
        if {link.a, link.b} == {a, b}:
            direct += link.count
        elif link.b == "nvswitch" or topo.device_kind.get(link.b) == "nvswitch":
            fabric[link.a] = fabric.get(link.a, 0) + link.count
    if direct:
        return direct
    return min(fabric[a], fabric[b]) if fabric.get(a) and fabric.get(b) else 0


def test_link_index_matches_a_scan_of_every_link(inputs):
    seen_links = 0
    for path in inputs:
        topo = Topology(load_facts(str(path)))
        seen_links += len(topo.snap.nvlinks)
        ends = sorted({x for link in topo.snap.nvlinks for x in (link.a, link.b)} | set(topo.of_kind("gpu")))
        for a in ends:
            for b in ends:
                assert topo.nvlink_count(a, b) == _scan_count(topo, a, b), (path, a, b)
                assert topo.nvlink_count(a, b) == _scan_count(topo, a, b), (path, a, b)  # the pair's kept answer
                scan = [lk for lk in topo.snap.nvlinks if {lk.a, lk.b} == {a, b}]
                assert topo.direct_nvlink(a, b) == any(lk.count for lk in scan)
                assert topo.link_word(a, b) == ("XGMI" if any(lk.source == "xgmi" for lk in scan) else "NV")
    assert seen_links  # the inputs hold NVLinks (direct, through NVSwitch, xGMI)


def test_best_nic_kept_across_gpu_pairs_matches_each_pair(inputs):
    for path in inputs:
        topo, pairs, node = _judged(path)
        best = lru_cache(maxsize=None)(partial(p2p_pairs.best_net, node, topo))
        for p in pairs:
            if p.kind == "gpu-gpu":
                t = node.types[(p.a, p.b)][0]
                assert p2p_pairs.net_faster(node, topo, p, t, best) == p2p_pairs.net_faster(node, topo, p, t), \
                    (path, p)


def test_nvlink_need_codes_say_what_the_words_say(inputs, tmp_path):
    """GDR009 of a GPU-NIC pair reads the decision's need codes: the same pairs its words name an unseen
    NVLink for."""
    from gdrcheck.rules.nccl.decision import Decision
    from gdrcheck.rules.topology_rules import _rests_on_nvlink

    build(tmp_path / "fabric", gpus=16, nics=16, nvme=0, sockets=2, nested=True)
    seen = 0
    for path in inputs + [tmp_path / "fabric"]:
        for key, view in evaluate(load_facts(str(path)), Options()).nccl_view.items():
            if isinstance(view, Decision):
                said = any("NVLink joins" in d for d in view.get("depends_on", ()))
                assert _rests_on_nvlink(view) == said, (path, key)
                seen += said
    assert seen  # some input leaves a PXN relay's NVLink unseen


def _direct_hops(topo, a, b, bridges, skip=()):
    """A path's PCIe hops worked out from the tree alone: the meeting bridge from both ancestries, each hop read
    from the device and its port (what the hop table and the pair's cached path stand for)."""
    from gdrcheck.rules.nccl.speed import _device_hop_bw

    anc = set(topo.ancestors(b))
    meet = next((x for x in topo.ancestors(a) if x in anc), None)
    parts = [x for x in (a, b) if x not in skip]
    parts += [x for x in bridges if topo.device_kind.get(x) == "switch_upstream" and x != meet]
    return [_device_hop_bw(topo, x) for x in parts]


def test_hop_table_and_pair_path_match_the_tree(inputs):
    from gdrcheck.rules.nccl.speed import pcie_hops

    for path in inputs:
        topo, pairs, _node = _judged(path)
        for p in pairs:
            anc = set(topo.ancestors(p.b))
            assert topo.pair_path(p.a, p.b)[0] == next((x for x in topo.ancestors(p.a) if x in anc), None)
            assert topo.pair_path(p.a, p.b)[1] == p.bridges
            for skip in ((), (p.a,)):
                assert pcie_hops(topo, p.a, p.b, p.bridges, skip) == _direct_hops(topo, p.a, p.b, p.bridges, skip), \
                    (path, p)


def test_chosen_nics_from_the_decisions_relays_match_a_fresh_relay_choice(inputs):
    """Each GPU's chosen NICs, read from the relay choice NCCL's GPU-NIC decisions made, are those a relay choice
    made afresh gives."""
    from gdrcheck.rules.capabilities import _chosen_nics
    from gdrcheck.rules.nccl.pxn import Relays

    for path in inputs:
        evaluation = evaluate(load_facts(str(path)), Options())
        node = evaluation.nccl_node
        if not isinstance(getattr(node, "relays", None), Relays):
            continue  # RCCL's view of the node
        fresh = Relays(node, evaluation.snap, evaluation.topo, evaluation.pairs, node.types)
        want = {g: tuple(n) if n is not None else None for g in fresh.gpus for n in (fresh.local_nets(g),)}
        assert _chosen_nics(evaluation, node) == want, path


def test_node_cpu_link_asked_once_matches_each_ask(inputs):
    """The CPU link's bandwidths a relay choice keeps for its node are what asking for them gives."""
    from gdrcheck.rules.nccl.cpu import cpu_kind, cpu_model, inter_cpu_bw
    from gdrcheck.rules.nccl.speed import gpu_nic_bw

    for path in inputs:
        topo, pairs, node = _judged(path)
        rl = _fresh_relays(node, topo.snap, topo, pairs)
        if rl is None:
            continue
        want = inter_cpu_bw(node.version, cpu_kind(node.cpu), *cpu_model(topo.snap))[0]
        assert rl._cpu_bws() == want and rl._cpu_bws() == want, path
        for g in rl.gpus:
            for n in rl.nics:
                t = (node.types.get((g, n)) or (None,))[0]
                nic = node.nics.get(n)
                assert rl.path_bw(g, n) == gpu_nic_bw(topo, g, n, nic.rate if nic is not None else None,
                                                      node.gpus[g].c2c, t, want if t == "SYS" else ()), (path, g, n)


def test_nvlinked_kept_per_pair_matches_the_paths(inputs):
    """Whether a GPU pair's path is NVLink after NCCL's P2P decision, kept per pair, is what the paths give."""

    for path in inputs:
        topo, pairs, node = _judged(path)
        rl = _fresh_relays(node, topo.snap, topo, pairs)
        if rl is None:
            continue
        for a in rl.gpus:
            for b in rl.gpus:
                if a != b:
                    assert rl.nvlinked(a, b) == rl.nvlinked_now(a, b) == rl.nvlinked(a, b), (path, a, b)


def _filled(path):
    """An input's evaluation and its facts with what it lacks filled in (gdrcheck.rules.expected)."""
    from gdrcheck.rules.assumed_facts import assumed_facts

    first = evaluate(load_facts(str(path)), Options())
    snap2, options2, _made = assumed_facts(first)
    return first, snap2, options2


def test_topology_sharing_the_first_ones_pcie_tables_matches_a_fresh_one(inputs):
    """A topology of the filled facts that takes over the first topology's tables of the PCIe tree (ancestors,
    paths, pair classes, NUMA nodes, the hops NCCL's model reads) answers as one built afresh."""
    from gdrcheck.rules.nccl.speed import _gpu_nic_bw, gpu_nic_bw, pcie_hops

    for path in inputs:
        first, snap2, _options2 = _filled(path)
        for p in first.pairs:  # the first topology's hop tables filled, as its evaluation leaves them
            pcie_hops(first.topo, p.a, p.b, p.bridges)
        shared, fresh = Topology(snap2, first.topo), Topology(snap2)
        assert shared._paths is first.topo._paths, path  # the tree is the same: its paths carry over
        assert shared.link_tables is first.topo.link_tables, path  # so are the links
        ends = list(fresh.by_bdf)
        for a in ends:
            assert shared.ancestors(a) == fresh.ancestors(a) and shared.numa(a) == fresh.numa(a), (path, a)
        for p in build_pairs(fresh):
            for a, b in ((p.a, p.b), (p.b, p.a)):
                assert shared.pair_path(a, b) == fresh.pair_path(a, b), (path, a, b)
                assert shared.pcie_class(a, b) == fresh.pcie_class(a, b) == fresh._pcie_class(a, b), (path, a, b)
            if p.kind == "gpu-nic":  # the path's bandwidth, kept by every argument
                for t, c2c, cpu_bws in (("PXB", False, ()), ("SYS", True, (20.0,)), ("SYS", None, ())):
                    assert gpu_nic_bw(first.topo, p.a, p.b, 50.0, c2c, t, cpu_bws) == gpu_nic_bw(
                        shared, p.a, p.b, 50.0, c2c, t, cpu_bws) == _gpu_nic_bw(fresh, p.a, p.b, 50.0, c2c, t,
                                                                                 cpu_bws), (path, p, t)
            for skip in ((), (p.a,)):
                bridges = shared.path_bridges(p.a, p.b)
                assert pcie_hops(shared, p.a, p.b, bridges, skip) == _direct_hops(fresh, p.a, p.b, bridges, skip), \
                    (path, p)
        build_pairs(first.topo)  # the first topology's pairs made, as its evaluation leaves them
        assert build_pairs(shared) == build_pairs(fresh), path  # endpoint pairs from the shared class tables
        if shared._classes is first.topo._classes:
            assert shared.class_tables is first.topo.class_tables, path


def test_topology_of_another_tree_shares_nothing(tmp_path):
    """A topology of another tree (other parents) keeps its own tables."""
    build(tmp_path / "a", gpus=2, nics=2, nvme=0, sockets=1, nested=False)
    build(tmp_path / "b", gpus=2, nics=2, nvme=0, sockets=1, nested=True)
    first = Topology(load_facts(str(tmp_path / "a")))
    other = Topology(load_facts(str(tmp_path / "b")), first)
    assert other._paths is not first._paths and other._classes is not first._classes


def test_second_evaluation_on_shared_pcie_tables_matches_a_fresh_one(inputs):
    """The evaluation of the filled facts on the first topology's PCIe tables is the one made afresh."""
    for path in inputs:
        first, snap2, options2 = _filled(path)
        shared, fresh = evaluate(snap2, options2, first.topo), evaluate(snap2, options2)
        assert shared.pairs == fresh.pairs, path
        assert shared.verdicts == fresh.verdicts and shared.pair_findings == fresh.pair_findings, path
        assert shared.findings == fresh.findings, path
        assert shared.nccl_view == fresh.nccl_view, path


def test_nvlink_peer_stopping_at_the_first_peer_matches_asking_every_gpu(inputs):
    """A GPU's NVLink peer, asked until the first GPU still on NVLink answers, is what asking every GPU gives,
    on the input's facts and on them filled in (where NVLink is assumed)."""
    from gdrcheck.rules.nccl.pxn import nccl_own_dump

    for path in inputs:
        first, snap2, options2 = _filled(path)
        for evaluation in (first, evaluate(snap2, options2, first.topo)):
            node = evaluation.nccl_node
            rl = _fresh_relays(node, evaluation.snap, evaluation.topo, evaluation.pairs)
            if rl is None:
                continue
            for g in rl.gpus:
                if not evaluation.snap.shows_nvlink:
                    want = False if nccl_own_dump(evaluation.topo) else None
                else:
                    seen = [rl.nvlinked_now(g, o) for o in rl.gpus if o != g]
                    want = True if any(seen) else None if any(s is None for s in seen) else False
                assert rl.nvlink_peer(g) == want, (path, g)


def test_links_filled_from_each_gpus_part_asked_once_match_each_pair(inputs, tmp_path):
    """The NVLinks filled in where the input cannot show them, each GPU's part asked once, are those asking both
    GPUs' parts for each pair gives."""
    from gdrcheck.device_models import link_word
    from gdrcheck.model import NvLink
    from gdrcheck.rules.assumed_facts import NVLINK_OPEN, _links_filled, _nv_count, _part, all_to_all

    build(tmp_path / "sxm", gpus=8, nics=8, nvme=0, sockets=2, nested=True)
    for path in inputs + [tmp_path / "sxm", FIXTURES / "h200-x4-vm" / "snapshot.tar.gz"]:
        first = evaluate(load_facts(str(path)), Options())
        topo, gpus = first.topo, first.topo.of_kind("gpu")
        want, open_ = [], False
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                if topo.nvlink_unseen(a, b):
                    part, xgmi = _part(topo.by_bdf[a]), link_word(topo.by_bdf[a]) == "xGMI"
                    if all_to_all(part) and all_to_all(_part(topo.by_bdf[b])):
                        want.append(NvLink(a, b, 1 if xgmi else _nv_count(part), source="xgmi" if xgmi else "assumed"))
                    else:
                        open_ = True
        made: list = []
        assert _links_filled(first.snap, topo, gpus, made) == want, path
        assert (NVLINK_OPEN in made) == open_, path


def test_kept_shared_by_pairs_alike_matches_each_pairs_decision(inputs):
    """Whether NCCL keeps a GPU pair's path, shared by pairs whose path and NVML statuses are alike, is what the
    pair's own P2P decision says, on the input's facts and on them filled in."""
    from gdrcheck.rules.nccl import p2p as p2p_rules
    from gdrcheck.rules.nccl.pxn import nvml_hops

    for path in inputs:
        first, snap2, options2 = _filled(path)
        for evaluation in (first, evaluate(snap2, options2, first.topo)):
            node = evaluation.nccl_node
            rl = _fresh_relays(node, evaluation.snap, evaluation.topo, evaluation.pairs)
            if rl is None:
                continue
            for p in evaluation.pairs:
                if p.kind != "gpu-gpu":
                    continue
                t, cands, _flat, via = node.types[(p.a, p.b)]
                hops = nvml_hops(evaluation.snap, p.a, p.b, via)
                if t in ("NVL", "NVB") and not node.st.ignore_disabled_p2p:
                    hops = tuple((h, r or "OK", w or "OK") for h, r, w in hops)
                facts = p2p_rules.PairFacts(t, cands, via, hops, False, "")
                want = p2p_rules.decide(node.version, node.st, rl.default, facts)["p2p"]
                assert rl.kept(p.a, p.b) == rl.kept(p.b, p.a) == want, (path, p)
