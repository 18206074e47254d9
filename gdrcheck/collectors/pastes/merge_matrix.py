"""The merge's steps for ``nvidia-smi topo -m`` / ``-mp`` / ``-p2p`` (:mod:`gdrcheck.collectors.pastes.merge`).

A matrix has no bus ids: its GPUs are matched by nvidia-smi's index, its NICs by RDMA device name or by bus
order within their vendor, each match stated in a note; without a tree its devices are shown at synthetic
addresses in domain ``ffff``. Where the matrix and the tree disagree on a class, the matrix's class decides.
"""

from __future__ import annotations

import re

from gdrcheck.errors import InputError
from gdrcheck.model import NvLink, PathFact, PciFunction, bdf_key, frozen_map, root_of
from gdrcheck.patterns import lazy_pattern
from gdrcheck.pcie.kinds import base_kind
from gdrcheck.record import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass

SYNTH_DOMAIN = 0xFFFF
# the -p2p words that mean the same whichever mode printed them: OK, and the platform's refusals
MODE_FREE = frozenset({"OK", "CNS", "GNS", "TNS", "DR"})
_NIC_FAMILY = (
    (lazy_pattern(r"^mlx[45]_"), 0x15B3, lazy_pattern(r"mellanox|connectx|bluefield", re.I)),
    (lazy_pattern(r"^bnxt_re"), 0x14E4, lazy_pattern(r"broadcom|netxtreme", re.I)),
    (lazy_pattern(r"^efa_?"), 0x1D0F, lazy_pattern(r"amazon|elastic fabric", re.I)),
    (lazy_pattern(r"^(irdma|i40iw)"), 0x8086, lazy_pattern(r"intel", re.I)),
    (lazy_pattern(r"^qedr"), 0x1077, lazy_pattern(r"qlogic", re.I)),
)
TRUST_MATRIX = ("nvidia-smi classified the pair on the node itself from the PCIe tree the kernel sees; "
                "a pasted tree may be cut, hand-edited or of another node")


def nic_family(name: str):
    """The (name pattern, PCI vendor, vendor words) family an RDMA device name belongs to, or None."""
    return next((f for f in _NIC_FAMILY if f[0].match(name)), None)


def synthetic_bdf(i: int, nic: bool = False) -> str:
    """Where the matrix's i-th GPU (buses 00-7f) or NIC (buses 80-ff) is shown: domain ffff, one per bus first."""
    if i >= 0x80 * 32 * 8:
        raise InputError(f"more than {0x80 * 32 * 8} {'NICs' if nic else 'GPUs'} in one matrix")
    bus, dev, fn = i % 0x80, i // 0x80 % 32, i // (0x80 * 32)
    return f"{SYNTH_DOMAIN:04x}:{bus + (0x80 if nic else 0):02x}:{dev:02x}.{fn}"


def bus_of(bdf: str) -> str:
    """The ``dddd:bb`` bus label of an address (domains may have more than four digits)."""
    dom, bus, _dev, _fn = bdf_key(bdf)
    return root_of(dom, bus)


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if bdf_key(a) <= bdf_key(b) else (b, a)


class MatrixSteps:
    """What the merge does with a matrix; mixed into its state (devices, notes, facts)."""

    def _gpu_order(self) -> tuple[list[str], str]:
        if self.gpus and all(g.index is not None for g in self.gpus):
            order = [g.bdf for g in sorted(self.gpus, key=lambda g: g.index)]
            return order, f"by bus id (the driver view of {self.gpus_from} gives each index's bus id)"
        gpus = sorted((b for b, d in self.devs.items() if base_kind(d) == "gpu" and d.vendor in (None, 0x10DE)),
                      key=bdf_key)
        return gpus, "by nvidia-smi's index order (PCI bus order)"

    def _nic_match(self, m, label: str) -> dict[str, str]:
        nics = [b for b, d in self.devs.items() if base_kind(d) == "nic"]
        out: dict[str, str] = {}
        by_name = {n: b for b in nics for n in self.devs[b].rdma_devices}
        cols = m.nics
        if cols and all(m.rdma_name(c) in by_name for c in cols):
            for c in cols:
                out[c] = by_name[m.rdma_name(c)]
            self.note(label, "NICs matched by RDMA device name")
            return out
        groups: dict[object, list[str]] = {}
        for c in cols:
            name = m.rdma_name(c)
            groups.setdefault(nic_family(name), []).append(c)
        said = []
        for fam, members in groups.items():
            if fam is None:
                cands = sorted(nics, key=bdf_key)
            else:
                cands = sorted((b for b in nics if self.devs[b].vendor == fam[1]
                                or (self.devs[b].vendor is None and fam[2].search(self.devs[b].name or ""))),
                               key=bdf_key)
            names = ", ".join(m.rdma_name(c) for c in members)
            if len(cands) != len(members):
                self.note(label, f"NICs {names} not matched: the tree shows {len(cands)} NIC function(s) of their "
                                 f"family, the matrix {len(members)}; their pairs are not judged from the matrix")
                continue
            for c, b in zip(members, cands):
                out[c] = b
            said.append(", ".join(f"{m.rdma_name(c)}={b}" for c, b in zip(members, cands)))
        if said:
            self.note(label, "NICs matched by bus order within their vendor (the matrix gives no bus ids): "
                      + "; ".join(said))
        return out

    def _synthetic(self, m, label: str, gmap: dict[str, str], nmap: dict[str, str], gpus: bool, nics: bool) -> None:
        made = []
        for i, g in enumerate(m.gpus if gpus else ()):
            if g in gmap:
                continue
            bdf = synthetic_bdf(i)
            self.devs[bdf] = PciFunction(bdf=bdf, root=bus_of(bdf), kind_hint="gpu",
                                         name=f"{g} of nvidia-smi topo -m", gpu_index=int(g[3:]),
                                         extra=frozen_map({"synthetic": True}))
            gmap[g] = bdf
            made.append(f"{g}={bdf}")
            self.unplaced.append(bdf)
        for j, c in enumerate(m.nics if nics else ()):
            if c in nmap:
                continue
            bdf = synthetic_bdf(j, nic=True)
            name = m.rdma_name(c)
            self.devs[bdf] = PciFunction(bdf=bdf, root=bus_of(bdf), kind_hint="nic",
                                         name=f"{c} of nvidia-smi topo -m",
                                         rdma_devices=(name,) if not name.startswith("NIC") else (),
                                         extra=frozen_map({"synthetic": True}))
            nmap[c] = bdf
            made.append(f"{c}={bdf}")
            self.unplaced.append(bdf)
        if made:
            self.note(label, "the matrix gives no bus ids; its devices are named as nvidia-smi names them "
                             f"({', '.join(m.split('=')[0] for m in made)}), at synthetic addresses in domain ffff in "
                             "--json (\"synthetic\": true)")

    def add_matrices(self, part) -> None:
        """``nvidia-smi topo`` output: one matrix, or several (-m and -p2p pasted in one file)."""
        for m in (part.data if isinstance(part.data, (list, tuple)) else [part.data]):
            self.add_matrix(part.label, m)

    def add_matrix(self, label: str, m) -> None:
        for n in m.notes:
            self.note(label, n)
        order, how = self._gpu_order()
        gmap: dict[str, str] = {}
        if order and len(order) == len(m.gpus):
            gmap = {g: order[int(g[3:])] for g in m.gpus if int(g[3:]) < len(order)}
            if not all(b.startswith(f"{SYNTH_DOMAIN:04x}:") for b in gmap.values()):  # not the matrix's own
                self.note(label, f"GPUs matched {how}: " + ", ".join(f"{g}={b}" for g, b in gmap.items()))
        elif order:
            self.note(label, f"the matrix shows {len(m.gpus)} GPU(s), the other input(s) {len(order)}: GPUs not "
                             "matched; their pairs are not judged from the matrix")
        has_nics = any(base_kind(d) == "nic" for d in self.devs.values())
        nmap = self._nic_match(m, label) if has_nics and m.nics else {}
        # no device of a kind in the other inputs: the matrix's own, at synthetic addresses
        self._synthetic(m, label, gmap, nmap, gpus=not order, nics=not has_nics)
        for g, b in gmap.items():
            d = self.devs[b]
            upd = {}
            numa = m.numa_affinity.get(g)
            if numa is not None:
                self.numa_facts = True
                if d.numa_node is None:
                    upd["numa_node"] = numa
                elif d.numa_node != numa:
                    self.note(label, f"{g} ({b}): NUMA node {numa} here, {d.numa_node} in another input; "
                                     f"{d.numa_node} kept")
            cpus = m.cpu_affinity.get(g)
            if cpus and cpus != "N/A" and d.local_cpulist is None:
                upd["local_cpulist"] = cpus
            if upd:
                self.devs[b] = replace(d, **upd)
        for c, b in nmap.items():
            name = m.rdma_name(c)
            d = self.devs[b]
            if not d.rdma_devices and not name.startswith("NIC"):
                self.devs[b] = replace(d, rdma_devices=(name,))
        if m.p2p is not None:
            self._p2p(m, label, gmap)
            return
        self._classes(m, label, gmap, nmap)

    def _p2p(self, m, label: str, gmap: dict[str, str]) -> None:
        """A ``-p2p`` matrix: the driver's P2P status per GPU pair for its capability (what NCCL reads from NVML).

        One printed without its command (as nvidia-smi prints it) gives the read and write status NCCL checks
        (v2.30.7 ``src/graph/paths.cc:373-410``) where its word means the same whichever mode printed it: OK, and
        the platform's refusals (CNS, GNS, TNS, DR). NS does not: ``-p2p n`` and ``-p2p p`` print NS where P2P
        reads and writes work (fixtures/nccl-runs-4gpu-vm/smi/topo-p2p-p.txt), so an NS pair stays unknown."""
        caps = m.p2p.split("+") if m.p2p else ["read", "write"]
        gpus = [g for g in m.gpus if g in gmap]
        n = 0
        for i, g in enumerate(gpus):
            for h in gpus[i + 1:]:
                code = m.code(g, h)
                if code is None or code == "X" or (not m.p2p and code not in MODE_FREE):
                    continue
                for cap in caps:
                    key = (gmap[g], gmap[h], cap)
                    prev = self.p2p.get(key) or self.p2p.get((gmap[h], gmap[g], cap))
                    if prev is not None and prev != code:
                        self.note(label, f"{g}-{h}: P2P {cap} {code} here, {prev} in another input; {prev} kept")
                        continue
                    self.p2p[key] = code
                    n += 1
        if m.p2p and n:
            self.note(label, f"the driver's P2P {m.p2p.replace('+', ' and ')} status of {len(gpus)} GPU(s) read "
                             "from nvidia-smi topo -p2p")
        elif not m.p2p:
            self.note(label, _untitled_p2p_note(m, gpus))

    def _classes(self, m, label: str, gmap: dict[str, str], nmap: dict[str, str]) -> None:
        from gdrcheck.pcie.topology import Topology

        tree = Topology(self.snapshot(with_facts=False))
        cols = {**gmap, **nmap}
        gpus = [g for g in m.gpus if g in gmap]
        pairs = [(g, h) for i, g in enumerate(gpus) for h in gpus[i + 1:]]
        pairs += [(g, c) for g in gpus for c in m.nics if c in nmap]
        nv_all = bool(gpus) and len(gpus) == len(m.gpus) and not m.pcie_only
        disagree = []
        nv_pairs = []
        for x, y in pairs:
            code = m.code(x, y)
            if code is None:
                continue
            a, b = cols[x], cols[y]
            if code.startswith("NV"):
                nv_pairs.append((a, b, int(code[2:])))
                continue
            key = _pair(a, b)
            t_cls, t_cands = (None, ()) if (a in self.unplaced or b in self.unplaced) else tree.tree_class(a, b)
            tree_said = t_cls if t_cls is not None else ("/".join(t_cands) if t_cands else None)
            if t_cls is not None and t_cls != code or (t_cls is None and t_cands and code not in t_cands):
                disagree.append(f"{x} ({a}) - {y} ({b}): {code} in the matrix, {tree_said} from the tree")
                fact = PathFact(code, label, tree=tree_said, why=TRUST_MATRIX)
            else:
                fact = PathFact(code, label)
            prev = self.facts.get(key)
            if prev is not None and prev.cls != code:
                self.note(label, f"{x}-{y}: {code} here, {prev.cls} in {prev.source}; {prev.source} kept")
                continue
            self.facts[key] = fact
        if nv_pairs:
            have = {(n.a, n.b) for n in self.nvlinks} | {(n.b, n.a) for n in self.nvlinks}
            for a, b, count in nv_pairs:
                if (a, b) not in have:
                    self.nvlinks.append(NvLink(a, b, count, source=label))
        if nv_all:
            self.shows_nvlink = True
        if disagree:
            self.note(label, f"the matrix and the tree disagree on {len(disagree)} pair(s): "
                      + "; ".join(disagree[:4]) + ("; ..." if len(disagree) > 4 else "")
                      + f". Verdicts use the matrix's class: {TRUST_MATRIX}")


def _untitled_p2p_note(m, gpus: list[str]) -> str:
    """What a ``-p2p`` matrix printed without its command settles, and what it leaves to the command."""
    cells = [m.code(g, h) for i, g in enumerate(gpus) for h in gpus[i + 1:]]
    said = sorted({c for c in cells if c in MODE_FREE})
    open_ = sorted({c for c in cells if c not in MODE_FREE and c not in (None, "X")})
    out = ("an nvidia-smi topo -p2p matrix printed without its command (r, w, rw, n, a or p): "
           + (f"{', '.join(said)} read as the driver's P2P read and write status (the same in every mode)"
              if said else "nothing in it says the same in every mode"))
    if open_:
        out += (f"; {', '.join(open_)} left unknown (-p2p n and p print NS where P2P works): "
                "'nvidia-smi topo -p2p r' and 'nvidia-smi topo -p2p w', each with its command line, settle it")
    return out
