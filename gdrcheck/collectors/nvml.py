"""The GPUs as NVML reports them, live or replayed from a snapshot.

Live, every NVML answer (and every NVML error) goes into one JSON-able record;
the facts are then built from that record (:mod:`gdrcheck.collectors.nvml_record`). A snapshot stores the record at
``/gdrcheck/nvml.json`` and a replay builds the facts from it the same way, so
a snapshot says exactly what NVML said.

``pynvml`` (NVIDIA's ``nvidia-ml-py``) and ``psutil`` are imported lazily, only
for a live source: ``gdrcheck topology`` works on a machine without a driver.
No NVML error escapes: each becomes a :class:`CollectorStatus` with a plain
hint, and a failure on one GPU or one field degrades only that.
"""

from __future__ import annotations

import json

from gdrcheck.collectors.driver_records import NVML_FILE
from gdrcheck.collectors.nvml_errors import error_doc
from gdrcheck.collectors.nvml_record import P2P_CAPS, NvmlFacts, facts_from_record
from gdrcheck.io.source import Source
from gdrcheck.model import CollectorStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

RECORD_VERSION = 1
MAX_LINKS = 36
_NO_LINK = ("NotSupported", "InvalidArgument")


# ---------------------------------------------------------------------------
# live


def _bindings(versions: bool = True) -> tuple[Any, dict[str, Any], Optional[dict[str, Any]]]:
    """(module or None, what is installed, error doc or None).

    ``versions``: also look the packages up in the installed metadata (importlib.metadata
    costs tens of milliseconds: snapshots only); a plain run tells the deprecated
    ``pynvml`` shim (a package directory) from NVIDIA's ``pynvml.py`` by its file."""
    import importlib
    import warnings

    info: dict[str, Any] = {"module": None, "version": None, "deprecated_pynvml": None}
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

    def __call__(self, errors: dict[str, Any], key: str, fname: str, *args: Any,
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


def _proc_names(procs: list[dict[str, Any]]) -> None:
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


def _query_gpu(ask: _Asker, h: Any, index: int, names: bool, full: bool = True) -> dict[str, Any]:
    errors: dict[str, Any] = {}
    g: dict[str, Any] = {"index": index, "errors": errors}
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
    procs: dict[int, dict[str, Any]] = {}
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
    links: list[dict[str, Any]] = []
    for link in range(MAX_LINKS):
        lerr: dict[str, Any] = {}
        state = ask(lerr, "state", "nvmlDeviceGetNvLinkState", h, link)
        if lerr:
            if lerr["state"]["error"] in _NO_LINK:
                continue
            g["nvlink_error"] = lerr["state"]
            break
        entry: dict[str, Any] = {"link": link, "active": bool(state)}
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


def query_nvml(nv: Any, names: bool = True, full: bool = True) -> dict[str, Any]:
    """Ask a (real or fake) pynvml module everything gdrcheck needs; never raises.

    ``full`` (snapshots) asks every P2P capability both ways and the common ancestors; a plain
    run asks only what verdicts use, read and write status once per pair, since each P2P query
    costs about 2 ms on a real driver."""
    rec: dict[str, Any] = {"version": RECORD_VERSION, "init": None, "gpus": [], "p2p": [], "topology": []}
    try:
        nv.nvmlInit()
    except Exception as e:  # noqa: BLE001
        rec["init"] = error_doc(e)
        return rec
    try:
        ask = _Asker(nv)
        top: dict[str, Any] = {}
        rec["driver_version"] = _text(ask(top, "driver_version", "nvmlSystemGetDriverVersion"))
        count = ask(top, "count", "nvmlDeviceGetCount")
        rec["errors"] = top
        rec["count"] = int(count) if isinstance(count, int) else None
        handles: list[tuple[str, Any]] = []
        for i in range(rec["count"] or 0):
            herr: dict[str, Any] = {}
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
                perr: dict[str, Any] = {}
                entry: dict[str, Any] = {"a": ba, "b": bb}
                for cap, idx in caps:
                    st = ask(perr, cap, "nvmlDeviceGetP2PStatus", ha, hb, idx)
                    entry[cap] = int(st) if isinstance(st, int) else None
                if perr:
                    entry["errors"] = perr
                rec["p2p"].append(entry)
                if x < y and full:
                    terr: dict[str, Any] = {}
                    lvl = ask(terr, "level", "nvmlDeviceGetTopologyCommonAncestor", ha, hb)
                    rec["topology"].append({"a": ba, "b": bb, "level": int(lvl) if isinstance(lvl, int) else None,
                                            **({"error": terr["level"]} if terr else {})})
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return rec


def _live_record(full: bool = True) -> dict[str, Any]:
    nv, info, err = _bindings(versions=full)
    if err is not None:
        return {"version": RECORD_VERSION, "init": err, "bindings": info, "gpus": [], "p2p": [], "topology": []}
    rec = query_nvml(nv, full=full)
    rec["bindings"] = info
    return rec


_EARLY: dict[str, Any] = {}  # a plain live run's NVML questions, begun by the console script (begin_early)


def begin_early() -> None:
    """Begin a plain live run's NVML questions now, in a daemon thread, before the command line machinery
    and the collectors load: the driver's own waits (nvmlInit, the first handle: some 20 ms on an H100 VM)
    then pass while Python imports. :func:`begin_nvml` takes the answer over."""
    import threading

    box: dict[str, Any] = {}

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


def collect_nvml(src: Source, query: Optional[Callable[[], dict[str, Any]]] = None,
                 waiter: Optional[Callable[[], Optional[dict[str, Any]]]] = None) -> NvmlFacts:
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
        from gdrcheck.collectors.driver_records import nvml_not_recorded

        return NvmlFacts(nvml_not_recorded(src))
    try:
        rec = json.loads(text)
    except ValueError as e:
        return NvmlFacts(CollectorStatus("nvml", "error", f"{NVML_FILE}: not valid JSON ({e})",
                                         "make the snapshot again"))
    if not isinstance(rec, dict):
        return NvmlFacts(CollectorStatus("nvml", "error", f"{NVML_FILE}: not an NVML record",
                                         "make the snapshot again"))
    return facts_from_record(rec)
