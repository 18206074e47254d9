"""NVSwitch fabric state and NVLink link state per GPU, as NVML answers them (live) and as a record holds them.

Asked live: ``nvmlDeviceGetGpuFabricInfo`` (the struct passed by reference: state, status, clique id, cluster
UUID; what ``nvidia-smi -q`` prints under "Fabric"), the field values for the links the part has
(``NVML_FI_DEV_NVLINK_LINK_COUNT``), the links into NVSwitches (``NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT``)
and each link's speed (``NVML_FI_DEV_NVLINK_GET_SPEED`` with the link as scope, MB/s; the older per-link
``NVML_FI_DEV_NVLINK_SPEED_MBPS_Ln``), and ``nvmlDeviceGetNvLinkVersion`` per active link. The answers go
into the GPU's entry of the NVML record (``fabric``, ``nvlink_fields``, each link's ``version``), so a
snapshot replays them; :func:`gpu_facts` turns them into the plain dicts the rules read
(``DriverGpu.extra["fabric"]`` and ``["nvlink"]``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

MAX_LINKS = 64
FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
FABRIC_COMPLETED = 3
FI_LINK_COUNT = 91
FI_SPEED_COMMON = 90
FI_SWITCH_LINKS = 147
FI_GET_SPEED = 164
FI_SPEED_L = (84, 85, 86, 87, 88, 89, 132, 133, 134, 135, 136, 137)  # NVML_FI_DEV_NVLINK_SPEED_MBPS_L0..L11
# nvmlNvlinkVersion_t -> the NVLink generation, and its per-link rate each way in GB/s where NVML gives none
# (what `nvidia-smi nvlink -s` prints per link: 26.562 GB/s on NVLink 4)
VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0"}
RATE_BY_VERSION = {"1.0": 20.0, "2.0": 25.0, "2.2": 25.0, "3.0": 25.0, "3.1": 25.0, "4.0": 26.562, "5.0": 53.125}
# links and NVLink generation of the SXM parts (device_models.nvlink_part names), where NVML does not say
PART_NVLINK = {"P100 SXM2": (4, "1.0"), "V100 SXM2": (6, "2.0"), "V100 SXM3": (6, "2.0"), "A100 SXM4": (12, "3.0"),
               "A100 SXM": (12, "3.0"), "A800 SXM4": (8, "3.0"), "H100 SXM5": (18, "4.0"), "H800 SXM5": (8, "4.0"),
               "H200 SXM": (18, "4.0"), "B200": (18, "5.0"), "HGX B200": (18, "5.0"), "B100": (18, "5.0"),
               "B300": (18, "5.0")}


def part_nvlink(model: Optional[str]) -> Optional[tuple[int, str]]:
    """(links, NVLink version) of a GPU model as gdrcheck names it ("H100 SXM5 80GB" is an "H100 SXM5")."""
    if not model:
        return None
    hits = [k for k in PART_NVLINK if model == k or model.startswith(k + " ")]
    return PART_NVLINK[max(hits, key=len)] if hits else None
NVML_SUCCESS = 0
RETURN_NAMES = {0: "Success", 1: "Uninitialized", 2: "InvalidArgument", 3: "NotSupported", 4: "NoPermission",
                6: "NotFound", 9: "DriverNotLoaded", 10: "Timeout", 15: "GpuIsLost", 17: "OperatingSystem",
                999: "Unknown"}


def ask_fabric(nv: Any, h: Any) -> dict[str, Any]:
    """The GPU's fabric info, or ``{"error": ...}``. Only the struct form passed by reference: the versioned
    call has crashed a process when handed its struct any other way."""
    import ctypes

    from gdrcheck.collectors.nvml_errors import error_doc

    st = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
    fn = getattr(nv, "nvmlDeviceGetGpuFabricInfo", None)
    if st is None or fn is None:
        return {"error": {"error": "FunctionNotFound", "code": 13,
                          "message": "pynvml has no nvmlDeviceGetGpuFabricInfo"}}
    try:
        info = st()
        fn(h, ctypes.byref(info))
        return {"state": int(info.state), "status": int(info.status), "clique_id": int(info.cliqueId),
                "cluster_uuid": bytes(bytearray(info.clusterUuid)).hex()}
    except Exception as e:  # noqa: BLE001 - NotSupported on a part without a fabric, old drivers
        return {"error": error_doc(e)}


def ask_fields(nv: Any, h: Any, links: list[int]) -> dict[str, Any]:
    """Field values: ``{"<field>" or "<field>:<link>": {"ret": n, "value": v}}`` or ``{"error": ...}``."""
    from gdrcheck.collectors.nvml_errors import error_doc

    ids = [(FI_LINK_COUNT, 0), (FI_SWITCH_LINKS, 0), (FI_SPEED_COMMON, 0)]
    ids += [(FI_GET_SPEED, i) for i in links]
    ids += [(FI_SPEED_L[i], 0) for i in links if i < len(FI_SPEED_L)]
    fn = getattr(nv, "nvmlDeviceGetFieldValues", None)
    if fn is None:
        return {"error": {"error": "FunctionNotFound", "code": 13, "message": "pynvml has no nvmlDeviceGetFieldValues"}}
    try:
        got = fn(h, ids)
        out: dict[str, Any] = {}
        for (fid, scope), v in zip(ids, got):
            key = f"{fid}:{scope}" if fid == FI_GET_SPEED else str(fid)
            ret = int(getattr(v, "nvmlReturn", 999))
            out[key] = {"ret": ret, "value": _value(v) if ret == NVML_SUCCESS else None}
        return out
    except Exception as e:  # noqa: BLE001
        return {"error": error_doc(e)}


def _value(v: Any) -> Any:
    kind = int(getattr(v, "valueType", 3))
    val = v.value
    if kind == 0:
        return float(val.dVal)
    if kind in (4, 5):
        return int(val.sllVal)
    return int(val.ullVal)


# ---------------------------------------------------------------------------
# record -> facts


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def fabric_facts(g: dict[str, Any]) -> Optional[dict[str, Any]]:
    """``{"state", "status", "clique_id", "cluster_uuid", "ok"}`` from a record's GPU entry; None when not asked;
    ``{"error": name}`` when NVML refused (NotSupported: no fabric on this part or driver)."""
    f = g.get("fabric")
    if not isinstance(f, dict):
        return None
    if isinstance(f.get("error"), dict):
        return {"error": str(f["error"].get("error") or "Unknown")}
    state, status = _int(f.get("state")), _int(f.get("status"))
    if state is None:
        return None
    out = {"state": FABRIC_STATES.get(state, f"state {state}"),
           "status": RETURN_NAMES.get(status, f"NVML return {status}") if status is not None else None,
           "clique_id": _int(f.get("clique_id")),
           "cluster_uuid": f.get("cluster_uuid") if isinstance(f.get("cluster_uuid"), str) else None}
    out["ok"] = state == FABRIC_COMPLETED and status == NVML_SUCCESS
    out["supported"] = state != 0
    return out


def nvlink_facts(g: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The GPU's links: how many the part has, which are active and which down, into NVSwitches, the version
    and the per-link rate each way (GB/s, with where it came from). None when the record has no link answers."""
    links = [x for x in g.get("nvlinks") or () if isinstance(x, dict) and _int(x.get("link")) is not None
             and 0 <= x["link"] < MAX_LINKS]
    fields = g.get("nvlink_fields") if isinstance(g.get("nvlink_fields"), dict) else {}
    if not links and not fields:
        return None

    def field(key: str) -> Optional[Any]:
        v = fields.get(key)
        return v.get("value") if isinstance(v, dict) and v.get("ret") == NVML_SUCCESS else None

    count = _int(field(str(FI_LINK_COUNT)))
    if count is not None and not 0 < count <= MAX_LINKS:  # no part has more (a damaged or forged record)
        count = None
    active = sorted(x["link"] for x in links if x.get("active"))
    seen = sorted(x["link"] for x in links)
    total = count if count else (len(seen) or None)
    down = sorted(set(range(total)) - set(active)) if total else sorted(set(seen) - set(active))
    versions = sorted({VERSIONS.get(_int(x.get("version")) or -1, "") for x in links if x.get("active")} - {""})
    rates = []
    for i in active:
        r = field(f"{FI_GET_SPEED}:{i}")
        if not r and i < len(FI_SPEED_L):
            r = field(str(FI_SPEED_L[i]))
        if isinstance(r, (int, float)) and r > 0:
            rates.append(r / 1000.0)
    out: dict[str, Any] = {"links": total, "active": len(active), "down": down,
                           "to_nvswitch": _int(field(str(FI_SWITCH_LINKS))),
                           "version": versions[0] if len(versions) == 1 else (", ".join(versions) or None)}
    if rates:
        out["rate_gb_per_s"] = round(min(rates), 3)
        out["rate_basis"] = "NVML's per-link speed"
    elif len(versions) == 1 and versions[0] in RATE_BY_VERSION:
        out["rate_gb_per_s"] = RATE_BY_VERSION[versions[0]]
        out["rate_basis"] = f"NVLink {versions[0]}'s per-link rate (NVML gave no per-link speed)"
    return out


def gpu_facts(g: dict[str, Any]) -> dict[str, Any]:
    """What goes into ``DriverGpu.extra``: ``fabric`` and ``nvlink`` where the record has them."""
    out: dict[str, Any] = {}
    fab = fabric_facts(g)
    if fab is not None:
        out["fabric"] = fab
    nvl = nvlink_facts(g)
    if nvl is not None:
        out["nvlink"] = nvl
    return out
