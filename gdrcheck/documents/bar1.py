"""The ``bar1`` document: each GPU's BAR1 as the driver, the bus and the ReBAR capability see it."""

from __future__ import annotations

from gdrcheck.documents.topology import collectors_doc, header_doc
from gdrcheck.model import address_known
from gdrcheck.reach import on_node
from gdrcheck.rules.bar1 import GpuBar1, driver_answered, gpu_views

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

BAR1_CODES = range(100, 120)


def is_bar1_code(code: str) -> bool:
    return code.startswith("GDR") and code[3:].isdigit() and int(code[3:]) in BAR1_CODES


def _disagreements(v: GpuBar1) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    d = v.drv
    bus = v.bus.get("sysfs_bar1_bytes")
    cur = v.bus.get("rebar_current_bytes")
    if d is not None and d.bar1_total_bytes is not None and bus and not v.unset and d.bar1_total_bytes != bus:
        out.append({"field": "bar1_total_bytes", "values": {d.source: d.bar1_total_bytes, "sysfs": bus},
                    "message": f"{d.source} says {d.bar1_total_bytes} bytes, sysfs {v.res_name()} {bus} bytes"})
    if cur is not None and bus and not v.unset and cur != bus and v.bus.get("rebar_source") == "config":
        out.append({"field": "rebar_current_bytes", "values": {"rebar": cur, "sysfs": bus},
                    "message": f"Resizable BAR control says {cur} bytes, sysfs {v.res_name()} {bus} bytes"})
    return out


def gpu_doc(v: GpuBar1, driver_view: bool = True) -> dict[str, Any]:
    """``driver_listed``: whether the NVIDIA driver lists the GPU; null where the input has no driver view (an
    lspci paste, an XML file, a node without NVML and nvidia-smi), which can show neither."""
    d = v.drv
    from_driver = d is not None and d.bar1_total_bytes is not None
    total = d.bar1_total_bytes if from_driver else v.total
    used = d.bar1_used_bytes if from_driver else None
    doc: dict[str, Any] = {
        "bdf": v.bdf,
        "index": v.index,
        "name": v.name,
        "uuid": d.uuid if d is not None else None,
        "bar1_total_bytes": total,
        "bar1_used_bytes": used,
        "bar1_free_bytes": d.bar1_free_bytes if from_driver else None,
        "bar1_used_pct": round(100.0 * used / total, 1) if used is not None and total else None,
        "fb_total_bytes": v.fb,
        "source": d.source if from_driver else ("sysfs" if total is not None else None),
        **({"synthetic": True} if v.dev is not None and not address_known(v.dev) else {}),
        "sysfs_bar1_index": v.bus.get("sysfs_bar1_index"),
        "sysfs_bar1_bytes": v.bus.get("sysfs_bar1_bytes"),
        "sysfs_bar1_unset": v.bus.get("sysfs_bar1_unset"),
        "rebar_current_bytes": v.bus.get("rebar_current_bytes"),
        "rebar_supported_bytes": list(v.bus.get("rebar_supported_bytes") or []),
        "rebar_source": v.bus.get("rebar_source"),
        "driver_listed": True if d is not None else (False if driver_view else None),
        "processes": [{"pid": p.pid, "name": p.name, "user": p.user, "used_memory_bytes": p.used_memory_bytes}
                      for p in (d.processes if d is not None else ())],
        "disagreements": _disagreements(v),
    }
    return doc


def bar1_doc(snap, topo, findings: Iterable, fail_on: str = "error") -> dict[str, Any]:
    """The ``gdrcheck bar1`` JSON document (findings: all of the run's; BAR1's are kept)."""
    return bar1_document(snap, topo, findings, fail_on)[0]


def bar1_document(snap, topo, findings: Iterable, fail_on: str = "error") -> tuple[dict[str, Any], str]:
    """The ``gdrcheck bar1`` document, its status word in it, and the line saying why where the status is not
    a plain pass or fail."""
    from gdrcheck import VIEW_FORMAT_VERSION

    doc = header_doc(snap, VIEW_FORMAT_VERSION)
    view = driver_answered(snap)
    kept = [f for f in findings if is_bar1_code(f.code)]
    doc["gpus"] = [gpu_doc(v, view) for v in gpu_views(snap, topo)]
    doc["findings"] = [f.to_doc() for f in kept]
    doc["collectors"] = collectors_doc(snap)
    amd = _amd_gpus(snap, topo)
    if amd and not doc["gpus"]:  # RCCL's GPUs: no BAR1 figure is read for them
        doc["amd_gpus"] = amd
    if snap.notes:
        doc["notes"] = list(snap.notes)
    doc["status"], why = bar1_status(doc, snap, topo, kept, fail_on)
    return doc, why


def bar1_status(doc: dict[str, Any], snap, topo, findings: Iterable, fail_on: str) -> tuple[str, str]:
    """The status word of ``gdrcheck bar1`` and, when it is not a plain pass or fail, the line saying why."""
    from gdrcheck.status import reaches

    if any(reaches(f.severity, fail_on) for f in findings):
        return "fail", ""
    gpus = topo.of_kind("gpu")
    if doc.get("amd_gpus"):
        return "unknown", ("could not decide: gdrcheck reads the BAR1 figures of no AMD GPU "
                           "(lspci -vv shows each GPU's BARs)")
    if gpus and any(g.get("bar1_total_bytes") is None for g in doc.get("gpus", [])) or (gpus and not doc.get("gpus")):
        return "unknown", "could not decide: BAR1 figures not available (NVML and nvidia-smi unavailable)"
    if not gpus:
        from gdrcheck.rules.facts import blank_functions

        blank = blank_functions(topo)
        if blank:  # as check says (GDR124): GPUs may be among functions the input names by address only
            return "unknown", (f"could not decide: no GPU recognised, and {len(blank)} PCI function"
                               f"{'s' if len(blank) != 1 else ''} named by address only may be GPUs")
        why = "; ".join(f"{c.name}: {c.detail}" for c in snap.collectors if c.name in ("nvml", "nvidia-smi")
                        and c.status != "ok")
        word = "unknown" if on_node(snap) and why else "pass"
        return word, "no GPU found" + (f" ({why})" if why else "")
    return "pass", ""


def _amd_gpus(snap, topo) -> list[str]:
    """The GPUs of a node RCCL judges (gdrcheck.rules.rccl: AMD GPUs, or RCCL's own input, which shows only
    AMD GPUs), whose BAR1 gdrcheck does not read."""
    from gdrcheck.rules.rccl.releases import node_reason

    if not node_reason(snap, topo):
        return []
    return sorted(topo.of_kind("gpu"))
