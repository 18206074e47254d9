"""An NVML record turned into facts, live and replay alike (:mod:`gdrcheck.collectors.nvml` asks the driver).

The record is the JSON-able dict every NVML answer and error went into (a snapshot stores it at
``/gdrcheck/nvml.json``); :func:`facts_from_record` is tolerant of damage: a field that is missing or of the
wrong type is not a fact, and each recorded error becomes a status with a plain hint.
"""

from __future__ import annotations

from gdrcheck.collectors.clip import clip_name
from gdrcheck.model import CollectorStatus, DriverGpu, GpuProcess, NvLink, bdf_key, frozen_map, norm_bdf
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

# nvmlDeviceGetP2PStatus capability indexes. Literal ints on purpose: in nvidia-ml-py
# NVML_P2P_CAPS_INDEX_READ is the tuple (0,) (a trailing comma) and passing it fails.
P2P_CAPS: tuple[tuple[str, int], ...] = (("read", 0), ("write", 1), ("nvlink", 2), ("atomics", 3), ("prop", 4))
# nvmlGpuP2PStatus_t -> the letters of ``nvidia-smi topo -p2p``
P2P_LETTERS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
NVLINK_GPU, NVLINK_IBMNPU, NVLINK_SWITCH = 0, 1, 2


# error name -> (status, what it means, what to do)
_ERRORS: dict[str, tuple[str, str, str]] = {
    "BindingsMissing": ("unavailable", "the Python NVML bindings (nvidia-ml-py) are not installed",
                        "pip install nvidia-ml-py"),
    "BindingsNotNvidia": ("unavailable", "the installed 'pynvml' module is not NVIDIA's nvidia-ml-py",
                          "pip uninstall pynvml nvidia-ml-py3 && pip install --force-reinstall nvidia-ml-py"),
    "LibraryNotFound": ("unavailable", "the NVIDIA driver library libnvidia-ml.so.1 was not found "
                        "(no NVIDIA driver installed here)",
                        "install the NVIDIA driver on this node; in a container, start it with the NVIDIA "
                        "container runtime (docker run --gpus all, Kubernetes runtimeClassName: nvidia)"),
    "DriverNotLoaded": ("unavailable", "the NVIDIA kernel driver is not loaded",
                        "sudo modprobe nvidia, then 'sudo dmesg | grep -i nvrm' says why it did not load "
                        "(Secure Boot module signing, no module built for this kernel)"),
    "LibRmVersionMismatch": ("error", "the NVML library and the loaded kernel module are different driver "
                             "versions (the driver was upgraded without reloading the module)",
                             "reboot the node, or stop every GPU user and reload the nvidia modules"),
    "NoPermission": ("error", "NVML refused the query (insufficient permissions)",
                     "run gdrcheck as root, or check the permissions of /dev/nvidiactl and /dev/nvidia*"),
    "NotSupported": ("error", "the GPU or driver does not support this query",
                     "a newer NVIDIA driver may answer it; a vGPU guest cannot"),
    "FunctionNotFound": ("error", "the NVIDIA driver is older than the nvidia-ml-py bindings and lacks this "
                         "function", "upgrade the NVIDIA driver, or install nvidia-ml-py of the driver's branch"),
    "GpuIsLost": ("error", "a GPU fell off the bus or stopped responding",
                  "check 'sudo dmesg | grep -i xid' (Xid 79: fallen off the bus), the GPU's power cables and "
                  "slot; a reset or power cycle brings it back"),
    "Uninitialized": ("error", "NVML was not initialised", "retry; report it if it persists"),
    "Timeout": ("error", "the driver timed out answering NVML", "check 'sudo dmesg | grep -i -e nvrm -e xid'"),
    "ResetRequired": ("error", "a GPU needs a reset", "sudo nvidia-smi -r -i <gpu> with no process on it, "
                      "or reboot"),
    "CorruptedInforom": ("error", "a GPU's infoROM is corrupted", "contact the GPU vendor (RMA)"),
    "InsufficientPower": ("error", "a GPU's external power cables are not attached",
                          "connect the GPU's auxiliary power cables"),
    "Unknown": ("error", "NVML returned an unknown error",
                "check 'nvidia-smi' and 'sudo dmesg | grep -i -e nvrm -e xid'"),
}


@record
class NvmlFacts:
    """What NVML said, turned into facts (also for a failed init: no GPUs, a status)."""

    status: CollectorStatus
    gpus: tuple[DriverGpu, ...] = ()
    nvlinks: tuple[NvLink, ...] = ()
    p2p_status: dict[tuple[str, str, str], str] = field(default_factory=dict)
    common_ancestor: dict[tuple[str, str], int] = field(default_factory=dict)
    shows_nvlink: bool = False
    answered: bool = False  # NVML initialised and listed the GPUs
    record: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------
# errors


def explain(err: dict[str, Any]) -> tuple[str, str, str]:
    """(status, meaning, hint) of a recorded error."""
    name = str(err.get("error") or "Unknown")
    if name in _ERRORS:
        return _ERRORS[name]
    return "error", f"NVML error {name}: {err.get('message') or ''}".strip(), _ERRORS["Unknown"][2]


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bdf(v: Any) -> Optional[str]:
    if not isinstance(v, str):
        return None
    try:
        return norm_bdf(v)
    except ValueError:
        return None


def _bindings_note(rec: dict[str, Any]) -> str:
    b = rec.get("bindings")
    if isinstance(b, dict) and b.get("deprecated_pynvml"):
        return (f"the deprecated 'pynvml' package {b['deprecated_pynvml']} is installed beside nvidia-ml-py; "
                "it warns on every import and has overwritten NVIDIA's pynvml.py before: pip uninstall pynvml")
    return ""


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _errs(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _gpu(g: dict[str, Any], bdf: str) -> DriverGpu:
    bar1 = g.get("bar1") if isinstance(g.get("bar1"), dict) else {}
    cc = g.get("cuda_compute")
    procs = []
    for p in g.get("processes") or ():
        if isinstance(p, dict) and _int(p.get("pid")) is not None:
            name, user = (p.get(k) if isinstance(p.get(k), str) else None for k in ("name", "user"))
            procs.append(GpuProcess(pid=p["pid"], name=clip_name(name), user=clip_name(user),
                                    used_memory_bytes=_int(p.get("used_memory"))))
    from gdrcheck.collectors.nvml_fabric import gpu_facts

    extra: dict[str, Any] = gpu_facts(g)
    if _errs(g.get("errors")):
        extra["nvml_errors"] = {k: str(_errs(v).get("error")) for k, v in g["errors"].items()}
    return DriverGpu(
        bdf=bdf, index=_int(g.get("index")),
        name=clip_name(g.get("name") if isinstance(g.get("name"), str) else None),
        uuid=g.get("uuid") if isinstance(g.get("uuid"), str) else None,
        serial=g.get("serial") if isinstance(g.get("serial"), str) else None,
        bar1_total_bytes=_int(bar1.get("total")), bar1_used_bytes=_int(bar1.get("used")),
        bar1_free_bytes=_int(bar1.get("free")), fb_total_bytes=_int(g.get("memory_total")),
        source="nvml",
        cuda_compute=(cc[0], cc[1]) if isinstance(cc, list) and len(cc) == 2 and all(_int(c) is not None for c in cc)
        else None,
        processes=tuple(procs), extra=frozen_map(extra))


def facts_from_record(rec: dict[str, Any]) -> NvmlFacts:
    """Build facts from an NVML record (live or from a snapshot); tolerant of damage."""
    note = _bindings_note(rec)
    failed = _not_answered(rec, note)
    if failed is not None:
        return failed
    gpus, raw, problems, hints = _gpus_of(rec)
    nvlinks, shows = _nvlinks(raw)
    anc = _common_ancestors(rec)
    if anc:
        gpus = _with_ancestors(gpus, anc)
    status = _status(rec, gpus, problems, hints, note)
    return NvmlFacts(status=status, gpus=tuple(gpus), nvlinks=nvlinks, p2p_status=_p2p_status(rec),
                     common_ancestor=anc, shows_nvlink=shows, answered=True, record=rec)


def _not_answered(rec: dict[str, Any], note: str) -> Optional[NvmlFacts]:
    """The facts of a record where NVML did not start or could not count the GPUs; None where it did."""
    init = rec.get("init")
    if isinstance(init, dict):
        status, meaning, hint = explain(init)
        return NvmlFacts(CollectorStatus("nvml", status, f"NVML not available: {meaning} ({init.get('message')})",
                                         _join(hint, note)), record=rec)
    top = _errs(rec.get("errors"))
    if _int(rec.get("count")) is None:
        err = _errs(top.get("count")) or {"error": "Unknown", "message": "no device count recorded"}
        status, meaning, hint = explain(err)
        return NvmlFacts(CollectorStatus("nvml", "error", f"NVML could not count the GPUs: {meaning}",
                                         _join(hint, note)), record=rec)
    return None


def _gpus_of(rec: dict[str, Any]) -> tuple[list[DriverGpu], dict[str, dict[str, Any]], list[str], list[str]]:
    """(the GPUs that answered, sorted by index; their raw records by bus id; problems; hints)."""
    gpus: list[DriverGpu] = []
    problems: list[str] = []
    hints: list[str] = []
    raw: dict[str, dict[str, Any]] = {}
    for g in rec.get("gpus") or ():
        if not isinstance(g, dict):
            continue
        idx = _int(g.get("index"))
        bdf = _bdf(g.get("bus_id"))
        if bdf is None:
            err = _errs(g.get("handle_error")) or _errs(_errs(g.get("errors")).get("pci")) or {"error": "Unknown"}
            status, meaning, hint = explain(err)
            problems.append(f"GPU index {idx} did not answer: {meaning}")
            hints.append(hint)
            continue
        raw[bdf] = g
        gpus.append(_gpu(g, bdf))
        for k, v in _errs(g.get("errors")).items():
            if k.startswith("processes") or k in ("serial",):
                continue
            if _errs(v).get("error") == "GpuIsLost":
                problems.append(f"GPU {bdf} is lost")
                hints.append(explain(v)[2])
                break
    gpus.sort(key=lambda d: (d.index if d.index is not None else 1 << 30, bdf_key(d.bdf)))
    return gpus, raw, problems, hints


def _p2p_status(rec: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    """The driver's P2P status per GPU pair and capability, as ``nvidia-smi topo -p2p`` letters."""
    p2p: dict[tuple[str, str, str], str] = {}
    for e in rec.get("p2p") or ():
        a, b = _bdf(_errs(e).get("a")), _bdf(_errs(e).get("b"))
        if a is None or b is None:
            continue
        for cap, _idx in P2P_CAPS:
            v = _int(e.get(cap))
            if v is not None:
                p2p[(a, b, cap)] = P2P_LETTERS.get(v, "U")
    return p2p


def _common_ancestors(rec: dict[str, Any]) -> dict[tuple[str, str], int]:
    """NVML's topology level per GPU pair (nvmlDeviceGetTopologyCommonAncestor)."""
    anc: dict[tuple[str, str], int] = {}
    for e in rec.get("topology") or ():
        a, b, lvl = _bdf(_errs(e).get("a")), _bdf(_errs(e).get("b")), _int(_errs(e).get("level"))
        if a and b and lvl is not None:
            anc[(a, b)] = lvl
    return anc


def _with_ancestors(gpus: list[DriverGpu], anc: dict[tuple[str, str], int]) -> list[DriverGpu]:
    from gdrcheck.record import replace

    return [replace(g, extra=frozen_map({**g.extra, "common_ancestor": {
        (b if a == g.bdf else a): lvl for (a, b), lvl in anc.items() if g.bdf in (a, b)}}))
        for g in gpus]


def _status(rec: dict[str, Any], gpus: list[DriverGpu], problems: list[str], hints: list[str],
            note: str) -> CollectorStatus:
    degraded = sorted({f"{k} on {d.bdf}" for d in gpus for k in d.extra.get("nvml_errors", {})
                       if not k.startswith("processes") and k != "serial"})
    detail = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    if rec.get("driver_version"):
        detail += f", driver {rec['driver_version']}"
    if problems:
        detail += "; " + "; ".join(problems)
    if degraded:
        detail += "; not answered: " + ", ".join(degraded[:8]) + (" ..." if len(degraded) > 8 else "")
    return CollectorStatus("nvml", "error" if problems else "ok", detail, _join(*dict.fromkeys(hints), note))


def _nvlinks(raw: dict[str, dict[str, Any]]) -> tuple[tuple[NvLink, ...], bool]:
    """Active links aggregated per remote; GPU-GPU pairs once (a before b)."""
    shows = bool(raw) and all("nvlink_error" not in g for g in raw.values())
    per: dict[tuple[str, str], int] = {}
    for a, g in raw.items():
        for link in g.get("nvlinks") or ():
            if not isinstance(link, dict) or not link.get("active"):
                continue
            remote = _bdf(link.get("remote_bus_id"))
            rtype = _int(link.get("remote_type"))
            if rtype == NVLINK_SWITCH:
                b = "nvswitch"
            elif rtype == NVLINK_IBMNPU:
                b = "cpu"
            elif remote is not None and remote in raw and rtype in (None, NVLINK_GPU):
                b = remote
            elif rtype == NVLINK_GPU and remote is not None:
                b = remote
            else:
                b = "nvswitch"
            per[(a, b)] = per.get((a, b), 0) + 1
    out: dict[tuple[str, str], int] = {}
    for (a, b), n in per.items():
        if b in raw:
            key = (a, b) if bdf_key(a) < bdf_key(b) else (b, a)
            out[key] = max(out.get(key, 0), n)
        else:
            out[(a, b)] = n
    links = tuple(NvLink(a=a, b=b, count=n, source="nvml")
                  for (a, b), n in sorted(out.items(), key=lambda kv: (bdf_key(kv[0][0]), kv[0][1])))
    return links, shows
