"""The ``topology`` document: one object per PCI function, per the contract."""

from __future__ import annotations

from gdrcheck import FORMAT_VERSION, VIEW_FORMAT_VERSION, __version__
from gdrcheck.host_facts import host_fact
from gdrcheck.model import Bar, address_known, bdf_key
from gdrcheck.pcie.topology import Topology

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def _bar_doc(b: Bar) -> dict[str, Any]:
    return {"index": b.index, "size_bytes": b.size, "is_64bit": b.is_64bit,
            "prefetchable": b.prefetchable, "unset": b.unset}


def names_doc(d) -> dict[str, Any]:
    """The Linux names of a function (netdevs, RDMA devices, NVMe controllers), where it has any."""
    out: dict[str, Any] = {}
    if d.netdevs:
        out["netdevs"] = list(d.netdevs)
    if d.rdma_devices:
        out["rdma_devices"] = list(d.rdma_devices)
    if d.nvme_names:
        out["nvme_names"] = list(d.nvme_names)
    if not address_known(d):
        out["synthetic"] = True  # an address gdrcheck made up (a topo -m device without a bus id)
    return out


def rdma_doc(topo: Topology, bdf: str) -> dict[str, Any]:
    """``rdma``: whether the NIC is (or may be) a GPUDirect RDMA device, null where the input cannot tell;
    ``rdma_basis``: what decided it."""
    capable, basis = topo.rdma(bdf)
    out: dict[str, Any] = {"rdma": capable}
    if basis:
        out["rdma_basis"] = basis
    return out


def device_doc(topo: Topology, bdf: str) -> dict[str, Any]:

    d = topo.by_bdf[bdf]
    link = d.link
    doc: dict[str, Any] = {
        "bdf": d.bdf,
        "parent": topo.parent(d.bdf),
        "root": d.root,
        "kind": topo.device_kind[d.bdf],
        "numa_node": topo.numa(d.bdf) if topo.snap.numa_known else None,
        "class": f"0x{d.class_code:06x}" if d.class_code is not None else None,
        "vendor_id": f"0x{d.vendor:04x}" if d.vendor is not None else None,
        "device_id": f"0x{d.device:04x}" if d.device is not None else None,
        "name": d.name,
        "driver": d.driver,
        "link": {
            "current_speed_gts": link.cur_speed, "current_width": link.cur_width,
            "max_speed_gts": link.max_speed, "max_width": link.max_width,
        },
        "bars": [_bar_doc(b) for b in d.bars],
    }
    if d.gpu_index is not None:
        doc["gpu_index"] = d.gpu_index
    if doc["kind"] == "gpu":
        doc.update(gpu_link_doc(topo, bdf))
        model = _model_unnamed(d)
        if model:
            doc["model"] = model
    doc.update(names_doc(d))
    if doc["kind"] == "nic":
        doc.update(rdma_doc(topo, bdf))
    if d.physfn:
        doc["physfn"] = d.physfn
    if d.unlisted_upstream:
        doc["unlisted_upstream"] = list(d.unlisted_upstream)
    if d.iommu_group is not None:
        doc["iommu_group"] = d.iommu_group
    if d.is_bridge and topo.device_kind[d.bdf] != "gpu":
        doc["acs"] = acs_doc(topo, d.bdf)
    return doc


def _model_unnamed(d) -> Optional[str]:
    """The GPU's model from gdrcheck's table (gdrcheck.device_models) where the input names it only by its
    device id (an lspci whose PCI database is older: "NVIDIA Corporation Device 2335") or not at all."""
    from gdrcheck.device_models import gpu_model, nvidia_device_id

    if d.name and not (nvidia_device_id(d) is not None and d.name.rstrip().split(" ")[-1].lower()
                       in (f"{nvidia_device_id(d):04x}", f"10de:{nvidia_device_id(d):04x}")):
        return None
    return gpu_model(d)


def gpu_link_doc(topo: Topology, bdf: str) -> dict[str, Any]:
    """NVML's NVSwitch fabric state (``fabric``) and NVLink link state (``nvlink``) of a GPU, where shown."""
    g = next((x for x in topo.snap.gpus if x.bdf == bdf), None)
    extra = (g.extra or {}) if g is not None else {}
    return {k: dict(extra[k]) for k in ("fabric", "nvlink") if isinstance(extra.get(k), dict)}


def acs_doc(topo, bdf: str) -> dict[str, Any]:
    """A bridge's ACS as read, with ``redirect``: whether it sends peer traffic up to the root complex
    (true/false, null where the registers could not be read)."""
    from gdrcheck.pcie.acs import redirect_names, redirects

    state = topo.acs(bdf)
    doc = state.to_doc()
    doc["redirect"] = redirects(state)
    if doc["redirect"]:
        doc["redirect_bits"] = redirect_names(state.ctrl)
    return doc


def _fact(snap, name: str, pick=None) -> dict[str, Any]:
    f = host_fact(snap, name)
    if f is None:
        return {"value": None, "reason": "not read from this input"}
    v = f.value
    if v is not None and pick is not None:
        v = pick(v)
    out: dict[str, Any] = {"value": v}
    if f.source:
        out["source"] = f.source
    if v is None and (f.reason or f.settle):
        out["reason"] = f.reason or f.settle
    return out


def _peermem(v) -> Optional[str]:
    if not isinstance(v, dict):
        return None
    loaded = [m for m, key in (("nvidia_peermem", "nvidia_peermem_loaded"), ("nv_peer_mem", "nv_peer_mem_loaded"))
              if v.get(key)]
    return ", ".join(loaded) if loaded else "none loaded"


def host_facts_doc(snap) -> dict[str, Any]:
    """The host facts a reader looks at first: driver, kernel, IOMMU, peer memory, CPU, virtualisation."""
    return {
        "kernel_release": _fact(snap, "kernel_release"),
        "nvidia_driver_version": _fact(snap, "nvidia_driver_version"),
        "nvidia_driver_flavor": _fact(snap, "nvidia_driver_flavor"),
        "iommu_mode": _fact(snap, "iommu", lambda v: v.get("mode") if isinstance(v, dict) else None),
        "peermem": _fact(snap, "peermem", _peermem),
        "dmabuf_possible": _fact(snap, "dmabuf", lambda v: v.get("possible") if isinstance(v, dict) else None),
        "cpu_vendor": _fact(snap, "cpu_vendor"),
        "cpu_arch": _fact(snap, "cpu_arch"),
        "virtual": _fact(snap, "virtualization", lambda v: v.get("virtual") if isinstance(v, dict) else None),
        "numa_nodes": _fact(snap, "numa_nodes", list),
    }


# topology is an informational view: read, it passes (its exit status 0, as the contract says)
TOPOLOGY_STATUS = "pass"

def collectors_doc(snap) -> list[dict[str, str]]:
    return [{"name": c.name, "status": c.status, "detail": c.detail, **({"hint": c.hint} if c.hint else {})}
            for c in snap.collectors]


def header_doc(snap, format_version: str = FORMAT_VERSION) -> dict[str, Any]:
    return {
        "format_version": format_version,
        "gdrcheck_version": __version__,
        "host": snap.hostname,
    }


def topology_doc(topo: Topology, describe_input: bool = False) -> dict[str, Any]:
    """``describe_input``: add where the facts came from (for pages that say so); left out of
    ``--json`` so that a snapshot replays to the same bytes as the live run."""
    snap = topo.snap
    doc = header_doc(snap, VIEW_FORMAT_VERSION)
    # a function the input shows without the bridges above it (an lspci -vvv alone) is on no root bus the input
    # shows: its device keeps the bus as "root", and no root bus is listed for it
    unplaced = set(snap.unplaced)
    placed = {d.root for d in snap.devices if d.bdf not in unplaced}
    placed |= set(snap.roots) - {d.root for d in snap.devices}
    doc["roots"] = [{"root": r, "numa_node": topo.root_numa(r) if snap.numa_known else None}
                    for r in topo.roots() if not unplaced or r in placed]
    doc["devices"] = [device_doc(topo, b) for b in sorted(topo.by_bdf, key=bdf_key)]
    doc["collectors"] = collectors_doc(snap)
    if snap.notes:
        doc["notes"] = list(snap.notes)
    if describe_input:
        doc["input"] = {"kind": snap.input_kind, "label": snap.label}
    doc["host_facts"] = host_facts_doc(snap)
    doc["status"] = TOPOLOGY_STATUS
    return doc
