"""NVML: a fake ``pynvml`` for every error path, record/replay, and the real bindings without a driver."""

import ctypes
import ctypes.util
import importlib.metadata
import json
import sys
import types
from pathlib import Path

import pytest

from gdrcheck.collectors.driver import collect_driver
from gdrcheck.collectors.nvml import NVML_FILE, collect_nvml, facts_from_record
from gdrcheck.io.source import Source
from gdrcheck.model import Bar, PciFunction

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
GIB = 1 << 30

ERRORS = {"Uninitialized": 1, "InvalidArgument": 2, "NotSupported": 3, "NoPermission": 4, "DriverNotLoaded": 9,
          "LibraryNotFound": 12, "FunctionNotFound": 13, "GpuIsLost": 15, "LibRmVersionMismatch": 18,
          "Unknown": 999}


def fake_pynvml(gpus=(), *, init_error=None, fail=None, nvlink=None, p2p=0):
    """A module shaped like nvidia-ml-py's ``pynvml``.

    ``gpus``: bus ids; ``fail``: {(function name, gpu index or None): error name};
    ``nvlink``: {gpu index: [(active, remote bus id, remote type)]}.
    """
    m = types.ModuleType("pynvml")
    fail = fail or {}
    nvlink = nvlink or {}
    calls = []

    class NVMLError(Exception):
        def __init__(self, value=999):
            super().__init__(value)
            self.value = value

        def __str__(self):
            return f"NVML error {self.value}"

    m.NVMLError = NVMLError
    for name, code in ERRORS.items():
        cls = type(f"NVMLError_{name}", (NVMLError,), {"__init__": lambda self, c=code: NVMLError.__init__(self, c)})
        setattr(m, f"NVMLError_{name}", cls)
    m._nvmlGetFunctionPointer = lambda name: None
    m.calls = calls

    def api(fname, fn):
        def wrapper(*args):
            calls.append(fname)
            idx = args[0].index if args and isinstance(args[0], Handle) else None
            err = fail.get((fname, idx)) or fail.get((fname, None))
            if err:
                raise getattr(m, f"NVMLError_{err}")()
            return fn(*args)
        setattr(m, fname, wrapper)

    class Handle:
        def __init__(self, i):
            self.index = i

    def init():
        if init_error:
            raise getattr(m, f"NVMLError_{init_error}")()

    api("nvmlInit", init)
    api("nvmlShutdown", lambda: None)
    api("nvmlSystemGetDriverVersion", lambda: "550.54.15")
    api("nvmlDeviceGetCount", lambda: len(gpus))
    api("nvmlDeviceGetHandleByIndex", lambda i: Handle(i))
    api("nvmlDeviceGetPciInfo", lambda h: types.SimpleNamespace(busId=gpus[h.index]))
    api("nvmlDeviceGetName", lambda h: "NVIDIA H100 80GB HBM3")
    api("nvmlDeviceGetUUID", lambda h: f"GPU-0000000{h.index}-aaaa-bbbb-cccc-dddddddddddd")
    api("nvmlDeviceGetSerial", lambda h: f"165242200{h.index}")
    api("nvmlDeviceGetBAR1MemoryInfo",
        lambda h: types.SimpleNamespace(bar1Total=128 * GIB, bar1Used=120 * GIB, bar1Free=8 * GIB))
    api("nvmlDeviceGetMemoryInfo", lambda h: types.SimpleNamespace(total=80 * GIB, used=0, free=80 * GIB))
    api("nvmlDeviceGetCudaComputeCapability", lambda h: (9, 0))
    api("nvmlDeviceGetComputeRunningProcesses",
        lambda h: [types.SimpleNamespace(pid=999999, usedGpuMemory=3 * GIB)] if h.index == 0 else [])
    api("nvmlDeviceGetGraphicsRunningProcesses", lambda h: [])

    def link_state(h, link):
        links = nvlink.get(h.index)
        if links is None or link >= len(links):
            raise m.NVMLError_NotSupported() if links is None else m.NVMLError_InvalidArgument()
        return 1 if links[link][0] else 0

    api("nvmlDeviceGetNvLinkState", link_state)
    api("nvmlDeviceGetNvLinkRemotePciInfo",
        lambda h, link: types.SimpleNamespace(busId=nvlink[h.index][link][1]))
    api("nvmlDeviceGetNvLinkRemoteDeviceType", lambda h, link: nvlink[h.index][link][2])

    def p2p_status(a, b, idx):
        if not isinstance(idx, int):  # the real bindings' NVML_P2P_CAPS_INDEX_READ is the tuple (0,)
            raise ctypes.ArgumentError("argument 3: wrong type")
        return p2p

    api("nvmlDeviceGetP2PStatus", p2p_status)
    api("nvmlDeviceGetTopologyCommonAncestor", lambda a, b: 20)
    return m


@pytest.fixture
def live(monkeypatch):
    """Install a fake pynvml and return a function that collects through it."""

    def go(mod, record=False):
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        src = Source("/", record=record)
        return collect_nvml(src), src

    return go


@pytest.mark.parametrize("error,status,words", [
    ("LibraryNotFound", "unavailable", "libnvidia-ml.so.1"),
    ("DriverNotLoaded", "unavailable", "modprobe nvidia"),
    ("LibRmVersionMismatch", "error", "reboot"),
    ("NoPermission", "error", "root"),
    ("NotSupported", "error", "driver"),
    ("FunctionNotFound", "error", "upgrade the NVIDIA driver"),
    ("GpuIsLost", "error", "Xid 79"),
    ("Unknown", "error", "dmesg"),
    ("Uninitialized", "error", "retry"),
])
def test_init_errors_become_statuses(live, error, status, words):
    mod = fake_pynvml(["00000000:18:00.0"], init_error=error)
    facts, _ = live(mod)
    assert facts.status.name == "nvml" and facts.status.status == status
    assert facts.status.detail.startswith("NVML not available")
    assert words in facts.status.hint + facts.status.detail
    assert not facts.gpus and not facts.answered
    assert "nvmlShutdown" not in mod.calls  # only after a successful init


def test_a_healthy_answer(live):
    bus = ["00000000:18:00.0", "00000000:2A:00.0"]
    links = {0: [(True, "FFFFFFFF:FF:FF.0", 2)] * 18, 1: [(True, "FFFFFFFF:FF:FF.0", 2)] * 18}
    mod = fake_pynvml(bus, nvlink=links)
    facts, _ = live(mod, record=True)  # a snapshot asks everything
    assert facts.status.status == "ok" and "2 GPUs" in facts.status.detail
    assert [g.bdf for g in facts.gpus] == ["0000:18:00.0", "0000:2a:00.0"]
    g = facts.gpus[0]
    assert (g.bar1_total_bytes, g.bar1_used_bytes, g.bar1_free_bytes) == (128 * GIB, 120 * GIB, 8 * GIB)
    assert g.fb_total_bytes == 80 * GIB and g.cuda_compute == (9, 0) and g.source == "nvml"
    assert g.processes[0].pid == 999999 and g.processes[0].used_memory_bytes == 3 * GIB
    assert g.processes[0].name is None  # no such process: psutil's NoSuchProcess is tolerated
    assert {(n.a, n.b, n.count) for n in facts.nvlinks} == {("0000:18:00.0", "nvswitch", 18),
                                                          ("0000:2a:00.0", "nvswitch", 18)}
    assert facts.shows_nvlink
    for cap in ("read", "write", "nvlink", "atomics", "prop"):
        assert facts.p2p_status[("0000:18:00.0", "0000:2a:00.0", cap)] == "OK"
        assert facts.p2p_status[("0000:2a:00.0", "0000:18:00.0", cap)] == "OK"
    assert facts.common_ancestor == {("0000:18:00.0", "0000:2a:00.0"): 20}
    assert mod.calls[-1] == "nvmlShutdown"


def test_direct_nvlinks_are_counted_once_per_pair(live):
    a, b = "00000000:18:00.0", "00000000:2A:00.0"
    mod = fake_pynvml([a, b], nvlink={0: [(True, b, 0)] * 4 + [(False, b, 0)], 1: [(True, a, 0)] * 4})
    facts, _ = live(mod)
    assert [(n.a, n.b, n.count) for n in facts.nvlinks] == [("0000:18:00.0", "0000:2a:00.0", 4)]


def test_pcie_gpus_answer_no_nvlink(live):
    facts, _ = live(fake_pynvml(["00000000:18:00.0", "00000000:2A:00.0"], p2p=1))
    assert facts.nvlinks == () and facts.shows_nvlink  # NotSupported on link 0 is an answer: none
    assert facts.p2p_status[("0000:18:00.0", "0000:2a:00.0", "read")] == "CNS"


def test_nvlink_query_refused_means_not_shown(live):
    mod = fake_pynvml(["00000000:18:00.0"], fail={("nvmlDeviceGetNvLinkState", None): "NoPermission"})
    facts, _ = live(mod)
    assert facts.status.status == "ok" and not facts.shows_nvlink


def test_per_gpu_failures_degrade_only_that(live):
    bus = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0"]
    mod = fake_pynvml(bus, fail={("nvmlDeviceGetBAR1MemoryInfo", 0): "NotSupported",
                                 ("nvmlDeviceGetSerial", None): "NotSupported"})
    orig = mod.nvmlDeviceGetHandleByIndex

    def handle(i):
        if i == 2:
            raise mod.NVMLError_GpuIsLost()
        return orig(i)

    mod.nvmlDeviceGetHandleByIndex = handle
    facts, _ = live(mod)
    assert [g.bdf for g in facts.gpus] == ["0000:18:00.0", "0000:2a:00.0"]
    assert facts.gpus[0].bar1_total_bytes is None and facts.gpus[0].serial is None
    assert facts.gpus[1].bar1_total_bytes == 128 * GIB
    assert facts.status.status == "error"
    assert "GPU index 2 did not answer" in facts.status.detail and "Xid 79" in facts.status.hint
    assert "bar1 on 0000:18:00.0" in facts.status.detail
    assert "serial" not in facts.status.detail
    assert facts.gpus[0].extra["nvml_errors"]["bar1"] == "NotSupported"


def test_device_count_failure(live):
    facts, _ = live(fake_pynvml(["00000000:18:00.0"], fail={("nvmlDeviceGetCount", None): "Unknown"}))
    assert facts.status.status == "error" and "could not count" in facts.status.detail and not facts.gpus


def test_p2p_uses_literal_indexes(live):
    facts, _ = live(fake_pynvml(["00000000:18:00.0", "00000000:2A:00.0"]), record=True)
    assert len([k for k in facts.p2p_status if k[2] == "read"]) == 2  # a tuple index would have failed


def test_a_plain_run_asks_only_what_verdicts_use(live):
    mod = fake_pynvml(["00000000:18:00.0", "00000000:2A:00.0"])
    facts, _ = live(mod)
    assert set(facts.p2p_status) == {("0000:18:00.0", "0000:2a:00.0", "read"),
                                     ("0000:18:00.0", "0000:2a:00.0", "write")}
    assert facts.common_ancestor == {}
    assert "nvmlDeviceGetSerial" not in mod.calls  # no document shows it; a snapshot keeps it
    assert mod.calls.count("nvmlDeviceGetP2PStatus") == 2  # read and write, once per unordered pair


def test_bindings_missing(live):
    facts, _ = live(None)  # sys.modules["pynvml"] = None makes the import fail
    assert facts.status.status == "unavailable" and "nvidia-ml-py" in facts.status.detail
    assert facts.status.hint == "pip install nvidia-ml-py"


def test_bindings_not_nvidias(live):
    mod = fake_pynvml([])
    del mod._nvmlGetFunctionPointer
    facts, _ = live(mod)
    assert facts.status.status == "unavailable" and "not NVIDIA's" in facts.status.detail


def test_deprecated_pynvml_distribution_is_named(live, monkeypatch):
    real = importlib.metadata.version

    def version(name):
        return "13.0.1" if name == "pynvml" else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    facts, _ = live(fake_pynvml([], init_error="DriverNotLoaded"), record=True)  # snapshots look versions up
    assert "deprecated 'pynvml' package 13.0.1" in facts.status.hint


def test_deprecated_pynvml_shim_is_named_in_a_plain_run(live):
    """A plain run skips importlib.metadata (tens of ms); the shim is a package, NVIDIA's is pynvml.py."""
    mod = fake_pynvml([], init_error="DriverNotLoaded")
    mod.__file__ = "/usr/lib/python3/dist-packages/pynvml/__init__.py"
    facts, _ = live(mod)
    assert "deprecated 'pynvml' package" in facts.status.hint
    mod.__file__ = "/usr/lib/python3/dist-packages/pynvml.py"
    facts, _ = live(mod)
    assert "deprecated" not in facts.status.hint


def test_record_then_replay_is_identical(live, tmp_path):
    bus = ["00000000:18:00.0", "00000000:2A:00.0"]
    mod = fake_pynvml(bus, nvlink={0: [(True, bus[1], 0)] * 6, 1: [(True, bus[0], 0)] * 6})
    facts, src = live(mod, record=True)
    kind, data = src.recorded[NVML_FILE]
    assert kind == "f"
    (tmp_path / "gdrcheck").mkdir()
    (tmp_path / "gdrcheck" / "nvml.json").write_bytes(data)
    again = collect_nvml(Source(str(tmp_path)))
    assert again.gpus == facts.gpus and again.nvlinks == facts.nvlinks
    assert again.p2p_status == facts.p2p_status and again.status == facts.status
    assert again.shows_nvlink == facts.shows_nvlink


def test_failed_init_is_recorded_too(live, tmp_path):
    facts, src = live(fake_pynvml([], init_error="LibRmVersionMismatch"), record=True)
    (tmp_path / "gdrcheck").mkdir()
    (tmp_path / "gdrcheck" / "nvml.json").write_bytes(src.recorded[NVML_FILE][1])
    assert collect_nvml(Source(str(tmp_path))).status == facts.status


def test_replay_fixture_nvswitch():
    f = collect_nvml(Source(str(FIX / "nvml-2xh200-nvswitch-580")))
    assert f.status.status == "ok" and "580.159.04" in f.status.detail
    assert [(g.index, g.bdf, g.bar1_total_bytes) for g in f.gpus] == [(0, "0000:00:06.0", 256 * GIB),
                                                                      (1, "0000:00:07.0", 256 * GIB)]
    assert [(n.a, n.b, n.count) for n in f.nvlinks] == [("0000:00:06.0", "nvswitch", 18),
                                                        ("0000:00:07.0", "nvswitch", 18)]
    assert f.p2p_status[("0000:00:06.0", "0000:00:07.0", "read")] == "OK"
    assert f.p2p_status[("0000:00:06.0", "0000:00:07.0", "prop")] == "NS"
    assert f.gpus[0].extra["common_ancestor"] == {"0000:00:07.0": 30}


def test_replay_fixture_direct_nvlink():
    f = collect_nvml(Source(str(FIX / "nvml-4xa100-sxm4-nv4")))
    assert len(f.gpus) == 4 and len(f.nvlinks) == 6 and all(n.count == 4 for n in f.nvlinks)
    assert f.gpus[0].processes[0].name == "python3" and f.gpus[0].processes[0].user == "alice"


@pytest.mark.parametrize("content", ["{not json", "[]", json.dumps({"gpus": "x", "count": 1}),
                                     json.dumps({"count": 2, "gpus": [None, {"bus_id": 7}, {"bus_id": "zz"}],
                                                 "p2p": [1, {"a": "x"}], "topology": ["y"]})])
def test_damaged_record_never_crashes(tmp_path, content):
    (tmp_path / "gdrcheck").mkdir()
    (tmp_path / "gdrcheck" / "nvml.json").write_text(content)
    f = collect_nvml(Source(str(tmp_path)))
    assert f.status.name == "nvml" and f.gpus == ()


def test_not_recorded_in_input(tmp_path):
    f = collect_nvml(Source(str(tmp_path)))
    assert f.status.status == "unavailable" and "not recorded" in f.status.detail and f.status.hint


def test_facts_from_record_minimal():
    f = facts_from_record({"init": None, "count": 0})
    assert f.status.status == "ok" and f.answered and f.gpus == () and not f.shows_nvlink


def test_real_bindings_without_a_driver():
    pynvml = pytest.importorskip("pynvml")
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("an NVIDIA driver library is installed here")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        pass
    else:  # pragma: no cover - a driver after all
        pynvml.nvmlShutdown()
        pytest.skip("NVML initialised")
    f = collect_nvml(Source("/"))
    assert f.status.status == "unavailable"
    assert "libnvidia-ml.so.1" in f.status.detail and f.status.hint


# ---------------------------------------------------------------------------
# the driver collector: NVML first, nvidia-smi second, the bus beside them


def _gpu(bdf, bar1=256 * GIB):
    return PciFunction(bdf=bdf, root=bdf[:7], class_code=0x030200, vendor=0x10DE, device=0x2335, driver="nvidia",
                       bars=(Bar(0, 0xF0000000, 16 << 20, 0x140204, True, False),
                             Bar(2, 0x20000000000, bar1, 0x14220C, True, True),
                             Bar(4, 0x30000000000, 32 << 20, 0x14220C, True, True)))


def test_driver_joins_nvml_with_the_bus_and_reports_missing_gpus():
    devs = [_gpu("0000:00:06.0"), _gpu("0000:00:07.0"), _gpu("0000:00:08.0")]
    f = collect_driver(Source(str(FIX / "nvml-2xh200-nvswitch-580")), devs)
    assert [g.bdf for g in f.gpus] == ["0000:00:06.0", "0000:00:07.0"]
    e = f.gpus[0].extra
    # the collector keeps the one bus file beyond the function (resourceN_resize); the BAR1 rules join the view
    assert "bar1_resize" in e
    from gdrcheck.pcie.rebar import sysfs_bar1

    bus = sysfs_bar1(devs[0], e["bar1_resize"])
    assert bus["sysfs_bar1_index"] == 2 and bus["sysfs_bar1_bytes"] == 256 * GIB and bus["sysfs_bar1_unset"] is False
    assert f.shows_nvlink and f.common_ancestor
    missing = [s for s in f.statuses if s.name == "driver-gpus"]
    assert len(missing) == 1 and "0000:00:08.0" in missing[0].detail and "NVML" in missing[0].detail
    assert [s.name for s in f.statuses][:1] == ["nvml"]
    renum = f.renumber(devs)
    assert [d.gpu_index for d in renum] == [0, 1, None]


def test_driver_falls_back_to_nvidia_smi(tmp_path):
    (tmp_path / "gdrcheck").mkdir()
    xml = (FIX / "nvidia-smi-q" / "rtx6000ada-rebar-64gib-575.xml").read_text()
    (tmp_path / "gdrcheck" / "commands.json").write_text(json.dumps(
        {"nvidia-smi -q -x": {"rc": 0, "stdout": xml, "stderr": "", "error": None}}))
    f = collect_driver(Source(str(tmp_path)), [])
    assert [s.name for s in f.statuses] == ["nvml", "nvidia-smi"]
    assert f.statuses[0].status == "unavailable" and f.statuses[1].status == "ok"
    assert [g.source for g in f.gpus] == ["nvidia-smi -q -x"] * 2
    assert not f.shows_nvlink and f.p2p_status == {}


def test_answers_of_an_unexpected_shape_never_crash(live):
    mod = fake_pynvml(["00000000:18:00.0", "00000000:2A:00.0"])
    real = mod.nvmlDeviceGetBAR1MemoryInfo
    mod.nvmlDeviceGetBAR1MemoryInfo = lambda h: object() if h.index == 1 else real(h)
    facts, _ = live(mod)
    assert [g.bdf for g in facts.gpus] == ["0000:18:00.0", "0000:2a:00.0"]
    assert facts.gpus[1].bar1_total_bytes is None and facts.gpus[1].fb_total_bytes == 80 * GIB
    assert facts.status.status == "ok" and "bar1 on 0000:2a:00.0" in facts.status.detail
    mod.nvmlInit = lambda: (_ for _ in ()).throw(RuntimeError("boom"))
    facts, _ = live(mod)
    assert facts.status.name == "nvml" and facts.status.status == "error" and "boom" in facts.status.detail


@pytest.mark.parametrize("argv,early", [
    (["pairs", "--json"], True),
    (["check", "--format", "npd"], True),
    (["topology"], True),
    (["pairs", "--from", "x"], False),
    (["pairs", "--from=x"], False),
    (["pairs", "--help"], False),
    (["rules"], False),
    (["snapshot", "-o", "x.tar.gz"], False),  # a snapshot asks everything itself
    ([], False),
])
def test_the_console_script_begins_nvml_only_for_live_driver_commands(monkeypatch, argv, early):
    from gdrcheck.cli import entry
    from gdrcheck.cli.node_argv import read
    from gdrcheck.collectors import nvml

    begun = []
    monkeypatch.setattr(nvml, "begin_early", lambda: begun.append(True))
    entry._begin_driver_early(read(argv))
    assert bool(begun) is early


def test_a_run_takes_over_the_questions_begun_early(monkeypatch):
    from gdrcheck.collectors import nvml

    mod = fake_pynvml(["00000000:18:00.0"])
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    monkeypatch.setattr(nvml, "_preload_operator_library", lambda: None)
    nvml.begin_early()
    wait = nvml.begin_nvml(Source("/"))
    facts = wait()
    assert not nvml._EARLY
    assert [g.bdf for g in facts.gpus] == ["0000:18:00.0"]
    assert mod.calls.count("nvmlInit") == 1  # asked once, by the early thread
    # a snapshot (recording) never takes over the plain run's questions: it asks everything itself
    nvml.begin_early()
    facts = nvml.begin_nvml(Source("/", record=True))()
    assert not nvml._EARLY and facts.gpus
