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
    damaged; :class:`TooLarge` past ``limit`` bytes out."""
    import zlib

    out = []
    total = 0
    while data:
        d = zlib.decompressobj(wbits=31)
        try:
            part = d.decompress(data, limit + 1 - total)
        except zlib.error:
            return None
        total += len(part)
        out.append(part)
        if total > limit or d.unconsumed_tail:
            raise TooLarge(f"decompresses to more than {limit >> 20} MiB")
        if not d.eof:
            return None
        data = d.unused_data.lstrip(b"\0")
    return b"".join(out)


class Decompressed:
    """A read-only stream of ``raw``'s content, decompressed when it is gzip, bzip2 or xz (by its first
    bytes); :class:`TooLarge` once more than ``limit`` bytes have come out of it."""

    def __init__(self, raw: BinaryIO, limit: int, name: str = "input") -> None:
        self.raw, self.limit, self.name = raw, limit, name
        head = raw.read(6)
        self._pending = head  # compressed bytes not yet given to the decompressor
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

    def _more(self, want: int) -> bytes:
        """Up to ``want`` more bytes of output; b"" at the end."""
        if self._dec is None:
            data = self._pending + self.raw.read(max(0, want - len(self._pending)))
            self._pending = b""
            return data
        while True:
            dec = self._dec
            if self.kind == "gzip":
                src = dec.unconsumed_tail or self._pending or self.raw.read(CHUNK)
                self._pending = b""
                if not src and not dec.unconsumed_tail:
                    if not dec.eof:
                        raise EOFError("compressed stream ends early")
                    return b""
                out = dec.decompress(src, want)
                if dec.eof:
                    self._restart(dec.unused_data)
            else:
                if dec.needs_input:
                    src = self._pending or self.raw.read(CHUNK)
                    self._pending = b""
                    if not src:
                        if not dec.eof:
                            raise EOFError("compressed stream ends early")
                        return b""
                else:
                    src = b""
                out = dec.decompress(src, want)
                if dec.eof:
                    self._restart(dec.unused_data)
            if out:
                return out
            if self._eof:
                return b""

    def _restart(self, rest: bytes) -> None:
        """After one compressed stream: another may follow (pigz, pbzip2, xz -T), or zero padding."""
        rest = rest + (self.raw.read(CHUNK) if not rest else b"")
        while rest and not rest.strip(b"\0"):
            rest = self.raw.read(CHUNK)
        if not rest:
            self._eof = True
            self._dec = _Ended()
            return
        self._pending = rest
        self._dec = self._new()

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
