"""Redaction: what ``--redact`` removes from a report, a page or a snapshot archive.

Host name, serial numbers, UUIDs and MAC addresses are replaced by fixed stand-ins, so a redacted
output keeps its shape (and a redacted snapshot replays) without saying which machine it came from.
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


def redact_text(text: str, host: Optional[str]) -> str:
    """UUIDs, MAC addresses and serial numbers (and the host name, when given) replaced in a text."""
    text = _UUID.sub(lambda m: (m.group(1) or "") + "00000000-0000-0000-0000-000000000000", text)
    text = _MAC.sub("00:00:00:00:00:00", text)
    text = _SERIAL_LINE.sub(lambda m: m.group(1) + "REDACTED", text)
    text = _SERIAL_XML.sub(r"\1REDACTED\3", text)
    text = _SERIAL_JSON.sub(r'\1"REDACTED"', text)
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
    return redact_text(text, host).encode("utf-8")
