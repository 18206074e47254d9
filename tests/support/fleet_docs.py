"""Small per-node reports (the ``pairs --json`` document, format 1.1) for fleet tests.

``report()`` makes a self-consistent document: the shape hash is taken over the
canonical lines, the topology hash over the lines and the positions, so two
reports with the same lines and positions group together, as real ones do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional, Union

BASE_LINES = (
    "bridge[bridge0].acs=none",
    "bridge[bridge1].acs=off",
    "bridge[bridge2].acs=off",
    "device[gpu0].id=10de:2335",
    "device[gpu1].id=10de:2335",
    "device[nic0].id=15b3:1021",
    "device[nic0].rdma=yes",
    "devices.gpu=2x10de:2335",
    "devices.nic=1x15b3:1021",
    "host.driver.version=580.95.05",
    "host.iommu.mode=passthrough",
    "host.module.nvidia_peermem=loaded",
    "pair[gpu0,gpu1]=NV18/PIX",
    "pair[gpu0,nic0]=PIX",
    "pair[gpu1,nic0]=PIX",
)
BASE_POSITIONS = {"bridge0": "0000:00:01.0", "bridge1": "0000:01:00.0", "bridge2": "0000:02:00.0",
                  "gpu0": "0000:03:00.0", "gpu1": "0000:04:00.0", "nic0": "0000:05:00.0"}

Finding = Union[tuple[str, str], tuple[str, str, str], dict]


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def lines_with(changes: Optional[Mapping[str, Optional[str]]] = None, base: Sequence[str] = BASE_LINES) -> list:
    """The base lines with ``key: value`` changed, added, or removed (value None)."""
    d = dict(line.split("=", 1) for line in base)
    for k, v in (changes or {}).items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return sorted(f"{k}={v}" for k, v in d.items())


def fingerprint(changes=None, positions: Optional[Mapping[str, str]] = None) -> dict:
    lines = lines_with(changes)
    pos = dict(BASE_POSITIONS if positions is None else positions)
    topo_lines = sorted(lines + [f"position[{k}]={v}" for k, v in pos.items()])
    return {"shape": sha("\n".join(lines)), "topology": sha("\n".join(topo_lines)), "lines": lines,
            "positions": pos}


def report(host: Optional[str] = "gpu001", *, changes=None, positions=None, findings: Iterable[Finding] = (),
           status: Optional[str] = None, timed_out: bool = False, with_fingerprint: bool = True,
           summary_line: Optional[str] = None) -> dict:
    fs = []
    for f in findings:
        if isinstance(f, dict):
            fs.append(f)
            continue
        code, sev = f[0], f[1]
        subject = f[2] if len(f) > 2 else "0000:03:00.0"
        fs.append({"code": code, "severity": sev, "subject": [subject], "effect": "fail" if sev == "error" else "ok",
                   "message": f"{code} on {subject} of {host}"})
    counts = {s: sum(1 for f in fs if f["severity"] == s) for s in ("error", "warning", "info")}
    if status is None:
        status = "unknown" if timed_out else ("fail" if counts["error"] else "pass")
    if summary_line is None:
        summary_line = "OK 2 GPU, 1 NIC, 0 NVMe: 3 ok" if status == "pass" else \
            (f"{fs[0]['code']} something" if fs else "GDR122 run-timed-out")
    doc = {
        "format_version": "1.1", "gdrcheck_version": "0.1.0", "host": host,
        "pairs": [{"a": "0000:03:00.0", "b": "0000:05:00.0", "kind": "gpu-nic", "pcie_path": "PIX", "path": "PIX",
                   "verdict": "fail" if status == "fail" else ("unknown" if status == "unknown" else "ok"),
                   "findings": [f["code"] for f in fs]}],
        "findings": fs,
        "summary": {"pairs": 1, "verdicts": {}, "findings": counts},
        "status": status, "timed_out": timed_out, "summary_line": summary_line,
    }
    if with_fingerprint:
        doc["fingerprint"] = fingerprint(changes, positions)
    return doc


def dumps(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def write(path: Path, doc: dict, pretty: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n" if pretty else dumps(doc) + "\n")
    return path


def write_fleet(directory: Path, docs: Mapping[str, dict], suffix: str = "") -> Path:
    """One file per node named by the node (clush --outdir: no suffix; srun %N.json / Ansible: .json)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        write(directory / f"{name}{suffix}", doc)
    return directory


def renumbered(positions: Optional[dict[str, str]] = None, shift: int = 0x10) -> dict[str, str]:
    """The same board with bus numbers shifted (another BIOS, another slot order)."""
    out = {}
    for k, bdf in (positions or BASE_POSITIONS).items():
        dom, bus, rest = bdf.split(":")
        out[k] = f"{dom}:{int(bus, 16) + shift:02x}:{rest}"
    return out


def prefixed(docs: Mapping[str, dict], sep: str = ": ") -> str:
    """``host: {json}`` lines as pdsh (``"host: "``) or clush (``": "``) print them."""
    return "".join(f"{h}{sep}{dumps(d)}\n" for h, d in docs.items())
