"""The GPUs as ``nvidia-smi -q`` reports them: the fallback when NVML cannot be used.

Two pure parsers (XML from ``nvidia-smi -q -x``, text from ``nvidia-smi -q``)
turn output into one dict per GPU; :func:`collect_nvidia_smi` runs the tool
through the :class:`~gdrcheck.io.source.Source` (so a snapshot replays it) and
maps its failures to a :class:`CollectorStatus` with a plain hint.

The text is parsed by section and indentation, never by line number or column:
the label column moves between driver versions, and newer drivers add sections
(``Conf Compute Protected Memory Usage`` after BAR1) with the same ``Total``,
``Used``, ``Free`` keys.
"""

from __future__ import annotations

import re

from gdrcheck.collectors.bounds import MAX_GPUS, check_gpus
from gdrcheck.collectors.clip import clip_name
from gdrcheck.io.source import CommandResult, Source
from gdrcheck.model import CollectorStatus, DriverGpu, GpuProcess, frozen_map, norm_bdf
from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

MIB = 1 << 20
SMI_TIMEOUT = 30.0
_GPU_RE = lazy_pattern(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_SIZE_RE = lazy_pattern(r"^(\d+)\s*(KiB|MiB|GiB|B)$", re.I)
_UNITS = {"b": 1, "kib": 1 << 10, "mib": MIB, "gib": 1 << 30}

# documented nvidia-smi exit codes -> (status, meaning, hint)
EXIT_CODES: dict[int, tuple[str, str, str]] = {
    2: ("error", "nvidia-smi rejected its arguments (a very old nvidia-smi?)", "upgrade the NVIDIA driver"),
    3: ("error", "the query is not available on this GPU", "upgrade the NVIDIA driver"),
    4: ("error", "insufficient permissions", "run gdrcheck as root"),
    6: ("error", "the query was unsuccessful", "run 'nvidia-smi -q' by hand to see which GPU fails"),
    8: ("error", "a GPU's external power cables are not attached", "connect the GPU's auxiliary power cables"),
    9: ("unavailable", "the NVIDIA kernel driver is not loaded",
        "sudo modprobe nvidia, then 'sudo dmesg | grep -i nvrm' says why it did not load"),
    10: ("error", "the kernel reported an interrupt problem with a GPU", "check 'sudo dmesg | grep -i nvrm'"),
    12: ("unavailable", "the NVML shared library (libnvidia-ml.so.1) was not found",
         "install the NVIDIA driver; in a container, start it with the NVIDIA container runtime"),
    13: ("error", "the installed NVML lacks a function nvidia-smi needs (driver and nvidia-smi do not match)",
         "reinstall the NVIDIA driver so nvidia-smi and libnvidia-ml.so.1 match"),
    14: ("error", "a GPU's infoROM is corrupted", "contact the GPU vendor (RMA)"),
    15: ("error", "a GPU fell off the bus or is otherwise inaccessible",
         "check 'sudo dmesg | grep -i xid' (Xid 79), the GPU's power and slot; reset or power-cycle it"),
}


# ---------------------------------------------------------------------------
# values


def size_bytes(text: Optional[str]) -> Optional[int]:
    """``65536 MiB`` -> bytes; ``N/A``, ``[N/A]``, ``[Not Supported]`` -> None."""
    if text is None:
        return None
    m = _SIZE_RE.match(text.strip())
    if not m:
        return None
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _bdf(text: Optional[str]) -> Optional[str]:
    if not text:
        return None
    try:
        return norm_bdf(text)
    except ValueError:
        return None


def _val(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    t = text.strip()
    if not t or t.strip("[]") in ("N/A", "Not Supported", "Unknown Error", "Insufficient Permissions"):
        return None
    return t


def _pci_id(text: Optional[str]) -> Optional[tuple[int, int]]:
    """``0x233010DE`` (nvidia-smi -q's PCI Device Id, or -x's ``233010DE``) -> (vendor, device): (0x10de, 0x2330)."""
    t = _val(text)
    if t is None:
        return None
    try:
        v = int(t, 16)
    except ValueError:
        return None
    return (v & 0xFFFF, v >> 16) if 0 < v <= 0xFFFFFFFF else None


def _int(text: Optional[str]) -> Optional[int]:
    t = _val(text)
    if t is None:
        return None
    try:
        return int(t, 0)
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# text


@record
class _Node:
    label: str
    value: Optional[str]
    indent: int
    children: list[_Node] = field(default_factory=list)

    def get(self, *path: str) -> Optional[_Node]:
        node: Optional[_Node] = self
        for label in path:
            if node is None:
                return None
            want = label.lower()
            node = next((c for c in node.children if c.label.lower() == want), None)
        return node

    def value_of(self, *path: str) -> Optional[str]:
        n = self.get(*path)
        return n.value if n is not None else None

    def walk(self):
        for c in self.children:
            yield c
            yield from c.walk()


def _tree(lines: list[str]) -> _Node:
    root = _Node("", None, -1)
    stack = [root]
    for line in lines:
        if not line.strip():
            continue
        line = line.expandtabs(4).rstrip()
        indent = len(line) - len(line.lstrip(" "))
        text = line.strip()
        label, sep, value = text.partition(":")
        node = _Node(label.strip(), value.strip() if sep else None, indent)
        while stack[-1].indent >= indent:
            stack.pop()
        stack[-1].children.append(node)
        stack.append(node)
    return root


def _text_processes(node: Optional[_Node]) -> list[dict[str, Any]]:
    procs: list[dict[str, Any]] = []
    if node is None:
        return procs
    cur: Optional[dict[str, Any]] = None
    for n in node.walk():
        label = n.label.lower()
        if label == "process id":
            pid = _int(n.value)
            cur = {"pid": pid, "name": None, "type": None, "used_memory_bytes": None} if pid is not None else None
            if cur is not None:
                procs.append(cur)
        elif cur is not None and label == "name":
            cur["name"] = _val(n.value)
        elif cur is not None and label == "type":
            cur["type"] = _val(n.value)
        elif cur is not None and label == "used gpu memory":
            cur["used_memory_bytes"] = size_bytes(n.value)
    return procs


def parse_smi_text(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi -q`` (any section selection) -> one dict per GPU, in output (index) order."""
    blocks: list[tuple[str, list[str]]] = []
    header: list[str] = []
    for line in text.splitlines():
        m = _GPU_RE.match(line.rstrip())
        if m:
            blocks.append((m.group(1), []))
            if len(blocks) > MAX_GPUS:
                check_gpus("nvidia-smi -q", len(blocks))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            header.append(line)
    head = _tree(header)
    driver = _val(head.value_of("Driver Version"))
    rows = []
    for i, (bus, lines) in enumerate(blocks):
        t = _tree(lines)
        bdf = _bdf(bus) or _bdf(t.value_of("PCI", "Bus Id"))
        if bdf is None:
            continue
        rows.append({
            "bdf": bdf, "index": i, "name": _val(t.value_of("Product Name")),
            "pci_id": _pci_id(t.value_of("PCI", "Device Id")),
            "uuid": _val(t.value_of("GPU UUID")), "serial": _val(t.value_of("Serial Number")),
            "minor": _int(t.value_of("Minor Number")),
            "bar1_total_bytes": size_bytes(t.value_of("BAR1 Memory Usage", "Total")),
            "bar1_used_bytes": size_bytes(t.value_of("BAR1 Memory Usage", "Used")),
            "bar1_free_bytes": size_bytes(t.value_of("BAR1 Memory Usage", "Free")),
            "fb_total_bytes": size_bytes(t.value_of("FB Memory Usage", "Total")),
            "fb_used_bytes": size_bytes(t.value_of("FB Memory Usage", "Used")),
            "processes": _text_processes(t.get("Processes")),
            "driver_version": driver, "source": "nvidia-smi -q",
        })
    return rows


# ---------------------------------------------------------------------------
# XML


def parse_smi_xml(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi -q -x`` -> one dict per GPU; raises ValueError on damaged XML."""
    from gdrcheck.collectors.pastes.xml_safe import parse_xml_safely
    from gdrcheck.errors import InputError

    try:  # the elements counted as read (a file of millions is refused before it is held whole)
        root, _lines = parse_xml_safely(text, "", allow_doctype=True, what="nvidia-smi XML")
    except InputError as e:
        raise ValueError(f"not nvidia-smi XML: {str(e).lstrip(': ')}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"not nvidia-smi XML: root element <{root.tag}>")

    def tx(el, path: str) -> Optional[str]:
        found = el.find(path)
        return found.text if found is not None and found.text is not None else None

    driver = _val(tx(root, "driver_version"))
    rows = []
    for i, g in enumerate(root.findall("gpu")):
        bdf = _bdf(tx(g, "pci/pci_bus_id")) or _bdf(g.get("id"))
        if bdf is None:
            continue
        procs = []
        for p in g.findall("processes/process_info"):
            pid = _int(tx(p, "pid"))
            if pid is not None:
                procs.append({"pid": pid, "name": _val(tx(p, "process_name")), "type": _val(tx(p, "type")),
                              "used_memory_bytes": size_bytes(tx(p, "used_memory"))})
        rows.append({
            "bdf": bdf, "index": i, "name": _val(tx(g, "product_name")), "uuid": _val(tx(g, "uuid")),
            "pci_id": _pci_id(tx(g, "pci/pci_device_id")),
            "serial": _val(tx(g, "serial")), "minor": _int(tx(g, "minor_number")),
            "bar1_total_bytes": size_bytes(tx(g, "bar1_memory_usage/total")),
            "bar1_used_bytes": size_bytes(tx(g, "bar1_memory_usage/used")),
            "bar1_free_bytes": size_bytes(tx(g, "bar1_memory_usage/free")),
            "fb_total_bytes": size_bytes(tx(g, "fb_memory_usage/total")),
            "fb_used_bytes": size_bytes(tx(g, "fb_memory_usage/used")),
            "processes": procs, "driver_version": driver, "source": "nvidia-smi -q -x",
        })
    return rows


# ---------------------------------------------------------------------------
# collector


def rows_to_gpus(rows: list[dict[str, Any]]) -> tuple[DriverGpu, ...]:
    out = []
    for r in rows:
        procs = tuple(GpuProcess(pid=p["pid"], name=clip_name(p.get("name")),
                                 used_memory_bytes=p.get("used_memory_bytes"))
                      for p in r.get("processes") or ())
        extra = {k: r[k] for k in ("minor", "fb_used_bytes", "driver_version") if r.get(k) is not None}
        out.append(DriverGpu(
            bdf=r["bdf"], index=r.get("index"), name=clip_name(r.get("name")), uuid=r.get("uuid"),
            serial=r.get("serial"),
            bar1_total_bytes=r.get("bar1_total_bytes"), bar1_used_bytes=r.get("bar1_used_bytes"),
            bar1_free_bytes=r.get("bar1_free_bytes"), fb_total_bytes=r.get("fb_total_bytes"),
            source=r.get("source", "nvidia-smi"), processes=procs, extra=frozen_map(extra)))
    return tuple(out)


def _first_line(res: CommandResult) -> str:
    for text in (res.stdout, res.stderr):
        for line in text.splitlines():
            if line.strip():
                return line.strip()[:200]
    return ""


def failure_status(res: CommandResult) -> CollectorStatus:
    """Why a run of nvidia-smi gave no GPUs, in plain words."""
    cmd = " ".join(res.argv)
    if res.error == "not found":
        return CollectorStatus("nvidia-smi", "unavailable", "nvidia-smi not found",
                               "install the NVIDIA driver (nvidia-smi ships with it), or set GDRCHECK_TOOL_PATH "
                               "to the directory that holds it")
    if res.error == "not captured":
        from gdrcheck.collectors.driver_records import not_captured

        return not_captured(res.argv)
    if res.error and res.error.startswith("timed out"):
        return CollectorStatus("nvidia-smi", "unavailable", f"'{cmd}' {res.error}: the driver did not answer",
                               "a GPU or the driver may be hung: check 'sudo dmesg | grep -i -e xid -e nvrm'; "
                               "persistence mode (nvidia-persistenced) makes nvidia-smi answer faster")
    if res.error:
        return CollectorStatus("nvidia-smi", "error", f"'{cmd}' could not run: {res.error}", "")
    said = _first_line(res)
    known = EXIT_CODES.get(res.rc if res.rc is not None else -1)
    if known:
        status, meaning, hint = known
        return CollectorStatus("nvidia-smi", status, f"'{cmd}' exited {res.rc}: {meaning}"
                               + (f" ({said})" if said else ""), hint)
    return CollectorStatus("nvidia-smi", "error", f"'{cmd}' exited {res.rc}" + (f": {said}" if said else ""),
                           "run 'nvidia-smi -q' by hand to see what fails")


def collect_nvidia_smi(src: Source, timeout: float = SMI_TIMEOUT) -> tuple[list[dict[str, Any]], CollectorStatus]:
    """``nvidia-smi -q -x`` first, then the text ``nvidia-smi -q``; GPU rows and a status."""
    res = src.run(["nvidia-smi", "-q", "-x"], timeout=timeout)
    bad: Optional[CollectorStatus] = None
    if res.error in ("not found",) or (res.error or "").startswith("timed out"):
        return [], failure_status(res)
    rows: list[dict[str, Any]] = []
    if res.error is None and res.stdout.strip():
        try:
            rows = parse_smi_xml(res.stdout)
        except ValueError as e:
            bad = CollectorStatus("nvidia-smi", "error", f"'nvidia-smi -q -x': {e}", "")
    if not rows:
        if res.error is None and res.rc in EXIT_CODES and EXIT_CODES[res.rc][0] == "unavailable":
            return [], failure_status(res)
        text_res = src.run(["nvidia-smi", "-q"], timeout=timeout)
        if text_res.error is None and text_res.stdout.strip():
            rows = parse_smi_text(text_res.stdout)
        if rows:
            res = text_res
        else:
            first = res if res.error != "not captured" else text_res
            return [], bad if bad is not None and first.ok else failure_status(first)
    names = ", ".join(sorted({r["name"] for r in rows if r.get("name")})) or "GPU"
    driver = next((r["driver_version"] for r in rows if r.get("driver_version")), None)
    detail = f"{len(rows)} x {names}" + (f", driver {driver}" if driver else "") + f" ({' '.join(res.argv)})"
    if not res.ok:
        partial = failure_status(res)
        return rows, CollectorStatus("nvidia-smi", "error", f"{detail}; {partial.detail}", partial.hint)
    return rows, CollectorStatus("nvidia-smi", "ok", detail)
