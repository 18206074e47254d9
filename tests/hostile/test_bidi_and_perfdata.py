"""Bidirectional controls and Nagios' ``|`` from an input: shown, never obeyed.

A setting or a name may carry U+202E RIGHT-TO-LEFT OVERRIDE (and its kin), which makes a terminal or a page
show text in another order than it is; every text output shows them as ``?``, as other control characters.
In Nagios' output a ``|`` starts the performance data: one from the input (a setting's value, a message that
quotes it) could add figures of its own; only gdrcheck's own ``|`` is there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.nccl_nodes import build

BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
TEXT_OUTPUTS = (
    ("pairs",), ("topology",), ("topology", "--all"), ("topology", "--format", "dot"), ("fingerprint",),
    ("fingerprint", "--explain"), ("check",), ("check", "--format", "nhc"), ("check", "--format", "npd"),
    ("check", "--format", "nagios"), ("check", "--format", "prometheus"), ("bar1",),
    ("report", "-o", "-"),
)
SETTINGS = {"NCCL_P2P_LEVEL": "PIX\u202e\u2066LXN", "NCCL_SOCKET_IFNAME": "=eth9|ok=1;;;0 forged=7",
            "NCCL_IB_HCA": "mlx5_0\u200f|x=1", "NCCL_NET_GDR_LEVEL": "\u061cSYS"}


def _node(root: Path) -> Path:
    build(root, devices=[("gpu", "0000:03:00.0", 0, "switch"), ("nic", "0000:04:00.0", 0, "switch"),
                         ("gpu", "0000:83:00.0", 1, "root")],
          files={"/gdrcheck/env.json": json.dumps(SETTINGS), "/etc/nccl.conf": ""})
    return root


def _gdrcheck(argv, capsys):
    from gdrcheck.cli.entry import main

    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


# the node has no peer-memory or IOMMU facts: pairs, check and report are unknown (3; NPD says 2 for it), topology,
# fingerprint and bar1 pass
_STATUS = {"topology": 0, "fingerprint": 0, "bar1": 0}


def test_no_text_output_carries_a_bidi_control(tmp_path, capsys):
    root = _node(tmp_path / "node")
    for argv in TEXT_OUTPUTS:
        code, out, err = _gdrcheck([*argv, "--from", str(root)], capsys)
        want = 2 if "npd" in argv else _STATUS.get(argv[0], 3)
        assert code == want, (argv, code, err)
        bad = BIDI.search(out)
        assert bad is None, (argv, repr(out[max(0, bad.start() - 60):bad.end() + 60]))
    code, out, _ = _gdrcheck(["pairs", "--json", "--from", str(root)], capsys)
    assert "\\u202e" in out  # JSON keeps the string exactly, escaped


def test_nagios_has_one_pipe_its_own(tmp_path):
    """A finding's message and the headline carry what the input said (a name, a setting's value)."""
    from gdrcheck.collectors.clip import printable
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.documents.node import node_documents
    from gdrcheck.render.adapters import nagios
    from gdrcheck.rules.engine import evaluate

    docs = node_documents(evaluate(load_facts(str(_node(tmp_path / "node")))), describe_input=True)
    pairs = json.loads(json.dumps(docs["pairs"]))
    warned = [f for f in pairs["findings"] if f["severity"] in ("error", "warning")]
    assert warned
    for f in warned:
        f["message"] += " NCCL_SOCKET_IFNAME=eth0|forged=7;;;0"
        f["subject"] = [s + "|forged=8" for s in f["subject"]]
    pairs["summary_line"] += " |forged=9"
    out, _ = nagios(printable(pairs))
    lines = out.splitlines()
    assert lines[0].count("|") == 1 and "forged" not in lines[0].split("|", 1)[1], lines[0]
    assert all("|" not in ln for ln in lines[1:]), [ln for ln in lines[1:] if "|" in ln]
    assert "eth0/forged=7" in out


def test_nagios_usage_line_has_no_pipe(tmp_path, capsys):
    code, out, err = _gdrcheck(["check", "--format", "nagios", "--from", str(tmp_path / "a|b=1")], capsys)
    assert code == 3 or code == 2, (code, out, err)
    assert out.count("|") == 0, out
