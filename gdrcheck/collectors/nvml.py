"""The GPUs as NVML reports them, live or replayed from a snapshot.

Live, every NVML answer (and every NVML error) goes into one JSON-able record;
the facts are then built from that record. A snapshot stores the record at
``/gdrcheck/nvml.json`` and a replay builds the facts from it the same way, so
a snapshot says exactly what NVML said.

``pynvml`` (NVIDIA's ``nvidia-ml-py``) and ``psutil`` are imported lazily, only
for a live source: ``gdrcheck topology`` works on a machine without a driver.
No NVML error escapes: each becomes a :class:`CollectorStatus` with a plain
hint, and a failure on one GPU or one field degrades only that.
"""

from __future__ import annotations

import json

from gdrcheck.collectors.clip import clip_name
from gdrcheck.collectors.nvml_errors import error_doc
from gdrcheck.io.source import Source
from gdrcheck.model import CollectorStatus, DriverGpu, GpuProcess, NvLink, bdf_key, frozen_map, norm_bdf
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple

NVML_FILE = "/gdrcheck/nvml.json"
RECORD_VERSION = 1
# nvmlDeviceGetP2PStatus capability indexes. Literal ints on purpose: in nvidia-ml-py
# NVML_P2P_CAPS_INDEX_READ is the tuple (0,) (a trailing comma) and passing it fails.
P2P_CAPS: Tuple[Tuple[str, int], ...] = (("read", 0), ("write", 1), ("nvlink", 2), ("atomics", 3), ("prop", 4))
# nvmlGpuP2PStatus_t -> the letters of ``nvidia-smi topo -p2p``
P2P_LETTERS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
NVLINK_GPU, NVLINK_IBMNPU, NVLINK_SWITCH = 0, 1, 2
MAX_LINKS = 36
_NO_LINK = ("NotSupported", "InvalidArgument")


# error name -> (status, what it means, what to do)
_ERRORS: Dict[str, Tuple[str, str, str]] = {
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
    gpus: Tuple[DriverGpu, ...] = ()
    nvlinks: Tuple[NvLink, ...] = ()
    p2p_status: Dict[Tuple[str, str, str], str] = field(default_factory=dict)
    common_ancestor: Dict[Tuple[str, str], int] = field(default_factory=dict)
    shows_nvlink: bool = False
    answered: bool = False  # NVML initialised and listed the GPUs
    record: Dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------
# errors


def explain(err: Dict[str, Any]) -> Tuple[str, str, str]:
    """(status, meaning, hint) of a recorded error."""
    name = str(err.get("error") or "Unknown")
    if name in _ERRORS:
        return _ERRORS[name]
    return "error", f"NVML error {name}: {err.get('message') or ''}".strip(), _ERRORS["Unknown"][2]


# ---------------------------------------------------------------------------
# live


def _bindings(versions: bool = True) -> Tuple[Any, Dict[str, Any], Optional[Dict[str, Any]]]:
    """(module or None, what is installed, error doc or None).

    ``versions``: also look the packages up in the installed metadata (importlib.metadata
    costs tens of milliseconds: snapshots only); a plain run tells the deprecated
    ``pynvml`` shim (a package directory) from NVIDIA's ``pynvml.py`` by its file."""
    import importlib
    import warnings

    info: Dict[str, Any] = {"module": None, "version": None, "deprecated_pynvml": None}
    try:
        if not versions:
            raise LookupError
        from importlib import metadata

        try:
            info["version"] = metadata.version("nvidia-ml-py")
        except metadata.PackageNotFoundError:
            pass
        try:
            info["deprecated_pynvml"] = metadata.version("pynvml")
        except metadata.PackageNotFoundError:
            pass
    except Exception:  # noqa: BLE001 - metadata of a broken install, or not asked
        pass
    _preload_operator_library()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the deprecated shim warns on every import
            mod = importlib.import_module("pynvml")
    except Exception as e:  # noqa: BLE001
        return None, info, {"error": "BindingsMissing", "code": None, "message": f"import pynvml: {e}"}
    info["module"] = getattr(mod, "__file__", None)
    if not versions and str(info["module"] or "").endswith("__init__.py"):
        info["deprecated_pynvml"] = "(a package directory)"
    needed = ("_nvmlGetFunctionPointer", "nvmlInit", "nvmlDeviceGetBAR1MemoryInfo", "nvmlDeviceGetP2PStatus")
    missing = [n for n in needed if not hasattr(mod, n)]
    if missing:
        return None, info, {"error": "BindingsNotNvidia", "code": None,
                            "message": f"pynvml lacks {', '.join(missing)}"}
    return mod, info, None


# where the NVIDIA GPU Operator's driver container puts the library on the host
OPERATOR_LIBS = ("/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                 "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1",
                 "/run/nvidia/driver/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1")


def _preload_operator_library() -> None:
    """When the driver is the GPU Operator's (NVML under /run/nvidia/driver, not on the loader's
    path), load it from there first: pynvml's later dlopen by name then finds it loaded."""
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return
    except OSError:
        pass
    for path in OPERATOR_LIBS:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue


class _Asker:
    """Calls NVML functions, turning every exception into an entry of ``errors``."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv

    def __call__(self, errors: Dict[str, Any], key: str, fname: str, *args: Any,
                 conv: Optional[Callable[[Any], Any]] = None) -> Any:
        """``conv`` turns the answer into plain values inside the same guard."""
        fn = getattr(self.nv, fname, None)
        if fn is None:
            errors[key] = {"error": "FunctionNotFound", "code": 13, "message": f"pynvml has no {fname}"}
            return None
        try:
            got = fn(*args)
            return conv(got) if conv is not None else got
        except Exception as e:  # noqa: BLE001 - every NVML error degrades only this field
            errors[key] = error_doc(e)
            return None


def _text(v: Any) -> Optional[str]:
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return v if isinstance(v, str) else None


def _proc_names(procs: List[Dict[str, Any]]) -> None:
    if not procs:
        return  # psutil costs tens of milliseconds to import: only when there is someone to name
    try:
        import psutil
    except Exception:  # noqa: BLE001
        return
    for p in procs:
        try:
            proc = psutil.Process(p["pid"])
            p["name"] = proc.name()
            p["user"] = proc.username()
        except Exception:  # noqa: BLE001 - AccessDenied, NoSuchProcess, ZombieProcess, another pid namespace
            continue


def _query_gpu(ask: _Asker, h: Any, index: int, names: bool, full: bool = True) -> Dict[str, Any]:
    errors: Dict[str, Any] = {}
    g: Dict[str, Any] = {"index": index, "errors": errors}
    g["bus_id"] = ask(errors, "pci", "nvmlDeviceGetPciInfo", h, conv=lambda p: _text(p.busId))
    g["name"] = ask(errors, "name", "nvmlDeviceGetName", h, conv=_text)
    g["uuid"] = ask(errors, "uuid", "nvmlDeviceGetUUID", h, conv=_text)
    if full:  # no document shows it: a snapshot keeps it, a plain run does not ask
        g["serial"] = ask(errors, "serial", "nvmlDeviceGetSerial", h, conv=_text)
    bar1 = ask(errors, "bar1", "nvmlDeviceGetBAR1MemoryInfo", h,
               conv=lambda b: {"total": int(b.bar1Total), "used": int(b.bar1Used), "free": int(b.bar1Free)})
    if bar1 is not None:
        g["bar1"] = bar1
    g["memory_total"] = ask(errors, "memory", "nvmlDeviceGetMemoryInfo", h, conv=lambda m: int(m.total))
    g["cuda_compute"] = ask(errors, "cuda_compute", "nvmlDeviceGetCudaComputeCapability", h,
                            conv=lambda c: [int(c[0]), int(c[1])])
    procs: Dict[int, Dict[str, Any]] = {}
    for kind, fname in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                        ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
        got = ask(errors, f"processes_{kind}", fname, h,
                  conv=lambda ps: [(int(p.pid), getattr(p, "usedGpuMemory", None)) for p in ps]) or ()
        for pid, used in got:
            used = used if isinstance(used, int) else None
            cur = procs.setdefault(pid, {"pid": pid, "type": kind, "used_memory": used})
            if cur["type"] != kind:
                cur["type"] = "compute+graphics"
            if used is not None and (cur["used_memory"] or 0) < used:
                cur["used_memory"] = used
    g["processes"] = [procs[k] for k in sorted(procs)]
    if names:
        _proc_names(g["processes"])
    links: List[Dict[str, Any]] = []
    for link in range(MAX_LINKS):
        lerr: Dict[str, Any] = {}
        state = ask(lerr, "state", "nvmlDeviceGetNvLinkState", h, link)
        if lerr:
            if lerr["state"]["error"] in _NO_LINK:
                continue
            g["nvlink_error"] = lerr["state"]
            break
        entry: Dict[str, Any] = {"link": link, "active": bool(state)}
        if state:
            entry["remote_bus_id"] = ask(lerr, "remote", "nvmlDeviceGetNvLinkRemotePciInfo", h, link,
                                         conv=lambda p: _text(p.busId))
            entry["remote_type"] = ask(lerr, "remote_type", "nvmlDeviceGetNvLinkRemoteDeviceType", h, link,
                                       conv=int)
            if "remote" in lerr:
                g["nvlink_error"] = lerr["remote"]
            entry["version"] = ask({}, "version", "nvmlDeviceGetNvLinkVersion", h, link, conv=int)
        links.append(entry)
    g["nvlinks"] = links
    from gdrcheck.collectors import nvml_fabric

    g["fabric"] = nvml_fabric.ask_fabric(ask.nv, h)
    if links:
        g["nvlink_fields"] = nvml_fabric.ask_fields(ask.nv, h, [x["link"] for x in links])
    return g


def query_nvml(nv: Any, names: bool = True, full: bool = True) -> Dict[str, Any]:
    """Ask a (real or fake) pynvml module everything gdrcheck needs; never raises.

    ``full`` (snapshots) asks every P2P capability both ways and the common ancestors; a plain
    run asks only what verdicts use, read and write status once per pair, since each P2P query
    costs about 2 ms on a real driver."""
    rec: Dict[str, Any] = {"version": RECORD_VERSION, "init": None, "gpus": [], "p2p": [], "topology": []}
    try:
        nv.nvmlInit()
    except Exception as e:  # noqa: BLE001
        rec["init"] = error_doc(e)
        return rec
    try:
        ask = _Asker(nv)
        top: Dict[str, Any] = {}
        rec["driver_version"] = _text(ask(top, "driver_version", "nvmlSystemGetDriverVersion"))
        count = ask(top, "count", "nvmlDeviceGetCount")
        rec["errors"] = top
        rec["count"] = int(count) if isinstance(count, int) else None
        handles: List[Tuple[str, Any]] = []
        for i in range(rec["count"] or 0):
            herr: Dict[str, Any] = {}
            h = ask(herr, "handle", "nvmlDeviceGetHandleByIndex", i)
            if h is None:
                rec["gpus"].append({"index": i, "handle_error": herr.get("handle")})
                continue
            try:
                g = _query_gpu(ask, h, i, names, full)
            except Exception as e:  # noqa: BLE001 - an answer of an unexpected shape
                rec["gpus"].append({"index": i, "handle_error": error_doc(e)})
                continue
            rec["gpus"].append(g)
            if g.get("bus_id"):
                handles.append((g["bus_id"], h))
        caps = P2P_CAPS if full else tuple(c for c in P2P_CAPS if c[0] in ("read", "write"))
        for x, (ba, ha) in enumerate(handles):
            for y, (bb, hb) in enumerate(handles):
                if x == y or (not full and y < x):
                    continue
                perr: Dict[str, Any] = {}
                entry: Dict[str, Any] = {"a": ba, "b": bb}
                for cap, idx in caps:
                    st = ask(perr, cap, "nvmlDeviceGetP2PStatus", ha, hb, idx)
                    entry[cap] = int(st) if isinstance(st, int) else None
                if perr:
                    entry["errors"] = perr
                rec["p2p"].append(entry)
                if x < y and full:
                    terr: Dict[str, Any] = {}
                    lvl = ask(terr, "level", "nvmlDeviceGetTopologyCommonAncestor", ha, hb)
                    rec["topology"].append({"a": ba, "b": bb, "level": int(lvl) if isinstance(lvl, int) else None,
                                            **({"error": terr["level"]} if terr else {})})
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return rec


def _live_record(full: bool = True) -> Dict[str, Any]:
    nv, info, err = _bindings(versions=full)
    if err is not None:
        return {"version": RECORD_VERSION, "init": err, "bindings": info, "gpus": [], "p2p": [], "topology": []}
    rec = query_nvml(nv, full=full)
    rec["bindings"] = info
    return rec


_EARLY: Dict[str, Any] = {}  # a plain live run's NVML questions, begun by the console script (begin_early)


def begin_early() -> None:
    """Begin a plain live run's NVML questions now, in a daemon thread, before the command line machinery
    and the collectors load: the driver's own waits (nvmlInit, the first handle: some 20 ms on an H100 VM)
    then pass while Python imports. :func:`begin_nvml` takes the answer over."""
    import threading

    box: Dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = _live_record(full=False)
        except BaseException as e:  # noqa: BLE001 - re-raised where the answer is waited for
            box["error"] = e

    t = threading.Thread(target=work, name="gdrcheck-nvml", daemon=True)
    t.start()
    _EARLY.update(thread=t, box=box)


def begin_nvml(src: Source) -> Callable[[], NvmlFacts]:
    """Start asking NVML now, in a thread (its calls release the GIL, so the driver answers while
    sysfs is read), or take over the questions the console script began; the returned function waits
    (within the run's deadline) and gives the facts."""
    from gdrcheck.io.deadline import Deadline

    dl = src.deadline if src.deadline is not None else Deadline(None)
    early = _EARLY.pop("thread", None)
    box = _EARLY.pop("box", None)
    if early is not None and src.live and not src.recording:
        wait = dl.adopt("nvml", early, box)
    else:
        wait = dl.begin("nvml", lambda: _live_record(full=src.recording))
    return lambda: collect_nvml(src, waiter=wait)


def collect_nvml(src: Source, query: Optional[Callable[[], Dict[str, Any]]] = None,
                 waiter: Optional[Callable[[], Optional[Dict[str, Any]]]] = None) -> NvmlFacts:
    """NVML facts of the source: asked live, or replayed from ``/gdrcheck/nvml.json``."""
    if src.live:
        ask = query if query is not None else (lambda: _live_record(full=src.recording))
        try:
            if waiter is not None:
                rec = waiter()
            else:
                rec = src.deadline.call("nvml", ask) if src.deadline is not None else ask()
        except Exception as e:  # noqa: BLE001 - never a crash, whatever the bindings do
            rec = {"version": RECORD_VERSION, "init": error_doc(e), "gpus": [], "p2p": [], "topology": []}
        if rec is None:
            return NvmlFacts(CollectorStatus(
                "nvml", "unavailable", f"NVML did not answer within the --timeout of {src.deadline.seconds:g} s",
                "a driver call is stuck or slow: check 'nvidia-smi' by hand and 'dmesg' for Xid errors, "
                "or raise --timeout"))
        if src.recording:
            src.recorded[NVML_FILE] = ("f", json.dumps(rec, indent=1, sort_keys=True).encode())
        return facts_from_record(rec)
    text = src.read_text(NVML_FILE, 64 << 20)
    if text is None:
        hint = ("run gdrcheck on the node itself, or make a snapshot there with 'gdrcheck snapshot'"
                if not src.has_capture() else "the snapshot was made without NVML answers")
        return NvmlFacts(CollectorStatus("nvml", "unavailable", "NVML not available: not recorded in this input",
                                         hint))
    try:
        rec = json.loads(text)
    except ValueError as e:
        return NvmlFacts(CollectorStatus("nvml", "error", f"{NVML_FILE}: not valid JSON ({e})",
                                         "make the snapshot again"))
    if not isinstance(rec, dict):
        return NvmlFacts(CollectorStatus("nvml", "error", f"{NVML_FILE}: not an NVML record",
                                         "make the snapshot again"))
    return facts_from_record(rec)


# ---------------------------------------------------------------------------
# record -> facts (live and replay alike)


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bdf(v: Any) -> Optional[str]:
    if not isinstance(v, str):
        return None
    try:
        return norm_bdf(v)
    except ValueError:
        return None


def _bindings_note(rec: Dict[str, Any]) -> str:
    b = rec.get("bindings")
    if isinstance(b, dict) and b.get("deprecated_pynvml"):
        return (f"the deprecated 'pynvml' package {b['deprecated_pynvml']} is installed beside nvidia-ml-py; "
                "it warns on every import and has overwritten NVIDIA's pynvml.py before: pip uninstall pynvml")
    return ""


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _errs(v: Any) -> Dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _gpu(g: Dict[str, Any], bdf: str) -> DriverGpu:
    bar1 = g.get("bar1") if isinstance(g.get("bar1"), dict) else {}
    cc = g.get("cuda_compute")
    procs = []
    for p in g.get("processes") or ():
        if isinstance(p, dict) and _int(p.get("pid")) is not None:
            name, user = (p.get(k) if isinstance(p.get(k), str) else None for k in ("name", "user"))
            procs.append(GpuProcess(pid=p["pid"], name=clip_name(name), user=clip_name(user),
                                    used_memory_bytes=_int(p.get("used_memory"))))
    from gdrcheck.collectors.nvml_fabric import gpu_facts

    extra: Dict[str, Any] = gpu_facts(g)
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


def facts_from_record(rec: Dict[str, Any]) -> NvmlFacts:
    """Build facts from an NVML record (live or from a snapshot); tolerant of damage."""
    note = _bindings_note(rec)
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
    gpus: List[DriverGpu] = []
    problems: List[str] = []
    hints: List[str] = []
    raw: Dict[str, Dict[str, Any]] = {}
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
    nvlinks, shows = _nvlinks(raw)
    p2p: Dict[Tuple[str, str, str], str] = {}
    for e in rec.get("p2p") or ():
        a, b = _bdf(_errs(e).get("a")), _bdf(_errs(e).get("b"))
        if a is None or b is None:
            continue
        for cap, _idx in P2P_CAPS:
            v = _int(e.get(cap))
            if v is not None:
                p2p[(a, b, cap)] = P2P_LETTERS.get(v, "U")
    anc: Dict[Tuple[str, str], int] = {}
    for e in rec.get("topology") or ():
        a, b, lvl = _bdf(_errs(e).get("a")), _bdf(_errs(e).get("b")), _int(_errs(e).get("level"))
        if a and b and lvl is not None:
            anc[(a, b)] = lvl
    if anc:
        from gdrcheck.record import replace

        gpus = [replace(g, extra=frozen_map({**g.extra, "common_ancestor": {
            (b if a == g.bdf else a): lvl for (a, b), lvl in anc.items() if g.bdf in (a, b)}}))
            for g in gpus]
    degraded = sorted({f"{k} on {d.bdf}" for d in gpus for k in d.extra.get("nvml_errors", {})
                       if not k.startswith("processes") and k != "serial"})
    detail = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    if rec.get("driver_version"):
        detail += f", driver {rec['driver_version']}"
    if problems:
        detail += "; " + "; ".join(problems)
    if degraded:
        detail += "; not answered: " + ", ".join(degraded[:8]) + (" ..." if len(degraded) > 8 else "")
    status = CollectorStatus("nvml", "error" if problems else "ok", detail,
                             _join(*dict.fromkeys(hints), note))
    return NvmlFacts(status=status, gpus=tuple(gpus), nvlinks=nvlinks, p2p_status=p2p, common_ancestor=anc,
                     shows_nvlink=shows, answered=True, record=rec)


def _nvlinks(raw: Dict[str, Dict[str, Any]]) -> Tuple[Tuple[NvLink, ...], bool]:
    """Active links aggregated per remote; GPU-GPU pairs once (a before b)."""
    shows = bool(raw) and all("nvlink_error" not in g for g in raw.values())
    per: Dict[Tuple[str, str], int] = {}
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
    out: Dict[Tuple[str, str], int] = {}
    for (a, b), n in per.items():
        if b in raw:
            key = (a, b) if bdf_key(a) < bdf_key(b) else (b, a)
            out[key] = max(out.get(key, 0), n)
        else:
            out[(a, b)] = n
    links = tuple(NvLink(a=a, b=b, count=n, source="nvml")
                  for (a, b), n in sorted(out.items(), key=lambda kv: (bdf_key(kv[0][0]), kv[0][1])))
    return links, shows
