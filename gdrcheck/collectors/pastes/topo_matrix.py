"""Read an ``nvidia-smi topo -m`` / ``-mp`` matrix: path classes, NVLink counts, CPU/NUMA affinity, NIC legend.

What nvidia-smi prints (driver 440-580 layouts): a header row of device names
(``GPU0``.. then ``NIC0``.. with a ``NIC Legend:`` block on drivers >= 5xx, or
``mlx5_0``.. on older ones), then ``CPU Affinity``, ``NUMA Affinity`` and, on
newer drivers, ``GPU NUMA ID``; one row per device with one code per column
(``X``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``, ``SOC`` (old name of
SYS), ``NV#``); GPU rows end with the affinity cells, NIC rows do not. ``-mp``
prints PCIe classes only (no ``NV#``). Copies arrive with tabs expanded, tabs
doubled, ANSI underline escapes around the header, a leading ``== nvidia-smi
topo -m`` title, shell prompts and ``[sudo]`` lines around them: the reader
splits rows on whitespace runs, treats the multi-word headers as units, and
reads a row only when its code cells can be told from its affinity cells.

A matrix has no bus ids: GPUs are known by nvidia-smi's index, NICs by their
RDMA device name (the legend) in nvidia-smi's order. Anything that cannot be
read where the meaning is clear raises :class:`InputError` naming the line.
"""

from __future__ import annotations

import re

from gdrcheck.collectors.bounds import check_matrix
from gdrcheck.errors import InputError
from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_ANSI = lazy_pattern(r"\x1b\[[0-9;]*[A-Za-z]")
_MULTI = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
CODE = lazy_pattern(r"^(X|PIX|PXB|PHB|NODE|SYS|SOC|NV\d{1,3})$")
_DEV = lazy_pattern(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[A-Za-z][A-Za-z0-9]*_\d+)$")
_P2P = lazy_pattern(r"^(X|OK|CNS|GNS|TNS|NS|DR|U)$")
_LEGEND = lazy_pattern(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_PROMPT = lazy_pattern(r"^\s*(?:\$ |# |sh-[\d.]+[#$] |\[sudo\]|\S+@\S+[:~][^$#]*[$#] )")

_SNIFF_LINES = 200


@record(frozen=True)
class TopoMatrix:
    """One matrix as printed: device names in header order, code per (row, col), affinity per GPU."""

    label: str
    devices: tuple[str, ...]
    cells: dict[tuple[str, str], str]
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, Optional[int]] = field(default_factory=dict)
    gpu_numa_id: dict[str, Optional[int]] = field(default_factory=dict)
    legend: dict[str, str] = field(default_factory=dict)  # NICn -> RDMA device name
    pcie_only: bool = False  # a -mp matrix (no NV# anywhere and a legend without NV#)
    notes: tuple[str, ...] = ()
    # a -p2p matrix: the driver's P2P status per pair (OK, NS, CNS, GNS, TNS, DR, U) for the capability named
    # before it ("read", "write", "nvlink", "atomics"; "read+write" for rw; "" where the paste does not say: as
    # nvidia-smi prints it, without its command line)
    p2p: Optional[str] = None

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if d.startswith("GPU")]

    @property
    def nics(self) -> list[str]:
        return [d for d in self.devices if not d.startswith("GPU")]

    def rdma_name(self, nic: str) -> str:
        """The RDMA device name of a NIC column (``NIC0`` -> legend, ``mlx5_0`` -> itself)."""
        return self.legend.get(nic, nic)

    def code(self, a: str, b: str) -> Optional[str]:
        c = self.cells.get((a, b))
        if c is None:
            c = self.cells.get((b, a))
        return "SYS" if c == "SOC" else c


def _clean(line: str) -> str:
    return _ANSI.sub("", line).replace("\r", "").rstrip()


def _header_tokens(line: str) -> Optional[list[str]]:
    """The device names of a header row, or None when the line is no header."""
    s = line
    for h in _MULTI:
        s = re.sub(r"\s+".join(h.split()), h.replace(" ", "_"), s)
    toks = s.split()
    if not toks or not _DEV.match(toks[0]):
        return None
    devs = []
    for t in toks:
        if t.replace("_", " ") in _MULTI:
            break
        if not _DEV.match(t):
            return None
        devs.append(t)
    if len(devs) < 1 or not devs[0].startswith("GPU"):
        return None
    return devs if len(set(devs)) == len(devs) else None


def _is_header_at(lines: list[str], i: int) -> bool:
    head = _header_tokens(lines[i])
    if head is None or ("Affinity" not in lines[i] and len(head) < 2):
        return False
    for nxt in lines[i + 1:i + 4]:
        toks = nxt.split()
        if toks and toks[0] == head[0] and len(toks) > 1 and (CODE.match(toks[1]) or _P2P.match(toks[1])):
            return True
    return False


def parse_topo_matrices(text: str, label: str) -> list[TopoMatrix]:
    """Every matrix of a paste that holds several (``topo -m`` then ``topo -mp``, ``-p2p`` ones after them).

    Lines are numbered as in the whole text.
    """
    lines = [_clean(x) for x in text.lstrip("\ufeff").split("\n")]
    starts = [i for i in range(len(lines)) if _is_header_at(lines, i)]
    if len(starts) <= 1:
        return [parse_topo_matrix(text, label)]
    out: list[TopoMatrix] = []
    for k, i in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        seg = "\n" * i + "\n".join(lines[i:end])  # keeps the line numbers of the whole text
        # the title lines naming a -p2p one: those after the previous matrix's rows and legend
        first = max(starts[k - 1] + 1 if k else 0, i - 3)
        before = "\n" * first + "\n".join(lines[first:i])
        m = parse_topo_matrix(seg, label, p2p_title=before)
        out.append(TopoMatrix(**{**m.__dict__, "notes": tuple(n for n in m.notes if "around the matrix" not in n)}))
    return out


def looks_like_topo_matrix(text: str) -> bool:
    """True when a header row (``GPU0 GPU1 ... CPU Affinity``) opens one of the first lines and a GPU0 row follows."""
    lines = [_clean(x) for x in text.lstrip("\ufeff").split("\n")[:_SNIFF_LINES]]
    return any(_is_header_at(lines, i) for i in range(len(lines)))


def looks_like_topo_mp(text: str) -> bool:
    """A ``topo -mp`` paste: matrices whose path-class ones are all PCIe-only (their legend has no NV# line)."""
    if not looks_like_topo_matrix(text):
        return False
    try:
        ms = parse_topo_matrices(text, "")
    except InputError:
        return False
    classes = [m for m in ms if m.p2p is None]
    return bool(classes) and all(m.pcie_only for m in classes)


def _unwrap(lines: list[str]) -> list[str]:
    """Join a row a terminal or mail client wrapped: a line of codes only, after a row line, goes onto it.

    The joined line keeps the number of the line it started on; the continuation becomes blank.
    """
    out = list(lines)
    last = None
    for i, ln in enumerate(lines):
        toks = ln.split()
        if not toks:
            last = None
            continue
        if last is not None and all(CODE.match(t) or re.fullmatch(r"[\d,\-]+|N/A", t) for t in toks) \
                and CODE.match(toks[0]) and not _DEV.match(toks[0]):
            out[last] = out[last] + " " + ln.strip()
            out[i] = ""
            continue
        last = i if _DEV.match(toks[0]) else None
    return out


def _int_or_none(tok: Optional[str]) -> Optional[int]:
    if tok is None or not tok.isdigit():
        return None
    return int(tok)


_P2P_TITLE = lazy_pattern(r"topo\s+-p2p\s*(rw|r|w|n|a|p)\b|-p2p\s*(rw|r|w|n|a|p)\b")
_P2P_CAPS = {"r": "read", "w": "write", "rw": "read+write", "n": "nvlink", "a": "atomics", "p": "prop"}
# a title in words above a matrix ("P2P read:", "== write ==", "NVLink P2P"); legend lines ('OK = ...') aside
_P2P_WORD = lazy_pattern(r"\b(read|write|nvlink|atomics?)\b", re.I)
_LEGEND_LINE = lazy_pattern(r"^\s*(X|OK|CNS|GNS|TNS|NS|DR|U|NV#|SYS|NODE|PHB|PXB|PIX|SOC)\s*=")


def p2p_capability(text: str) -> str:
    """The capability a ``-p2p`` matrix shows, from the last line before it that names one: its command
    (``nvidia-smi topo -p2p r``) or a title in words (``P2P read``); '' where none does."""
    got = ""
    for line in text.split("\n"):
        if _LEGEND_LINE.match(line):
            continue
        cmd = list(_P2P_TITLE.finditer(line))
        if cmd:
            got = _P2P_CAPS[cmd[-1].group(1) or cmd[-1].group(2)]
            continue
        words = {w.lower().rstrip("s") if w.lower().startswith("atomic") else w.lower()
                 for w in _P2P_WORD.findall(line)}
        if len(words) == 1:
            got = words.pop()
            got = "atomics" if got == "atomic" else got
        elif words == {"read", "write"}:
            got = "read+write"
    return got


def _is_p2p(lines: list[str], header: list[str]) -> bool:
    """Whether the first row under the header holds P2P statuses (OK, NS, ...) rather than path classes."""
    for ln in lines:
        toks = ln.split()
        if toks and toks[0] in header:
            codes = toks[1:len(header) + 1]
            return bool(codes) and all(_P2P.match(c) for c in codes) and any(c != "X" for c in codes)
    return False


def parse_topo_matrix(text: str, label: str, p2p_title: str = "") -> TopoMatrix:
    """Parse one matrix; raise :class:`InputError` ``"<label>: line N: <what>"`` where its meaning is lost.
    ``p2p_title``: the lines before it, where a ``-p2p`` matrix's command names its capability."""
    if not text.strip():
        raise InputError(f"{label}: empty input")
    reader = _MatrixReader(label, _unwrap([_clean(x) for x in text.lstrip("\ufeff").split("\n")]), p2p_title)
    for n, ln in enumerate(reader.lines, 1):
        if not ln.strip():
            continue
        if reader.header is None:
            reader.find_header(n, ln)
        elif not reader.legend_line(n, ln):
            reader.row(n, ln)
    return reader.matrix()


class _MatrixReader:
    """One matrix, read line by line: the lines before its header, the header, its rows and its legend."""

    def __init__(self, label: str, lines: list[str], p2p_title: str) -> None:
        self.label, self.lines, self.p2p_title = label, lines, p2p_title
        self.p2p: Optional[str] = None
        self.header: Optional[list[str]] = None
        self.header_line = 0
        self.extras: list[str] = []
        self.cells: dict[tuple[str, str], str] = {}
        self.rows_seen: dict[str, int] = {}
        self.cpu: dict[str, str] = {}
        self.numa: dict[str, Optional[int]] = {}
        self.gnuma: dict[str, Optional[int]] = {}
        self.legend: dict[str, str] = {}
        self.notes: list[str] = []
        self.ignored: list[int] = []
        self.nv_in_legend = False
        self.in_legend = False

    def find_header(self, n: int, ln: str) -> None:
        head = _header_tokens(ln)
        if head is None:
            self.ignored.append(n)
            return
        check_matrix(self.label, head)
        self.header, self.header_line = head, n
        self.extras = [h for h in _MULTI if re.search(r"\s+".join(h.split()), ln)]
        if _is_p2p(self.lines[n:n + 4], head):
            self.p2p = p2p_capability(self.p2p_title + "\n" + "\n".join(self.lines[:n]))

    def legend_line(self, n: int, ln: str) -> bool:
        """Whether the line is the legend's (a NIC's name, the Legend: block, or what follows it)."""
        m = _LEGEND.match(ln)
        if m:
            self.legend[m.group(1)] = m.group(2)
            return True
        s = ln.strip()
        if s.startswith(("Legend:", "NIC Legend:")):
            self.in_legend = True
            return True
        if not self.in_legend:
            return False
        if s.startswith("NV#"):
            self.nv_in_legend = True
        if not re.match(r"^(X|SYS|NODE|PHB|PXB|PIX|NV#|SOC|PCI|CPU|OK|CNS|GNS|TNS|NS|DR|U)\s*=", s):
            self.ignored.append(n)
        return True

    def row(self, n: int, ln: str) -> None:
        label, header = self.label, self.header
        toks = ln.strip().split()
        row = toks[0]
        if row not in header:
            if _PROMPT.match(ln) or not any(CODE.match(t) for t in toks[1:]):
                self.ignored.append(n)
                return
            raise InputError(f"{label}: line {n}: row {row!r} is not a column of the header at line "
                             f"{self.header_line}")
        if row in self.rows_seen:
            if ln == self.lines[self.rows_seen[row] - 1]:
                self.notes.append(f"line {n} repeats line {self.rows_seen[row]} exactly; ignored")
                return
            raise InputError(f"{label}: line {n}: row {row} is already given at line {self.rows_seen[row]}")
        self.rows_seen[row] = n
        vals = toks[1:]
        for col, code in zip(header, _row_codes(label, n, row, header, vals) if self.p2p is None
                             else _p2p_codes(label, n, row, header, vals)):
            self.cells[(row, col)] = code
        rest = vals[len(header):]
        if row.startswith("GPU") and rest:
            self.affinity(row, rest)

    def affinity(self, row: str, rest: list[str]) -> None:
        """A GPU row's columns after the matrix: CPU Affinity, NUMA Affinity, GPU NUMA ID, as the header has them."""
        if "CPU Affinity" in self.extras:
            self.cpu[row] = rest[0]
            rest = rest[1:]
        if "NUMA Affinity" in self.extras:
            self.numa[row] = _int_or_none(rest[0] if rest else None)
            rest = rest[1:]
        if "GPU NUMA ID" in self.extras:
            self.gnuma[row] = _int_or_none(rest[0] if rest else None)

    def matrix(self) -> TopoMatrix:
        label, header, notes = self.label, self.header, self.notes
        if header is None:
            raise InputError(f"{label}: no nvidia-smi topo -m matrix found (expected a header like 'GPU0 GPU1 ... "
                             "CPU Affinity')")
        _check_whole(label, header, self.header_line, self.rows_seen, self.cells)
        pcie_only = not any(c.startswith("NV") for c in self.cells.values()) and not self.nv_in_legend and bool(
            [x for x in self.lines if x.strip().startswith("Legend:")])
        if self.ignored:
            notes.append(f"{len(self.ignored)} line(s) around the matrix are not part of it (first at line "
                         f"{self.ignored[0]}); ignored")
        nic_cols = [d for d in header if d.startswith("NIC")]
        lost = [c for c in nic_cols if c not in self.legend]
        if nic_cols and lost:
            notes.append(f"the NIC legend does not name {', '.join(lost)}; their RDMA device names are unknown")
        if self.p2p is not None:
            return TopoMatrix(label=label, devices=tuple(header), cells=self.cells, legend=self.legend,
                              notes=tuple(notes), p2p=self.p2p)
        return TopoMatrix(label=label, devices=tuple(header), cells=self.cells, cpu_affinity=self.cpu,
                          numa_affinity=self.numa, gpu_numa_id=self.gnuma, legend=self.legend, pcie_only=pcie_only,
                          notes=tuple(notes))


def _p2p_codes(label: str, n: int, row: str, header: list[str], vals: list[str]) -> list[str]:
    """The P2P statuses of one row of a ``-p2p`` matrix, one per header column."""
    return _cells(label, n, row, header, vals, _P2P, "a P2P status (X, OK, NS, CNS, GNS, TNS, DR, U)", "statuses")


def _row_codes(label: str, n: int, row: str, header: list[str], vals: list[str]) -> list[str]:
    """The path codes of one row, one per header column; raise where they cannot be told apart."""
    codes = vals[:len(header)]
    if codes and all(_P2P.match(c) for c in codes) and any(c != "X" for c in codes):
        raise InputError(f"{label}: line {n}: an nvidia-smi topo -p2p matrix (P2P status, not path classes); "
                         "pass 'nvidia-smi topo -m' (or -mp)")
    return _cells(label, n, row, header, vals, CODE, "a path code (X, PIX, PXB, PHB, NODE, SYS, NV#)", "codes",
                  "; the row's cells cannot be told apart")


def _cells(label: str, n: int, row: str, header: list[str], vals: list[str], pattern, what_one: str,
           what_many: str, tail: str = "") -> list[str]:
    """One cell per header column, each matching ``pattern``, X on the diagonal only."""
    codes = vals[:len(header)]
    if len(codes) < len(header) or not all(pattern.match(c) for c in codes):
        bad = next((c for c in codes if not pattern.match(c)), None)
        what = f"{len(codes)} of {len(header)} {what_many}" if bad is None else f"{bad!r} is not {what_one}"
        raise InputError(f"{label}: line {n}: row {row}: {what}{tail}")
    for col, code in zip(header, codes):
        if (col == row) != (code == "X"):
            raise InputError(f"{label}: line {n}: row {row}, column {col}: {code!r} "
                             f"({'the diagonal must be X' if col == row else 'X off the diagonal'})")
    return codes


def _check_whole(label: str, header: list[str], header_line: int, rows_seen: dict[str, int],
                 cells: dict[tuple[str, str], str]) -> None:
    """Every column has its row, and the matrix is symmetric."""
    missing = [d for d in header if d not in rows_seen]
    if missing:
        raise InputError(f"{label}: line {header_line}: the header names {', '.join(missing)} but no row gives "
                         "it (a cut-off paste?)")
    for (a, b), c in cells.items():
        other = cells.get((b, a))
        if other is not None and other != c:
            raise InputError(f"{label}: line {rows_seen[a]}: {a}-{b} is {c} but {b}-{a} (line {rows_seen[b]}) "
                             f"is {other}; the matrix is not symmetric")
