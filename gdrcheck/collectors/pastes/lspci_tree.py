"""Read ``lspci -t`` / ``-tv`` / ``-tvv`` / ``-tvnn`` text into a :class:`Snapshot`.

How lspci draws the tree (pciutils ``ls-tree.c``): every device is ``dd.f``;
a bridge adds ``-[SS]-`` or ``-[SS-UU]-`` (its secondary and subordinate bus)
and the devices printed after it sit on bus ``SS``; an unconfigured bridge
(secondary bus 0) prints ``dd.f--`` and nothing below it. A bus with one device
prints ``--dev``, with several ``+-dev`` for each and ``\\-dev`` for the last.
Root buses are labelled ``[dddd:bb]`` (domain of four digits or more), one
per line as ``+-[dddd:bb]-`` / ``\\-[dddd:bb]-`` when there are several. After
each line lspci turns every ``+`` and ``|`` into ``|`` and everything else into
spaces, so a continuation line is spaces and ``|`` up to the column of the
``+`` that opened the sibling list it continues. The reader is therefore
column-anchored: each ``+`` remembers, by column, the bus it lists; a
continuation line looks up the column of its ``+-`` / ``\\-`` (a ``\\-`` closes
that list). No recursion, one pass over the text: linear time.

Forms read: the multi-root form ``-+-[0000:00]-+-...``, the single-root form
``-[0000:00]-+-...``, a plain ``-+-00.0`` without a label (domain 0000, bus 00),
root buses in any order (pciutils <= 3.7 lists them descending), all domains in
one tree (<= 3.9) or one tree per domain (>= 3.10), a bridge with several buses
(``-[04-06]-+-[0000:04]-...``), names with ``-v``, ids with ``-nn``
(``... [10de:2330]`` fills vendor and device; ``-n`` alone prints ``10de:2330``, and ``-v`` where
pci.ids is missing ``Device 10de:2330``),
and the resource lines of ``-tvv`` (``Memory at ...``, skipped). A line that is
just ``-`` (3.14 with ``-s``) is skipped; a line cut by lspci's line buffer
(``...``) is read up to the cut, with a note.

Damage tolerated where the intent is clear, each with a note in ``notes``:

* text before and after the tree (shell prompts, ``[sudo] password`` lines,
  markdown fences) is ignored; text *between* tree lines is an error;
* leading spaces before the first ``-`` (a whole tree indented alike is fine);
* a continuation line one column off the ``+`` it continues (an exact match
  wins; real sibling lists are at least eight columns apart, so +-1 is never
  ambiguous); two or more columns off is an error;
* a line that repeats the line before it exactly (lspci never prints the same
  line twice: every line names a different device) is dropped;
* blank lines: a blank line between tree lines separates fragments, so a
  ``+-dd.f`` line that follows it with no ``|`` before it starts a new fragment.

Fragments. A tree line that starts with ``+-dd.f`` / ``\\-dd.f`` (no ``-`` and
no root label before it) as the first tree line or after a blank line is a
cut-out fragment: the bus its first devices sit on is not shown (a
``+-[dddd:bb]-`` line whose list was cut away needs no guess: its label names
its root). Otherwise a line that continues no open list is an error. Each
fragment gets its own synthetic root bus, with this rule: domain 0000; bus =
one below the lowest secondary bus of the bridges directly on it (firmware
numbers a root port's bus that way), or 00 when none of them shows a bus
range; when that bus is already used anywhere in the input (as a root bus, or
inside a bridge's ``[SS-UU]`` range), the nearest free bus below it, else
above it. Devices
below the fragment's bridges keep the bus numbers the text prints. The note
names the fragment's line and the synthetic root.

Anything else raises :class:`InputError` ``"<label>: line N: <what>"``.
Consistency checks: a device listed twice, one bus holding devices under two
different bridges, a bus label inside a bridge naming another domain. Since
every bus has one owner, a chain of bridges is at most 256 deep per domain.
"""

from __future__ import annotations

from gdrcheck.collectors.bounds import MAX_FUNCTIONS, too_many_functions
from gdrcheck.collectors.clip import clip_name
from gdrcheck.errors import InputError
from gdrcheck.model import PciFunction, Snapshot, norm_bdf, root_of
from gdrcheck.patterns import lazy_pattern
from gdrcheck.pcie.kinds import kind_from_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_H = "[0-9a-fA-F]"
_DEV = lazy_pattern(rf"({_H}{{2}})\.([0-7])")
_RANGE = lazy_pattern(rf"-\[({_H}{{2}})(?:-({_H}{{2}}))?\]-")
_LABEL = lazy_pattern(rf"\[(?:({_H}{{4,8}}):)?({_H}{{2}})\]-")
_START = lazy_pattern(rf"-(?:[+\\]-)?\[(?:{_H}{{4,8}}:)?{_H}{{2}}\]-|-(?:[+\\]-|--){_H}{{2}}\.[0-7]")
_FRAG = lazy_pattern(rf"[+\\]-(?:{_H}{{2}}\.[0-7](?:-|\s|$)|\[{_H}{{4,8}}:{_H}{{2}}\]-)")
_PREFIX = lazy_pattern(r"[ |]*")
_RESOURCE = lazy_pattern(r"(?:Region \d+: )?(?:\[(?:virtual|enhanced)\] )?(?:Memory at|I/O ports at) ")
_IDS_TAIL = lazy_pattern(rf"\[({_H}{{4}}):({_H}{{4}})\]\s*$")
_IDS_ONLY = lazy_pattern(rf"(?:Device )?({_H}{{4}}):({_H}{{4}})$")  # -n; -v without pci.ids: "Device 10de:2330"

_SNIFF_LINES = 400
_SNIFF_CHARS = 256 << 10


def looks_like_lspci_tree(text: str) -> bool:
    """True when a tree line (``-[0000:00]-+-``, ``-+-00.0``, ``+-00.0-[..]``) opens one of the first lines."""
    head = text[:_SNIFF_CHARS].lstrip("\ufeff")
    for line in head.split("\n")[:_SNIFF_LINES]:
        s = line.lstrip(" ")
        if s[:1] == "-" and _START.match(s):
            return True
        if s[:1] in ("+", "\\") and _FRAG.match(s):
            return True
    return False


class _Ctx:
    """Where the devices printed next sit: domain, bus, parent bridge (index) and root (index).

    A top context (``top`` set) has no bus yet: a label gives it one, and a device
    met there takes the default root (0000:00 for ``-+-00.0``, a synthetic root
    for a fragment), created once and shared by every line that continues it.
    """

    __slots__ = ("dom", "bus", "parent", "root", "top")

    def __init__(self, dom, bus, parent, root, top=None):
        self.dom, self.bus, self.parent, self.root, self.top = dom, bus, parent, root, top


class _Reader:
    def __init__(self, label: str) -> None:
        self.label = label
        self.notes: list[str] = []
        self.roots: list[list] = []  # [domain, bus or None (synthetic), line]
        self.root_ix: dict[tuple[int, int], int] = {}
        # one entry per device: [dom, bus|None, dev, fn, parent, root, line, name, sec, sub, bridge]
        self.devs: list[list] = []
        self.seen: dict[tuple[int, int, int], int] = {}
        self.owner: dict[tuple[int, int], object] = {}
        self.anchors: list[tuple[int, _Ctx]] = []  # open sibling lists, columns increasing
        self.off_by_one: list[int] = []
        self.cut_lines: list[int] = []

    def fail(self, n: int, what: str) -> InputError:
        return InputError(f"{self.label}: line {n}: {what}")

    def cut_or_fail(self, n: int, line: str, what: str) -> None:
        """A line that lspci cut at its buffer size ends in '...': keep what came before the cut."""
        if not line.endswith("..."):
            raise self.fail(n, what)
        self.cut_lines.append(n)

    def get_root(self, dom: int, bus: Optional[int], n: int) -> int:
        if bus is not None and (dom, bus) in self.root_ix:
            return self.root_ix[(dom, bus)]
        self.roots.append([dom, bus, n])
        if bus is not None:
            self.root_ix[(dom, bus)] = len(self.roots) - 1
        return len(self.roots) - 1

    # -- one tree line -----------------------------------------------------

    def line(self, n: int, line: str, i: int, ctx: _Ctx) -> None:
        length = len(line)
        while i < length:
            ch = line[i]
            if ch == "-":
                i += 1
                continue
            if ch == "+" or ch == "\\":
                if line[i + 1:i + 2] != "-":
                    raise self.fail(n, f"{ch!r} at column {i + 1} is not followed by '-'")
                if ch == "+":
                    self.anchors.append((i, ctx))
                i += 2
                continue
            if ch == "[":
                m = _LABEL.match(line, i)
                if not m:
                    return self.cut_or_fail(n, line, f"bad bus label {line[i:i + 16]!r} at column {i + 1}")
                dom, bus = int(m.group(1) or "0", 16), int(m.group(2), 16)
                if ctx.parent is None:
                    ctx = _Ctx(dom, bus, None, self.get_root(dom, bus, n))
                elif dom != ctx.dom:
                    raise self.fail(n, f"bus label {m.group(0)[:-1]} below a bridge of domain {ctx.dom:04x}")
                else:
                    ctx = _Ctx(dom, bus, ctx.parent, ctx.root)
                i = m.end()
                continue
            m = _DEV.match(line, i)
            if m is None:
                return self.cut_or_fail(n, line, f"unexpected {line[i:i + 16]!r} at column {i + 1}")
            if ctx.root is None:
                self.top_root(ctx, n)
            ix = self.add(n, ctx, int(m.group(1), 16), int(m.group(2)))
            i = m.end()
            r = _RANGE.match(line, i)
            if r:
                d = self.devs[ix]
                d[8] = int(r.group(1), 16)
                d[9] = int(r.group(2), 16) if r.group(2) else d[8]
                d[10] = True
                ctx = _Ctx(ctx.dom, d[8], ix, ctx.root)
                i = r.end()
                continue
            rest = line[i:]
            if rest and not rest.strip("-"):  # 'dd.f--': a bridge with no secondary bus
                self.devs[ix][10] = True
                return
            if rest and not rest[0].isspace():
                return self.cut_or_fail(n, line, f"unexpected {rest[:16]!r} after device {m.group(0)} "
                                                 f"at column {i + 1}")
            self.devs[ix][7] = rest.strip() or None
            return

    def top_root(self, ctx: _Ctx, n: int) -> None:
        kind, first = ctx.top
        if kind == "plain":
            ctx.dom, ctx.bus, ctx.root = 0, 0, self.get_root(0, 0, n)
        else:
            ctx.dom, ctx.bus, ctx.root = 0, None, self.get_root(0, None, first)

    def add(self, n: int, ctx: _Ctx, dev: int, fn: int) -> int:
        if dev > 0x1F:
            raise self.fail(n, f"device number {dev:02x} is above 1f")
        bus_key = ctx.bus if ctx.bus is not None else -1 - ctx.root
        key = (ctx.dom, bus_key, dev * 8 + fn)
        if key in self.seen:
            raise self.fail(n, f"device {dev:02x}.{fn} on this bus is already listed at line {self.seen[key]}")
        owner = ("bridge", ctx.parent) if ctx.parent is not None else ("root", ctx.root)
        prev = self.owner.setdefault((ctx.dom, bus_key), owner)
        if prev != owner:
            raise self.fail(n, f"bus {bus_key:02x} holds devices below two different bridges")
        self.seen[key] = n
        self.devs.append([ctx.dom, ctx.bus, dev, fn, ctx.parent, ctx.root, n, None, None, None, False])
        if len(self.devs) > MAX_FUNCTIONS:  # refused as it is read: a 31 MB paste holds some 90,000
            raise too_many_functions(self.label, len(self.devs))
        return len(self.devs) - 1

    # -- continuation lines ------------------------------------------------

    def continue_at(self, n: int, col: int, marker: str, labelled: bool) -> Optional[_Ctx]:
        """The bus a continuation line lists; None for a root label whose list was cut away."""
        anchors = self.anchors
        while anchors and anchors[-1][0] > col + 1:
            anchors.pop()
        if not anchors or anchors[-1][0] < col - 1:
            if labelled:
                return None
            raise self.fail(n, f"'{marker}-' at column {col + 1} continues no open sibling list")
        acol, ctx = anchors[-1]
        if acol != col:
            self.off_by_one.append(n)
        if marker == "\\":
            anchors.pop()
        return ctx

    # -- synthetic roots ---------------------------------------------------

    def place_fragments(self) -> None:
        synth = [k for k, r in enumerate(self.roots) if r[1] is None]
        if not synth:
            return
        diff = [0] * 258
        for dom, bus, _n in self.roots:
            if dom == 0 and bus is not None:
                diff[bus] += 1
                diff[bus + 1] -= 1
        tops: dict[int, int] = {}
        for d in self.devs:
            if d[0] == 0 and d[1] is not None:
                diff[d[1]] += 1
                diff[d[1] + 1] -= 1
            if d[0] == 0 and d[8] is not None:
                lo, hi = sorted((d[8], d[9]))
                diff[lo] += 1
                diff[hi + 1] -= 1
            if d[1] is None and d[8] is not None:
                tops[d[5]] = min(tops.get(d[5], 0x100), d[8])
        used, run = [], 0
        for b in range(256):
            run += diff[b]
            used.append(run > 0)
        for k in synth:
            want = max(tops.get(k, 1) - 1, 0)
            free = [b for b in range(want, -1, -1) if not used[b]] or [b for b in range(want, 256) if not used[b]]
            if not free:
                raise self.fail(self.roots[k][2], "no free bus number left for this fragment's unknown root bus")
            self.roots[k][1] = free[0]
            used[free[0]] = True
            how = ("one below its bridges' lowest secondary bus" if k in tops and free[0] == want
                   else "a bus number no other bus of the input uses")
            self.notes.append(
                f"line {self.roots[k][2]}: the tree starts without a root-bus label (a cut-out fragment); "
                f"its root bus is unknown and is shown as synthetic root {root_of(0, free[0])} "
                f"(domain 0000 assumed; bus {how})")

    def snapshot(self) -> Snapshot:
        self.place_fragments()
        bdfs: list[str] = []
        by_bdf: dict[str, int] = {}
        for d in self.devs:
            bus = d[1] if d[1] is not None else self.roots[d[5]][1]
            bdf = norm_bdf(f"{d[0]:x}:{bus:02x}:{d[2]:02x}.{d[3]}")
            if bdf in by_bdf:
                raise self.fail(d[6], f"device {bdf} is already listed at line {self.devs[by_bdf[bdf]][6]}")
            by_bdf[bdf] = len(bdfs)
            bdfs.append(bdf)
        out = []
        for d, bdf in zip(self.devs, bdfs):
            name = d[7]
            vendor = device = None
            if name:
                m = _IDS_TAIL.search(name) or _IDS_ONLY.match(name)
                if m:
                    vendor, device = int(m.group(1), 16), int(m.group(2), 16)
            hint = None
            if d[10]:
                hint = "bridge"
            elif name and kind_from_name(name) == "bridge":
                hint = "other"  # a leaf of the tree is no PCI-to-PCI bridge (an NT or management endpoint)
            r = self.roots[d[5]]
            out.append(PciFunction(
                bdf=bdf, root=root_of(r[0], r[1]), parent=bdfs[d[4]] if d[4] is not None else None,
                vendor=vendor, device=device, name=clip_name(name), kind_hint=hint,
                secondary_bus=d[8], subordinate_bus=d[9]))
        if self.off_by_one:
            self.notes.append(f"{len(self.off_by_one)} continuation line(s) sit one column off the sibling list "
                              f"they continue (first at line {self.off_by_one[0]}); read as aligned")
        if self.cut_lines:
            self.notes.append(f"line {self.cut_lines[0]}: cut by lspci at its line-length limit ('...'); "
                              "devices past the cut are missing")
        roots = tuple(dict.fromkeys(root_of(r[0], r[1]) for r in self.roots))
        return Snapshot(input_kind="lspci", label=self.label, devices=tuple(out), roots=roots,
                        numa_known=False, shows_nvlink=False, notes=tuple(self.notes))


def parse_lspci_tree(text: str, label: str) -> Snapshot:
    """Parse ``lspci -t``-style text; raise :class:`InputError` naming ``label`` and the line."""
    rd = _Reader(label)
    if not text.strip():
        raise InputError(f"{label}: empty input")
    lines = text.lstrip("\ufeff").split("\n")
    in_tree = brk = False
    noise_after: Optional[int] = None
    ignored: list[int] = []
    dups: list[tuple[int, int]] = []
    prev = None
    last_tree = 0
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line.strip(" |") or line.strip() == "-":
            brk = brk or (in_tree and not line)
            continue
        s_off = len(line) - len(line.lstrip(" "))
        p = _PREFIX.match(line).end()
        marker = line[p:p + 2]
        if line.startswith(("-[", "-+-", "-\\-"), s_off) or _START.match(line, s_off):
            kind = "start"
        elif marker in ("+-", "\\-"):
            fresh = not in_tree or (brk and "|" not in line[:p])
            kind = "fragment" if fresh and _FRAG.match(line, p) else "cont"
        elif in_tree and noise_after is None and _RESOURCE.match(line, p):
            continue
        else:
            ignored.append(n)
            if in_tree and noise_after is None:
                noise_after = n
            continue
        if noise_after is not None:
            raise rd.fail(noise_after, f"not part of an lspci tree: {_preview(lines[noise_after - 1])}")
        if line == prev:
            dups.append((n, last_tree))
            continue
        prev, in_tree, brk, last_tree = line, True, False, n
        if kind == "start":
            rd.anchors.clear()
            rd.line(n, line, s_off, _Ctx(None, None, None, None, ("plain", n)))
        elif kind == "fragment":
            rd.anchors.clear()
            rd.line(n, line, p, _Ctx(None, None, None, None, ("fragment", n)))
        else:
            ctx = rd.continue_at(n, p, line[p], line.startswith("[", p + 2))
            if ctx is None:  # '+-[dddd:bb]-' below a cut-away '-+-': the label says where it is
                rd.line(n, line, p, _Ctx(None, None, None, None, ("fragment", n)))
            else:
                rd.line(n, line, p + 2, ctx)
    if not in_tree:
        raise InputError(f"{label}: no lspci -t tree found (expected a line like '-+-[0000:00]-+-00.0')")
    if not rd.devs:
        raise rd.fail(last_tree, "the tree lists no PCI functions")
    for n, first in dups:
        rd.notes.append(f"line {n} repeats line {first} exactly; ignored")
    if ignored:
        rd.notes.append(f"{len(ignored)} line(s) around the tree are not part of it (first at line {ignored[0]}); "
                        "ignored")
    return rd.snapshot()


def _preview(line: str) -> str:
    return repr(line.strip()[:40])
