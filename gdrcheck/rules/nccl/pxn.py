"""PXN's one relay GPU and what NCCL's P2P decision leaves of the NVLink paths.

Sources (``NVIDIA/nccl``; line numbers at the tag named):
* the relay: ``ncclTopoComputePaths`` v2.30.7 ``src/graph/paths.cc:812-843``: for NIC ``n`` and GPU ``g`` the
  only candidate is ``ncclTopoGetLocalGpu(n)`` (v2.30.7 ``src/graph/topo.cc:2110-2135``; v2.18.6
  ``topo.cc:719-733``), used when it is not ``g``, reaches the NIC at PXB (P2C with ``NCCL_PXN_C2C``) or closer
  and its path to ``g`` is NVLink (``paths[GPU][g].type <= PATH_NVL``, ``paths.cc:832``).
* that path is NVLink only if P2P stays: ``paths.cc:762-773`` reroutes every GPU pair whose
  ``ncclTopoCheckP2p`` is 0 (``NCCL_P2P_DISABLE=1``, ``NCCL_P2P_LEVEL=LOC``, NVML refusing P2P) through the CPU
  before the PXN loop; the read side's NVLink peer (``paths.cc:501``) reads the same rewritten paths.
* ``ncclTopoGetLocalGpu``: the first of the NIC's local GPUs (``ncclTopoGetLocal``, best bandwidth then best
  type, ``topo.cc:1943-1971``; from v2.19.1 ``topo.cc:753-775``; before, every GPU) whose
  ``ncclTopoGetLocalNet`` names the NIC on the lowest channel: ``net = dev`` (``% localGpuCount`` from v2.30.7
  ``topo.cc:2070``; not in v2.30.4), bits mirrored when the GPU's local NIC count is a power of two,
  ``+ channel % DIVUP(localNets, localGpus)`` (v2.18.6 ``topo.cc:701-717``).

gdrcheck orders GPUs and NICs by PCI bus id (NCCL's CUDA device numbers and node order on a node whose
devices are enumerated in that order) and, as ``ncclTopoGetLocal`` does, compares each path's bandwidth first
(its narrowest PCIe hop from link speed and width, the NIC's port rate, the CPU link across CPUs:
:func:`gdrcheck.rules.nccl.speed.gpu_nic_bw`), then its type; where the input does not show a bandwidth, the
types alone (equal bandwidths assumed).
"""

from __future__ import annotations

from functools import lru_cache

from gdrcheck.reach import nccl_own_tree
from gdrcheck.rules.nccl import gdr as gdr_rules
from gdrcheck.rules.nccl import p2p as p2p_rules
from gdrcheck.rules.nccl.core import rank_in
from gdrcheck.rules.nccl.cpu import cpu_kind, cpu_model, inter_cpu_bw
from gdrcheck.rules.nccl.speed import gpu_nic_bw

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

LOCAL_GPUS_OF_NIC_FROM = (2, 19, 0)  # v2.19.1 topo.cc:753-775: the NIC's local GPUs only
DEV_MOD_FROM = (2, 30, 7)  # v2.30.7 topo.cc:2070: dev % localGpuCount
MAXCHANNELS = 64
P2C_LOCAL_FROM = (2, 29, 2)  # v2.29.2 paths.cc:703-720 (v2.28.9 paths.cc:699-712: every NIC)


def nvml_hops(snap, a: str, b: str, via: Optional[str]) -> tuple[tuple[str, Optional[str], Optional[str]], ...]:
    """NVML's P2P read and write status per hop of the pair (through ``via`` for an NVB path)."""
    hops = [(a, via), (via, b)] if via else [(a, b)]
    out = []
    for x, y in hops:
        r = snap.p2p_status.get((x, y, "read")) or snap.p2p_status.get((y, x, "read"))
        w = snap.p2p_status.get((x, y, "write")) or snap.p2p_status.get((y, x, "write"))
        out.append((f"{x}-{y}", r, w))
    return tuple(out)


@lru_cache(maxsize=8)
def nccl_own_dump(topo) -> bool:
    """The input is NCCL's own topology XML: its ``<nvlink>`` elements are every NVLink NCCL found and its GPUs
    the communicator's on the node (``xml.cc:930-995@v2.30.7``). Not RCCL's, whose ``<gpu>`` carries ``gcn``
    (AMD's architecture) and whose links are its own."""
    if not nccl_own_tree(topo.snap):
        return False
    return not any("gcn" in ((topo.by_bdf[g].extra or {}).get("nccl_gpu") or {}) for g in topo.of_kind("gpu"))


def _mirror(val: int, pow2: int) -> int:
    """``mirrorBits`` (v2.30.7 ``src/graph/topo.h:288-294``)."""
    m, b, mb = 0, 1, pow2 >> 1
    while b < pow2:
        if val & b:
            m |= mb
        b, mb = b << 1, mb >> 1
    return m


_UNASKED = object()


class Relays:
    """NCCL's GPU-NIC relay choice and kept NVLink paths for one node at one version."""

    def __init__(self, node, snap, topo, pairs, types) -> None:
        self.node, self.snap, self.topo, self.types = node, snap, topo, types
        v = node.version
        self.order = rank_in(v)
        self.gpus = sorted(node.gpus)
        self.nics = sorted(n for n in node.nics if node.rdma.get(n) is not False)
        self.gg = {frozenset((p.a, p.b)): p for p in pairs if p.kind == "gpu-gpu"}
        self.default = p2p_rules.default_p2p_level(v, cpu_kind(node.cpu), len(node.gpus))
        self._index = {g: i for i, g in enumerate(self.gpus)}
        # each answer depends on its arguments alone (the node, version and paths are fixed): asked once
        self.local_nets = lru_cache(maxsize=None)(self._local_nets)
        self.local_gpus = lru_cache(maxsize=None)(self._local_gpus)
        self.local_gpu = lru_cache(maxsize=None)(self._local_gpu)
        self._kept = lru_cache(maxsize=None)(self._kept_sorted)
        self._bw = lru_cache(maxsize=None)(self._path_bw)
        self._cpu_bws_of_node: Optional[tuple[float, ...]] = None
        self._nvlinked: dict[tuple[str, str], Optional[bool]] = {}  # (a, b) -> nvlinked()'s answer
        self._kept_values: dict[tuple, str] = {}  # a pair's path and NVML statuses -> kept()'s answer

    # -- the path types NCCL compares
    def gn_type(self, g: str, n: str) -> Optional[str]:
        t = (self.types.get((g, n)) or (None,))[0]
        d = gdr_rules.distance(self.node.version, self.node.st, t, self.node.gpus[g].c2c)[0]
        return "P2C" if d == "C2C" and t == "PHB" else d

    def path_bw(self, g: str, n: str) -> Optional[float]:
        """The bandwidth of NCCL's GPU-NIC path (:func:`speed.gpu_nic_bw`); None where a figure is not shown."""
        return self._bw(g, n)

    def _path_bw(self, g: str, n: str) -> Optional[float]:
        t = (self.types.get((g, n)) or (None,))[0]
        cpu_bws: tuple[float, ...] = ()
        if t == "SYS":
            cpu_bws = self._cpu_bws()
        nic = self.node.nics.get(n)
        return gpu_nic_bw(self.topo, g, n, nic.rate if nic is not None else None, self.node.gpus[g].c2c, t,
                          cpu_bws)

    def _cpu_bws(self) -> tuple[float, ...]:
        """The CPU link's bandwidths (:func:`gdrcheck.rules.nccl.cpu.inter_cpu_bw`): the node's, asked once."""
        got = self._cpu_bws_of_node
        if got is None:
            got = self._cpu_bws_of_node = inter_cpu_bw(self.node.version, cpu_kind(self.node.cpu),
                                                       *cpu_model(self.snap))[0]
        return got

    def _best(self, items: list[tuple[str, Optional[str], Optional[float]]]) -> Optional[list[str]]:
        """``ncclTopoGetLocal`` (v2.30.7 ``topo.cc:1943-1971``, v2.19.1 ``topo.cc:753-775``): the items with the
        highest path bandwidth, of those the best path type. Where a bandwidth is not shown, the best type
        (equal bandwidths assumed: the input cannot show which is wider); None where a type is not shown."""
        if not items or any(t is None or t not in self.order for _, t, _bw in items):
            return None
        if all(bw is not None for _, _t, bw in items):
            top = max(bw for _, _t, bw in items)
            items = [i for i in items if i[2] == top]
        low = min(self.order[t] for _, t, _bw in items)
        return [x for x, t, _bw in items if self.order[t] == low]

    def _local_nets(self, g: str) -> Optional[list[str]]:
        return self._best([(n, self.gn_type(g, n), self.path_bw(g, n)) for n in self.nics])

    def _local_gpus(self, n: str) -> Optional[list[str]]:
        return self._best([(g, self.gn_type(g, n), self.path_bw(g, n)) for g in self.gpus])

    def local_net(self, g: str, c: int) -> Optional[str]:
        """``ncclTopoGetLocalNet`` (v2.30.7 ``topo.cc:2077-2079``, through ``ncclTopoGetLocalNetType``
        ``topo.cc:2039-2076``; default ``NCCL_NETDEVS_POLICY``)."""
        nets = self.local_nets(g)
        if not nets:
            return None
        lg = self.local_gpus(nets[0])
        if not lg:
            return None
        dev = self._index[g]
        net = dev % len(lg) if self.node.version >= DEV_MOD_FROM else dev
        if len(nets) & (len(nets) - 1) == 0:
            net = _mirror(net, len(nets))
        net += c % (-(-len(nets) // len(lg)))
        return nets[net % len(nets)]

    def _local_gpu(self, n: str) -> Optional[str]:
        """``ncclTopoGetLocalGpu``: the one GPU that relays for NIC ``n``; None where NCCL finds none or the
        input does not show the paths it compares."""
        cands = self.local_gpus(n) if self.node.version >= LOCAL_GPUS_OF_NIC_FROM else self.gpus
        got = None
        if cands and all(self.local_nets(g) is not None for g in cands):
            got = next((g for c in range(MAXCHANNELS) for g in cands if self.local_net(g, c) == n), None)
        return got

    def p2c_local(self, g: str, n: str) -> bool:
        """From 2.29.2 a NIC on the GPU's own Grace CPU is P2C only when it is one of the GPU's local NICs
        (``ncclTopoGetLocal``: the highest bandwidth, then the best path type before the P2C update, v2.29.2
        ``paths.cc:703-720``, v2.30.7 ``paths.cc:794-810``): of two NICs on one Grace at 400 and 200 Gb/s only the
        faster; before, every such NIC (v2.28.9 ``paths.cc:699-712``). True where the input does not show the
        types."""
        if self.node.version < P2C_LOCAL_FROM:
            return True
        raw = [(m, (self.types.get((g, m)) or (None,))[0], self.path_bw(g, m)) for m in self.nics]
        best = self._best(raw)
        return best is None or n in best

    # -- NCCL's P2P decision in ncclTopoComputePaths (level and NVML; the transport's checks come later)
    def kept(self, a: str, b: str) -> str:
        """``enabled`` when ``ncclTopoCheckP2p`` keeps the pair's path, ``disabled`` when NCCL reroutes it
        through the CPU (``paths.cc:762-773``), ``unknown``."""
        return self._kept(*sorted((a, b)))

    def _kept_sorted(self, a: str, b: str) -> str:
        p = self.gg.get(frozenset((a, b)))
        if p is None:
            return "unknown"
        t, cands, _flat, via = self.types[(p.a, p.b)]
        hops = nvml_hops(self.snap, p.a, p.b, via)
        if t in ("NVL", "NVB") and not self.node.st.ignore_disabled_p2p:
            # a refusing NVML status on an NVLink path aborts NCCL's init (paths.cc:394-399): in a job
            # that runs, a status the input does not show was OK
            hops = tuple((h, r or "OK", w or "OK") for h, r, w in hops)
        # the value reads each hop's status, not its name (only the causes name the hops): pairs alike share it
        key = (t, cands, via, tuple((r, w) for _hop, r, w in hops))
        got = self._kept_values.get(key)
        if got is None:
            facts = p2p_rules.PairFacts(t, cands, via, hops, False, "")
            got = self._kept_values[key] = p2p_rules.decide(self.node.version, self.node.st, self.default, facts)["p2p"]
        return got

    def nvlinked(self, a: str, b: str) -> Optional[bool]:
        """The pair's path is NVLink after NCCL's P2P decision (``<= PATH_NVL``); None: not known. Asked once
        per pair (each GPU's NVLink peer asks it of every other GPU)."""
        got = self._nvlinked.get((a, b), _UNASKED)
        if got is _UNASKED:
            got = self._nvlinked[(a, b)] = self.nvlinked_now(a, b)
        return got

    def nvlinked_now(self, a: str, b: str) -> Optional[bool]:
        """:meth:`nvlinked` worked out from the paths, not kept."""
        if not self.topo.snap.shows_nvlink:
            return None if self.topo.nvlink_unseen(a, b) else False
        if not self.topo.nvlink_count(a, b):
            return False
        k = self.kept(a, b)
        return True if k == "enabled" else False if k == "disabled" else None

    def nvlink_peer(self, g: str) -> Optional[bool]:
        """The read side's NVLink peer (``paths.cc:497-503``): another GPU whose path is still NVLink. NCCL's own
        dump without ``<nvlink>`` shows none (it lists every NVLink NCCL found, ``xml.cc:930-995@v2.30.7``)."""
        if not self.topo.snap.shows_nvlink:
            return False if nccl_own_dump(self.topo) else None
        unknown = False
        for o in self.gpus:  # the first peer still on NVLink answers; the others are not asked
            if o != g:
                linked = self.nvlinked(g, o)
                if linked:
                    return True
                unknown = unknown or linked is None
        return None if unknown else False


BEST_TYPE_FROM = (2, 30, 7)  # v2.30.7 paths.cc:96-99: the best type wins; before, fewest hops then bandwidth


def nvb_or_pcie(version, t_pcie: Optional[str], nvb_bw: Optional[float], pcie_bw: Optional[float],
                pcie_hops: Optional[int] = None) -> tuple[Optional[str], str]:
    """Which path NCCL keeps between two GPUs that an NVB path (through a third GPU) and a PCIe path join.

    v2.30.7 ``paths.cc:96-99`` keeps the better type (NVB). Up to v2.30.4 (``paths.cc:80``; v2.28.9
    ``paths.cc:73``; v2.21.5 ``paths.cc:71``) a path replaces the one found first only with no more hops and
    strictly more bandwidth, so the shorter path stays and of two as short the wider. NVB is two hops (GPU,
    GPU, GPU; 2.30's DEV nodes add one on each side of both paths). A PCIe path is as short under one PCIe
    switch (PIX: GPU, switch, GPU) and between two GPUs on root ports of one CPU (PHB: GPU, CPU, GPU, NCCL's
    sysfs walk skipping the root ports, ``xml.cc:589-880@v2.30.7``); ``pcie_hops`` (NCCL's links on the PCIe
    path; None: 2 for PIX, more otherwise) says which. A longer PCIe path leaves NVB. Returns (the type kept,
    why) or (None, why) where a bandwidth is not shown or the two are equal (BFS order decides)."""
    if pcie_hops is None:
        pcie_hops = 2 if t_pcie == "PIX" else 3
    if version >= BEST_TYPE_FROM or t_pcie is None or pcie_hops > 2:
        return "NVB", ""
    where = "PCIe switch" if t_pcie == "PIX" else "root-port"
    if nvb_bw is None or pcie_bw is None:
        return None, (f"NCCL up to 2.30.4 keeps the wider of the NVB path and the {where} PCIe path (as many "
                      "hops, paths.cc:80@v2.30.4); a bandwidth is not shown")
    if pcie_bw > nvb_bw:
        return t_pcie, (f"the {where} PCIe path ({pcie_bw:g} GB/s) is wider than the NVB path ({nvb_bw:g} GB/s) "
                        "and as short: NCCL up to 2.30.4 keeps it (paths.cc:80@v2.30.4, paths.cc:71@v2.21.5)")
    if pcie_bw == nvb_bw:
        return None, (f"the {where} PCIe path and the NVB path are as short and as wide ({pcie_bw:g} GB/s): NCCL "
                      "up to 2.30.4 keeps the one its search finds first (paths.cc:80@v2.30.4)")
    return "NVB", ""
