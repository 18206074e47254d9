"""A node's fingerprint: the facts that decide GPUDirect, as sorted ``key=value`` lines and two hashes.

Identically built nodes give identical lines. Nothing of the moment goes in
(BAR1 in use, processes, a GPU's link speed, which drops when it idles), and
nothing that names the node (host name, UUIDs, serials).

* ``topology``: the lines with PCI addresses, so a moved card changes it;
* ``shape``: the same lines with each address replaced by its position
  (``gpu3``: the fourth GPU in address order, ``bridge7``, ``root1``), so the same
  board with renumbered buses keeps its shape. Fleets group by shape.

Pure: a function of the evaluation.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_value
from gdrcheck.model import bdf_key
from gdrcheck.pcie.kinds import BRIDGE_KINDS
from gdrcheck.reach import kernel_view
from gdrcheck.units import speed_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

DEVICE_KINDS = ("gpu", "nic", "nvme", "nvswitch")
_REACH_OF_KIND = {"gpu": "gpus", "nic": "nics", "nvme": "nvme", "nvswitch": "tree"}  # gdrcheck.reach's facts
# what a fingerprint line calls a bridge: the ports, plus a bridge of no known port type and a host bridge
BRIDGE_TAGGED = BRIDGE_KINDS + ("bridge", "host_bridge")


def _width(v: Optional[int]) -> str:
    return "x?" if v is None else f"x{v}"


def _link(d, with_speed: bool) -> str:
    k = d.link
    if k.cur_width is None and k.max_width is None and k.cur_speed is None and k.max_speed is None:
        return "unknown"
    cur = _width(k.cur_width) + (f" {speed_text(k.cur_speed)}" if with_speed else "")
    return f"{cur} max {_width(k.max_width)} {speed_text(k.max_speed)}"


def _acs(topo, bdf: str) -> str:
    from gdrcheck.pcie.acs import ACS_BITS

    st = topo.acs(bdf)
    if not st.known:
        return "unknown"
    if not st.present:
        return "none"
    on = [k for mask, k, _l, _n in ACS_BITS if st.ctrl & mask]
    return ",".join(on) if on else "off"


def _module(loaded, name: str) -> str:
    if not isinstance(loaded, (list, tuple)):
        return "unknown"
    return "loaded" if name in loaded else "absent"


class Fingerprint:
    """The canonical lines of a node in both forms, the hashes, and the address of each position."""

    def __init__(self, shape_lines: list[str], topology_lines: list[str], positions: dict[str, str],
                 host: Optional[dict[str, str]] = None, bridge_acs: tuple = ()) -> None:
        self.shape_lines = shape_lines
        self.host = host or {}  # the host facts' values as their lines give them, by key
        self.bridge_acs = bridge_acs  # the ACS state of each bridge on a pair's path
        self.topology_lines = topology_lines
        self.positions = positions
        self.shape = "sha256:" + _digest(shape_lines)
        self.topology = "sha256:" + _digest(topology_lines)

    def to_doc(self) -> dict[str, object]:
        return {"shape": self.shape, "topology": self.topology, "lines": list(self.shape_lines),
                "positions": dict(self.positions)}


def _sha256():
    """CPython's own SHA-256 (``_sha2`` from 3.12, ``_sha256`` before): the same digest as hashlib's, without
    loading OpenSSL's libcrypto, which costs a few milliseconds of every ``pairs`` run."""
    for name in ("_sha2", "_sha256"):
        try:
            return __import__(name).sha256
        except ImportError:
            continue
    import hashlib

    return hashlib.sha256


def _digest(lines: Iterable[str]) -> str:
    return _sha256()("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate of an input


def positions(topo) -> dict[str, str]:
    """Address -> position name (``gpu0``, ``nic1``, ``bridge4``, ``root0``), in PCI address order per kind."""
    names: dict[str, str] = {}
    counters: dict[str, int] = {}
    for bdf in sorted(topo.by_bdf, key=bdf_key):
        kind = topo.device_kind[bdf]
        tag = "bridge" if kind in BRIDGE_TAGGED else kind if kind in DEVICE_KINDS else "fn"
        n = counters.get(tag, 0)
        counters[tag] = n + 1
        names[bdf] = f"{tag}{n}"
    for i, r in enumerate(topo.roots()):
        names[r] = f"root{i}"
    return names


def _host_facts(evaluation) -> list[tuple[str, str]]:
    snap = evaluation.snap

    def val(name: str, key: Optional[str] = None):
        return host_value(snap, name, key)

    def show(v) -> str:
        return "unknown" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    mods = val("modules_loaded")
    out = [
        ("host.driver.version", show(val("nvidia_driver_version"))),
        ("host.driver.flavor", show(val("nvidia_driver_flavor"))),
        ("host.kernel.release", show(val("kernel_release"))),
        ("host.iommu.mode", show(val("iommu", "mode"))),
        ("host.module.nvidia_peermem", _module(mods, "nvidia_peermem")),
        ("host.module.nv_peer_mem", _module(mods, "nv_peer_mem")),
        ("host.module.nvidia_fs", _module(mods, "nvidia_fs")),
        ("host.p2pdma", show(val("p2pdma_config"))),
        ("host.peer_mapping_override", show(val("peer_mapping_override"))),
        ("host.numa_nodes", show(len(val("numa_nodes")) if isinstance(val("numa_nodes"), list) else None)),
    ]
    amd = val("amd_gpu")
    if isinstance(amd, dict):  # an AMD node: RCCL's peer memory is the amdkfd client (docs/rccl.md)
        out.append(("host.peer.amdkfd", "loaded" if any((amd.get("peer_files") or {}).values()) else "absent"))
    for k, v in sorted(evaluation.settings.overrides.items()):
        out.append((f"host.nccl.{k}", str(v)))
    return out


def fingerprint(evaluation) -> Fingerprint:
    """The fingerprint of one evaluated node."""
    topo = evaluation.topo
    pos = positions(topo)
    # key templates name addresses as {0}, {1}; rendered once with positions, once with addresses.
    # A value that is an address is given as an int: the index of that address in ``addrs``.
    facts: list[tuple[tuple[str, ...], str, object]] = []

    def add(key: str, value: object, *addrs: str) -> None:
        facts.append((addrs, key, value))

    host = dict(_host_facts(evaluation))
    for k, v in host.items():
        add(k, v)
    models = _device_facts(evaluation, add)
    _device_counts(topo, models, add)
    bridge_acs = _bridge_facts(evaluation, add)
    pair_rows = _pair_rows(evaluation)
    pair_ends = {a for a, _b, _v in pair_rows} | {b for _a, b, _v in pair_rows}

    # each fact once: (what it is about, its key template, addresses, value)
    prepared = [(key.split("[", 1)[0], key, addrs, value if isinstance(value, int) else "=" + str(value))
                for addrs, key, value in facts]
    shape_order = {b: _pos_key(n) for b, n in pos.items()}
    addr_order = {b: (bdf_key(b) if b.count(":") == 2 else bdf_key(b + ":00.0")) for b in pos}
    shape_lines = _render(prepared, pair_rows, pair_ends, pos, shape_order)
    topology_lines = _render(prepared, pair_rows, pair_ends, {}, addr_order)
    used = {a for addrs, _k, _v in facts for a in addrs} | pair_ends
    by_pos = {name: bdf for bdf, name in pos.items() if bdf in used}
    return Fingerprint(shape_lines, topology_lines, dict(sorted(by_pos.items(), key=lambda kv: _pos_key(kv[0]))),
                       host, bridge_acs)


def _device_facts(evaluation, add) -> dict[str, dict[str, int]]:
    """Each GPU, NIC, NVMe drive and NVSwitch: its id, parent, NUMA node, link, BAR1 (a GPU) and whether an RDMA
    device is bound (a NIC). Returns how many of each model there are, per kind."""
    topo = evaluation.topo
    models: dict[str, dict[str, int]] = {k: {} for k in DEVICE_KINDS}
    bar1 = {g.bdf: g.bar1_total_bytes for g in evaluation.snap.gpus if g.bar1_total_bytes is not None}
    for bdf in sorted(topo.by_bdf, key=bdf_key):
        kind = topo.device_kind[bdf]
        if kind not in DEVICE_KINDS:
            continue
        d = topo.by_bdf[bdf]
        ident = f"{d.vendor:04x}:{d.device:04x}" if d.vendor is not None and d.device is not None else "?"
        models[kind][ident] = models[kind].get(ident, 0) + 1
        add("device[{0}].id", ident, bdf)
        parent = topo.parent(bdf)
        add("device[{0}].parent", 1, bdf, parent if parent is not None else d.root)
        numa = topo.numa(bdf) if topo.snap.numa_known else None
        add("device[{0}].numa", "unknown" if numa is None else str(numa), bdf)
        # a GPU lowers its link speed when idle: only its width and maxima are stable
        add("device[{0}].link", _link(d, with_speed=kind != "gpu"), bdf)
        if kind == "gpu" and bdf in bar1:
            add("device[{0}].bar1_bytes", str(bar1[bdf]), bdf)
        if kind == "nic":
            # whether an RDMA device is bound: only an input with the kernel's RDMA view can say "no"
            shown = kernel_view(topo.snap)
            add("device[{0}].rdma", "yes" if d.rdma_devices else "no" if shown else "unknown", bdf)
    return models


def _device_counts(topo, models: dict[str, dict[str, int]], add) -> None:
    from gdrcheck.reach import shows

    for kind in DEVICE_KINDS:
        m = models[kind]
        # none of a kind the input cannot show is "not-in-input", never 0 (an nvidia-smi -q has no NIC column)
        none = "0" if shows(topo.snap, _REACH_OF_KIND[kind]) else "not-in-input"
        add(f"devices.{kind}", ",".join(f"{n}x{ident}" for ident, n in sorted(m.items())) or none)


def _bridge_facts(evaluation, add) -> tuple:
    """Each bridge on a pair's path: its kind, ACS and link. Returns the bridges' ACS states."""
    topo = evaluation.topo
    on_paths = sorted(set().union(*[p.bridges for p in evaluation.pairs]), key=bdf_key)
    states = []
    for b in on_paths:
        d = topo.by_bdf.get(b)
        if d is None:
            continue
        add("bridge[{0}].kind", topo.device_kind[b], b)
        add("bridge[{0}].acs", _acs(topo, b), b)
        add("bridge[{0}].link", _link(d, with_speed=False), b)
        states.append(topo.acs(b))
    return tuple(states)


def _acs_word(states) -> str:
    """One word for the bridges' ACS: ``redirect`` where any bridge redirects peer requests (RR, CR or EC on),
    else ``unknown`` where any bridge's ACS is not read, else ``off``."""
    from gdrcheck.pcie.acs import ACS_REDIRECT_MASK

    if any(st.known and st.present and st.ctrl & ACS_REDIRECT_MASK for st in states):
        return "redirect"
    return "unknown" if any(not st.known for st in states) else "off"


def _pair_rows(evaluation) -> list[tuple[str, str, str]]:
    """The pairs, most lines of a large node, kept apart: (a, b, "=value"), each distinct value worded once."""
    pair_rows: list[tuple[str, str, str]] = []
    pair_values: dict[tuple, str] = {}  # (pcie_path, path, candidates) -> "=value"
    for p in evaluation.pairs:
        value = pair_values.get((p.pcie_path, p.path, p.candidates))
        if value is None:
            cls = p.pcie_path or ("?" + "|".join(p.candidates) if p.candidates else "?")
            value = pair_values[(p.pcie_path, p.path, p.candidates)] = \
                "=" + (cls if p.path == p.pcie_path or p.path is None else f"{p.path}/{cls}")
        pair_rows.append((p.a, p.b, value))
    return pair_rows


def _render(prepared, pair_rows, pair_ends, names: dict[str, str], order: dict[str, object]) -> list[str]:
    """The lines with addresses shown by ``names`` (an address where it has none), sorted per thing (host
    facts, then each device, bridge and pair in ``order``)."""
    keyed = []
    for head, key, addrs, value in prepared:
        if not addrs:
            keyed.append(((head, (), key), key + value))
            continue
        shown = [names.get(a, a) for a in addrs]
        line = key.format(*shown) + ("=" + shown[value] if isinstance(value, int) else value)
        keyed.append(((head, tuple([order[a] for a in addrs]), key), line))
    keyed.sort()
    pair_lines = _pair_lines(pair_rows, pair_ends, names, order)
    before = [line for k, line in keyed if k[0] <= "pair"]
    after = [line for k, line in keyed if k[0] > "pair"]
    return before + pair_lines + after


def _pair_lines(pair_rows, pair_ends, names: dict[str, str], order: dict[str, object]) -> list[str]:
    """Every pair line has the one key template ``pair[{0},{1}]``: it sorts among the others by its head, and
    among pairs by its two ends' order, which an integer rank per address stands for."""
    rank: dict[str, int] = {}
    last, r = None, -1
    for a in sorted(pair_ends, key=order.__getitem__):
        if r < 0 or order[a] != last:
            r, last = r + 1, order[a]
        rank[a] = r
    n = r + 1
    keys = [rank[a] * n + rank[b] for a, b, _v in pair_rows]
    if len(set(keys)) == len(keys):  # no two pairs in the same place: the rank alone orders them
        rows = [pair_rows[i] for i in sorted(range(len(keys)), key=keys.__getitem__)]
        return [f"pair[{names.get(a, a)},{names.get(b, b)}]{value}" for a, b, value in rows]
    # ends that sort alike: their lines decide, as for every other line
    return [line for _k, line in sorted(
        (k, f"pair[{names.get(a, a)},{names.get(b, b)}]{value}") for k, (a, b, value) in zip(keys, pair_rows))]


def _pos_key(name: str) -> tuple[str, int]:
    i = len(name.rstrip("0123456789"))
    return (name[:i], int(name[i:] or 0))


def fingerprint_status(evaluation) -> str:
    """The fingerprint's status word: ``pass`` when read, ``unknown`` where the --timeout cut the reading short
    (the fingerprint is then of what was read in time)."""
    from gdrcheck.rules.decisions import timed_out

    return "unknown" if timed_out(evaluation) else "pass"


def one_line(evaluation, fp: Fingerprint) -> str:
    """The fingerprint as one line: identical bytes on identically built nodes."""
    topo = evaluation.topo

    def models(kind: str) -> str:
        m: dict[str, int] = {}
        for b in topo.of_kind(kind):
            d = topo.by_bdf[b]
            ident = f"{d.vendor:04x}:{d.device:04x}" if d.vendor is not None and d.device is not None else "?"
            m[ident] = m.get(ident, 0) + 1
        return ",".join(f"{n}x{i}" for i, n in sorted(m.items())) or "0"

    def classes(kind: str) -> str:
        c: dict[str, int] = {}
        for p in evaluation.pairs:
            if p.kind == kind:
                k = p.path or "?"
                c[k] = c.get(k, 0) + 1
        return ",".join(f"{k}:{n}" for k, n in sorted(c.items())) or "-"

    from gdrcheck.reach import shows

    def reach(fact: str, said: str) -> str:
        return said if shows(evaluation.snap, fact) else "not-in-input"

    lines = fp.host
    acs = _acs_word(fp.bridge_acs)
    peer = ("loaded" if "loaded" in (lines.get("host.module.nvidia_peermem"), lines.get("host.module.nv_peer_mem"))
            else lines.get("host.module.nvidia_peermem", "unknown"))
    peer = lines.get("host.peer.amdkfd", peer)
    parts = [
        f"shape={fp.shape[:23]}", f"topology={fp.topology[:23]}",
        f"gpus={models('gpu')}", f"nics={reach('nics', models('nic'))}", f"nvme={reach('nvme', models('nvme'))}",
        f"gpu-gpu={classes('gpu-gpu')}", f"gpu-nic={reach('nics', classes('gpu-nic'))}",
        f"gpu-nvme={reach('nvme', classes('gpu-nvme'))}", f"acs={reach('acs', acs)}",
        f"iommu={reach('iommu', lines.get('host.iommu.mode', 'unknown'))}", f"peermem={reach('peer_memory', peer)}",
        f"driver={lines.get('host.driver.version', 'unknown')}",
    ]
    return " ".join(parts)
