"""GDR208 held to NCCL on a real GPU node: under each NCCL_SOCKET_IFNAME, NCCL 2.28.9 either started
(``all_reduce ok``) or stopped at its bootstrap ("Bootstrap : no socket interface found", v2.28.9
``bootstrap.cc:114``); gdrcheck, reading that node's snapshot under the same setting, says GDR208 exactly when
NCCL stopped. The capture: fixtures/nccl-socket-ifname-h200-x1-vm/NOTE.md."""

from __future__ import annotations

import pytest
from support.cli_util import ROOT, call

CAPTURE = ROOT / "fixtures" / "nccl-socket-ifname-h200-x1-vm"
SETTINGS = {"nosuch0": "nosuch0", "lo": "lo", "not-lo": "^lo", "unset": ""}


@pytest.mark.parametrize("tag", sorted(SETTINGS))
def test_gdr208_exactly_where_nccl_did_not_start(tag):
    nccl = (CAPTURE / f"nccl-{tag}.txt").read_text()
    started = "all_reduce ok" in nccl and nccl.rstrip().endswith("rc=0")
    assert started or "Bootstrap : no socket interface found" in nccl
    out = call("check", "--from", CAPTURE / "snapshot.tar.gz", "--env", f"NCCL_SOCKET_IFNAME={SETTINGS[tag]}")
    assert ("GDR208" in out.stdout) is (not started), out.stdout
    assert out.returncode == (0 if started else 1)
    # what gdrcheck said on the node itself, under the same setting
    live = (CAPTURE / f"gdrcheck-check-{tag}.txt").read_text()
    assert live.startswith("gdrcheck PASS" if started else "gdrcheck FAIL on vm: GDR208")
