"""What each kind of input can show: the one table of input kinds against facts.

A fact outside an input's reach is "not in this input": never a count of 0, never ``off``, ``none`` or
``pass``. Collectors name the kind of every input they read (``Snapshot.input_kind``, and ``input_kinds``
for several merged); documents, rules and renderers ask this table, never the kind's name, what it can show.
Whether a fact an input *can* show was actually in it (an lspci tree without NVMe drives, a snapshot taken
without root) is for the facts themselves to say; this table says only where a fact cannot be at all.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# fact -> how it is said where an input cannot show it
FACTS: dict[str, str] = {
    "tree": "the PCIe tree",
    "gpus": "GPUs",
    "nics": "NICs",
    "nvme": "NVMe drives",
    "numa": "NUMA nodes",
    "acs": "ACS",
    "iommu": "the IOMMU mode",
    "peer_memory": "peer memory",
    "p2p_status": "the driver's P2P status",
    "nvlink": "NVLink",
    "gpu_model": "the GPU model",
    "cpu_vendor": "the CPU vendor",
    "nccl": "NCCL's settings and version",
    "bar1": "BAR1",
}
_ALL = frozenset(FACTS)

# input kind -> the facts it can show (docs/inputs.md says the same in words)
SHOWS: dict[str, frozenset[str]] = {
    "live": _ALL,
    "snapshot": _ALL,
    # a copy of /sys and /proc is read as / is: what it lacks, its facts say
    "sysfs": _ALL,
    # lspci -t / -tv: the tree, and what each function is by its name or ids (root complexes name the CPU)
    "lspci": frozenset({"tree", "gpus", "nics", "nvme", "gpu_model", "cpu_vendor"}),
    # plain lspci or lspci -vvv: each function's class, ids, NUMA node, config space (ACS as root)
    "lspci-vvv": frozenset({"gpus", "nics", "nvme", "numa", "acs", "gpu_model", "cpu_vendor"}),
    # NCCL's own dump: its PCI tree of GPUs and NICs, NVLink, the CPU, and per NIC whether GPUDirect works
    "nccl-xml": frozenset({"tree", "gpus", "nics", "numa", "nvlink", "gpu_model", "cpu_vendor", "peer_memory"}),
    "hwloc-xml": frozenset({"tree", "gpus", "nics", "nvme", "numa", "gpu_model", "cpu_vendor"}),
    # nvidia-smi topo -m / -mp / -p2p: classes, NVLink (-m), NUMA affinity, RDMA NICs, P2P status (-p2p)
    "topo-matrix": frozenset({"gpus", "nics", "numa", "nvlink", "p2p_status"}),
    # nvidia-smi topo -mp alone: the PCIe classes under whatever NVLinks there are; NVLink is not in it
    "topo-matrix-mp": frozenset({"gpus", "nics", "numa", "p2p_status"}),
    "nvidia-smi-q": frozenset({"gpus", "gpu_model", "bar1"}),
    # rocm-smi --showtopo: an AMD node's GPUs by index, their xGMI links and NUMA nodes (no bus ids, no NIC)
    "rocm-smi-topo": frozenset({"gpus", "numa", "nvlink"}),
    # amd-smi topology: the same by the GPUs' bus ids (no NUMA node in its text tables, no NIC)
    "amd-smi-topology": frozenset({"gpus", "nvlink"}),
    # lspci -vvv | grep ACSCtl: the ACS Control of every bridge that has it, not whose
    "acsctl-grep": frozenset({"acs"}),
    # plain nvidia-smi: each GPU's index, bus id and (cut) name, the driver and CUDA versions
    "nvidia-smi": frozenset({"gpus", "gpu_model"}),
    # nvidia-smi -q | grep -A3 -i bar: BAR1 per GPU index
    "bar1-grep": frozenset({"bar1"}),
    # nccl-tests' rank lines: each CUDA device's bus id and name
    "nccl-tests": frozenset({"gpus", "gpu_model"}),
    "numactl": frozenset({"numa"}),
    "lscpu": frozenset({"cpu_vendor"}),
    "cpuinfo": frozenset({"cpu_vendor"}),
    # /etc/default/grub: the IOMMU options of the kernel command line, as configured
    "grub": frozenset({"iommu"}),
    # gdscheck -p: the IOMMU, nvidia-fs and PeerDirect as NVIDIA's tool sees them (its BAR1 sizes are by CUDA's
    # index and only said in a note)
    "gdscheck": frozenset({"iommu"}),
    "gdsio": frozenset(),
    # ibv_devinfo: each RDMA device's ports, their state and link layer (no bus ids)
    "ibv_devinfo": frozenset(),
    # NCCL_GRAPH_DUMP_FILE: the channels NCCL built (what it decided, not the machine)
    "nccl-graph": frozenset(),
    # a job's NCCL_DEBUG=INFO log: the GPUs of its ranks (busId), NCCL's version and settings (the NICs it names by
    # index and HCA name are not placed as devices)
    "nccl-log": frozenset({"gpus", "nccl"}),
}


# input kind -> what reading it is, beyond the facts it shows; asked of the input that drew the tree
# (``Snapshot.input_kind``): "kernel" the node's own /sys and /proc (an RDMA device absent there is a "no"),
# "on_node" read on the node, where the NVIDIA driver could answer, "nccl" NCCL's own topology dump (its PCI
# nodes, link widths and NIC list are NCCL's), "no_config" a tree without PCI config space (no ACS in it)
# ("pastes": several pastes merged without a tree; what they show is each one's own row, Snapshot.input_kinds)
IS: dict[str, frozenset[str]] = {kind: frozenset() for kind in (*SHOWS, "pastes")}
IS.update({
    "live": frozenset({"kernel", "on_node"}),
    "snapshot": frozenset({"kernel", "on_node"}),
    "sysfs": frozenset({"kernel"}),
    "nccl-xml": frozenset({"nccl", "no_config"}),
    "lspci": frozenset({"no_config"}),
    "hwloc-xml": frozenset({"no_config"}),
})


def _is(snap, what: str) -> bool:
    return what in IS[snap.input_kind]


def kernel_view(snap) -> bool:
    """The input is the node's own /sys and /proc: what the kernel lists is all there is."""
    return _is(snap, "kernel")


def on_node(snap) -> bool:
    """The input was read on the node itself (live, or its snapshot), where the NVIDIA driver could answer."""
    return _is(snap, "on_node")


def nccl_own_tree(snap) -> bool:
    """The tree is NCCL's own topology dump: its PCI nodes, link widths and NICs are NCCL's."""
    return _is(snap, "nccl")


def no_config_space(snap) -> bool:
    """The tree was drawn by an input that carries no PCI config space (ACS cannot be read from it)."""
    return _is(snap, "no_config")


def kinds_of(snap) -> tuple[str, ...]:
    """The kinds of the inputs a snapshot was read from."""
    kinds = tuple(getattr(snap, "input_kinds", ()) or ())
    return kinds or (snap.input_kind,)


def shown(snap) -> frozenset[str]:
    """The facts at least one of the snapshot's inputs can show (every kind has its row: tests/base)."""
    out: frozenset[str] = frozenset()
    for k in kinds_of(snap):
        out = out | SHOWS[k]
    return out


def shows(snap, fact: str) -> bool:
    return fact in shown(snap)


def not_shown(snap, facts: Iterable[str] = FACTS) -> tuple[str, ...]:
    """Of ``facts``, those no input of the snapshot can show, in the table's order."""
    have = shown(snap)
    return tuple(f for f in facts if f not in have)


NOT_IN_INPUT = "not in this input"
