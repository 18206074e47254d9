"""Device names from udev's hardware database, when the node runs udev (``/run/udev``).

pyudev is optional: without it, or without ``/run/udev`` (a container, a bare
sysfs tree), devices keep the names their input gave (lspci, hwloc) or none;
ids and classes, never names, decide what a device is. Names read live are
recorded in a snapshot (``/gdrcheck/names.json``) so a replay shows the same.
"""

from __future__ import annotations

import json

from gdrcheck.collectors.clip import clip_name
from gdrcheck.io.source import Source
from gdrcheck.model import PciFunction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

NAMES_FILE = "/gdrcheck/names.json"


def _from_udev(devices: Sequence[PciFunction]) -> dict[str, str]:
    try:
        import pyudev
    except Exception:  # noqa: BLE001 - optional dependency, any import failure means no names
        return {}
    out: dict[str, str] = {}
    try:
        ctx = pyudev.Context()
        for d in devices:
            try:
                dev = pyudev.Devices.from_sys_path(ctx, f"/sys/bus/pci/devices/{d.bdf}")
                props = dev.properties
                vendor = props.get("ID_VENDOR_FROM_DATABASE")
                model = props.get("ID_MODEL_FROM_DATABASE")
            except Exception:  # noqa: BLE001 - a device that vanished, a missing property
                continue
            if vendor or model:
                out[d.bdf] = clip_name(" ".join(x for x in (vendor, model) if x))
    except Exception:  # noqa: BLE001 - no libudev in a slim image
        return {}
    return out


def collect_names(src: Source, devices: Sequence[PciFunction]) -> dict[str, str]:
    """{bdf: "Vendor Model"} from udev's hwdb (live) or from a snapshot's record."""
    if src.live:
        names = _from_udev(devices) if src.exists("/run/udev") else {}
        if src.recording:
            src.recorded[NAMES_FILE] = ("f", json.dumps(names, indent=1, sort_keys=True).encode())
        return names
    text = src.read_text(NAMES_FILE)
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: clip_name(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
