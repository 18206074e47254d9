"""Read ``lspci -vv`` / ``-vvv`` / ``-nnvvv`` (with or without ``-D``, ``-s`` excerpts, ``-xxx`` dumps).

What pciutils prints (``lspci.c`` ``show_device``/``show_verbose``, ``ls-caps.c``,
``ls-ecaps.c``): a device line ``[dddd:]bb:dd.f Class: Name`` (``-nn`` adds
``[cccc]`` after the class and ``[vvvv:dddd]`` after the name, ``(rev rr)``
and ``(prog-if pp [...])`` follow), then indented lines: ``NUMA node: N``,
``Bus: primary=.., secondary=.., subordinate=..`` on bridges,
``Region N: Memory at ADDR (64-bit, prefetchable) [size=64G]``,
``Capabilities: [off] Express (v2) Root Port|Upstream Port|Downstream Port|
Endpoint|Legacy Endpoint``, ``LnkCap: ... Speed 16GT/s, Width x16``,
``LnkSta: Speed 2.5GT/s (downgraded), Width x16``, ``Capabilities: [off vN]
Access Control Services`` with ``ACSCap:``/``ACSCtl:`` flags,
``Capabilities: [off vN] Physical Resizable BAR`` with ``BAR n: current size:
64GB, supported: ...``, ``Kernel driver in use: X``; ``Capabilities: <access
denied>`` when lspci ran without root. ``-xxx`` appends hex lines ``00: 10 de ..``.

What comes out per function is a :class:`VerboseFunction`. The config space
gdrcheck reads (ACS, Resizable BAR, the PCIe port type) is rebuilt from what
lspci decoded, at the offsets lspci printed: a ``-xxx`` dump is used as is; a
decoded listing gives 4096 bytes when lspci listed a PCI Express function's
capabilities (it ran as root, and so showed every extended capability there
is), 256 bytes for a conventional PCI function, and nothing when it listed none
(``<access denied>``, or an excerpt without them), so an ACS lspci could not
show stays unknown. An ``ACSCtl:`` line without its capability line (a ``grep`` of the
output) still gives ACS, placed at offset 0x100 with a note.

Text around the listings (shell prompts, ``[sudo] password`` lines, markdown
fences and labels, ``grep`` separators) is skipped.
"""

from __future__ import annotations

import re
import struct

from gdrcheck.collectors.bounds import MAX_FUNCTIONS, too_many_functions
from gdrcheck.errors import InputError
from gdrcheck.model import Bar, Link, norm_bdf
from gdrcheck.patterns import lazy_pattern
from gdrcheck.pcie.acs import ACS_BITS
from gdrcheck.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_H = "[0-9a-fA-F]"
_DEVLINE = lazy_pattern(rf"^((?:{_H}{{4,8}}:)?{_H}{{2}}:{_H}{{2}}\.[0-7]) ([^:]+?)(?: \[({_H}{{4}})\])?: (.*)$")
_IDS = lazy_pattern(rf"\[({_H}{{4}}):({_H}{{4}})\](?: \(rev ({_H}{{2}})\))?")
_REV = lazy_pattern(rf"\(rev ({_H}{{2}})\)")
_PROGIF = lazy_pattern(rf"\(prog-if ({_H}{{2}})")
_HEX = lazy_pattern(rf"^({_H}{{2,3}}): ((?:{_H}{{2}} ){{15}}{_H}{{2}})\s*$")
_REGION = lazy_pattern(r"^Region (\d): (?:Memory at (\S+)|I/O ports at (\S+)) ?(.*?)(?:\[size=(\d+)([KMGT]?)\])?\s*$")
_CAP = lazy_pattern(rf"^Capabilities: \[({_H}{{2,3}})(?: v(\d+))?\] (.*)$")
_SPEED = lazy_pattern(r"Speed ([\d.]+)GT/s")
_WIDTH = lazy_pattern(r"Width x(\d+)")
_NUMA = lazy_pattern(r"^NUMA node: (-?\d+)")
_BUS = lazy_pattern(rf"^Bus: primary=({_H}{{2}}), secondary=({_H}{{2}}), subordinate=({_H}{{2}})")
_REBAR = lazy_pattern(r"^BAR (\d): current size: (\d+)([KMGT]?B), supported: (.*)$")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_PORTS = (("Root Port", 4), ("Upstream Port", 5), ("Downstream Port", 6), ("Legacy Endpoint", 1),
          ("Root Complex Integrated Endpoint", 9), ("Endpoint", 0), ("PCI-Express to PCI/PCI-X Bridge", 7))
_CLASSES = {
    "Host bridge": 0x060000, "PCI bridge": 0x060400, "VGA compatible controller": 0x030000,
    "3D controller": 0x030200, "Display controller": 0x038000, "Ethernet controller": 0x020000,
    "Network controller": 0x028000, "Infiniband controller": 0x020700, "Non-Volatile memory controller": 0x010802,
    "Processing accelerators": 0x120000, "Bridge": 0x068000, "RAID bus controller": 0x010400,
    "Audio device": 0x040300, "USB controller": 0x0C0300, "SATA controller": 0x010600,
    "InfiniBand": 0x0C0600, "Serial bus controller": 0x0C8000, "System peripheral": 0x088000,
    "Encryption controller": 0x108000, "Signal processing controller": 0x118000,
    "Memory controller": 0x058000, "Mass storage controller": 0x018000, "ISA bridge": 0x060100,
    "SMBus": 0x0C0500, "Multimedia controller": 0x048000, "Non-Essential Instrumentation": 0x130000,
}
# pci.ids vendor names as lspci prints them without -n: the ids gdrcheck's kinds need
_VENDOR_NAMES = (
    ("NVIDIA Corporation", 0x10DE), ("Mellanox Technologies", 0x15B3),
    ("Advanced Micro Devices, Inc. [AMD/ATI]", 0x1002),
    ("Advanced Micro Devices, Inc. [AMD]", 0x1022), ("Intel Corporation", 0x8086), ("Broadcom / LSI", 0x1000),
    ("Broadcom Inc. and subsidiaries", 0x14E4), ("PLX Technology, Inc.", 0x10B5), ("Amazon.com, Inc.", 0x1D0F),
    ("Samsung Electronics Co Ltd", 0x144D), ("ASPEED Technology, Inc.", 0x1A03),
)
_PROMPT = lazy_pattern(r"^\s*(?:\$ |# |sh-[\d.]+[#$] |\[sudo\]|\S+@\S+[:~][^$#]*[$#] |```)")

_SNIFF_LINES = 400


@record
class VerboseFunction:
    """What one ``lspci -v*`` block says about a function (None: not shown)."""

    bdf: str
    line: int
    domain_shown: bool
    class_code: Optional[int] = None
    class_name: Optional[str] = None
    name: Optional[str] = None
    vendor: Optional[int] = None
    device: Optional[int] = None
    revision: Optional[int] = None
    numa_node: Optional[int] = None
    driver: Optional[str] = None
    bars: list[Bar] = field(default_factory=list)
    link: Link = Link()
    secondary_bus: Optional[int] = None
    subordinate_bus: Optional[int] = None
    port_type: Optional[int] = None
    pcie_cap: Optional[int] = None
    std_caps: bool = False
    ext_caps: list[tuple[int, int, str]] = field(default_factory=list)  # (offset, version, name)
    access_denied: bool = False
    acs_cap: Optional[int] = None
    acs_ctrl: Optional[int] = None
    rebar: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)  # bar -> (current, supported)
    hexdump: dict[int, bytes] = field(default_factory=dict)
    config: Optional[bytes] = None
    config_note: str = ""


class VerboseListing(list):
    """The functions of one ``lspci -v*`` paste, in order, with notes on what was read how."""

    def __init__(self, fns) -> None:
        super().__init__(fns)
        self.notes: list[str] = []


# detail labels lspci prints, recognisable at column 0 when a paste lost its indentation
_FLAT = lazy_pattern(r"^(Subsystem|Physical Slot|Control|Status|Latency|Interrupt|NUMA node|IOMMU group|Bus|"
                   r"Region \d|Expansion ROM|Capabilities|Kernel driver in use|Kernel modules|Memory behind bridge|"
                   r"I/O behind bridge|Prefetchable memory behind bridge|Secondary status|BridgeCtl|DevCap2?|DevCtl2?|"
                   r"DevSta|LnkCap2?|LnkCtl[23]?|LnkSta2?|SltCap|SltCtl|SltSta|RootCap|RootCtl|RootSta|ACSCap|ACSCtl|"
                   r"BAR \d|Flags|Address|Masking|Pending|Vector table|PBA|Caps|Arb|Ctrl|"
                   r"UESta|UEMsk|UESvrt|CESta|CEMsk|"
                   r"AERCap|HeaderLog|ARICap|ARICtl|IOVCap|IOVCtl|IOVSta|Initial VFs|VF offset|VF Migration|"
                   r"Page size|L1SubCap|L1SubCtl\d|LaneErrStat|Device Serial Number|Product Name|Read-only fields|"
                   r"End)\b[^\n]*:?")
_SUB = lazy_pattern(r"^(DevCap|DevCtl|DevSta|LnkCap|LnkCtl|LnkSta|SltCap|SltCtl|SltSta|RootCap|RootCtl|RootSta|"
                  r"ACSCap|ACSCtl|BAR \d|Flags|Address|Masking|Pending|Vector table|PBA|Caps|Arb|Ctrl|UE|CE|AER|"
                  r"HeaderLog|ARI|IOV|Initial VFs|VF |Page size|L1Sub|LaneErrStat)")


def looks_like_lspci_verbose(text: str) -> bool:
    """True when a device line is followed by indented detail lines within the first lines."""
    lines = text[:256 << 10].lstrip("\ufeff").split("\n")[:_SNIFF_LINES]
    body = [ln.rstrip() for ln in lines if ln.strip() and not _PROMPT.match(ln)]
    if len(body) >= 2 and all(_DEVLINE.match(ln) for ln in body):  # plain lspci: one line per function
        return True
    for i, ln in enumerate(lines):
        if _DEVLINE.match(ln.rstrip()):
            for nxt in lines[i + 1:i + 3]:
                if nxt[:1] in (" ", "\t") and re.match(r"^\s+[A-Z][A-Za-z /-]+:", nxt):
                    return True
                if _HEX.match(nxt.strip()) and nxt.startswith("00: "):  # lspci -x / -xxx
                    return True
    return False


def looks_like_acsctl_grep(text: str) -> bool:
    """``lspci -vvv | grep ACSCtl``: only ACSCtl lines, no device lines to say whose."""
    body = [x.strip() for x in text.split("\n") if x.strip() and not _PROMPT.match(x)]
    return bool(body) and all(x.startswith("ACSCtl:") for x in body)


def parse_acsctl_grep(text: str, label: str) -> tuple[int, ...]:
    """``sudo lspci -vvv | grep ACSCtl``: each line's ACS Control bits, whose function the paste does not say."""
    from gdrcheck.errors import InputError

    out = []
    for n, x in enumerate(text.lstrip("\ufeff").split("\n"), 1):
        if not x.strip() or _PROMPT.match(x):
            continue
        bits = _flags(x)
        if bits is None:
            raise InputError(f"{label}: line {n}: an ACSCtl line without its flags (SrcValid-, ReqRedir-, ...)")
        out.append(bits)
    return tuple(out)


def _size(num: str, unit: str) -> int:
    return int(num) * _UNITS[unit[:1].upper() if unit else ""]


def _flags(text: str) -> Optional[int]:
    bits = 0
    found = 0
    for bit, _k, lbl, _f in ACS_BITS:
        m = re.search(rf"\b{lbl}([+-])", text)
        if m:
            found += 1
            if m.group(1) == "+":
                bits |= bit
    return bits if found else None


def _speed_width(text: str) -> tuple[Optional[float], Optional[int]]:
    s = _SPEED.search(text)
    w = _WIDTH.search(text)
    return (float(s.group(1)) if s else None), (int(w.group(1)) if w else None)


def _device_line(m: re.Match, n: int) -> VerboseFunction:
    raw_bdf, cls_name, cls_hex, rest = m.group(1), m.group(2).strip(), m.group(3), m.group(4)
    fn = VerboseFunction(bdf=norm_bdf(raw_bdf), line=n, domain_shown=raw_bdf.count(":") == 2)
    fn.class_name = cls_name
    prog = _PROGIF.search(rest)
    if cls_hex:
        fn.class_code = (int(cls_hex, 16) << 8) | (int(prog.group(1), 16) if prog else 0)
    elif cls_name in _CLASSES:
        fn.class_code = _CLASSES[cls_name] | (int(prog.group(1), 16) if prog else 0)
    ids = _IDS.search(rest)
    if ids:
        fn.vendor, fn.device = int(ids.group(1), 16), int(ids.group(2), 16)
    else:
        fn.vendor = next((v for vname, v in _VENDOR_NAMES if rest.startswith(vname)), None)
    rev = _REV.search(rest)
    if rev:
        fn.revision = int(rev.group(1), 16)
    name = re.sub(r"\s*\((?:rev|prog-if) [^)]*\)+", "", rest).strip()
    fn.name = f"{name}" if name else None
    return fn


def _detail(fn: VerboseFunction, s: str, top: bool) -> None:
    """One indented line; ``top`` when it sits at the block's first indent (not inside a capability)."""
    if not top and s.startswith(("NUMA node:", "Kernel driver in use:", "Bus: primary=", "Region ",
                                 "Capabilities:")):
        return  # an SR-IOV VF BAR or a line of a capability's own listing
    if s.startswith("NUMA node:"):
        m = _NUMA.match(s)
        if m and int(m.group(1)) >= 0:
            fn.numa_node = int(m.group(1))
        return
    if s.startswith("Kernel driver in use:"):
        fn.driver = s.split(":", 1)[1].strip() or None
        return
    if s.startswith("Bus: primary="):
        m = _BUS.match(s)
        if m:
            fn.secondary_bus, fn.subordinate_bus = int(m.group(2), 16), int(m.group(3), 16)
        return
    if s.startswith("Region "):
        _region(fn, s)
        return
    if s.startswith("Capabilities:"):
        _capability(fn, s)
        return
    if s.startswith("LnkCap:"):
        sp, w = _speed_width(s)
        fn.link = Link(fn.link.cur_speed, fn.link.cur_width, sp, w)
        return
    if s.startswith("LnkSta:"):
        sp, w = _speed_width(s)
        fn.link = Link(sp, w, fn.link.max_speed, fn.link.max_width)
        return
    if s.startswith("ACSCap:"):
        fn.acs_cap = _flags(s)
        return
    if s.startswith("ACSCtl:"):
        fn.acs_ctrl = _flags(s)
        return
    m = _REBAR.match(s)
    if m:
        sup = tuple(_size(x[:-2] if x[-2:-1].isalpha() else x[:-1], x[-2:] if x[-2:-1].isalpha() else "")
                    for x in m.group(4).split() if re.fullmatch(r"\d+[KMGT]?B", x))
        fn.rebar[int(m.group(1))] = (_size(m.group(2), m.group(3)), sup)


def _region(fn: VerboseFunction, s: str) -> None:
    """``Region N: Memory at ADDR (64-bit, prefetchable) [size=32G]``: one BAR."""
    m = _REGION.match(s)
    if not m:
        return
    idx = int(m.group(1))
    addr = m.group(2) or m.group(3) or ""
    flags = m.group(4) or ""
    unset = addr.startswith("<")
    start = int(addr, 16) if re.fullmatch(r"[0-9a-fA-F]+", addr) else 0
    size = _size(m.group(5), m.group(6)) if m.group(5) else 0
    if any(b.index == idx for b in fn.bars):
        return  # an SR-IOV VF BAR whose indentation was lost
    fn.bars.append(Bar(index=idx, start=start, size=size, is_64bit="64-bit" in flags,
                       prefetchable=", prefetchable" in flags or "(prefetchable" in flags, unset=unset))


def _capability(fn: VerboseFunction, s: str) -> None:
    """``Capabilities: [OFF vN] WHAT``: a standard or extended capability, or ``<access denied>``."""
    if "<access denied>" in s:
        fn.access_denied = True
        return
    m = _CAP.match(s)
    if not m:
        return
    off = int(m.group(1), 16)
    what = m.group(3)
    if off >= 0x100:
        fn.ext_caps.append((off, int(m.group(2) or 1), what))
    else:
        fn.std_caps = True
        if what.startswith("Express"):
            fn.pcie_cap = off
            fn.port_type = next((t for name, t in _PORTS if name in what), None)


def _config(fn: VerboseFunction) -> None:
    """The config space gdrcheck reads, from a -xxx dump or rebuilt from what lspci decoded."""
    if fn.hexdump:
        fn.config, fn.config_note = _from_hexdump(fn.hexdump), "lspci -xxx dump"
        return
    ext = fn.ext_caps and not fn.access_denied
    if fn.acs_ctrl is None and not ext and not (fn.std_caps and fn.pcie_cap is not None):
        return
    # lspci lists capabilities only when it could read past byte 64 (root); a PCI Express function then
    # shows every extended capability it has, so none shown means none there
    size = 4096 if (ext or fn.acs_ctrl is not None or (fn.pcie_cap is not None and not fn.access_denied)) else 256
    buf = _header(fn, size)
    if size < 4096:
        fn.config, fn.config_note = bytes(buf), "rebuilt from lspci -vvv (no extended capabilities shown)"
        return
    _write_ext_caps(buf, _ext_caps(fn), size)
    fn.config = bytes(buf)
    fn.config_note = fn.config_note or "rebuilt from lspci -vvv"


def _from_hexdump(hexdump: dict[int, bytes]) -> bytes:
    """The config space an ``lspci -xxx`` dump shows (64, 256 or 4096 bytes; what it leaves out reads as ff)."""
    size = 4096 if max(hexdump) >= 0x100 else (256 if max(hexdump) >= 0x40 else 64)
    buf = bytearray(b"\xff" * size) if size > 64 else bytearray(size)
    for off, row in hexdump.items():
        if off + 16 <= size:
            buf[off:off + 16] = row
    return bytes(buf)


def _header(fn: VerboseFunction, size: int) -> bytearray:
    """``size`` bytes of config space with the header lspci decoded: ids, class, revision, header type, and
    the PCI Express capability with its port type."""
    buf = bytearray(size)
    struct.pack_into("<HH", buf, 0, fn.vendor if fn.vendor is not None else 0xFFFF,
                     fn.device if fn.device is not None else 0xFFFF)
    if fn.class_code is not None:
        buf[0x09], buf[0x0A], buf[0x0B] = fn.class_code & 0xFF, (fn.class_code >> 8) & 0xFF, fn.class_code >> 16
    if fn.revision is not None:
        buf[0x08] = fn.revision
    buf[0x0E] = 0x01 if fn.secondary_bus is not None else 0x00
    if fn.pcie_cap is not None and fn.pcie_cap + 4 <= size:
        buf[0x06] |= 0x10
        buf[0x34] = fn.pcie_cap
        buf[fn.pcie_cap] = 0x10
        buf[fn.pcie_cap + 2] = ((fn.port_type or 0) << 4) | 0x2
    return buf


def _ext_caps(fn: VerboseFunction) -> list[tuple[int, int, int, bytes]]:
    """(offset, id, version, body) of each extended capability, in offset order, from 0x100: ACS and
    Resizable BAR with what lspci decoded of them, the others as their header only."""
    caps: list[tuple[int, int, int, bytes]] = []
    acs_at = None
    for off, ver, what in fn.ext_caps:
        if what.startswith("Access Control Services") and fn.acs_ctrl is not None:
            caps.append((off, 0x000D, ver, struct.pack("<HH", fn.acs_cap or 0, fn.acs_ctrl)))
            acs_at = off
        elif "Resizable BAR" in what and "Virtual" not in what and fn.rebar:
            caps.append((off, 0x0015, ver, _rebar_body(fn.rebar)))
        else:
            caps.append((off, 0x0000, ver, b""))
    if fn.acs_ctrl is not None and acs_at is None:
        used = {c[0] for c in caps}
        off = next(o for o in range(0x100, 0x1000, 8) if o not in used)
        caps.append((off, 0x000D, 1, struct.pack("<HH", fn.acs_cap or 0, fn.acs_ctrl)))
        fn.config_note = (f"ACSCtl shown without its capability line; placed at offset 0x{off:x}")
    caps.sort()
    if caps and caps[0][0] != 0x100:
        caps.insert(0, (0x100, 0x0000, 0, b""))
    return caps


def _rebar_body(rebar: dict[int, tuple[int, tuple[int, ...]]]) -> bytes:
    """The Resizable BAR capability's registers: per BAR, its supported sizes and its control."""
    body = bytearray()
    entries = sorted(rebar.items())
    for i, (bar, (cur, sup)) in enumerate(entries):
        mask = 0
        for sz in sup:
            n = (sz >> 20).bit_length() - 1
            if sz >= 1 << 20 and 0 <= n < 44:
                mask |= 1 << n
        cur_n = max((cur >> 20).bit_length() - 1, 0)
        ctrl = bar | (cur_n << 8) | (((mask >> 28) & 0xFFFF) << 16)
        if i == 0:
            ctrl |= (len(entries) & 7) << 5
        body += struct.pack("<II", (mask & 0x0FFFFFFF) << 4, ctrl)
    return bytes(body)


def _write_ext_caps(buf: bytearray, caps: list[tuple[int, int, int, bytes]], size: int) -> None:
    """Each capability's header (id, version, next) and body at its offset."""
    for i, (off, cid, ver, body) in enumerate(caps):
        nxt = caps[i + 1][0] if i + 1 < len(caps) else 0
        if off + 4 + len(body) > size:
            continue
        struct.pack_into("<I", buf, off, (cid & 0xFFFF) | ((ver & 0xF) << 16) | (nxt << 20))
        buf[off + 4:off + 4 + len(body)] = body


def parse_lspci_verbose(text: str, label: str) -> VerboseListing:
    """Every function block in the text, in order; raise :class:`InputError` when there is none."""
    if not text.strip():
        raise InputError(f"{label}: empty input")
    out, flat, ignored = _blocks(text, label)
    if not out:
        raise InputError(f"{label}: no lspci -vvv device found (expected a line like '01:00.0 VGA compatible "
                         "controller: ...' followed by indented details)")
    # 'lspci -vvv | grep -E "^[0-9a-f]|ACSCtl"': device lines and ACSCtl lines only. An ACSCtl line shows lspci
    # read extended config space (root), so a function listed without one has no ACS capability.
    grep_form = any(fn.acs_ctrl is not None for fn in out) and not any(
        fn.std_caps or fn.ext_caps or fn.access_denied or fn.bars or fn.link != Link() for fn in out)
    for fn in out:
        if grep_form and fn.acs_ctrl is None:
            fn.config = bytes(4096)
            fn.config_note = "no ACSCtl line under a grep of lspci -vvv that shows ACSCtl: no ACS capability"
            continue
        _config(fn)
    listing = VerboseListing(out)
    if flat:
        listing.notes.append(f"{len(flat)} detail line(s) without indentation (first at line {flat[0]}) read by "
                             "their labels")
    if ignored:
        listing.notes.append(f"{len(ignored)} line(s) outside the listings (prompts, fences, labels; first at line "
                             f"{ignored[0]}) ignored")
    return listing


def _blocks(text: str, label: str) -> tuple[list[VerboseFunction], list[int], list[int]]:
    """(each function's block, the numbers of detail lines read without indentation, of lines ignored)."""
    out: list[VerboseFunction] = []
    by_bdf: dict[str, VerboseFunction] = {}
    cur: Optional[VerboseFunction] = None
    cur_indent: Optional[int] = None
    flat: list[int] = []
    ignored: list[int] = []
    for n, raw in enumerate(text.lstrip("\ufeff").split("\n"), 1):
        line = raw.rstrip("\r\n").rstrip()
        if not line.strip():
            continue
        m = _DEVLINE.match(line)
        if m:
            cur = _new_block(m, n, line, label, by_bdf, out)
            cur_indent = None
            continue
        h = _HEX.match(line.strip()) if cur is not None else None
        if h:
            cur.hexdump[int(h.group(1), 16)] = bytes(int(x, 16) for x in h.group(2).split())
            continue
        if line[:1] in (" ", "\t") and cur is not None:
            indent = len(line.expandtabs(8)) - len(line.lstrip())
            if cur_indent is None:
                cur_indent = indent
            _detail(cur, line.strip(), indent <= cur_indent)
            continue
        if cur is not None and _FLAT.match(line):
            # indentation lost (a paste through a chat or a ticket form): the labels still say what they are
            flat.append(n)
            _detail(cur, line.strip(), not _SUB.match(line))
            continue
        ignored.append(n)
        if _PROMPT.match(line) or not flat:
            cur = None  # a prompt or fence, or text after an indented listing: the block ended
    return out, flat, ignored


def _new_block(m: re.Match, n: int, line: str, label: str, by_bdf: dict[str, VerboseFunction],
               out: list[VerboseFunction]) -> VerboseFunction:
    """A device line: the function whose block it starts (a second listing of one address is refused)."""
    try:
        cur = _device_line(m, n)
    except ValueError:
        raise InputError(f"{label}: line {n}: {line[:40]!r} is not a PCI address") from None
    prev = by_bdf.get(cur.bdf)
    if prev is not None:
        raise InputError(f"{label}: line {n}: {cur.bdf} is already listed at line {prev.line}")
    by_bdf[cur.bdf] = cur
    out.append(cur)
    if len(out) > MAX_FUNCTIONS:
        raise too_many_functions(label, len(out))
    return cur
