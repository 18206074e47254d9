"""Several inputs of one node merged into one set of facts (``--from`` given more than once).

At most one input draws the PCIe tree (a directory, a snapshot archive, an
``lspci -t`` tree, an NCCL or hwloc XML); the others add what they carry:

* ``lspci -vvv``: per function class, ids, NUMA node, BARs, link state, driver
  and the config space gdrcheck reads (ACS, Resizable BAR, port type); its
  functions are matched to the tree by bus id; a function the tree lacks is
  placed by its bus number below a bridge whose secondary bus it is, or left
  *unplaced* (every path class open);
* ``nvidia-smi -q`` / ``-q -x``: the driver's GPUs (index, BAR1, memory),
  matched by bus id;
* ``nvidia-smi topo -m`` / ``-mp``: path classes per GPU-GPU and GPU-NIC pair,
  NVLink counts, NUMA and CPU affinity per GPU, the NIC legend. A matrix has no
  bus ids: its GPUs are matched by nvidia-smi's index (the driver view's bus
  id when an ``nvidia-smi -q`` or NVML view is given, else PCI bus order, which
  is nvidia-smi's default order), its NICs by RDMA device name (a NIC that
  already names it) or by bus order among the NICs of the family the name
  belongs to (``mlx5_N``: Mellanox). Each match is stated in a note. Without a
  tree, the matrix's devices are shown at synthetic addresses in domain
  ``ffff``, with a note.

* a job's NCCL log (``NCCL_DEBUG=INFO``, :mod:`gdrcheck.collectors.pastes.nccl_log`): kept whole as the host
  fact ``nccl_log`` with the host of the log that is this node (several ranks' files are one log); given
  alone, its ranks' GPUs at the bus ids NCCL printed.

Where the matrix and the tree disagree on a class, the matrix's class decides
the pair (nvidia-smi classified it on the node itself, from the PCIe tree as
the kernel sees it; a pasted tree may be another node's, cut, or hand-edited)
and a note gives both. The merge is pure: no I/O.
"""

from __future__ import annotations

import re

from gdrcheck.collectors.input_kinds import BY_NAME, MERGE_ORDER, TREE_KINDS
from gdrcheck.errors import InputError
from gdrcheck.model import (
    CollectorStatus,
    DriverGpu,
    Fact,
    Link,
    NvLink,
    PathFact,
    PciFunction,
    Snapshot,
    bdf_key,
    frozen_map,
    root_of,
)
from gdrcheck.patterns import lazy_pattern
from gdrcheck.pcie.acs import ACS_REDIRECT_MASK
from gdrcheck.pcie.kinds import base_kind
from gdrcheck.record import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple

BASE_KINDS = TREE_KINDS
SYNTH_DOMAIN = 0xFFFF
_NIC_FAMILY = (
    (lazy_pattern(r"^mlx[45]_"), 0x15B3, lazy_pattern(r"mellanox|connectx|bluefield", re.I)),
    (lazy_pattern(r"^bnxt_re"), 0x14E4, lazy_pattern(r"broadcom|netxtreme", re.I)),
    (lazy_pattern(r"^efa_?"), 0x1D0F, lazy_pattern(r"amazon|elastic fabric", re.I)),
    (lazy_pattern(r"^(irdma|i40iw)"), 0x8086, lazy_pattern(r"intel", re.I)),
    (lazy_pattern(r"^qedr"), 0x1077, lazy_pattern(r"qlogic", re.I)),
)
TRUST_MATRIX = ("nvidia-smi classified the pair on the node itself from the PCIe tree the kernel sees; "
                "a pasted tree may be cut, hand-edited or of another node")


class Part:
    """One input of the merge: its label, its input kind and what its parser returned."""

    __slots__ = ("label", "input_kind", "data")

    def __init__(self, label: str, input_kind: str, data) -> None:
        self.label, self.input_kind, self.data = label, input_kind, data


def _synthetic_bdf(i: int, nic: bool = False) -> str:
    """Where the matrix's i-th GPU (buses 00-7f) or NIC (buses 80-ff) is shown: domain ffff, one per bus first."""
    if i >= 0x80 * 32 * 8:
        raise InputError(f"more than {0x80 * 32 * 8} {'NICs' if nic else 'GPUs'} in one matrix")
    bus, dev, fn = i % 0x80, i // 0x80 % 32, i // (0x80 * 32)
    return f"{SYNTH_DOMAIN:04x}:{bus + (0x80 if nic else 0):02x}:{dev:02x}.{fn}"


def _bus_of(bdf: str) -> str:
    """The ``dddd:bb`` bus label of an address (domains may have more than four digits)."""
    dom, bus, _dev, _fn = bdf_key(bdf)
    return root_of(dom, bus)


def _pair(a: str, b: str) -> Tuple[str, str]:
    return (a, b) if bdf_key(a) <= bdf_key(b) else (b, a)


class _Merge:
    def __init__(self, parts: Sequence[Part]) -> None:
        self.parts = parts
        bases = [p for p in parts if p.input_kind in BASE_KINDS]
        if len(bases) > 1:
            raise InputError(f"{bases[1].label}: a second PCIe tree (the first is {bases[0].label}); give one "
                             "tree per node: a directory, snapshot, lspci -t tree, NCCL XML or hwloc XML")
        self.base: Optional[Snapshot] = bases[0].data if bases else None
        self.many = len(parts) > 1
        base = self.base
        self.devs: Dict[str, PciFunction] = {d.bdf: d for d in base.devices} if base else {}
        self.in_tree = set(self.devs)
        self.notes: List[str] = []
        if base:
            self.notes.extend(f"{bases[0].label}: {n}" if self.many else n for n in base.notes)
        self.unplaced: List[str] = []
        self.gpus: Tuple[DriverGpu, ...] = base.gpus if base else ()
        self.gpus_from = bases[0].label if base and base.gpus else ""
        self.nvlinks: List[NvLink] = list(base.nvlinks) if base else []
        self.shows_nvlink = base.shows_nvlink if base else False
        self.numa_facts = False
        self.facts: Dict[Tuple[str, str], PathFact] = dict(base.path_facts) if base else {}
        self.statuses: List[CollectorStatus] = list(base.collectors) if base else []
        self.log_fact = None  # a job's NCCL log (gdrcheck.collectors.pastes.nccl_log): the host fact nccl_log
        self.p2p: Dict[Tuple[str, str, str], str] = dict(base.p2p_status) if base else {}
        self.host_extra: Dict[str, Fact] = {}

    def add_acsctl(self, part: Part) -> None:
        """``lspci -vvv | grep ACSCtl``: the ACS Control of the node's bridges, whose is which not said."""
        values = tuple(part.data)
        prev = self.host_extra.get("acsctl_lines")
        if prev is not None:
            values = tuple(prev.value["values"]) + values
        redirect = sum(1 for v in values if v & ACS_REDIRECT_MASK)
        self.host_extra["acsctl_lines"] = Fact({"values": values, "redirect": redirect}, source=part.label)
        self.note(part.label, f"{len(part.data)} ACSCtl line(s) without their functions: "
                  + ("none has a redirect bit (ReqRedir, CmpltRedir, EgressCtrl), so no bridge of the node "
                     "redirects" if not redirect else f"{redirect} with a redirect bit, on bridges the paste does "
                     "not name"))

    def note(self, label: str, text: str) -> None:
        line = f"{label}: {text}" if self.many else text
        if line not in self.notes:  # a file with topo -m and -mp matches its GPUs once
            self.notes.append(line)

    # -- lspci -vvv -----------------------------------------------------------

    def add_verbose(self, part: Part) -> None:
        for n in getattr(part.data, "notes", ()):
            self.note(part.label, n)
        new = []
        for vf in part.data:
            d = self.devs.get(vf.bdf)
            if d is None:
                d = PciFunction(bdf=vf.bdf, root=_bus_of(vf.bdf))
                new.append(vf.bdf)
            else:
                if d.vendor is not None and vf.vendor is not None and (d.vendor, d.device) != (vf.vendor, vf.device):
                    self.note(part.label, f"{vf.bdf} is {vf.vendor:04x}:{vf.device:04x} here but "
                                          f"{d.vendor:04x}:{d.device or 0:04x} in the tree; the tree's ids are kept")
            upd = {}
            for key in ("class_code", "vendor", "device", "revision", "numa_node", "driver", "secondary_bus",
                        "subordinate_bus", "name"):
                v = getattr(vf, key)
                if v is not None and getattr(d, key) is None:
                    upd[key] = v
            if vf.bars and not d.bars:
                upd["bars"] = tuple(vf.bars)
            if vf.link != Link() and d.link == Link():
                upd["link"] = vf.link
            if vf.config is not None and (d.config is None or len(d.config) < len(vf.config)):
                upd["config"] = vf.config
                extra = dict(d.extra)
                extra["config_source"] = f"{part.label} ({vf.config_note})"
                upd["extra"] = frozen_map(extra)
            if vf.numa_node is not None:
                self.numa_facts = True
            self.devs[vf.bdf] = replace(d, **upd) if upd else d
        if new:
            self._place(new, part.label)
        shown = len(part.data) - len(new)
        if self.base is not None:
            self.note(part.label, f"{shown} of {len(part.data)} function(s) matched to the tree by bus id"
                      + (f"; {len(new)} not in the tree" if new else ""))

    def _place(self, new: List[str], label: str) -> None:
        """Hang functions the tree lacks below the bridge whose secondary bus they sit on."""
        by_sec: Dict[Tuple[str, int], str] = {}
        for d in self.devs.values():
            if d.secondary_bus is not None:
                by_sec.setdefault((bdf_key(d.bdf)[0], d.secondary_bus), d.bdf)
        roots = set(self.base.roots) if self.base else set()
        # a bus holding a host bridge or a root port is a root bus; in a whole listing (it shows a host
        # bridge) so is every bus that no bridge leads to, as lspci -t draws it
        whole = any(self.devs[b].class_code is not None and self.devs[b].class_code >> 8 == 0x0600 for b in new)
        # ... where each bridge says which bus it leads to (plain lspci does not: then no bus is known to be a root)
        whole = whole and all(d.secondary_bus is not None for d in self.devs.values() if d.is_bridge)
        secondaries = {(k[0], k[1]) for k in by_sec}
        for b in new:
            if self._is_root_bus_device(self.devs[b]) or (whole and bdf_key(b)[:2] not in secondaries):
                roots.add(_bus_of(b))
        pending = list(new)
        for _round in range(64):
            progress = False
            for b in list(pending):
                d = self.devs[b]
                parent = by_sec.get(bdf_key(b)[:2])
                if parent is not None and parent != b:
                    root = self.devs[parent].root if parent not in pending else None
                    if root is None:
                        continue
                    self.devs[b] = replace(d, parent=parent, root=root)
                elif _bus_of(b) in roots:
                    self.devs[b] = replace(d, parent=None, root=_bus_of(b))
                else:
                    continue
                pending.remove(b)
                progress = True
            if not progress:
                break
        for b in pending:
            self.unplaced.append(b)
        if pending:
            self.note(label, f"{len(pending)} function(s) shown without the bridges above them "
                             f"({', '.join(sorted(pending, key=bdf_key)[:4])}{', ...' if len(pending) > 4 else ''}): "
                             "their path classes stay open; add the node's lspci -tv")

    @staticmethod
    def _is_root_bus_device(d: PciFunction) -> bool:
        from gdrcheck.pcie.kinds import port_type

        return port_type(d) == 4 or (d.class_code is not None and d.class_code >> 8 == 0x0600)

    # -- nvidia-smi -q ----------------------------------------------------------

    def add_smi(self, part: Part) -> None:
        from gdrcheck.collectors.pastes.nvidia_smi import rows_to_gpus

        gpus = rows_to_gpus(part.data)
        shown = sum(1 for d in self.devs.values() if base_kind(d) == "gpu" and d.vendor in (None, 0x10DE))
        if shown > len(gpus):  # 'nvidia-smi -q -i N' or a cut paste: the file's order is not the index
            gpus = tuple(replace(g, index=None) for g in gpus)
            self.note(part.label, f"lists {len(gpus)} of the {shown} NVIDIA GPUs the other input(s) show; "
                                  "their nvidia-smi indexes are not known from it")
        if self.gpus:
            self.note(part.label, f"the driver view of {self.gpus_from} is kept; this file's GPUs are not used")
            return
        self.gpus, self.gpus_from = gpus, part.label
        # the PCI id the driver gives each GPU (its model where no tree names it: 10de:2330 is an H100 SXM5)
        ids = {r["bdf"]: r["pci_id"] for r in part.data if isinstance(r, dict) and r.get("pci_id")}
        new = []
        for g in gpus:
            d = self.devs.get(g.bdf)
            if d is None:
                d = PciFunction(bdf=g.bdf, root=_bus_of(g.bdf), vendor=0x10DE, kind_hint="gpu", name=g.name)
                new.append(g.bdf)
            vendor, device = ids.get(g.bdf) or (None, None)
            if d.device is None and vendor == 0x10DE and d.vendor in (None, 0x10DE):
                d = replace(d, vendor=0x10DE, device=device)
            self.devs[g.bdf] = replace(d, gpu_index=g.index)
        if new:
            self._place(new, part.label)
        if self.base is not None or len(new) < len(gpus):
            self.note(part.label, f"{len(gpus) - len(new)} of {len(gpus)} GPU(s) matched by bus id"
                      + (f"; {len(new)} not in the tree" if new else ""))
        driver = next((r.get("driver_version") for r in part.data if r.get("driver_version")), None)
        self.statuses.append(CollectorStatus(
            "nvidia-smi", "ok", f"{len(gpus)} GPU(s)" + (f", driver {driver}" if driver else "")
            + f" ({part.label})"))

    # -- nvidia-smi topo -m -------------------------------------------------------

    def _gpu_order(self) -> Tuple[List[str], str]:
        if self.gpus and all(g.index is not None for g in self.gpus):
            order = [g.bdf for g in sorted(self.gpus, key=lambda g: g.index)]
            return order, f"by bus id (the driver view of {self.gpus_from} gives each index's bus id)"
        gpus = sorted((b for b, d in self.devs.items() if base_kind(d) == "gpu" and d.vendor in (None, 0x10DE)),
                      key=bdf_key)
        return gpus, "by nvidia-smi's index order (PCI bus order)"

    def _nic_match(self, m, label: str) -> Dict[str, str]:
        nics = [b for b, d in self.devs.items() if base_kind(d) == "nic"]
        out: Dict[str, str] = {}
        by_name = {n: b for b in nics for n in self.devs[b].rdma_devices}
        cols = m.nics
        if cols and all(m.rdma_name(c) in by_name for c in cols):
            for c in cols:
                out[c] = by_name[m.rdma_name(c)]
            self.note(label, "NICs matched by RDMA device name")
            return out
        groups: Dict[object, List[str]] = {}
        for c in cols:
            name = m.rdma_name(c)
            fam = next((f for f in _NIC_FAMILY if f[0].match(name)), None)
            groups.setdefault(fam, []).append(c)
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

    def _synthetic(self, m, label: str, gmap: Dict[str, str], nmap: Dict[str, str], gpus: bool, nics: bool) -> None:
        made = []
        for i, g in enumerate(m.gpus if gpus else ()):
            if g in gmap:
                continue
            bdf = _synthetic_bdf(i)
            self.devs[bdf] = PciFunction(bdf=bdf, root=_bus_of(bdf), kind_hint="gpu",
                                         name=f"{g} of nvidia-smi topo -m", gpu_index=int(g[3:]),
                                         extra=frozen_map({"synthetic": True}))
            gmap[g] = bdf
            made.append(f"{g}={bdf}")
            self.unplaced.append(bdf)
        for j, c in enumerate(m.nics if nics else ()):
            if c in nmap:
                continue
            bdf = _synthetic_bdf(j, nic=True)
            name = m.rdma_name(c)
            self.devs[bdf] = PciFunction(bdf=bdf, root=_bus_of(bdf), kind_hint="nic",
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

    def add_matrices(self, part: Part) -> None:
        """``nvidia-smi topo`` output: one matrix, or several (-m and -p2p pasted in one file)."""
        for m in (part.data if isinstance(part.data, (list, tuple)) else [part.data]):
            self.add_matrix(Part(part.label, part.input_kind, m))

    def add_matrix(self, part: Part) -> None:
        m = part.data
        label = part.label
        for n in m.notes:
            self.note(label, n)
        order, how = self._gpu_order()
        gmap: Dict[str, str] = {}
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

    def _p2p(self, m, label: str, gmap: Dict[str, str]) -> None:
        """A ``-p2p`` matrix: the driver's P2P status per GPU pair for its capability (what NCCL reads from NVML)."""
        caps = m.p2p.split("+")
        gpus = [g for g in m.gpus if g in gmap]
        n = 0
        for i, g in enumerate(gpus):
            for h in gpus[i + 1:]:
                code = m.code(g, h)
                if code is None or code == "X":
                    continue
                for cap in caps:
                    key = (gmap[g], gmap[h], cap)
                    prev = self.p2p.get(key) or self.p2p.get((gmap[h], gmap[g], cap))
                    if prev is not None and prev != code:
                        self.note(label, f"{g}-{h}: P2P {cap} {code} here, {prev} in another input; {prev} kept")
                        continue
                    self.p2p[key] = code
                    n += 1
        if n:
            self.note(label, f"the driver's P2P {m.p2p.replace('+', ' and ')} status of {len(gpus)} GPU(s) read "
                             "from nvidia-smi topo -p2p")

    def _classes(self, m, label: str, gmap: Dict[str, str], nmap: Dict[str, str]) -> None:
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

    # -- a job's NCCL log -------------------------------------------------------------

    def add_logs(self, parts: Sequence[Part]) -> None:
        """One job's log (several ranks' files are one log); of its hosts, one is this node's."""
        from gdrcheck.collectors.pastes.nccl_log import choose_host, merge_logs
        from gdrcheck.model import Fact

        log = merge_logs([p.data for p in parts])
        label = log.label
        gpus = {b for b, d in self.devs.items() if base_kind(d) == "gpu"}
        host, why = choose_host(log, gpus, self.base.hostname if self.base else None)
        if not self.devs:  # the log alone: its ranks' GPUs, by the bus ids NCCL printed
            from gdrcheck.collectors.pastes.nccl_log import bus_ids_shown

            new = []
            for bdf, what in bus_ids_shown(log, host):
                if bdf not in self.devs:
                    self.devs[bdf] = PciFunction(bdf=bdf, root=_bus_of(bdf), vendor=0x10DE, kind_hint="gpu",
                                                 name=f"{what} of the NCCL log")
                    new.append(bdf)
            self._place(new, label)
        said = f"NCCL {log.version or '(version not shown)'} log of {len(log.ranks) or 'no'} rank(s)"
        if log.hosts:
            said += f" on {len(log.hosts)} host(s) ({', '.join(log.hosts[:4])}{', ...' if len(log.hosts) > 4 else ''})"
        if host is not None and len(log.hosts) > 1:
            said += f"; only host {host}'s ranks are this node's ({why})"
        self.note(label, said)
        self.log_fact = Fact({"log": log, "host": host, "host_reason": why}, source=label)

    # -- result -------------------------------------------------------------------

    def snapshot(self, with_facts: bool = True) -> Snapshot:
        base = self.base
        devices = tuple(sorted(self.devs.values(), key=lambda d: bdf_key(d.bdf)))
        roots = tuple(sorted({*(base.roots if base else ()), *(d.root for d in devices)},
                             key=lambda r: tuple(int(x, 16) for x in r.split(":"))))
        # the kind of the input that drew the tree (rules that ask what the input can show ask about it);
        # without one, the paste's own kind, or "pastes" for several
        kinds = [p.input_kind for p in self.parts]
        kind = base.input_kind if base else (kinds[0] if len(kinds) == 1 else "pastes")
        host = dict(base.host) if base else {}
        if self.log_fact is not None:
            host["nccl_log"] = self.log_fact
        host.update(self.host_extra)
        return Snapshot(
            input_kind=kind,
            label=" + ".join(p.label for p in self.parts),
            devices=devices, roots=roots,
            root_numa=base.root_numa if base else frozen_map({}),
            numa_known=(base.numa_known if base else False) or self.numa_facts,
            shows_nvlink=self.shows_nvlink, nvlinks=tuple(self.nvlinks), gpus=self.gpus,
            p2p_status=frozen_map(self.p2p),
            host=frozen_map(host), collectors=tuple(self.statuses),
            hostname=base.hostname if base else None,
            notes=tuple(self.notes),
            path_facts=frozen_map(self.facts if with_facts else {}),
            unplaced=tuple(self.unplaced),
            input_kinds=tuple(dict.fromkeys(kinds)),
        )


def merge(parts: Sequence[Part]) -> Snapshot:
    """One node's facts from its inputs (already parsed), in the order: tree, lspci -vvv, nvidia-smi -q, matrices,
    a job's NCCL log (what NCCL chose, for :mod:`gdrcheck.rules.nccl_log` to hold beside the prediction); each
    added by its kind's merge step (:data:`gdrcheck.collectors.input_kinds.INPUT_KINDS`)."""
    mg = _Merge(parts)
    logs = [p for p in parts if p.input_kind == "nccl-log"]
    if all(p.input_kind == "acsctl-grep" for p in parts):
        raise InputError(f"{parts[0].label}: ACSCtl lines without the device lines they belong to show no device; "
                         "pass them beside the tree (--from lspci-tv.txt --from this file), or run "
                         "\"sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'\"")
    for p in sorted((p for p in parts if p.input_kind not in BASE_KINDS and p.input_kind != "nccl-log"),
                    key=lambda p: MERGE_ORDER.index(p.input_kind)):
        getattr(mg, BY_NAME[p.input_kind].merge_step)(p)
    if logs:
        mg.add_logs(logs)
    return mg.snapshot()
