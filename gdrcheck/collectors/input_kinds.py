"""The kinds of input ``--from`` accepts: one table, read by recognition, parsing, merging and the help.

Each row of :data:`INPUT_KINDS` says, for one kind: its name (``Snapshot.input_kind``), what a user gives and
the command that makes it (:data:`ACCEPTED_KINDS`, the README and ``--help``), how a single file of it is
recognised (by content, never by name), the parser that reads it, and the step that merges it into one node's
facts (:mod:`gdrcheck.collectors.pastes.merge`). What each kind can show is :data:`gdrcheck.reach.SHOWS`
(:attr:`InputKind.shows`), not said again here.

Parsers and recognisers are named ``module:function`` and imported when a file of that kind is read: an
input pays only for its own parser.
"""

from __future__ import annotations

import os
import re

from gdrcheck.errors import InputError
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

_PASTES = "gdrcheck.collectors.pastes."
_HERE = "gdrcheck.collectors.input_kinds:"


class InputKind:
    """One kind of input: a row of :data:`INPUT_KINDS`."""

    __slots__ = ("name", "forms", "short", "recognised", "xml_root", "looks_like", "parse", "reads_as",
                 "merge_step", "alone", "above_it")

    def __init__(self, name: str, forms: tuple[tuple[str, str], ...], recognised: str, *, short: str = "",
                 xml_root: Optional[str] = None, looks_like: Optional[str] = None, parse: Optional[str] = None,
                 reads_as: Optional[str] = None, merge_step: str = "tree", alone: bool = True,
                 above_it: Optional[str] = None) -> None:
        self.name = name
        self.forms = forms  # (what the user gives, the command that makes it), as the README and --help say it
        self.short = short  # a file kind in a few words, for the one-line error (FILE_KINDS_TEXT)
        self.recognised = recognised  # how it is told from the others, in words
        self.xml_root = xml_root  # an XML file whose first element starts so
        self.looks_like = looks_like  # text: "module:function", true for this kind's text
        self.parse = parse  # "module:function" (text, file name) -> what the merge takes; None: read as /
        self.reads_as = reads_as or name  # the kind its facts carry (nvidia-smi -q -x is nvidia-smi -q)
        self.merge_step = merge_step  # "tree": it draws the PCIe tree; else the merge's method that adds it
        self.alone = alone  # False: its lines belong to devices another input shows, so it cannot be read alone
        self.above_it = above_it  # the kind a file of it may hold pasted above it (read as a part of its own)

    @property
    def shows(self) -> frozenset[str]:
        """The facts this kind can show (:data:`gdrcheck.reach.SHOWS`; every kind has its row: tests/base)."""
        from gdrcheck.reach import SHOWS

        return SHOWS[self.reads_as]


# In the order the README and --help list them; single files are recognised in RECOGNITION_ORDER.
INPUT_KINDS: tuple[InputKind, ...] = (
    InputKind("live", (), "no --from: this machine, read through /sys, /proc and the NVIDIA driver"),
    InputKind("sysfs", (("a directory laid out like /", "a copy of /sys and /proc, or an unpacked snapshot "
                                                         "archive"),),
              "a directory holding sys/bus/pci/devices or a gdrcheck snapshot manifest"),
    InputKind("snapshot", (("a snapshot archive", "gdrcheck snapshot -o node.tar.gz"),),
              "a tar archive (plain, gzip, bzip2 or xz) of such a directory"),
    InputKind("lspci", (("an lspci tree", "lspci -tv (also -t, -tvv, -tvnn)"),),
              "lspci's tree drawing: -[dddd:bb]- roots and +-/\\- branches",
              short="lspci -tv", looks_like=_PASTES + "lspci_tree:looks_like_lspci_tree",
              parse=_PASTES + "lspci_tree:parse_lspci_tree"),
    InputKind("lspci-vvv", (("lspci details", "sudo lspci -vvv (also -vv, -nnvvv, -D, -s BDF, -xxx, or plain "
                                              "lspci)"),),
              "lines that start with a bus id and a device class",
              short="lspci -vvv", looks_like=_PASTES + "lspci_verbose:looks_like_lspci_verbose",
              parse=_PASTES + "lspci_verbose:parse_lspci_verbose", merge_step="add_verbose"),
    InputKind("acsctl-grep", (("ACS Control lines, beside a tree", "the ACSCtl lines of sudo lspci -vvv"),),
              "ACSCtl: lines alone",
              looks_like=_PASTES + "lspci_verbose:looks_like_acsctl_grep",
              parse=_PASTES + "lspci_verbose:parse_acsctl_grep", merge_step="add_acsctl", alone=False),
    InputKind("nvidia-smi-q", (("the driver's GPU list", "nvidia-smi -q, or nvidia-smi -q -x"),),
              "the NVSMI LOG banner, or a GPU bus id line with its fields indented below",
              short="nvidia-smi -q (text or -x XML)", looks_like=_HERE + "looks_like_smi_text",
              parse=_HERE + "parse_smi_text", merge_step="add_smi"),
    InputKind("nvidia-smi-q-xml", (), "the root element <nvidia_smi_log>", xml_root="<nvidia_smi_log",
              parse=_HERE + "parse_smi_xml", reads_as="nvidia-smi-q", merge_step="add_smi"),
    InputKind("topo-matrix", (("a topology matrix", "nvidia-smi topo -m, or nvidia-smi topo -mp"),
                              ("the driver's P2P status", "nvidia-smi topo -p2p r (also w, rw, n)")),
              "a header row of GPU columns and a legend of its link words",
              short="nvidia-smi topo -m/-mp/-p2p", looks_like=_PASTES + "topo_matrix:looks_like_topo_matrix",
              parse=_PASTES + "topo_matrix:parse_topo_matrices", merge_step="add_matrices"),
    InputKind("rocm-smi-topo", (("an AMD node's GPU links and NUMA nodes", "rocm-smi --showtopo"),),
              "rocm-smi's '... between two GPUs' or 'Numa Nodes' tables",
              short="rocm-smi --showtopo", looks_like=_PASTES + "rocm_smi:looks_like_rocm_smi_topo",
              parse=_PASTES + "rocm_smi:parse_rocm_smi_topo"),
    InputKind("amd-smi-topology", (("an AMD node's GPU links by bus id", "amd-smi topology"),),
              "amd-smi's LINK TYPE, HOPS, WEIGHT, ACCESS or NUMA BW TABLE: with bus id columns",
              short="amd-smi topology", looks_like=_PASTES + "amd_smi:looks_like_amd_smi_topology",
              parse=_PASTES + "amd_smi:parse_amd_smi_topology"),
    InputKind("topo-matrix-mp", (), "a matrix of PCIe classes only, its legend without NV# (nvidia-smi topo -mp)",
              looks_like=_PASTES + "topo_matrix:looks_like_topo_mp",
              parse=_PASTES + "topo_matrix:parse_topo_matrices", merge_step="add_matrices"),
    InputKind("nccl-xml", (("an NCCL topology XML", "NCCL_TOPO_DUMP_FILE=FILE"),), "the root element <system>",
              short="NCCL topology XML (<system>)", xml_root="<system", parse=_PASTES + "nccl_xml:parse_nccl_xml"),
    InputKind("hwloc-xml", (("an hwloc XML", "lstopo FILE.xml"),), "the root element <topology>",
              short="hwloc XML (<topology>)", xml_root="<topology", parse=_PASTES + "hwloc_xml:parse_hwloc_xml"),
    InputKind("nccl-graph", (("the channels NCCL built", "NCCL_GRAPH_DUMP_FILE=FILE"),), "the root element <graphs>",
              short="NCCL graph XML (<graphs>)", xml_root="<graphs", parse=_PASTES + "nccl_graph:parse_nccl_graph",
              merge_step="add_host"),
    InputKind("nvidia-smi", (("the driver's GPU table", "nvidia-smi"),),
              "nvidia-smi's boxed table: the NVIDIA-SMI / Driver Version banner and GPU rows with bus ids",
              short="nvidia-smi", looks_like=_PASTES + "gpu_lists:looks_like_smi_table",
              parse=_PASTES + "gpu_lists:parse_smi_table", merge_step="add_gpu_list"),
    InputKind("bar1-grep", (("BAR1 per GPU", "the BAR1 lines of nvidia-smi -q (grep -A3 -i bar)"),),
              "'BAR1 Memory Usage' blocks without the GPU bus id lines of nvidia-smi -q",
              short="nvidia-smi -q | grep -A3 -i bar", looks_like=_PASTES + "gpu_lists:looks_like_bar1_grep",
              parse=_PASTES + "gpu_lists:parse_bar1_grep", merge_step="add_gpu_list"),
    InputKind("nccl-tests", (("nccl-tests' device lines", "all_reduce_perf (or any nccl-tests binary)"),),
              "'#  Rank N Group N Pid N on HOST device N [BUS] NAME' lines",
              short="nccl-tests output", looks_like=_PASTES + "gpu_lists:looks_like_nccl_tests",
              parse=_PASTES + "gpu_lists:parse_nccl_tests", merge_step="add_gpu_list"),
    InputKind("numactl", (("NUMA nodes and distances", "numactl --hardware"),),
              "'available: N nodes (...)' and 'node distances:'",
              short="numactl --hardware", looks_like=_PASTES + "host_pastes:looks_like_numactl",
              parse=_PASTES + "host_pastes:parse_numactl", merge_step="add_host"),
    InputKind("lscpu", (("the CPU vendor and model", "lscpu, or cat /proc/cpuinfo"),),
              "lscpu's 'Architecture:' with 'Vendor ID:' or 'Model name:'",
              short="lscpu", looks_like=_PASTES + "host_pastes:looks_like_lscpu",
              parse=_PASTES + "host_pastes:parse_lscpu", merge_step="add_host"),
    InputKind("cpuinfo", (), "/proc/cpuinfo's 'processor : N' with 'vendor_id' (or POWER's 'cpu', ARM's "
              "'CPU implementer')", short="/proc/cpuinfo", looks_like=_PASTES + "host_pastes:looks_like_cpuinfo",
              parse=_PASTES + "host_pastes:parse_cpuinfo", merge_step="add_host"),
    InputKind("grub", (("the configured kernel command line", "cat /etc/default/grub"),),
              "GRUB_CMDLINE_LINUX lines among GRUB_ settings",
              short="/etc/default/grub", looks_like=_PASTES + "host_pastes:looks_like_grub",
              parse=_PASTES + "host_pastes:parse_grub", merge_step="add_host"),
    InputKind("gdscheck", (("GPUDirect Storage as NVIDIA's tool sees it", "gdscheck -p"),),
              "'GDS release version' or gdscheck's DRIVER CONFIGURATION block",
              short="gdscheck -p", looks_like=_PASTES + "host_pastes:looks_like_gdscheck",
              parse=_PASTES + "host_pastes:parse_gdscheck", merge_step="add_host"),
    InputKind("gdsio", (("a GDS measurement", "gdsio"),), "'IoType: ... XferType: ... Throughput: N GiB/sec' lines",
              short="gdsio output", looks_like=_PASTES + "host_pastes:looks_like_gdsio",
              parse=_PASTES + "host_pastes:parse_gdsio", merge_step="add_host"),
    InputKind("ibv_devinfo", (("RDMA ports: state and link layer", "ibv_devinfo"),),
              "'hca_id:' blocks with their ports",
              short="ibv_devinfo", looks_like=_PASTES + "host_pastes:looks_like_ibv_devinfo",
              parse=_PASTES + "host_pastes:parse_ibv_devinfo", merge_step="add_host"),
    InputKind("nccl-log", (("a job's NCCL log", "NCCL_DEBUG=INFO (every rank's output, or several ranks' "
                                                "files)"),),
              "NCCL's INFO lines (host:pid:tid [rank] NCCL INFO ...)",
              short="an NCCL_DEBUG=INFO log", looks_like=_PASTES + "nccl_log:looks_like_nccl_log",
              parse=_PASTES + "nccl_log:parse_nccl_log", merge_step="add_logs", above_it="topo-matrix"),
)
BY_NAME = {k.name: k for k in INPUT_KINDS}
LOG_STEP = "add_logs"  # the merge step that takes every job log at once, after the node's own inputs

# A single file is the first of these that fits. The XML roots first; an NCCL log before the texts (a host
# written <cluster_name> starts with '<' too, and no other text kind does).
RECOGNITION_ORDER = ("nccl-xml", "nccl-graph", "hwloc-xml", "nvidia-smi-q-xml", "nccl-log", "lspci", "nvidia-smi-q",
                     "rocm-smi-topo", "amd-smi-topology", "topo-matrix-mp", "topo-matrix", "lspci-vvv", "acsctl-grep",
                     "nvidia-smi", "bar1-grep", "nccl-tests", "gdscheck", "gdsio", "ibv_devinfo", "numactl", "lscpu",
                     "cpuinfo", "grub")
# the order the merge adds the kinds that do not draw the tree (a job's NCCL log comes last, all its files at once)
MERGE_ORDER = ("lspci-vvv", "nvidia-smi-q", "nvidia-smi", "nccl-tests", "bar1-grep", "topo-matrix", "topo-matrix-mp",
               "acsctl-grep", "numactl", "lscpu", "cpuinfo", "gdscheck", "grub", "gdsio", "ibv_devinfo",
               "nccl-graph")
# the kinds that draw the PCIe tree: one per node (the merge refuses a second)
TREE_KINDS = tuple(k.name for k in INPUT_KINDS if k.merge_step == "tree")

# Every input kind --from accepts, with the command that produces it (README and --help list the same).
ACCEPTED_KINDS = tuple(form for k in INPUT_KINDS for form in k.forms)
# the file kinds in one line, for the error that says a file is none of them
FILE_KINDS_TEXT = (", ".join(k.short for k in INPUT_KINDS if k.parse and k.short)
                   + ", or a directory or snapshot archive (gdrcheck snapshot)")
MAX_SINGLE_FILE = 32 << 20


def _function(spec: str) -> Callable[..., Any]:
    import importlib

    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def sniff(text: str) -> Optional[str]:
    """The kind of a single-file input, from its content (the first of :data:`RECOGNITION_ORDER` that fits)."""
    xml = text.lstrip("\ufeff \t\r\n")[:4096].startswith("<")
    body = _skip_xml_prolog(text) if xml else ""
    for name in RECOGNITION_ORDER:
        kind = BY_NAME[name]
        if kind.xml_root is not None:
            if xml and body.startswith(kind.xml_root):
                return name
        elif (not xml or name == "nccl-log") and _function(kind.looks_like)(text):
            return name
    return None


def looks_like(kind: str, text: str) -> bool:
    """Whether ``text`` reads as input of ``kind`` (its row's recogniser)."""
    return bool(_function(BY_NAME[kind].looks_like)(text))


def parse_as(kind: str, text: str, name: str) -> tuple[str, Any]:
    """(the kind its facts carry, what its parser returned) for the text of file ``name`` of ``kind``."""
    row = BY_NAME[kind]
    return row.reads_as, _function(row.parse)(text, name)


# 'GPU 00000000:18:00.0' then an indented section or field ('nvidia-smi -q -d MEMORY' has no Product Name)
_SMI_GPU = lazy_pattern(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*\n[ \t]+[A-Z][\w /()-]*", re.M)


def looks_like_smi_text(text: str) -> bool:
    return "==============NVSMI LOG==============" in text[:65536] or bool(_SMI_GPU.search(text[:65536]))


def parse_smi_text(text: str, name: str):
    from gdrcheck.collectors.pastes.nvidia_smi import parse_smi_text as parse

    return _gpu_rows(parse(text), name)


def parse_smi_xml(text: str, name: str):
    from gdrcheck.collectors.pastes.nvidia_smi import parse_smi_xml as parse

    try:
        rows = parse(text)
    except ValueError as e:
        raise InputError(f"{name}: {e}") from None
    return _gpu_rows(rows, name)


def _gpu_rows(rows, name: str):
    if not rows:
        raise InputError(f"{name}: nvidia-smi -q output that lists no GPU with a bus id")
    return rows


_PROLOG = lazy_pattern(r"\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>)", re.S | re.I)


def _skip_xml_prolog(text: str) -> str:
    """Text after the XML declaration, comments and DOCTYPE."""
    s = text.lstrip("\ufeff")
    pos = 0
    while True:
        m = _PROLOG.match(s, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    return s[pos:].lstrip()


def read_kind(path: str, name: str) -> tuple[str, str]:
    """(kind, text) of a single file; one-line errors for what is none of the accepted kinds."""
    text = _read_text(path, name)
    kind = sniff(text)
    if kind is None:
        raise InputError(f"{name}: not one of the accepted kinds: {FILE_KINDS_TEXT}")
    return kind, text


def _read_text(path: str, name: str) -> str:
    """A single file's text (UTF-16 with its BOM, UTF-8, else Latin-1); empty and binary files refused."""
    try:
        size = os.path.getsize(path)
        if size > MAX_SINGLE_FILE:
            raise InputError(f"{name}: file is larger than {MAX_SINGLE_FILE >> 20} MiB")
        with open(path, "rb") as f:
            data = f.read(MAX_SINGLE_FILE + 1)
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with its BOM: what PowerShell's > writes
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{name}: damaged UTF-16 text") from None
    if not data.strip():
        raise InputError(f"{name}: empty file")
    if b"\x00" in data[:65536]:
        raise InputError(f"{name}: binary file, not one of the accepted kinds: {FILE_KINDS_TEXT}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")
