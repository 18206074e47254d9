"""Redaction: what ``--redact`` removes from a report, a page or a snapshot archive.

Host name, serial numbers, UUIDs, MAC addresses, IP addresses (IPv4 and IPv6: a link-local IPv6
address carries its interface's MAC) and the user name in a home directory's path (``/home/NAME``,
``/Users/NAME``, in a file and in the archive's names alike) are replaced by fixed stand-ins, so a redacted
output keeps its shape (and a redacted snapshot replays) without saying which machine it came from. The
loopback and unspecified addresses (``127.0.0.1``, ``::1``, ``0.0.0.0``, ``::``) and net masks stay.
"""

from __future__ import annotations

import re

from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_UUID = lazy_pattern(r"\b(GPU-|MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_MAC = lazy_pattern(r"\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}\b")
_SERIAL_LINE = lazy_pattern(r"(?im)^(\s*(?:Serial Number|Board Serial|Serial)\s*:\s*)(\S.*)$")
_SERIAL_XML = lazy_pattern(r"(?i)(<serial>)([^<]*)(</serial>)")
_SERIAL_JSON = lazy_pattern(r'(?i)("serial"\s*:\s*)"[^"]*"')
_SERIAL_FILES = ("product_serial", "board_serial", "chassis_serial", "product_uuid")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = lazy_pattern(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)")
_IPV6 = lazy_pattern(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?<=:))(?:%[\w.-]+)?(?![\w:])")
_HOME = lazy_pattern(r"(?<![\w.-])(/home/|/Users/)([^/\s\"'<>:;,=|\\]+)")
IPV4_STANDIN = "192.0.2.1"  # RFC 5737's documentation range
IPV6_STANDIN = "2001:db8::1"  # RFC 3849's


def _ipv4(m) -> str:
    ip = m.group(0)
    return ip if ip.startswith(("127.", "255.")) or ip == "0.0.0.0" else IPV4_STANDIN


def _ipv6(m) -> str:
    ip = m.group(0)
    core = ip.split("%", 1)[0]
    if "::" not in core and core.count(":") != 7:
        return ip  # a time (12:34:56), a PCI address (0000:3b:00), a MAC (already replaced): not IPv6
    if core in ("::1", "::") or core.count("::") > 1:
        return ip
    return "fe80::1" if core.lower().startswith("fe80:") else IPV6_STANDIN


def redact_path(path: str) -> str:
    """A path with the user name of a home directory replaced (``/home/alice/x`` -> ``/home/user/x``)."""
    return _HOME.sub(lambda m: m.group(1) + "user", path)


def redact_text(text: str, host: Optional[str]) -> str:
    """UUIDs, MAC addresses and serial numbers (and the host name, when given) replaced in a text."""
    text = _UUID.sub(lambda m: (m.group(1) or "") + "00000000-0000-0000-0000-000000000000", text)
    text = _MAC.sub("00:00:00:00:00:00", text)
    text = _SERIAL_LINE.sub(lambda m: m.group(1) + "REDACTED", text)
    text = _SERIAL_XML.sub(r"\1REDACTED\3", text)
    text = _SERIAL_JSON.sub(r'\1"REDACTED"', text)
    text = _IPV4.sub(_ipv4, text)
    text = _IPV6.sub(_ipv6, text)
    text = redact_path(text)
    if host:
        text = re.sub(rf"\b{re.escape(host)}\b", "redacted-host", text)
    return text


def redact_file(path: str, data: bytes, host: Optional[str]) -> bytes:
    """A captured file as ``snapshot --redact`` stores it: identity files emptied, text redacted."""
    base = path.rsplit("/", 1)[-1]
    if path == "/proc/sys/kernel/hostname":
        return b"redacted-host\n"
    if base in _SERIAL_FILES or (base == "serial" and "/nvme" in path) or (base == "address" and "/net/" in path):
        return b"REDACTED\n"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    if path == "/proc/net/if_inet6":
        text = _IF_INET6.sub(_if_inet6, text)
    return redact_text(text, host).encode("utf-8")


_IF_INET6 = lazy_pattern(r"(?m)^[0-9a-fA-F]{32}(?= )")


def _if_inet6(m) -> str:
    """An address of ``/proc/net/if_inet6`` (32 hex digits, no colons), as :func:`_ipv6` replaces one."""
    a = m.group(0).lower()
    if a in ("0" * 31 + "1", "0" * 32):
        return a
    return "fe80" + "0" * 27 + "1" if a.startswith("fe80") else "20010db8" + "0" * 23 + "1"
