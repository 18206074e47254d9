"""Decompression and tar headers read within bounds: no input of a few kilobytes becomes gigabytes in memory.

Every decompression gdrcheck does (a snapshot archive's gzip, bzip2 or xz stream; ``proc/config.gz``
inside one) goes through here and stops at a limit on the bytes it gives out, never holding more than one
block of output at a time. :func:`scan_tar` reads an archive's 512-byte headers itself, before Python's
``tarfile`` sees them: ``tarfile`` reads a GNU long-name or long-link header (``L``, ``K``) and a PAX header
(``x``, ``g``) whole, whatever size it claims, so a header's size is checked here before it is read, and the
members are counted from the headers before anything is unpacked.
"""

from __future__ import annotations

from gdrcheck.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO, Optional

BLOCK = 512
CHUNK = 1 << 16
#: the most a long-name, long-link or PAX header may hold (a path is at most 4 KiB on Linux)
MAX_HEADER_BYTES = 64 << 10

GZIP, BZIP2, XZ = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"


class TooLarge(InputError):
    """A stream that gives out more than its limit."""


def gunzip(data: bytes, limit: int) -> Optional[bytes]:
    """``data`` decompressed (gzip, each member of a concatenation), or None when it is not gzip or
    damaged; :class:`TooLarge` past ``limit`` bytes out. Linear in ``data``: each member is fed in pieces
    that grow from 64 bytes, so what a member leaves over is never more than twice the member (many empty
    members, each re-copying the rest, took minutes)."""
    import zlib

    view = memoryview(data)
    out = []
    total = pos = 0
    while True:
        pos = _past_zeros(data, pos)
        if pos >= len(data):
            return b"".join(out)
        d = zlib.decompressobj(wbits=31)
        step = 64
        while not d.eof:
            piece = view[pos:pos + step]
            if not piece:
                return None  # the member ends early
            try:
                part = d.decompress(piece, limit + 1 - total)
            except zlib.error:
                return None
            total += len(part)
            out.append(part)
            if total > limit or d.unconsumed_tail:
                raise TooLarge(f"decompresses to more than {limit >> 20} MiB")
            pos += len(piece) - len(d.unused_data)
            step = min(step * 2, CHUNK)


def _past_zeros(data, pos: int) -> int:
    """The first position at or after ``pos`` that is not a zero byte (padding between members)."""
    if not _NONZERO:
        import re

        _NONZERO.append(re.compile(b"[^\\x00]"))
    m = _NONZERO[0].search(data, pos)
    return m.start() if m else len(data)


_NONZERO: list = []


class Decompressed:
    """A read-only stream of ``raw``'s content, decompressed when it is gzip, bzip2 or xz (by its first
    bytes); :class:`TooLarge` once more than ``limit`` bytes have come out of it."""

    def __init__(self, raw: BinaryIO, limit: int, name: str = "input") -> None:
        self.raw, self.limit, self.name = raw, limit, name
        head = raw.read(6)
        # compressed bytes read and not yet given to the decompressor: self._src from self._off on. A stream is
        # fed in pieces that grow from 64 bytes (self._step), and what it leaves over is given back, so many
        # small streams cost what they hold, not a block each
        self._src, self._off, self._step = memoryview(head), 0, 64
        self.kind = "gzip" if head[:2] == GZIP else "bzip2" if head[:3] == BZIP2 else "xz" if head == XZ else None
        self._dec = self._new() if self.kind else None
        self._buf = b""  # output decompressed and not yet read, from _pos on
        self._pos = 0
        self._eof = False
        self.total = 0

    def _new(self):
        if self.kind == "gzip":
            import zlib

            return zlib.decompressobj(wbits=31)
        if self.kind == "bzip2":
            import bz2

            return bz2.BZ2Decompressor()
        import lzma

        return lzma.LZMADecompressor()

    def _piece(self) -> Optional[memoryview]:
        """The next piece of compressed input, None at the end of ``raw``."""
        if self._off >= len(self._src):
            data = self.raw.read(CHUNK)
            if not data:
                return None
            self._src, self._off = memoryview(data), 0
        piece = self._src[self._off:self._off + self._step]
        self._off += len(piece)
        self._step = min(self._step * 2, CHUNK)
        return piece

    def _more(self, want: int) -> bytes:
        """Up to ``want`` more bytes of output; b"" at the end."""
        if self._dec is None:
            data = bytes(self._src[self._off:]) + self.raw.read(max(0, want - (len(self._src) - self._off)))
            self._src, self._off = memoryview(b""), 0
            return data
        while not self._eof:
            dec = self._dec
            gz = self.kind == "gzip"
            piece = b"" if not gz and not dec.needs_input else self._piece()
            if piece is None:
                raise EOFError("compressed stream ends early")
            out = dec.decompress(piece, want)
            self._give_back(dec.unused_data if dec.eof else dec.unconsumed_tail if gz else b"")
            if dec.eof:
                self._restart()
            if out:
                return out
        return b""

    def _give_back(self, left: bytes) -> None:
        """Input the decompressor did not use: read again from the next piece on."""
        if len(left) <= self._off:
            self._off -= len(left)
        else:  # more than this block holds (a decompressor that kept input from an earlier block)
            self._src, self._off = memoryview(bytes(left) + bytes(self._src[self._off:])), 0

    def _restart(self) -> None:
        """After one compressed stream: another may follow (pigz, pbzip2, xz -T), or zero padding."""
        while True:
            pos = _past_zeros(self._src, self._off)
            if pos < len(self._src):
                self._off, self._step = pos, 64
                self._dec = self._new()
                return
            data = self.raw.read(CHUNK)
            if not data:
                self._eof = True
                self._dec = _Ended()
                return
            self._src, self._off = memoryview(data), 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.limit + 1 - self.total
        buf, pos = self._buf, self._pos
        if len(buf) - pos >= n:  # the common case: a header out of the block already decompressed
            data = buf[pos:pos + n]
            self._pos = pos + n
        else:
            parts = [buf[pos:]]
            have = len(parts[0])
            self._buf, self._pos = b"", 0
            while have < n:
                got = self._more(CHUNK)
                if not got:
                    break
                parts.append(got)
                have += len(got)
            data = b"".join(parts)
            if len(data) > n:
                self._buf, self._pos = data, n
                data = data[:n]
        self.total += len(data)
        if self.total > self.limit:
            raise TooLarge(f"{self.name}: archive unpacks to more than {self.limit >> 20} MiB")
        return data

    def skip(self, n: int) -> None:
        while n > 0:
            got = self.read(min(CHUNK, n))
            if not got:
                raise EOFError("archive ends inside a member")
            n -= len(got)

    def close(self) -> None:
        self.raw.close()


class _Ended:
    """The decompressor after the last stream."""

    eof = True
    needs_input = False
    unconsumed_tail = b""
    unused_data = b""

    def decompress(self, _data: bytes, _n: int = -1) -> bytes:
        return b""


def _number(field: bytes) -> int:
    """A header's numeric field: octal text, or base-256 (GNU) when its first byte has the high bit."""
    if field[:1] and field[0] & 0x80:
        n = int.from_bytes(field[1:], "big")
        return -n if field[0] == 0xFF else n
    text = field.split(b"\0", 1)[0].strip(b" \0")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise ValueError("bad number in a tar header") from None


def _pax_size(data: bytes) -> Optional[int]:
    """The ``size`` record of a PAX header, if it has one."""
    pos = 0
    size = None
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        try:
            length = int(data[pos:space])
        except ValueError:
            raise ValueError("damaged PAX header") from None
        if length <= 0:
            raise ValueError("damaged PAX header")
        key, _, value = data[space + 1:pos + length].partition(b"=")
        if key == b"size":
            try:
                size = int(value.rstrip(b"\n"))
            except ValueError:
                raise ValueError("damaged PAX header") from None
        pos += length
    return size


MAX_EXTENSIONS = 8  # in a row before one member (GNU tar writes at most a long name and a long link)
EXTENSIONS = b"LKxgX"  # headers that say something of the next member: long name, long link, PAX (local, global)


def scan_tar(stream: Decompressed, name: str, *, max_members: int, max_member_bytes: int,
             max_total_bytes: int) -> int:
    """Read every header of the tar archive in ``stream`` (data skipped unread), refusing it at the first
    header that claims too much; the number of members. Reading stops at the first limit passed, so an
    archive of a million entries is refused after its first ``max_members``."""
    members = total = run = 0
    global_size = None
    local_size = None
    while True:
        block = stream.read(BLOCK)
        if len(block) < BLOCK:
            if block.strip(b"\0"):
                raise EOFError("archive ends inside a header")
            return members
        if not block.strip(b"\0"):
            return members  # the end-of-archive blocks
        kind = block[156:157]
        size = _number(block[124:136])
        if size < 0:
            raise ValueError("negative size in a tar header")
        if kind and kind in EXTENSIONS:
            run += 1
            if run > MAX_EXTENSIONS:  # tarfile reads each of a run of them by recursion
                raise InputError(f"{name}: archive has {run} extended headers in a row")
            if size > MAX_HEADER_BYTES:
                what = "PAX" if kind in b"xgX" else "long-name"
                raise InputError(f"{name}: archive has a {what} header of {size} bytes (at most "
                                 f"{MAX_HEADER_BYTES >> 10} KiB)")
            data = stream.read(size)
            if len(data) < size:
                raise EOFError("archive ends inside a header")
            stream.skip(-size % BLOCK)
            if kind in b"xgX":
                pax = _pax_size(data)
                if pax is not None and kind == b"g":
                    global_size = pax
                elif pax is not None:
                    local_size = pax
            continue
        run = 0
        if kind == b"S" and block[482:483] not in (b"\0", b""):
            raise InputError(f"{name}: archive holds an old GNU sparse member (a snapshot never does)")
        members += 1
        if members > max_members:
            raise InputError(f"{name}: archive has more than {max_members} entries")
        if local_size is not None:
            size = local_size
        elif global_size is not None:
            size = global_size
        local_size = None
        if kind in (b"0", b"\0", b"7", b"S"):  # a regular file (contiguous, sparse)
            if size > max_member_bytes:
                raise InputError(f"{name}: archive member larger than {max_member_bytes >> 20} MiB")
            total += size
            if total > max_total_bytes:
                raise InputError(f"{name}: archive unpacks to more than {max_total_bytes >> 20} MiB")
        elif kind in b"12345" and size:  # links, devices, directories, FIFOs carry no data
            size = 0
        stream.skip(size + (-size % BLOCK))
