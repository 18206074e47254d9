"""``nvidia-smi -q`` / ``-q -x`` parsing across driver generations, and the tool's failures."""

import json
import re
import shutil
import stat
from pathlib import Path

import pytest

from gdrcheck.collectors.pastes.nvidia_smi import (
    collect_nvidia_smi,
    parse_smi_text,
    parse_smi_xml,
    rows_to_gpus,
    size_bytes,
)
from gdrcheck.io.source import Source

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi-q"
MIB = 1 << 20
GIB = 1 << 30


def parse(name):
    text = (FIX / name).read_text()
    return parse_smi_xml(text) if name.endswith(".xml") else parse_smi_text(text)


# fixture -> (GPUs, first bdf, BAR1 total MiB, BAR1 used MiB of GPU0, framebuffer MiB, name, driver)
CASES = {
    "a-t4-bar1-256mib-470.txt": (1, "0000:00:1e.0", 256, 2, 15109, "Tesla T4", "470.57.02"),
    "t4-bar1-busy-535.txt": (1, "0000:3b:00.0", 256, 243, 15360, "Tesla T4", "535.154.05"),
    "h100-sxm-550.txt": (8, "0000:18:00.0", 131072, 1, 81559, "NVIDIA H100 80GB HBM3", "550.54.15"),
    "h200-580-passthrough.txt": (2, "0000:00:06.0", 262144, 1, 143771, "NVIDIA H200", "580.159.04"),
    "h200-580-passthrough.xml": (2, "0000:00:06.0", 262144, 1, 143771, "NVIDIA H200", "580.159.04"),
    "a100-pcie-40gb-470.xml": (1, "0000:86:00.0", 65536, 30, 40536, "NVIDIA A100-PCIE-40GB", "470.57.02"),
    "rtx6000ada-rebar-64gib-575.xml": (2, "0000:17:00.0", 65536, 2, 49140, "NVIDIA RTX 6000 Ada Generation",
                                       "575.51.03"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_parses(name):
    n, bdf, total, used, fb, pname, driver = CASES[name]
    rows = parse(name)
    assert len(rows) == n
    assert [r["index"] for r in rows] == list(range(n))
    g = rows[0]
    assert g["bdf"] == bdf
    assert g["bar1_total_bytes"] == total * MIB
    assert g["bar1_used_bytes"] == used * MIB
    assert g["bar1_free_bytes"] == (total - used) * MIB
    assert g["fb_total_bytes"] == fb * MIB
    assert g["name"] == pname and g["driver_version"] == driver
    assert g["uuid"].startswith("GPU-") and g["minor"] == 0
    assert g["source"] == ("nvidia-smi -q -x" if name.endswith(".xml") else "nvidia-smi -q")
    for r in rows:
        assert re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", r["bdf"])


def test_text_and_xml_of_one_machine_agree():
    t = parse("h200-580-passthrough.txt")
    x = parse("h200-580-passthrough.xml")
    keys = ("bdf", "index", "name", "uuid", "serial", "bar1_total_bytes", "bar1_used_bytes", "fb_total_bytes")
    assert [{k: r[k] for k in keys} for r in t] == [{k: r[k] for k in keys} for r in x]


def test_conf_compute_section_is_not_bar1():
    # 550+ prints "Conf Compute Protected Memory Usage" (Total 0 MiB) right after BAR1
    text = (FIX / "h100-sxm-550.txt").read_text()
    assert "Conf Compute Protected Memory Usage" in text
    assert all(r["bar1_total_bytes"] == 131072 * MIB for r in parse_smi_text(text))


def test_label_column_width_does_not_matter():
    text = (FIX / "a-t4-bar1-256mib-470.txt").read_text()
    wide = re.sub(r"^(\s+)(\S[^:]*?)\s*: ", lambda m: f"{m.group(1)}{m.group(2):<60}: ", text, flags=re.M)
    narrow = re.sub(r"^(\s+)(\S[^:]*?)\s*: ", lambda m: f"{m.group(1)}{m.group(2)}: ", text, flags=re.M)
    assert wide != text and narrow != text
    assert parse_smi_text(wide) == parse_smi_text(text) == parse_smi_text(narrow)


def test_section_order_does_not_matter():
    text = (FIX / "a-t4-bar1-256mib-470.txt").read_text()
    bar1 = re.search(r"^    BAR1 Memory Usage\n(?:        .*\n)+", text, re.M).group(0)
    moved = text.replace(bar1, "").replace("    Compute Mode", bar1 + "    Compute Mode")
    moved = moved.replace("    FB Memory Usage", bar1.replace("BAR1", "Conf Compute Protected")
                          .replace(": 256", ": 0").replace(": 254", ": 0").replace(": 2 ", ": 0 ")
                          + "    FB Memory Usage")
    r = parse_smi_text(moved)[0]
    assert r["bar1_total_bytes"] == 256 * MIB and r["bar1_used_bytes"] == 2 * MIB


def test_processes_text_and_xml():
    busy = parse("t4-bar1-busy-535.txt")[0]["processes"]
    assert [(p["pid"], p["name"], p["type"]) for p in busy] == [
        (2211, "/usr/local/bin/tritonserver", "C"), (30417, "python3", "C")]
    assert busy[0]["used_memory_bytes"] == 6102 * MIB
    h100 = parse("h100-sxm-550.txt")
    assert [p["pid"] for p in h100[3]["processes"]] == [41822, 41907]
    assert all(not r["processes"] for i, r in enumerate(h100) if i != 3)
    ada = parse("rtx6000ada-rebar-64gib-575.xml")
    assert ada[0]["processes"] == [{"pid": 2841, "name": "/usr/lib/xorg/Xorg", "type": "G",
                                    "used_memory_bytes": 4 * MIB}]


def test_values_not_available():
    assert size_bytes("N/A") is None and size_bytes("[N/A]") is None and size_bytes("[Not Supported]") is None
    assert size_bytes("256 MiB") == 256 * MIB and size_bytes("1 GiB") == GIB
    text = (FIX / "a-t4-bar1-256mib-470.txt").read_text()
    vgpu = text.replace("Total                             : 256 MiB", "Total                             : N/A")
    assert parse_smi_text(vgpu)[0]["bar1_total_bytes"] is None


def test_damaged_xml_raises_value_error():
    with pytest.raises(ValueError):
        parse_smi_xml("<nvidia_smi_log><gpu id='0'>")
    with pytest.raises(ValueError):
        parse_smi_xml("<topology/>")
    with pytest.raises(ValueError):
        parse_smi_xml('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><nvidia_smi_log>&a;</nvidia_smi_log>')


def test_rows_to_gpus():
    gpus = rows_to_gpus(parse("t4-bar1-busy-535.txt"))
    g = gpus[0]
    assert g.bdf == "0000:3b:00.0" and g.index == 0 and g.source == "nvidia-smi -q"
    assert g.bar1_total_bytes == 256 * MIB and g.fb_total_bytes == 15360 * MIB
    assert g.processes[1].pid == 30417 and g.processes[1].name == "python3"
    assert g.extra["driver_version"] == "535.154.05"


# ---------------------------------------------------------------------------
# the tool itself: a fake nvidia-smi on GDRCHECK_TOOL_PATH


def fake_smi(tmp_path, monkeypatch, body: str) -> Path:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    script = d / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("GDRCHECK_TOOL_PATH", str(d))
    return d


CAT = shutil.which("cat") or "/bin/cat"
SLEEP = shutil.which("sleep") or "/bin/sleep"


def test_runs_xml_first(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, f'[ "$2" = "-x" ] && exec {CAT} "{FIX / "rtx6000ada-rebar-64gib-575.xml"}"\n'
                                    "exit 2\n")
    rows, st = collect_nvidia_smi(Source("/"))
    assert st.status == "ok" and "nvidia-smi -q -x" in st.detail and "575.51.03" in st.detail
    assert [r["bar1_total_bytes"] for r in rows] == [64 * GIB, 64 * GIB]


def test_falls_back_to_text_when_xml_is_damaged(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, 'if [ "$2" = "-x" ]; then echo "<nvidia_smi_log><gpu"; exit 0; fi\n'
                                    f'exec {CAT} "{FIX / "a-t4-bar1-256mib-470.txt"}"\n')
    rows, st = collect_nvidia_smi(Source("/"))
    assert st.status == "ok" and rows[0]["source"] == "nvidia-smi -q"
    assert rows[0]["bar1_total_bytes"] == 256 * MIB


@pytest.mark.parametrize("rc,status,words", [
    (9, "unavailable", "driver is not loaded"),
    (12, "unavailable", "libnvidia-ml.so.1"),
    (15, "error", "fell off the bus"),
    (4, "error", "permission"),
    (255, "error", "exited 255"),
])
def test_exit_codes(tmp_path, monkeypatch, rc, status, words):
    fake_smi(tmp_path, monkeypatch, "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                    f"driver.\"\nexit {rc}\n")
    rows, st = collect_nvidia_smi(Source("/"))
    assert rows == []
    assert st.name == "nvidia-smi" and st.status == status
    assert words in st.detail
    assert f"exited {rc}" in st.detail
    if rc in (9, 12, 15):
        assert st.hint


def test_gpu_lost_with_partial_output_keeps_the_rest(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, f'[ "$2" = "-x" ] && {CAT} "{FIX / "h200-580-passthrough.xml"}"\nexit 15\n')
    rows, st = collect_nvidia_smi(Source("/"))
    assert len(rows) == 2 and st.status == "error" and "fell off the bus" in st.detail


def test_hang_is_a_timeout(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, f"exec {SLEEP} 30\n")
    rows, st = collect_nvidia_smi(Source("/"), timeout=0.5)
    assert rows == [] and st.status == "unavailable"
    assert "timed out" in st.detail and "persistence" in st.hint


def test_not_found(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("GDRCHECK_TOOL_PATH", str(tmp_path / "empty"))
    rows, st = collect_nvidia_smi(Source("/"))
    assert rows == [] and st.status == "unavailable" and st.detail == "nvidia-smi not found"


def test_replay_from_a_capture(tmp_path):
    root = tmp_path / "snap"
    (root / "gdrcheck").mkdir(parents=True)
    xml = (FIX / "h100-sxm-550.txt").read_text()
    (root / "gdrcheck" / "commands.json").write_text(json.dumps({
        "nvidia-smi -q -x": {"rc": None, "stdout": "", "stderr": "", "error": "not found"},
        "nvidia-smi -q": {"rc": 0, "stdout": xml, "stderr": "", "error": None}}))
    rows, st = collect_nvidia_smi(Source(str(root)))
    assert st.status == "unavailable" and rows == []  # not found stops: the text form was never run
    (root / "gdrcheck" / "commands.json").write_text(json.dumps({
        "nvidia-smi -q": {"rc": 0, "stdout": xml, "stderr": "", "error": None}}))
    rows, st = collect_nvidia_smi(Source(str(root)))
    assert st.status == "ok" and len(rows) == 8
    (root / "gdrcheck" / "commands.json").write_text("{}")
    rows, st = collect_nvidia_smi(Source(str(root)))
    assert rows == [] and st.status == "unavailable" and "not captured" in st.detail
