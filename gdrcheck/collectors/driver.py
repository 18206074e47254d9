"""The NVIDIA driver's view of the GPUs: NVML first, ``nvidia-smi -q`` as fallback.

Each GPU the driver lists keeps the one bus file its BAR1 view needs beyond the PCI function
(``resourceN_resize``, as ``DriverGpu.extra["bar1_resize"]``); the BAR1 rules join the two. An
NVIDIA GPU on the bus that the driver does not list is reported, not dropped.
"""

from __future__ import annotations

from gdrcheck.collectors.driver_records import no_driver_records, not_captured, nvml_not_recorded
from gdrcheck.io.source import Source
from gdrcheck.model import CollectorStatus, DriverGpu, NvLink, PciFunction, bdf_key, frozen_map
from gdrcheck.record import field, record, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


@record
class DriverFacts:
    gpus: tuple[DriverGpu, ...] = ()
    nvlinks: tuple[NvLink, ...] = ()
    p2p_status: dict[tuple[str, str, str], str] = field(default_factory=dict)
    shows_nvlink: bool = False
    statuses: list[CollectorStatus] = field(default_factory=list)
    common_ancestor: dict[tuple[str, str], int] = field(default_factory=dict)  # NVML topology level per GPU pair

    def renumber(self, devices: Sequence[PciFunction]) -> tuple[PciFunction, ...]:
        """Give PCI functions the driver's GPU index where the driver said it."""
        idx = {g.bdf: g.index for g in self.gpus if g.index is not None}
        if not idx:
            return tuple(devices)
        return tuple(replace(d, gpu_index=idx[d.bdf]) if d.bdf in idx else d for d in devices)


def _with_bus_view(src: Source, gpus: Sequence[DriverGpu], devices: Sequence[PciFunction]) -> tuple[DriverGpu, ...]:
    """The one read the bus view of BAR1 needs beyond the PCI function: its ``resourceN_resize`` file
    (kept as ``bar1_resize``; the view itself is joined once, in the BAR1 rules)."""
    from gdrcheck.pcie.rebar import bar1_index

    by_bdf = {d.bdf: d for d in devices}
    out = []
    for g in gpus:
        dev = by_bdf.get(g.bdf)
        if dev is None:
            out.append(g)
            continue
        resize = src.read_line(f"/sys/bus/pci/devices/{g.bdf}/resource{bar1_index(dev)}_resize")
        out.append(replace(g, extra=frozen_map({**g.extra, "bar1_resize": resize})))
    return tuple(sorted(out, key=lambda g: (g.index if g.index is not None else 1 << 30, bdf_key(g.bdf))))


def _missing(gpus: Sequence[DriverGpu], devices: Sequence[PciFunction], who: str) -> list[CollectorStatus]:
    from gdrcheck.pcie.kinds import is_nvidia_gpu

    listed = {g.bdf for g in gpus}
    out = []
    for d in sorted((d for d in devices if is_nvidia_gpu(d) and d.bdf not in listed), key=lambda d: bdf_key(d.bdf)):
        bound = f"bound to {d.driver}" if d.driver else "bound to no driver"
        hint = ("bind it to the nvidia driver" if d.driver and d.driver != "nvidia" else
                "check 'sudo dmesg | grep -i -e nvrm -e xid' for why the driver did not take it "
                "(an unassigned BAR, a GPU fallen off the bus)")
        status = "unavailable" if d.driver and d.driver != "nvidia" else "error"
        out.append(CollectorStatus("driver-gpus", status, f"GPU {d.bdf} is on the PCI bus ({bound}) but {who} "
                                   "does not list it", hint))
    return out


def collect_driver(src: Source, devices: Sequence[PciFunction], nvml=None) -> DriverFacts:
    """``nvml``: the waiter :func:`gdrcheck.collectors.nvml.begin_nvml` gave, when NVML was asked early."""
    if nvml is None and no_driver_records(src):
        nv = None
        facts = DriverFacts(statuses=[nvml_not_recorded(src)])
    else:
        from gdrcheck.collectors.nvml import collect_nvml

        nv = nvml() if nvml is not None else collect_nvml(src)
        facts = DriverFacts(statuses=[nv.status])
    if nv is not None and nv.answered:
        facts.gpus = _with_bus_view(src, nv.gpus, devices)
        facts.nvlinks = nv.nvlinks
        facts.p2p_status = dict(nv.p2p_status)
        facts.shows_nvlink = nv.shows_nvlink
        facts.common_ancestor = dict(nv.common_ancestor)
        facts.statuses.extend(_missing(facts.gpus, devices, "NVML"))
        return facts
    if nv is None:  # nor any nvidia-smi output: the text query, the last one asked, says so
        facts.statuses.append(not_captured(("nvidia-smi", "-q")))
        return facts
    from gdrcheck.collectors.pastes.nvidia_smi import collect_nvidia_smi, rows_to_gpus

    rows, st = collect_nvidia_smi(src)
    facts.statuses.append(st)
    if rows:
        facts.gpus = _with_bus_view(src, rows_to_gpus(rows), devices)
        facts.statuses.extend(_missing(facts.gpus, devices, "nvidia-smi"))
    return facts
