"""An AMD node speaks RCCL's terms in every output: the two real AMD machines of ../shared/realworld (RCCL's own
topology dumps), RCCL's topo_expl models and a rocm-smi paste. "NCCL" stays only in setting names (NCCL_*),
in "NCCL A.B.C base" and in RCCL's own messages; no NVIDIA-only tool, module or link is named. The fingerprint's
field names (``host.module.nvidia_peermem``, ``devices.nvswitch``) are the fleet contract and are not words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.cli_util import call

ROOT = Path(__file__).resolve().parents[2]
NCCL_WORD = re.compile(r"NCCL(?![_A-Z])")
NCCL_ALLOWED = re.compile(r"NCCL \d+\.\d+\.\d+ base")
NVIDIA_ONLY = re.compile(r"NVML|nvidia-smi|nvidia[-_]peermem|nv_peer_mem|NVLink|NVSwitch|NVIDIA driver|CUDA driver|"
                         r"no NVIDIA GPU|R515")
TEXT_COMMANDS = (("pairs",), ("check",), ("topology",), ("bar1",))


def _real(name: str) -> Path:
    from conftest import REALWORLD

    path = REALWORLD / name / "nccl-topo.xml"
    if not path.is_file():
        pytest.skip("../shared/realworld is not present")
    return path


def _inputs():
    return [pytest.param(lambda: _real("rccl-mi300x-8p-8nic"), id="mi300x-8p-8nic"),
            pytest.param(lambda: _real("rccl-mi50-8p-pcie-2nic"), id="mi50-8p-pcie-2nic"),
            pytest.param(lambda: ROOT / "fixtures" / "rccl-models" / "topo_8p_rome_pcie.xml", id="topo_8p_rome_pcie"),
            pytest.param(lambda: ROOT / "fixtures" / "rocm-smi" / "showtopo-4gpu-pcie.txt", id="rocm-smi")]


def _wrong_words(text: str) -> list[str]:
    text = " ".join(text.split())  # wrapped lines joined: a word the text view breaks is still seen
    text = NCCL_ALLOWED.sub("", text)
    return [m.group(0) for m in NCCL_WORD.finditer(text)] + [m.group(0) for m in NVIDIA_ONLY.finditer(text)]


def _strings(value, skip=("fingerprint",)):
    """Every string value of a JSON document (names of keys are the contract, not words)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, skip)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in skip:
                yield from _strings(v, skip)


@pytest.mark.parametrize("given", _inputs())
@pytest.mark.parametrize("command", TEXT_COMMANDS, ids=lambda c: c[0])
def test_text_outputs_speak_rccl(given, command):
    p = call(*command, "--from", str(given()))
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    out = p.stdout + "\n" + p.stderr
    if command[0] == "pairs":
        assert "RCCL" in out
    assert _wrong_words(out) == [], out


@pytest.mark.parametrize("given", _inputs())
def test_pairs_json_speaks_rccl(given):
    p = call("pairs", "--json", "--from", str(given()))
    doc = json.loads(p.stdout)
    assert doc["nccl"]["library"] == "rccl"
    wrong = sorted({s for s in _strings(doc) if _wrong_words(s)})
    assert wrong == [], wrong


def test_bar1_on_amd_gpus_says_why_not_judged():
    """BAR1 figures come from the NVIDIA driver; on AMD GPUs the answer stays unknown (exit 3) and says why."""
    p = call("bar1", "--from", str(_real("rccl-mi300x-8p-8nic")))
    assert p.returncode == 3
    assert "8 AMD GPUs: BAR1 figures not read for them" in p.stdout
    assert "no AMD GPU" in p.stderr and "lspci -vv" in p.stderr
    doc = json.loads(call("bar1", "--json", "--from", str(_real("rccl-mi300x-8p-8nic"))).stdout)
    assert len(doc["amd_gpus"]) == 8 and doc["gpus"] == []


def _rccl_log(tmp_path) -> Path:
    """An RCCL job's log (RCCL writes NCCL's prefixes: 'NCCL INFO' is RCCL's own) on two MI300X of the dump."""
    log = tmp_path / "rccl.log"
    log.write_text("node1:1:1 [0] NCCL INFO RCCL version 2.20.5+hip6.2 HEAD:3bd1b57\n"
                   "node1:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId c000 commId 0x1 - Init START\n"
                   "node1:1:2 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 15000 commId 0x1 - Init START\n"
                   "node1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                   "node1:1:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n")
    return log


def test_rccl_log_summary_names_rccl(tmp_path):
    p = call("pairs", "--from", str(_real("rccl-mi300x-8p-8nic")), "--from", str(_rccl_log(tmp_path)))
    assert "RCCL did what the node predicts: 1 of 1 pair" in " ".join(p.stdout.split())
    assert "P2P predicted enabled, RCCL used P2P/IPC: agrees" in p.stdout
    out = re.sub(r"\S+ NCCL INFO [^\n]*", "", p.stdout)  # RCCL's own lines quoted
    assert _wrong_words(out) == [], out


def test_report_speaks_rccl(tmp_path):
    """The HTML page of an AMD node: RCCL's rules, its log, the amdkfd peer memory; no NVIDIA driver row."""
    page = tmp_path / "r.html"
    call("report", "--from", str(_real("rccl-mi300x-8p-8nic")), "--from", str(_rccl_log(tmp_path)), "-o", str(page))
    html = page.read_text()
    text = re.sub(r"<style.*?</style>", "", html, flags=re.S)
    text = " ".join(re.findall(r'title="([^"]*)"', text)) + re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\S+ NCCL INFO [^<\n]*", "", text.replace("&#x27;", "'"))  # RCCL's own lines quoted
    assert "What RCCL did" in html and "RCCL rule" in html and "amdkfd" in html and "NVIDIA driver" not in html
    assert _wrong_words(text) == [], sorted(set(_wrong_words(text)))
