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
and a note gives both (:mod:`gdrcheck.collectors.pastes.merge_matrix`). The merge is pure: no I/O.
"""

from __future__ import annotations

from gdrcheck.collectors.input_kinds import BY_NAME, LOG_STEP, MERGE_ORDER, TREE_KINDS
from gdrcheck.collectors.pastes.merge_host import HostSteps
from gdrcheck.collectors.pastes.merge_matrix import SYNTH_DOMAIN, MatrixSteps, bus_of  # noqa: F401
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
)
from gdrcheck.pcie.acs import ACS_REDIRECT_MASK
from gdrcheck.pcie.kinds import base_kind
from gdrcheck.record import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional

BASE_KINDS = TREE_KINDS


class Part:
    """One input of the merge: its label, its input kind and what its parser returned."""

    __slots__ = ("label", "input_kind", "data")

    def __init__(self, label: str, input_kind: str, data) -> None:
        self.label, self.input_kind, self.data = label, input_kind, data


class _Merge(MatrixSteps, HostSteps):
    def __init__(self, parts: Sequence[Part]) -> None:
        self.parts = parts
        bases = [p for p in parts if p.input_kind in BASE_KINDS]
        if len(bases) > 1:
            raise InputError(f"{bases[1].label}: a second PCIe tree (the first is {bases[0].label}); give one "
                             "tree per node: a directory, snapshot, lspci -t tree, NCCL XML or hwloc XML")
        self.base: Optional[Snapshot] = bases[0].data if bases else None
        self.many = len(parts) > 1
        base = self.base
        self.devs: dict[str, PciFunction] = {d.bdf: d for d in base.devices} if base else {}
        self.in_tree = set(self.devs)
        self.notes: list[str] = []
        if base:
            self.notes.extend(f"{bases[0].label}: {n}" if self.many else n for n in base.notes)
        self.unplaced: list[str] = []
        self.gpus: tuple[DriverGpu, ...] = base.gpus if base else ()
        self.gpus_from = bases[0].label if base and base.gpus else ""
        self.nvlinks: list[NvLink] = list(base.nvlinks) if base else []
        self.shows_nvlink = base.shows_nvlink if base else False
        self.numa_facts = False
        self.facts: dict[tuple[str, str], PathFact] = dict(base.path_facts) if base else {}
        self.statuses: list[CollectorStatus] = list(base.collectors) if base else []
        self.log_fact = None  # a job's NCCL log (gdrcheck.collectors.pastes.nccl_log): the host fact nccl_log
        self.p2p: dict[tuple[str, str, str], str] = dict(base.p2p_status) if base else {}
        self.host_extra: dict[str, Fact] = {}

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
                d = PciFunction(bdf=vf.bdf, root=bus_of(vf.bdf))
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

    def _place(self, new: list[str], label: str) -> None:
        """Hang functions the tree lacks below the bridge whose secondary bus they sit on."""
        by_sec: dict[tuple[str, int], str] = {}
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
                roots.add(bus_of(b))
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
                elif bus_of(b) in roots:
                    self.devs[b] = replace(d, parent=None, root=bus_of(b))
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
                d = PciFunction(bdf=g.bdf, root=bus_of(g.bdf), vendor=0x10DE, kind_hint="gpu", name=g.name)
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

    # -- a job's NCCL log -------------------------------------------------------------

    def add_logs(self, parts: Sequence[Part]) -> None:
        """One job's log (several ranks' files are one log); of its hosts, one is this node's."""
        from gdrcheck.collectors.pastes.nccl_log import merge_logs
        from gdrcheck.collectors.pastes.nccl_log_host import choose_host
        from gdrcheck.model import Fact

        log = merge_logs([p.data for p in parts])
        label = log.label
        gpus = {b for b, d in self.devs.items() if base_kind(d) == "gpu"}
        host, why = choose_host(log, gpus, self.base.hostname if self.base else None)
        if not self.devs:  # the log alone: its ranks' GPUs, by the bus ids NCCL printed
            from gdrcheck.collectors.pastes.nccl_log_host import bus_ids_shown

            new = []
            for bdf, what in bus_ids_shown(log, host):
                if bdf not in self.devs:
                    self.devs[bdf] = PciFunction(bdf=bdf, root=bus_of(bdf), kind_hint="gpu",
                                                 vendor=0x1002 if log.library == "rccl" else 0x10DE,
                                                 name=f"{what} of the NCCL log")
                    new.append(bdf)
            self._place(new, label)
        unplaced = self._place_log(log, host, label)
        lib = f"RCCL {log.rccl_version}" if log.rccl_version else f"NCCL {log.version or '(version not shown)'}"
        said = f"{lib} log of {len(log.ranks) or 'no'} rank(s)"
        if log.hosts:
            said += f" on {len(log.hosts)} host(s) ({', '.join(log.hosts[:4])}{', ...' if len(log.hosts) > 4 else ''})"
        if host is not None and len(log.hosts) > 1:
            said += f"; only host {host}'s ranks are this node's ({why})"
        self.note(label, said)
        self.log_fact = Fact({"log": log, "host": host, "host_reason": why, "unplaced": unplaced}, source=label)

    def _place_log(self, log, host, label: str) -> list[str]:
        """A matrix's GPUs given the bus ids the log names them by; the log's bus ids this input cannot place."""
        from gdrcheck.collectors.pastes.nccl_log_place import matrix_addresses, readdress

        moved, notes, unplaced = matrix_addresses(log, host, self.devs)
        readdress(moved, self.devs, self.facts, self.p2p, self.nvlinks, self.unplaced)
        for n in notes:
            self.note(label, n)
        return unplaced

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
    logs = [p for p in parts if BY_NAME[p.input_kind].merge_step == LOG_STEP]
    if not any(BY_NAME[p.input_kind].alone for p in parts):
        raise InputError(f"{parts[0].label}: ACSCtl lines without the device lines they belong to show no device; "
                         "pass them beside the tree (--from lspci-tv.txt --from this file), or run "
                         "\"sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'\"")
    for p in sorted((p for p in parts if p.input_kind not in BASE_KINDS and p not in logs),
                    key=lambda p: MERGE_ORDER.index(p.input_kind)):
        getattr(mg, BY_NAME[p.input_kind].merge_step)(p)
    if logs:
        mg.add_logs(logs)
    mg.device_wide_facts()
    return mg.snapshot()
