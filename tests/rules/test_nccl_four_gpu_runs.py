"""gdrcheck's ``pairs[].nccl.p2p`` held to NCCL itself, pair by pair, on four NVSwitch H200s
(fixtures/nccl-runs-4gpu-vm: PyTorch's NCCL 2.28.9 under 18 settings, one process per GPU, every pair connected).

Each run's settings are given to gdrcheck the way the node would show them: its environment as the snapshot's
captured environment (``/gdrcheck/env.json``, which gdrcheck reads instead of its own for a snapshot), the
settings file and topology file a run named at their paths in the snapshot. NCCL's answer per pair is its
channel lines: ``via P2P/...`` (P2P) against ``via SHM/...`` or ``via NET/...`` (not P2P), v2.28.9
``src/transport/p2p.cc`` and ``shm.cc``. The table is in the fixture's NOTE.md.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.rules.base import Options
from gdrcheck.rules.engine import evaluate

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-runs-4gpu-vm"
NAMES = sorted(p.parent.name for p in RUNS.glob("*/nccl.log"))
CONF_AT = "/etc/nccl-run.conf"  # where a run's settings file is put in the snapshot
TOPO_AT = "/etc/nccl-run-topo.xml"

_INIT = re.compile(r"\brank (\d+) nranks \d+ cudaDev \d+ (?:nvmlDev \d+ )?busId ([0-9a-fA-F]+)\b")
_CHANNEL = re.compile(r"Channel \d+(?:/\d+)? : (\d+)\[\d+\] -> (\d+)\[\d+\](?: \[(?:send|receive)\])? via (\w+)")


def bus_id(hex_id: str) -> str:
    """NCCL's int64 busId (the bus id string's hex digits) -> ``dddd:bb:dd.f``."""
    s = hex_id.rjust(9, "0")  # domain 4, bus 2, device 2, function 1: "0000:00:06.0" is 0x60
    return f"{s[0:4]}:{s[4:6]}:{s[6:8]}.{s[8]}".lower()


def nccl_transports(log: str) -> dict:
    """{(bdf a, bdf b) sorted: {"P2P", "SHM", "NET"} seen between them}."""
    ranks = {int(r): bus_id(b) for r, b in _INIT.findall(log)}
    out: dict = {}
    for a, b, how in _CHANNEL.findall(log):
        key = tuple(sorted((ranks[int(a)], ranks[int(b)])))
        out.setdefault(key, set()).add(how)
    return out


def settings_of(run: Path) -> dict:
    env = {}
    for line in (run / "env.txt").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    root = tmp_path_factory.mktemp("four-gpu-node")
    with tarfile.open(RUNS / "snapshot.tar.gz") as t:
        t.extractall(root, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return root


def gdrcheck_p2p(root: Path, run: Path) -> dict:
    """{(a, b): pair's nccl} with the run's settings applied to the snapshot."""
    env = json.loads((root / "gdrcheck/env.json").read_text()) if not (root / ".env.json").exists() else \
        json.loads((root / ".env.json").read_text())
    if not (root / ".env.json").exists():
        (root / ".env.json").write_text(json.dumps(env))
    env = dict(env)
    for k, v in settings_of(run).items():
        if v == "@conf":
            (root / CONF_AT.lstrip("/")).write_text((run / "nccl.conf").read_text())
            v = CONF_AT
        elif v.startswith("@"):
            (root / TOPO_AT.lstrip("/")).write_text((run / "topo.xml").read_text())
            v = TOPO_AT
        env[k] = v
    (root / "gdrcheck/env.json").write_text(json.dumps(env))
    doc = pairs_doc(evaluate(load_facts(str(root)), Options()))
    return {(p["a"], p["b"]): p["nccl"] for p in doc["pairs"] if p["kind"] == "gpu-gpu"}


def table(snapshot) -> list:
    rows = []
    for name in NAMES:
        run = RUNS / name
        seen = nccl_transports((run / "nccl.log").read_text())
        ours = gdrcheck_p2p(snapshot, run)
        for pair in sorted(seen):
            nccl = "P2P" if "P2P" in seen[pair] else "/".join(sorted(seen[pair]))
            rows.append((name, pair, nccl, ours[pair]["p2p"], ours[pair].get("reason", "")))
    return rows


def test_every_run_was_captured():
    assert len(NAMES) == 18


@pytest.fixture(scope="module")
def rows(snapshot):
    return table(snapshot)


def test_p2p_as_nccl_connected_each_pair(rows):
    """Zero contradictions: gdrcheck says ``enabled`` exactly where NCCL connected the pair via P2P, and
    ``disabled`` exactly where it used SHM or the network."""
    assert len({r[0] for r in rows}) == 18
    bad = [r for r in rows if (r[2] == "P2P") != (r[3] == "enabled") or r[3] == "unknown"]
    assert not bad, "\n".join(f"{n} {a}-{b}: NCCL {x}, gdrcheck {y} ({why})" for n, (a, b), x, y, why in bad)


def note_rows() -> list:
    """The table in NOTE.md: | setting | pair | NCCL | gdrcheck |."""
    out = []
    for line in (RUNS / "NOTE.md").read_text().splitlines():
        m = re.match(r"^\| `([\w-]+)` \| (\S+)-(\S+) \| (\S+) \| (\w+) \|$", line)
        if m:
            out.append((m.group(1), (m.group(2), m.group(3)), m.group(4), m.group(5)))
    return out


def test_note_holds_the_table(rows):
    """NOTE.md's table is what the logs and gdrcheck say today."""
    assert note_rows() == [r[:4] for r in rows]


if __name__ == "__main__":  # prints NOTE.md's table rows: python3 tests/rules/test_nccl_four_gpu_runs.py DIR
    import sys

    for name, (a, b), nccl, ours, _why in table(Path(sys.argv[1])):
        print(f"| `{name}` | {a}-{b} | {nccl} | {ours} |")
