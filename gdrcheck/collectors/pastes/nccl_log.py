"""An NCCL log (``NCCL_DEBUG=INFO``) as an input: what NCCL chose for one job.

Recognised by content: lines carrying ``NCCL INFO`` or ``NCCL WARN``, with NCCL's prefix
``host:pid:tid [cudaDev]`` (v2.28.9 ``src/debug.cc:347-363``; the host is cut at its first dot) or
without it, anywhere in a line (``mpirun --tag-output``, ``torchrun`` prefixes), between any other
program output, from one process or from several ranks' files given together. Lines copied without the
``NCCL INFO`` tag (``host:pid:tid [0] Channel 00/0 : ...`` or the message alone) are read where the message is
one only NCCL prints (a connection, a rank's Init line, the network devices, the version); RCCL's log alike.

What is read, with the NCCL line that says it (v2.28.9 unless named):

* the version, ``NCCL version 2.28.9+cuda13.0``, and ``cudaDriverVersion 13000`` (``misc/cudawrap.cc:273``);
  RCCL's ``RCCL version 2.20.5+hip6.2`` as ``rccl_version``, NCCL's ``version`` then unset (no NCCL ran);
* the settings NCCL took, ``NCCL_P2P_LEVEL set by environment to LOC`` (``graph/paths.cc:247``; settings files
  are applied to the environment first, so ``/etc/nccl.conf`` and ``NCCL_CONF_FILE`` values read the same),
  numeric ones ``... set by environment to 1.`` (``misc/param.cc:89``);
* the network: ``NET/Plugin: Loaded net plugin NAME (vN)``, ``Using network IB``, and the devices opened,
  ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB ...`` (``transport/net_ib.cc:839``);
* per HCA, ``NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'`` (``graph/topo.cc:1357``; ``(no module)``
  from the IB transport up to 2.18), and per GPU and HCA ``GPU Direct RDMA Enabled for GPU 0 / HCA 2
  (distance 4 <= 5)`` (``graph/paths.cc:473, 483``; the GPU is a bus id up to 2.23, a rank from 2.24;
  TRACE only in 2.30);
* each rank: ``rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 ... Init START`` (``init.cc:1574``; no
  ``nvmlDev`` before 2.18) and the host and process of its lines;
* per channel, each connection: ``Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM`` (``transport/p2p.cc:386-406``),
  ``via SHM/direct/direct`` (``transport/shm.cc:128``), ``[send] via NET/IB/1(2)/GDRDMA``
  (``transport/net.cc:313-359``; ``(2)`` the PXN proxy rank); the bracket is the nvmlDev from 2.18.3, the
  bus id before;
* ``NCCL WARN`` lines.

The parser is pure: text in, :class:`NcclLog` out.
"""

from __future__ import annotations

import re

from gdrcheck.errors import InputError
from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import fields_of, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

KIND = "nccl-log"
MAX_KEPT = 4000  # connections, warnings: a long job's log repeats them per communicator

# NCCL's prefix (optional) then the level; anything before it is another tool's prefix
_LINE = lazy_pattern(r"(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) )?\[(?P<dev>\d+)\] "
                     r"(?:(?P<where>\S+:\d+) )?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
_BARE = lazy_pattern(r"(?:^|\s)NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
_VERSION = lazy_pattern(r"^NCCL version (\d{1,3}\.\d{1,3}\.\d{1,3})(?!\d)(?:[-+]cuda(\d+\.\d+))?")
# RCCL (ROCm): "RCCL version 2.20.5+hip6.2 <git hash>" (rocm-6.2.0 src/init.cc:686), later
# "RCCL version : 2.21.5-<hash>" (ROCm/rccl src/init.cc:719 at 0cbce2a7); the number is
# NCCL_MAJOR.NCCL_MINOR.NCCL_PATCH, the NCCL release RCCL follows
_RCCL_VERSION = lazy_pattern(r"^RCCL version(?: :)? (\d{1,3}\.\d{1,3}\.\d{1,3})(?!\d)(?:\+hip(\d+\.\d+))?")
# a line copied without its "NCCL INFO" tag: NCCL's prefix (optional), then a message only NCCL prints
_UNTAGGED = lazy_pattern(r"^(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) )?(?:\[(?P<dev>\d+)\] )?"
                         r"(?P<msg>(?:Channel \d+(?:/\d+)? : \d+|Ring \d+ : \d+|[NR]CCL version |cudaDriverVersion \d|"
                         r"NET/\S+ ?: |GPU Direct RDMA |NCCL_[A-Z0-9_]+ set by environment to |Using network |"
                         r"ncclCommInitRank|comm 0x[0-9a-fA-F]+ rank \d+ nranks |DMA-BUF is available ).*)$")
_DRIVER = lazy_pattern(r"^cudaDriverVersion (\d+)")
_SET = lazy_pattern(r"^(NCCL_[A-Z0-9_]+) set by environment to (.*?)\s*$")
_RANK = lazy_pattern(r"\brank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev (\d+))? busId ([0-9a-fA-F]+)"
                     r"(?: commId (0x[0-9a-fA-F]+))?")
_NNODES = lazy_pattern(r"\brank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank (\d+)")
_PLUGIN = lazy_pattern(r"^(?:NET/Plugin ?: Loaded net plugin (.+?) \(v\d+\)|Plugin Path : (\S+)|P2P plugin (\S+))")
_NETWORK = lazy_pattern(r"^Using network (.+?)\s*$")
_USING = lazy_pattern(r"^NET/(\S+) : Using (.*?)\s*(?:; OOB (\S+))?\s*$")
_USING_DEV = lazy_pattern(r"\[(\d+)\]([^\s\[\]]+)")
_HCA_GDR = lazy_pattern(r"^NET/(\S+) : GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']*)'\s*(.*)$")
_PAIR_GDR = lazy_pattern(r"^GPU Direct RDMA (Enabled|Disabled) for GPU ([0-9a-fA-F]+) / HCA ([0-9a-fA-F]+) "
                         r"\(distance (\d+) ([<>]=?) (-?\d+)\)(?:, read (\d+))?(?: mode (\S+))?")
_DMABUF = lazy_pattern(r"^DMA-BUF is available on GPU device (\d+)")
_CONN = lazy_pattern(r"^(?:Channel|Ring) (\d+)(?:/(\d+))? : (\d+)(?:\[([0-9a-fA-F]+)\])? -> (\d+)"
                     r"(?:\[([0-9a-fA-F]+)\])? (?:\[(send|receive)\] )?via (.+?)\s*$")


@record(frozen=True)
class LogRank:
    rank: int
    nranks: int
    cuda_dev: int
    nvml_dev: Optional[int]
    bdf: str
    host: Optional[str]
    pid: Optional[int]
    comm: str
    line: str


@record(frozen=True)
class Connection:
    """One ``Channel .. : a[x] -> b[y] via T`` line: ``src`` sends to ``dst``; ``local`` is the rank whose
    process printed it (the sender, or for ``[receive]`` the receiver)."""

    channel: int
    src: int
    dst: int
    src_dev: Optional[str]  # the bracket as printed: nvmlDev (2.18.3+) or bus id (hex)
    dst_dev: Optional[str]
    side: str  # "", "send", "receive"
    transport: str
    host: Optional[str]
    pid: Optional[int]
    cuda_dev: Optional[int]
    line: str

    @property
    def local(self) -> int:
        return self.dst if self.side == "receive" else self.src


@record(frozen=True)
class HcaGdr:
    net: str
    index: int
    name: str
    enabled: bool
    detail: str
    host: Optional[str]
    line: str


@record(frozen=True)
class PairGdr:
    gpu: str  # a rank (2.24+) or a bus id (hex, up to 2.23), as printed
    hca: int
    enabled: bool
    distance: int
    level: int
    read: Optional[int]
    mode: Optional[str]
    host: Optional[str]
    cuda_dev: Optional[int]
    line: str
    hca_text: str = ""  # the HCA as printed: %d up to 2.20, the netId in hex (%lx) from 2.21 (paths.cc:419@v2.21.5)


@record(frozen=True)
class NcclLog:
    label: str
    version: Optional[str]
    cuda: Optional[str]  # the CUDA NCCL was built with (+cudaX.Y)
    cuda_driver: Optional[str]  # cudaDriverVersion, as X.Y
    settings: tuple[tuple[str, str, str], ...]  # (name, value as NCCL reported it, line), first report wins
    plugin: Optional[str]  # an external net plugin NCCL loaded
    network: Optional[str]  # Using network NAME
    nics: tuple[tuple[Optional[str], str, int, str, str], ...]  # (host, transport, index, device text, line)
    hca_gdr: tuple[HcaGdr, ...]
    pair_gdr: tuple[PairGdr, ...]
    dmabuf: tuple[tuple[Optional[str], int], ...]  # (host, cudaDev) with DMA-BUF available
    ranks: tuple[LogRank, ...]
    nnodes: Optional[int]
    connections: tuple[Connection, ...]
    warnings: tuple[tuple[Optional[str], str], ...]  # (host, message with NCCL's file:line)
    hosts: tuple[str, ...]
    lines: int  # NCCL lines read
    other_lines: int  # lines of other program output between them
    rccl_version: Optional[str] = None  # RCCL's "RCCL version X.Y.Z": RCCL ran, not NCCL (version stays None)
    rccl_hip: Optional[str] = None  # the HIP RCCL was built with (+hipX.Y)

    @property
    def library(self) -> str:
        """``rccl`` where the log's version line is RCCL's, else ``nccl``."""
        return "rccl" if self.rccl_version else "nccl"

    def setting(self, name: str) -> Optional[str]:
        for n, v, _line in self.settings:
            if n == name:
                return v
        return None


def bdf_of_busid(text: str) -> Optional[str]:
    """NCCL's int64 bus id printed with %lx (``18000``, ``1b000``) as ``dddd:bb:dd.f``: the hex digits of the
    address without its separators (``busIdToInt64``), so the last five are bus, device, function."""
    s = text.lower()
    if not re.fullmatch(r"[0-9a-f]{1,16}", s):
        return None
    s = s.rjust(9, "0")
    dom, bus, dev, fn = s[:-5], s[-5:-3], s[-3:-1], s[-1]
    if int(fn, 16) > 7:
        return None
    return f"{int(dom, 16):04x}:{bus}:{dev}.{fn}"


def nccl_lines(text: str):
    """``(host, pid, cudaDev, level, message, where, line)`` for each NCCL line; other lines as None.

    A line without the ``NCCL INFO`` tag is NCCL's when its message is one only NCCL prints (:data:`_UNTAGGED`):
    rank 0's version line (printed without NCCL's prefix up to 2.2x, ``init.cc`` showVersion; RCCL's too) and
    lines copied with the tag cut off, with or without ``host:pid:tid [dev]``."""
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if "NCCL INFO" not in line and "NCCL WARN" not in line:
            yield _untagged(line.strip())
            continue
        m = _LINE.search(line)
        if m:
            yield (m.group("host"), int(m.group("pid")) if m.group("pid") else None, int(m.group("dev")),
                   m.group("level"), m.group("msg"), m.group("where"), line.strip())
            continue
        b = _BARE.search(line)
        if b:
            yield (None, None, None, b.group("level"), b.group("msg"), None, line.strip())
        else:
            yield None


def _untagged(line: str):
    m = _UNTAGGED.match(line)
    if m is None:
        return None
    pid, dev = m.group("pid"), m.group("dev")
    return (m.group("host"), int(pid) if pid else None, int(dev) if dev is not None else None, "INFO",
            m.group("msg"), None, line)


def looks_like_nccl_log(text: str) -> bool:
    """At least two NCCL lines, or one that names the version or a connection; without the ``NCCL INFO`` tag,
    two lines of a connection, a rank, the network devices or the version."""
    head = text[:1 << 20]
    tagged = "NCCL INFO" in head or "NCCL WARN" in head
    if not tagged and not _UNTAGGED_HINT.search(head):
        return False
    n = 0
    for got in nccl_lines(head):
        if got is None:
            continue
        msg = got[4]
        strong = _VERSION.match(msg) or _RCCL_VERSION.match(msg) or _CONN.match(msg)
        if tagged and (n >= 1 or strong):
            return True
        n += 1 if tagged or strong or _init_rank(msg) or _USING.match(msg) else 0
        if n >= 2:
            return True
    return False


_UNTAGGED_HINT = lazy_pattern(r"^(?:\S+ )?(?:\[\d+\] )?(?:Channel \d|Ring \d|[NR]CCL version |ncclCommInitRank|NET/)",
                              re.M)


def _numeric(value: str) -> str:
    """``1.`` (NCCL's numeric report, ``%lld.``) as ``1``; other values as printed."""
    m = re.fullmatch(r"(-?\d+)\.", value)
    return m.group(1) if m else value


def parse_nccl_log(text: str, label: str) -> NcclLog:
    reader = _LogReader()
    for got in nccl_lines(text):
        if got is None:
            reader.other += 1
        else:
            reader.read(*got)
    if reader.n == 0:
        raise InputError(f"{label}: no NCCL INFO or WARN line")
    return reader.log(label)


class _LogReader:
    """What a log's NCCL lines say, gathered line by line: each message is read by the first of
    :data:`_MESSAGES` that fits it."""

    def __init__(self) -> None:
        self.version = self.cuda = self.driver = self.plugin = self.plugin_path = self.network = None
        self.rccl = self.hip = None
        self.nnodes: Optional[int] = None
        self.settings: dict[str, tuple[str, str]] = {}
        self.nics: list[tuple] = []
        self.nic_seen: set = set()
        self.hca: list[HcaGdr] = []
        self.pair_gdr: list[PairGdr] = []
        self.dmabuf: list[tuple] = []
        self.ranks: dict[tuple, LogRank] = {}
        self.conns: list[Connection] = []
        self.conn_seen: set = set()
        self.warns: list[tuple] = []
        self.warn_seen: set = set()
        self.hosts: dict[str, None] = {}  # in the order the log names them; a dict: each line's look-up is O(1)
        self.n = self.other = 0

    def read(self, host, pid, dev, level, msg, where, line) -> None:
        self.n += 1
        if host:
            self.hosts.setdefault(host)
        if level == "WARN":
            if len(self.warns) < MAX_KEPT and (host, msg) not in self.warn_seen:  # every rank repeats a warning
                self.warn_seen.add((host, msg))
                self.warns.append((host, f"{where} NCCL WARN {msg}" if where else msg))
            return
        for find, step in _MESSAGES:
            m = find(msg)
            if m:
                step(self, m, host, pid, dev, line)
                return

    def connection(self, m, host, pid, dev, line) -> None:
        key = (host, pid, m.group(1), m.group(3), m.group(5), m.group(7), m.group(8))
        if key not in self.conn_seen and len(self.conns) < MAX_KEPT:
            self.conn_seen.add(key)
            self.conns.append(Connection(int(m.group(1)), int(m.group(3)), int(m.group(5)), m.group(4), m.group(6),
                                         m.group(7) or "", m.group(8), host, pid, dev, line))

    def rank(self, m, host, pid, dev, line) -> None:
        bdf = bdf_of_busid(m.group(5))
        r = int(m.group(1))
        comm = m.group(6) or ""
        if bdf and (comm, r) not in self.ranks:
            self.ranks[(comm, r)] = LogRank(r, int(m.group(2)), int(m.group(3)),
                                            int(m.group(4)) if m.group(4) is not None else None, bdf, host, pid,
                                            comm, line)

    def nodes(self, m, host, pid, dev, line) -> None:
        self.nnodes = max(self.nnodes or 0, int(m.group(3)))

    def nccl_version(self, m, host, pid, dev, line) -> None:
        self.version = self.version or m.group(1)
        self.cuda = self.cuda or m.group(2)

    def rccl_version(self, m, host, pid, dev, line) -> None:
        self.rccl = self.rccl or m.group(1)
        self.hip = self.hip or m.group(2)

    def cuda_driver(self, m, host, pid, dev, line) -> None:
        v = int(m.group(1))
        self.driver = self.driver or f"{v // 1000}.{v % 1000 // 10}"

    def setting(self, m, host, pid, dev, line) -> None:
        self.settings.setdefault(m.group(1), (_numeric(m.group(2)), line))

    def net_plugin(self, m, host, pid, dev, line) -> None:
        if m.group(2):
            self.plugin_path = self.plugin_path or m.group(2)
        else:
            self.plugin = self.plugin or m.group(1) or m.group(3)

    def using_network(self, m, host, pid, dev, line) -> None:
        self.network = self.network or m.group(1)

    def hca_gdr(self, m, host, pid, dev, line) -> None:
        self.hca.append(HcaGdr(m.group(1), int(m.group(3)), m.group(4), m.group(2) == "Enabled",
                               m.group(5).strip(), host, line))

    def pair(self, m, host, pid, dev, line) -> None:
        self.pair_gdr.append(PairGdr(m.group(2), int(m.group(3), 16) & ((1 << 56) - 1), m.group(1) == "Enabled",
                                     int(m.group(4)), int(m.group(6)),
                                     int(m.group(7)) if m.group(7) is not None else None, m.group(8), host, dev,
                                     line, m.group(3)))

    def dma_buf(self, m, host, pid, dev, line) -> None:
        self.dmabuf.append((host, int(m.group(1))))

    def net_devices(self, m, host, pid, dev, line) -> None:
        for d in _USING_DEV.finditer(m.group(2)):
            k = (host, m.group(1), int(d.group(1)))
            if k not in self.nic_seen:
                self.nic_seen.add(k)
                self.nics.append((host, m.group(1), int(d.group(1)), d.group(2), line))

    def log(self, label: str) -> NcclLog:
        return NcclLog(label=label, version=self.version, cuda=self.cuda, cuda_driver=self.driver,
                       settings=tuple((k, v, ln) for k, (v, ln) in self.settings.items()),
                       plugin=self.plugin or self.plugin_path, network=self.network,
                       nics=tuple(self.nics), hca_gdr=_dedup(self.hca), pair_gdr=_dedup(self.pair_gdr),
                       dmabuf=tuple(dict.fromkeys(self.dmabuf)), ranks=tuple(self.ranks.values()),
                       nnodes=self.nnodes, connections=tuple(self.conns), warnings=tuple(self.warns),
                       hosts=tuple(self.hosts), lines=self.n, other_lines=self.other, rccl_version=self.rccl,
                       rccl_hip=self.hip)


def _init_rank(msg: str):
    return _RANK.search(msg) if "Init" in msg else None  # not Destroy/Abort COMPLETE, which name no commId


# (how a message is found, what reads it), tried in order; the first that fits reads the message
_MESSAGES = (
    (lambda msg: _CONN.match(msg), _LogReader.connection),
    (_init_rank, _LogReader.rank),
    (lambda msg: _NNODES.search(msg), _LogReader.nodes),
    (lambda msg: _VERSION.match(msg), _LogReader.nccl_version),
    (lambda msg: _RCCL_VERSION.match(msg), _LogReader.rccl_version),
    (lambda msg: _DRIVER.match(msg), _LogReader.cuda_driver),
    (lambda msg: _SET.match(msg), _LogReader.setting),
    (lambda msg: _PLUGIN.match(msg), _LogReader.net_plugin),
    (lambda msg: _NETWORK.match(msg), _LogReader.using_network),
    (lambda msg: _HCA_GDR.match(msg), _LogReader.hca_gdr),
    (lambda msg: _PAIR_GDR.match(msg), _LogReader.pair),
    (lambda msg: _DMABUF.match(msg), _LogReader.dma_buf),
    (lambda msg: _USING.match(msg), _LogReader.net_devices),
)


def _dedup(items):
    """One of each fact: every rank of a host prints the same per-HCA line."""
    out, seen = [], set()
    for x in items:
        k = tuple(getattr(x, f) for f in fields_of(x) if f != "line")
        if k not in seen:
            seen.add(k)
            out.append(x)
    return tuple(out)


def nic_device(text: str) -> tuple[str, Optional[str], Optional[str]]:
    """``mlx5_0:1/IB`` -> (``mlx5_0``, ``1``, ``IB``); ``eth0:192.0.2.2<0>`` -> (``eth0``, None, None)."""
    m = re.fullmatch(r"([^:/\s]+):(\d+)/(\w+)", text)
    if m:
        return m.group(1), m.group(2), m.group(3)
    return text.split(":", 1)[0], None, None


def merge_logs(logs: list[NcclLog]) -> NcclLog:
    """Several ranks' files of one job as one log."""
    if len(logs) == 1:
        return logs[0]
    first = logs[0]

    def cat(name):
        out = []
        for lg in logs:
            out.extend(getattr(lg, name))
        return tuple(out)

    settings: dict[str, tuple] = {}
    for lg in logs:
        for k, v, ln in lg.settings:
            settings.setdefault(k, (k, v, ln))
    return NcclLog(
        label=" + ".join(lg.label for lg in logs),
        version=next((lg.version for lg in logs if lg.version), None),
        cuda=next((lg.cuda for lg in logs if lg.cuda), None),
        cuda_driver=next((lg.cuda_driver for lg in logs if lg.cuda_driver), None),
        settings=tuple(settings.values()), plugin=next((lg.plugin for lg in logs if lg.plugin), None),
        network=next((lg.network for lg in logs if lg.network), None),
        nics=tuple(dict.fromkeys(cat("nics"))), hca_gdr=_dedup(cat("hca_gdr")), pair_gdr=_dedup(cat("pair_gdr")),
        dmabuf=tuple(dict.fromkeys(cat("dmabuf"))),
        ranks=tuple({(r.comm, r.rank): r for r in reversed(cat("ranks"))}.values())[::-1],
        nnodes=max((lg.nnodes or 0 for lg in logs), default=0) or first.nnodes,
        connections=cat("connections"), warnings=tuple(dict.fromkeys(cat("warnings"))),
        hosts=tuple(dict.fromkeys(cat("hosts"))), lines=sum(lg.lines for lg in logs),
        other_lines=sum(lg.other_lines for lg in logs),
        rccl_version=next((lg.rccl_version for lg in logs if lg.rccl_version), None),
        rccl_hip=next((lg.rccl_hip for lg in logs if lg.rccl_hip), None))
