"""The merge's steps for host-wide pastes and GPU lists without a tree (:mod:`gdrcheck.collectors.pastes.merge`).

A host paste (:mod:`gdrcheck.collectors.pastes.host_pastes`) settles host facts under the live collector's
names; a fact another input already knows is kept and the difference noted. A setting that holds for every
device (an IOMMU off or in pass-through, one NUMA node) is given to every device the merged inputs show.
GPU lists (plain ``nvidia-smi``, nccl-tests' rank lines, BAR1 fragments) are matched by bus id, else by index.
"""

from __future__ import annotations

from gdrcheck.model import DriverGpu, PciFunction, frozen_map
from gdrcheck.pcie.kinds import base_kind
from gdrcheck.record import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class HostSteps:
    """What the merge does with host pastes and GPU lists; mixed into its state (devices, notes, facts)."""

    def add_host(self, part) -> None:
        paste = part.data
        for key, fact in paste.facts.items():
            prev = self.host_extra.get(key) or (self.base.host.get(key) if self.base else None)
            if prev is not None and getattr(prev, "known", False):
                if _said(prev.value) != _said(fact.value):
                    self.note(part.label, f"{key} here differs from {prev.source or 'another input'}, which is kept")
                continue
            self.host_extra[key] = fact
        if "numa_nodes" in paste.facts:
            self.numa_facts = True
        if paste.gpus and any("bar1_total_bytes" in g for g in paste.gpus):
            self._uniform_bar1(paste.gpus, part.label)
        if paste.extra.get("rdma_devices"):
            self._name_nics(tuple(paste.extra["rdma_devices"]), part.label)
        for n in paste.notes:
            self.note(part.label, n)

    def _uniform_bar1(self, rows, label: str) -> None:
        """BAR1 sizes by CUDA's index (gdscheck -p): CUDA's order is not the driver's, so they are given to the
        driver's GPUs only where every row has the same size and the counts match (then the order does not
        matter)."""
        sizes = {g.get("bar1_total_bytes") for g in rows}
        if not self.gpus or len(sizes) != 1 or None in sizes or len(rows) != len(self.gpus):
            if rows:
                self.note(label, "BAR1 sizes by CUDA device index, not matched to the driver's GPUs: "
                          + ", ".join(f"{g['index']}: {g['bar1_total_bytes'] >> 20} MiB" for g in rows))
            return
        size = sizes.pop()
        filled = [g for g in self.gpus if g.bar1_total_bytes is None]
        self.gpus = tuple(replace(g, bar1_total_bytes=size, source="gdscheck -p") if g.bar1_total_bytes is None else g
                          for g in self.gpus)
        if filled:
            self.note(label, f"BAR1 {size >> 20} MiB on each of its {len(rows)} GPU(s), given to the "
                      f"{len(filled)} GPU(s) of {self.gpus_from} without one (the same size for all, so CUDA's "
                      "device order does not matter)")

    def _name_nics(self, names: tuple[str, ...], label: str) -> None:
        """RDMA device names for the tree's NICs that have none, by bus order within the vendor (ibv_devinfo has
        no bus ids; mlx5_N are numbered in PCI order when the driver loads), as a matrix's NICs are matched."""
        from gdrcheck.collectors.pastes.merge_matrix import nic_family

        known = {n for d in self.devs.values() for n in d.rdma_devices}
        todo = [n for n in names if n not in known]
        groups: dict[object, list[str]] = {}
        for n in todo:
            groups.setdefault(nic_family(n), []).append(n)
        said = []
        for fam, members in groups.items():
            if fam is None:
                continue
            cands = sorted((b for b, d in self.devs.items() if base_kind(d) == "nic" and not d.rdma_devices
                            and (d.vendor == fam[1] or (d.vendor is None and fam[2].search(d.name or "")))),
                           key=_bdf_key)
            members = sorted(members, key=_name_key)
            if len(cands) != len(members):
                continue
            for n, b in zip(members, cands):
                self.devs[b] = replace(self.devs[b], rdma_devices=(n,))
            said.append(", ".join(f"{n}={b}" for n, b in zip(members, cands)))
        if said:
            self.note(label, "RDMA devices matched to NICs by bus order within their vendor (ibv_devinfo gives no bus "
                             "ids): " + "; ".join(said))

    def _name_unplaced(self) -> None:
        """nccl-tests' GPUs that its bus numbers do not tell apart: one name for all of them is every unnamed GPU's
        when the counts match (then CUDA's order does not matter); else only the note says them."""
        rows, label = getattr(self, "_unplaced_names", ((), ""))
        names = {r["name"] for r in rows}
        gpus = [b for b, d in self.devs.items() if base_kind(d) == "gpu"]
        if rows and not gpus:  # no other input shows the GPUs: each at a synthetic address, by CUDA's number
            self._synthetic_cuda_gpus(rows, label)
            return
        unnamed = [b for b in gpus if not self.devs[b].name or " of nvidia-smi topo -m" in self.devs[b].name]
        if not rows or len(names) != 1 or len(rows) != len(gpus) or not unnamed:
            return
        name = names.pop()
        for b in unnamed:
            self.devs[b] = replace(self.devs[b], name=name)
        self.note(label, f"{name} given to the {len(unnamed)} GPU(s) without a model name: nccl-tests names each of "
                         f"its {len(rows)} GPU(s) so, so the order does not matter")

    def _synthetic_cuda_gpus(self, rows, label: str) -> None:
        from gdrcheck.collectors.pastes.merge_matrix import synthetic_bdf

        for r in rows:
            bdf = synthetic_bdf(r["index"])
            self.unplaced.append(bdf)
            self.devs[bdf] = PciFunction(bdf=bdf, root=_bus(bdf), vendor=0x10DE, kind_hint="gpu", name=r["name"],
                                         extra=frozen_map({"synthetic": True}))
        self.note(label, f"{len(rows)} GPU(s) by CUDA device number at synthetic addresses in domain ffff "
                         "(\"synthetic\": true in --json): their bus ids are not in this input")

    def device_wide_facts(self) -> None:
        """What holds for every device once every input is in: nccl-tests' one name for GPUs it could not place,
        and an IOMMU mode a paste gives for the whole host (off, pass-through) as every device's mode."""
        self._name_unplaced()
        f = self.host_extra.get("iommu")
        if f is None or not isinstance(f.value, dict) or f.value.get("mode") not in ("off", "passthrough"):
            return
        base = self.base.host.get("iommu_devices") if self.base else None
        if base is not None and getattr(base, "known", False):
            return
        self.host_extra["iommu_devices"] = type(f)({b: f.value["mode"] for b in self.devs}, source=f.source)

    def add_gpu_list(self, part) -> None:
        """GPUs by index with bus id and name (plain nvidia-smi, nccl-tests), or BAR1 by index (a grep of -q)."""
        rows: list[dict[str, Any]] = list(part.data)
        cuda_order = any(r.get("source") == "nccl-tests" for r in rows)
        if cuda_order:
            self._cuda_devices(rows, part.label)
            return
        if self.gpus:
            self._fill_driver_gpus(rows, part.label)
            return
        by_index = {d.gpu_index: b for b, d in self.devs.items() if base_kind(d) == "gpu" and d.gpu_index is not None}
        gpus = []
        new = []
        for r in rows:
            bdf = r.get("bdf") or by_index.get(r["index"])
            if bdf is None:
                from gdrcheck.collectors.pastes.merge_matrix import synthetic_bdf

                bdf = synthetic_bdf(r["index"])
                self.unplaced.append(bdf)
            d = self.devs.get(bdf)
            if d is None:
                d = PciFunction(bdf=bdf, root=_bus(bdf), vendor=0x10DE, kind_hint="gpu", name=r.get("name"),
                                extra=frozen_map({"synthetic": True} if not r.get("bdf") else {}))
                new.append(bdf)
            self.devs[bdf] = replace(d, gpu_index=r["index"], name=d.name or r.get("name"))
            gpus.append(DriverGpu(bdf=bdf, index=r["index"], name=r.get("name"),
                                  bar1_total_bytes=r.get("bar1_total_bytes"), bar1_used_bytes=r.get("bar1_used_bytes"),
                                  bar1_free_bytes=r.get("bar1_free_bytes"), source=r.get("source", part.input_kind),
                                  extra=frozen_map({k: r[k] for k in ("driver_version", "cuda_version") if r.get(k)})))
        placed = [b for b in new if not b.startswith("ffff:")]
        if placed:
            self._place(placed, part.label)
        if any("bar1_total_bytes" in r for r in rows) or any(r.get("bdf") for r in rows):
            self.gpus, self.gpus_from = tuple(gpus), part.label
        driver = next((r["driver_version"] for r in rows if r.get("driver_version")), None)
        if driver and "nvidia_driver_version" not in self.host_extra and not (
                self.base and getattr(self.base.host.get("nvidia_driver_version"), "known", False)):
            from gdrcheck.model import Fact

            self.host_extra["nvidia_driver_version"] = Fact(driver, source=f"{part.label} (nvidia-smi's banner)")
        self.note(part.label, f"{len(rows)} GPU(s) by index"
                  + (" with their bus ids" if all(r.get("bdf") for r in rows) else ""))

    def _cuda_devices(self, rows: list[dict[str, Any]], label: str) -> None:
        """nccl-tests' lines: each CUDA device's bus id and name. CUDA numbers devices its own way (fastest first
        unless CUDA_DEVICE_ORDER=PCI_BUS_ID), so the number is not taken as nvidia-smi's index."""
        shared = [r for r in rows if r.get("bus_shared")]
        if shared:
            self._unplaced_names = (tuple(shared), label)
            self.note(label, f"nccl-tests printed only the bus number for {len(shared)} GPU(s) on one bus "
                      f"(0x{shared[0]['bus_shared']}): the GPUs are not placed by it")
        rows = [r for r in rows if r.get("bdf")]
        new = []
        for r in rows:
            d = self.devs.get(r["bdf"])
            if d is None:
                d = PciFunction(bdf=r["bdf"], root=_bus(r["bdf"]), vendor=0x10DE, kind_hint="gpu", name=r["name"])
                new.append(r["bdf"])
            self.devs[r["bdf"]] = replace(d, name=d.name or r["name"])
        if new:
            self._place(new, label)
        if not rows:
            return
        said = ", ".join(f"CUDA device {r['index']}={r['bdf']} ({r['name']})" for r in rows)
        self.note(label, f"nccl-tests names {len(rows)} GPU(s): {said}"
                  + ("; nccl-tests printed only each bus number: domain 0000 and device 00 assumed"
                     if any(r.get("bus_only") for r in rows) else ""))

    def _fill_driver_gpus(self, rows: list[dict[str, Any]], label: str) -> None:
        """Another input's driver view: this list only adds what it lacks (BAR1, a name), by bus id or index."""
        by_bdf = {r["bdf"]: r for r in rows if r.get("bdf")}
        by_index = {r["index"]: r for r in rows}
        out, filled = [], 0
        for g in self.gpus:
            r = by_bdf.get(g.bdf) or (by_index.get(g.index) if g.index is not None else None)
            if r is None:
                out.append(g)
                continue
            upd = {k: r[k] for k in ("bar1_total_bytes", "bar1_used_bytes", "bar1_free_bytes", "name")
                   if r.get(k) is not None and getattr(g, k) is None}
            filled += bool(upd)
            out.append(replace(g, **upd) if upd else g)
        self.gpus = tuple(out)
        self.note(label, f"{filled} of {len(self.gpus)} GPU(s) of {self.gpus_from} completed from this list")


def _bdf_key(bdf: str):
    from gdrcheck.model import bdf_key

    return bdf_key(bdf)


def _name_key(name: str):
    head, _, num = name.rpartition("_")
    return (head, int(num)) if num.isdigit() else (name, 0)


def _bus(bdf: str) -> str:
    from gdrcheck.collectors.pastes.merge_matrix import bus_of

    return bus_of(bdf)


def _said(value):
    """What a fact says, for telling two inputs' apart: an IOMMU's mode, else the value."""
    return value.get("mode", value) if isinstance(value, dict) and "mode" in value else value
