"""The fingerprint's hashes come from CPython's own SHA-256 (no OpenSSL load): the same digests as hashlib's."""

import hashlib

from gdrcheck.documents.fingerprint import _digest


def test_digest_is_hashlib_sha256_of_the_joined_lines():
    lines = ["gpu0=10de:2330 PIX nic0", "nic0=15b3:1021 400Gb/s", "ünïcode line"]
    assert _digest(lines) == hashlib.sha256("\n".join(lines).encode()).hexdigest()
    assert _digest([]) == hashlib.sha256(b"").hexdigest()
