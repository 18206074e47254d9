"""The fingerprint's hashes come from CPython's own SHA-256 (no OpenSSL load): the same digests as hashlib's."""

import hashlib

import pytest

from gdrcheck.documents.fingerprint import _digest


def test_digest_is_hashlib_sha256_of_the_joined_lines():
    lines = ["gpu0=10de:2330 PIX nic0", "nic0=15b3:1021 400Gb/s", "ünïcode line"]
    assert _digest(lines) == hashlib.sha256("\n".join(lines).encode()).hexdigest()
    assert _digest([]) == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize(("case", "acs"), [("healthy-gdr-node", "off"), ("acs-redirect-on-switch", "redirect"),
                                           ("config-space-not-root", "unknown")])
def test_the_one_line_is_made_from_the_facts_not_read_back_from_the_fingerprint_lines(tmp_path, case, acs):
    """``fingerprint --one-line`` comes from the host facts and the bridges' ACS states the fingerprint kept: lines
    reworded (or emptied) after the fact change nothing in it."""
    from builders.scenarios import scenario
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.documents.fingerprint import fingerprint, one_line
    from gdrcheck.rules.engine import evaluate

    evaluation = evaluate(load_facts((str(scenario(tmp_path, case)),)))
    fp = fingerprint(evaluation)
    line = one_line(evaluation, fp)
    assert f" acs={acs} " in line and " driver=580.95.05" in line, line
    fp.shape_lines[:] = [ln.replace("=", ": ") for ln in fp.shape_lines]
    assert one_line(evaluation, fp) == line
