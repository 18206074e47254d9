"""GPU lists without a tree: plain ``nvidia-smi``, ``nvidia-smi -q | grep -A3 -i bar``, nccl-tests' rank lines.

Each parser returns GPU rows (``index``, and where the paste has them ``bdf``, ``name``, BAR1 sizes, driver and
CUDA versions) for :meth:`gdrcheck.collectors.pastes.merge_host.HostSteps.add_gpu_list`.
"""

from __future__ import annotations

import re

from gdrcheck.errors import InputError
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_HEAD = 65536

# -- plain nvidia-smi ------------------------------------------------------------------------------------
# '|   0  NVIDIA RTX 6000 Ada Gene...    Off |   00000000:C1:00.0 Off |   Off |' (name cut to 20-odd characters)
_SMI_ROW = lazy_pattern(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s+"
                        r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s", re.M)
_SMI_HEAD = lazy_pattern(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s*(\S+)(?:\s+CUDA Version:\s*(\S+))?")


def looks_like_smi_table(text: str) -> bool:
    head = text[:_HEAD]
    return bool(_SMI_HEAD.search(head)) and bool(_SMI_ROW.search(head))


def parse_smi_table(text: str, name: str) -> list[dict[str, Any]]:
    from gdrcheck.model import norm_bdf

    head = _SMI_HEAD.search(text)
    driver, cuda = (head.group(2), head.group(3)) if head else (None, None)
    rows = []
    for idx, gpu_name, bus in _SMI_ROW.findall(text):
        full = not gpu_name.endswith("...")
        rows.append({"index": int(idx), "bdf": norm_bdf(bus), "name": gpu_name if full else gpu_name[:-3].rstrip(),
                     "driver_version": driver, "cuda_version": cuda, "source": "nvidia-smi"})
    if not rows:
        raise InputError(f"{name}: nvidia-smi's table without a GPU row")
    return rows


# -- nvidia-smi -q | grep -A3 -i bar ------------------------------------------------------------------------
_BAR_BLOCK = lazy_pattern(r"^\s*BAR1 Memory Usage\s*\n((?:\s+\w+\s*:\s*.*\n?){1,3})", re.M)
_BAR_FIELD = lazy_pattern(r"^\s*(Total|Used|Free)\s*:\s*(.+?)\s*$", re.M)


def looks_like_bar1_grep(text: str) -> bool:
    head = text[:_HEAD]
    return bool(_BAR_BLOCK.search(head)) and not re.search(r"^GPU [0-9A-Fa-f]{4,8}:", head, re.M)


def parse_bar1_grep(text: str, name: str) -> list[dict[str, Any]]:
    from gdrcheck.collectors.pastes.nvidia_smi import size_bytes

    rows = []
    for i, m in enumerate(_BAR_BLOCK.finditer(text)):
        fields = dict(_BAR_FIELD.findall(m.group(1)))
        rows.append({"index": i, "bar1_total_bytes": size_bytes(fields.get("Total")),
                     "bar1_used_bytes": size_bytes(fields.get("Used")),
                     "bar1_free_bytes": size_bytes(fields.get("Free")), "source": "nvidia-smi -q (BAR1 lines)"})
    if not rows:
        raise InputError(f"{name}: no 'BAR1 Memory Usage' block")
    return rows


# -- nccl-tests: '#  Rank  0 Group  0 Pid  1234 on   host device  0 [0x81] NVIDIA H100 80GB HBM3' -------------
# nccl-tests prints the bus as [0x%02x] (older) or [%04x:%02x:%02x] (domain:bus:device; src/common.cu)
_RANK = lazy_pattern(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                     r"\[(?:0x([0-9a-fA-F]{1,2})|([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2}))\]\s+(.+?)\s*$",
                     re.M)


def looks_like_nccl_tests(text: str) -> bool:
    return bool(_RANK.search(text[:_HEAD]))


def parse_nccl_tests(text: str, name: str) -> list[dict[str, Any]]:
    by_host: dict[str, dict[int, dict[str, Any]]] = {}
    for rank, host, dev, bus8, dom, bus, slot, gpu_name in _RANK.findall(text):
        bdf = f"0000:{int(bus8, 16):02x}:00.0" if bus8 else f"{dom.lower()}:{bus.lower()}:{slot.lower()}.0"
        by_host.setdefault(host, {})[int(dev)] = {
            "index": int(dev), "bdf": bdf, "name": gpu_name, "source": "nccl-tests",
            "rank": int(rank), "bus_only": bool(bus8)}
    if not by_host:
        raise InputError(f"{name}: no nccl-tests '#  Rank N ... device N [bus] NAME' line")
    host = next(iter(by_host))
    rows = [by_host[host][d] for d in sorted(by_host[host])]
    buses = [r["bdf"] for r in rows if r["bus_only"]]
    for r in rows:  # one bus number for several GPUs (a VM's bus 00): it tells none of them apart
        if r["bus_only"] and buses.count(r["bdf"]) > 1:
            r["bus_shared"], r["bdf"] = r["bdf"][5:7], None
    return rows
