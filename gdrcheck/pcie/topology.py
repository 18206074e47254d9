"""The PCIe forest and the path class of a pair.

One tree per root bus, parent pointers only. Bridges are told apart by
structure: a bridge on a root bus is a root port; a bridge below one whose
secondary bus holds further bridges is a switch upstream port, and those
bridges are its downstream ports. So a ConnectX-7's internal switch and a
PLX switch come out the same way.

The pair class (PIX, PXB, PHB, NODE, SYS, as ``path_class`` in the pairs schema)
reproduces ``nvidia-smi topo -m``.
"""

from __future__ import annotations

from functools import cached_property

from gdrcheck.host_facts import host_fact, host_record
from gdrcheck.model import PciFunction, Snapshot, address_known, bdf_key, bus_order
from gdrcheck.pair_classes import PCIE_CLASSES
from gdrcheck.pcie.acs import AcsState, parse_acs
from gdrcheck.pcie.kinds import BRIDGE_KINDS, base_kind
from gdrcheck.reach import kernel_view, nccl_own_tree

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional



class Topology:
    """Read-only view of a snapshot's PCI functions as a forest."""

    def __init__(self, snap: Snapshot, pcie_of: Optional[Topology] = None) -> None:
        """``pcie_of``: a topology of another snapshot of the same node (the same facts with some filled in);
        where its PCIe tree is this one's, its tables of the tree carry over (:meth:`_share_pcie`)."""
        self.snap = snap
        self.by_bdf: dict[str, PciFunction] = {d.bdf: d for d in snap.devices}
        self.children: dict[Optional[str], list[str]] = {}
        for d in snap.devices:
            parent = d.parent if d.parent in self.by_bdf else None
            self.children.setdefault(parent, []).append(d.bdf)
        for kids in self.children.values():
            kids.sort(key=bdf_key)
        self.device_kind: dict[str, str] = {}
        self._classify()
        self._number_gpus()
        self._anc: dict[str, tuple[str, ...]] = {}
        self._anc_set: dict[str, frozenset] = {}  # bdf -> its ancestors as a set (path lookups)
        self._paths: dict[tuple[str, str], tuple[Optional[str], tuple[str, ...]]] = {}  # (a, b) -> (lca, bridges)
        self._rdma: dict[str, tuple[Optional[bool], str]] = {}  # NIC -> rdma()'s answer
        self._links: Optional[_LinkIndex] = None  # the snapshot's NVLinks by pair, built on first use
        self._unseen: dict[tuple[str, str], str] = {}  # (a, b) -> nvlink_unseen()'s answer
        self._nv_counts: dict[tuple[str, str], Optional[int]] = {}  # (a, b) -> nvlink_count()'s answer
        self._numa: dict[str, Optional[int]] = {}  # bdf -> numa()'s answer
        self._acs: dict[str, AcsState] = {}
        self._classes: dict[tuple[str, str], tuple[Optional[str], tuple[str, ...]]] = {}  # pcie_class()'s answers
        # what other modules work out from the tree and the functions' links alone, by table (the PCIe hops NCCL's
        # model reads, gdrcheck.rules.nccl.speed); shared with a topology of the same tree and links
        self.link_tables: dict[str, dict] = {}
        # what other modules make of the pair classes and paths alone, by table (the GPU-NIC and GPU-NVMe pairs,
        # gdrcheck.rules.engine.build_pairs); shared with a topology that shares the classes
        self.class_tables: dict[str, dict] = {}
        nodes = host_fact(snap, "numa_nodes")
        self.single_numa: Optional[int] = None
        if nodes is not None and isinstance(nodes.value, (list, tuple)) and len(nodes.value) == 1:
            self.single_numa = int(nodes.value[0])
        if pcie_of is not None:
            self._share_pcie(pcie_of)

    def _share_pcie(self, other: Topology) -> None:
        """Take over ``other``'s tables of the PCIe tree where they hold for this snapshot too: ancestors and
        paths where every function has the same address and parent (they read nothing else); the link tables
        where the kinds and every function's link are the same too, and the tree is drawn by the same kind of
        input; the pair classes, NUMA nodes and class tables where, besides, the kinds, roots, NUMA facts,
        stated classes and placements are the same (what :meth:`pcie_class` and :meth:`numa` read). The tables
        are shared, not copied: an answer either topology works out is the other's too."""
        mine, theirs = self.snap, other.snap
        if len(mine.devices) != len(theirs.devices) or any(
                a.bdf != b.bdf or a.parent != b.parent for a, b in zip(mine.devices, theirs.devices)):
            return
        self._anc, self._anc_set, self._paths = other._anc, other._anc_set, other._paths
        same_kinds = self.device_kind == other.device_kind
        if same_kinds and nccl_own_tree(mine) == nccl_own_tree(theirs) and all(
                a.link == b.link for a, b in zip(mine.devices, theirs.devices)):
            self.link_tables = other.link_tables
        if (same_kinds and self.single_numa == other.single_numa
                and mine.root_numa == theirs.root_numa and mine.path_facts == theirs.path_facts
                and mine.unplaced == theirs.unplaced
                and all(a.root == b.root and a.numa_node == b.numa_node and address_known(a) == address_known(b)
                        for a, b in zip(mine.devices, theirs.devices))):
            self._classes, self._numa, self.class_tables = other._classes, other._numa, other.class_tables

    def acs(self, bdf: str) -> AcsState:
        """A function's ACS, parsed from its config-space bytes once per topology."""
        st = self._acs.get(bdf)
        if st is None:
            st = parse_acs(self.by_bdf[bdf].config)
            if not st.known:
                st = self._acs_from_lines(st)
            self._acs[bdf] = st
        return st

    def _acs_from_lines(self, st: AcsState) -> AcsState:
        """A bridge's ACS where its config space is not shown but ``lspci -vvv | grep ACSCtl`` of the node is:
        when no line has a redirect bit, no bridge redirects (Control taken as every line's bits together)."""
        f, v = host_fact(self.snap, "acsctl_lines"), host_record(self.snap, "acsctl_lines")
        if not v or v.get("redirect") or not v.get("values"):
            return st
        ctrl = 0
        for x in v["values"]:
            ctrl |= x
        return AcsState(known=True, present=True, ctrl=ctrl, cap=ctrl,
                        reason=f"{f.source}: no ACSCtl line of the node has a redirect bit")

    # -- kinds ---------------------------------------------------------------

    def _classify(self) -> None:
        """Endpoints by class; bridges top-down: what hangs below a root port or downstream port and
        holds further bridges is a switch upstream port, and its bridges are downstream ports. The
        PCIe capability's port type, where config space shows it, has the last word."""
        from gdrcheck.pcie.kinds import port_type

        for d in self.snap.devices:
            self.device_kind[d.bdf] = base_kind(d)
        stack = [(b, None) for b in reversed(self.children.get(None, ()))]
        while stack:
            b, parent_kind = stack.pop()
            if self.device_kind.get(b) == "bridge":
                d = self.by_bdf[b]
                kids = self.children.get(b, ())
                if d.kind_hint in BRIDGE_KINDS:
                    k = d.kind_hint
                elif parent_kind is None:
                    k = "root_port"
                elif parent_kind == "switch_upstream":
                    k = "switch_downstream"
                elif any(base_kind(self.by_bdf[c]) == "bridge" for c in kids):
                    k = "switch_upstream"
                else:
                    k = "bridge"
                pt = port_type(d) if d.kind_hint not in BRIDGE_KINDS else None
                k = {4: "root_port", 5: "switch_upstream", 6: "switch_downstream"}.get(pt, k)
                self.device_kind[b] = k
            for c in reversed(self.children.get(b, ())):
                stack.append((c, self.device_kind[b]))

    def _number_gpus(self) -> None:
        """Inputs without a driver view (lspci, XML) get nvidia-smi's order: PCI bus order."""
        from gdrcheck.record import replace

        index = bus_order(b for b, k in self.device_kind.items() if k == "gpu")
        if index and all(self.by_bdf[g].gpu_index is None for g in index):
            for g, i in index.items():
                self.by_bdf[g] = replace(self.by_bdf[g], gpu_index=i)

    def parent(self, bdf: str) -> Optional[str]:
        p = self.by_bdf[bdf].parent
        return p if p in self.by_bdf else None

    def ancestors(self, bdf: str) -> tuple[str, ...]:
        """Bridges above ``bdf``, nearest first."""
        got = self._anc.get(bdf)
        if got is not None:
            return got
        chain: list[str] = []
        p = self.parent(bdf)
        seen = {bdf}
        while p is not None and p not in seen:
            chain.append(p)
            seen.add(p)
            p = self.parent(p)
        got = tuple(chain)
        self._anc[bdf] = got
        return got

    def switch_id(self, bdf: str) -> str:
        """The switch a port belongs to (its upstream port), or the bridge itself."""
        k = self.device_kind.get(bdf)
        if k == "switch_downstream":
            p = self.parent(bdf)
            if p is not None:
                return p
        return bdf

    def of_kind(self, *kinds: str) -> list[str]:
        return sorted((b for b, k in self.device_kind.items() if k in kinds), key=bdf_key)

    def roots(self) -> list[str]:
        roots = set(self.snap.roots) | {d.root for d in self.snap.devices}
        return sorted(roots, key=lambda r: tuple(int(x, 16) for x in r.split(":")))

    def root_numa(self, root: str) -> Optional[int]:
        n = self.snap.root_numa.get(root)
        return n if n is not None else self.single_numa

    def numa(self, bdf: str) -> Optional[int]:
        if bdf in self._numa:
            return self._numa[bdf]
        got = self._numa[bdf] = self._numa_of(bdf)
        return got

    def _numa_of(self, bdf: str) -> Optional[int]:
        d = self.by_bdf[bdf]
        if d.numa_node is not None:
            return d.numa_node
        n = self.snap.root_numa.get(d.root)
        if n is not None:
            return n
        n = self._bus_numa.get(d.bdf.rsplit(":", 1)[0])
        if n is not None:  # a function beside it on the same bus (the other port of a NIC) says where it is
            return n
        return self.single_numa

    @cached_property
    def _bus_numa(self) -> dict[str, int]:
        """``dddd:bb`` -> the NUMA node the functions on that bus that state one agree on (built once)."""
        seen: dict[str, set] = {}
        for d in self.snap.devices:
            if d.numa_node is not None:
                seen.setdefault(d.bdf.rsplit(":", 1)[0], set()).add(d.numa_node)
        return {b: next(iter(n)) for b, n in seen.items() if len(n) == 1}

    # -- path class ----------------------------------------------------------

    def _path(self, a: str, b: str) -> tuple[Optional[str], tuple[str, ...]]:
        """(lowest common bridge, bridges on the path) of ``a`` and ``b``, worked out once per pair."""
        got = self._paths.get((a, b))
        if got is not None:
            return got
        bset = self._anc_set.get(b)
        if bset is None:
            bset = self._anc_set[b] = frozenset(self.ancestors(b))
        aa = self.ancestors(a)
        lca = None if bset.isdisjoint(aa) else next(x for x in aa if x in bset)
        bb = self.ancestors(b)
        bridges = aa + bb if lca is None else aa[: aa.index(lca) + 1] + bb[: bb.index(lca)]
        got = self._paths[(a, b)] = (lca, bridges)
        return got

    def pair_path(self, a: str, b: str) -> tuple[Optional[str], tuple[str, ...]]:
        """(the lowest bridge above both ``a`` and ``b``, None where they share none; the bridges on the path from
        ``a`` to ``b`` through it), worked out once per pair."""
        return self._path(a, b)

    def path_bridges(self, a: str, b: str) -> tuple[str, ...]:
        """Bridges on the path from ``a`` to ``b`` through their lowest common bridge."""
        return self._path(a, b)[1]

    def pcie_class(self, a: str, b: str) -> tuple[Optional[str], tuple[str, ...]]:
        """(class, candidates): class None when the input cannot decide.

        A class the input states for the pair (an ``nvidia-smi topo -m`` cell, ``snap.path_facts``) wins;
        a function whose place in the tree the input does not show leaves every class open. Worked out once
        per pair.
        """
        got = self._classes.get((a, b))
        if got is None:
            got = self._classes[(a, b)] = self._pcie_class(a, b)
        return got

    def _pcie_class(self, a: str, b: str) -> tuple[Optional[str], tuple[str, ...]]:
        if self.snap.path_facts:
            fact = self.snap.path_facts.get((a, b) if bdf_key(a) <= bdf_key(b) else (b, a))
            if fact is not None:
                return fact.cls, ()
        if self.snap.unplaced and (a in self.snap.unplaced or b in self.snap.unplaced):
            # NUMA nodes the input shows for real functions (lspci -vvv's "NUMA node:"): different nodes are SYS
            # whatever the tree, one node rules SYS out (a matrix's NV# cell keeps its PCIe class open, as it was)
            na, nb = self.numa(a), self.numa(b)
            if na is not None and nb is not None and not self._synthetic(a) and not self._synthetic(b):
                return ("SYS", ()) if na != nb else (None, PCIE_CLASSES[:-1])
            return None, PCIE_CLASSES
        return self.tree_class(a, b)

    def _synthetic(self, bdf: str) -> bool:
        return not address_known(self.by_bdf[bdf])

    def tree_class(self, a: str, b: str) -> tuple[Optional[str], tuple[str, ...]]:
        """(class, candidates) from the PCIe tree alone."""
        da, db = self.by_bdf[a], self.by_bdf[b]
        if da.root != db.root:
            na, nb = self.numa(a), self.numa(b)
            if na is None or nb is None:
                return None, ("NODE", "SYS")
            return ("NODE" if na == nb else "SYS"), ()
        lca, bridges = self._path(a, b)
        if lca is None:
            return "PHB", ()
        switches = {self.switch_id(x) for x in bridges}
        return ("PIX" if len(switches) == 1 else "PXB"), ()

    # -- what the devices are ----------------------------------------------------

    def rdma(self, nic: str) -> tuple[Optional[bool], str]:
        """Whether a NIC is (or may be) an RDMA device, and what says so.

        The kernel's word first (its entries in /sys/class/infiniband); where the input shows the kernel's
        RDMA view and the NIC has none, it is not one unless its model is RDMA-capable (then the RDMA
        driver is not bound, which is a finding). Inputs without that view decide from the model, or
        not at all.
        """
        got = self._rdma.get(nic)
        if got is None:
            got = self._rdma[nic] = self._rdma_of(nic)
        return got

    def _rdma_of(self, nic: str) -> tuple[Optional[bool], str]:
        from gdrcheck.device_models import nic_model

        d = self.by_bdf[nic]
        if d.rdma_devices:
            return True, "RDMA device " + ", ".join(d.rdma_devices)
        capable, what = nic_model(d)
        kernel = kernel_view(self.snap) and bool(host_fact(self.snap, "modules_loaded"))
        if nccl_own_tree(self.snap) and d.kind_hint == "nic" and capable is not False:
            return True, "NCCL lists it as a network device"
        if capable is not None:
            if not kernel:
                return capable, f"{what}, decided from the model"
            return capable, what if capable else f"{what}; no RDMA device in /sys/class/infiniband"
        if kernel:
            return False, "no RDMA device in /sys/class/infiniband"
        return None, ""

    def virtual(self) -> Optional[str]:
        """How the input shows a virtual machine (the kernel's view where read, else a device only a
        hypervisor presents), or None."""
        v = host_record(self.snap, "virtualization")
        if v is not None and v.get("virtual") is not None:
            return (v.get("how") or "hypervisor detected") if v["virtual"] else None
        from gdrcheck.device_models import virtual_platform

        got = virtual_platform(self.snap.devices)
        return f"{got[0]}: {got[1]}" if got else None

    def gpudirect_nics(self) -> list[str]:
        """NICs that are, or may be, RDMA devices: the ones that make GPU-NIC pairs."""
        return [n for n in self.of_kind("nic") if self.rdma(n)[0] is not False]

    def nvlink_unseen(self, a: str, b: str) -> str:
        """For two NVLink/NVSwitch (or xGMI) parts in an input that cannot show such links: what they are.
        Empty when the input shows links, or when either GPU is not such a part."""
        if self.snap.shows_nvlink:
            return ""
        got = self._unseen.get((a, b))
        if got is None:
            got = self._unseen[(a, b)] = self._nvlink_unseen(a, b)
        return got

    def _nvlink_unseen(self, a: str, b: str) -> str:
        from gdrcheck.device_models import link_word, nvlink_part

        pa, pb = nvlink_part(self.by_bdf[a]), nvlink_part(self.by_bdf[b])
        if not pa or not pb:
            return ""
        word = link_word(self.by_bdf[a])
        if pa.startswith("GPUs of a model"):
            return (f"NVLink is not in this {self.snap.input_kind} input, which does not name the GPU model "
                    "either, so NVLink/NVSwitch between them cannot be ruled out")
        parts = pa if pa == pb else f"{pa} and {pb}"
        return (f"{word} is not in this {self.snap.input_kind} input, and {parts} GPUs are normally joined by "
                f"{word}{'/NVSwitch' if word == 'NVLink' else ''}")

    def links(self) -> _LinkIndex:
        """The snapshot's NVLinks indexed by the pair they join (built once)."""
        if self._links is None:
            self._links = _LinkIndex(self.snap.nvlinks, self.device_kind)
        return self._links

    def link_word(self, a: str, b: str) -> str:
        """How the input names the GPU link between ``a`` and ``b``: ``NV`` (NVLink) or ``XGMI`` (AMD)."""
        return "XGMI" if any(link.source == "xgmi" for link in self.links().between(a, b)) else "NV"

    def direct_nvlink(self, a: str, b: str) -> bool:
        """Whether a link of non-zero count joins ``a`` and ``b`` directly."""
        return any(link.count for link in self.links().between(a, b))

    def nvlink_count(self, a: str, b: str) -> Optional[int]:
        """NVLinks joining two GPUs: direct links, or through the NVSwitch fabric (worked out once per pair)."""
        if not self.snap.shows_nvlink:
            return None
        got = self._nv_counts.get((a, b), _NOT_ASKED)
        if got is _NOT_ASKED:
            got = self._nv_counts[(a, b)] = self._nvlink_count(a, b)
        return got

    def _nvlink_count(self, a: str, b: str) -> int:
        index = self.links()
        mine = index.between(a, b)
        direct = sum(link.count for link in mine)
        if direct:
            return direct
        fa, fb = index.fabric.get(a, 0), index.fabric.get(b, 0)
        for link in mine:  # a link that joins the pair is not counted as a fabric link for it
            if index.to_fabric(link):
                fa -= link.count if link.a == a else 0
                fb -= link.count if link.a == b else 0
        if fa and fb:
            return min(fa, fb)
        return 0


_NOT_ASKED = object()


class _LinkIndex:
    """A snapshot's NVLinks by the unordered pair of ends they join, and each end's links into the NVSwitch
    fabric (summed counts), so a pair's links are a lookup rather than a scan of every link."""

    def __init__(self, nvlinks, device_kind: dict[str, str]) -> None:
        self.device_kind = device_kind
        self.by_pair: dict[frozenset, list] = {}
        self.fabric: dict[str, int] = {}
        for link in nvlinks:
            self.by_pair.setdefault(frozenset((link.a, link.b)), []).append(link)
            if self.to_fabric(link):
                self.fabric[link.a] = self.fabric.get(link.a, 0) + link.count

    def to_fabric(self, link) -> bool:
        return link.b == "nvswitch" or self.device_kind.get(link.b) == "nvswitch"

    def between(self, a: str, b: str) -> list:
        return self.by_pair.get(frozenset((a, b)), [])
