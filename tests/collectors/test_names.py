"""Names from udev's hwdb: used live when pyudev and /run/udev are there, recorded for replay."""

import json
import sys
import types

from gdrcheck.collectors import names as names_mod
from gdrcheck.io.source import Source
from gdrcheck.model import PciFunction


class _Dev:
    def __init__(self, path):
        self.properties = {"ID_VENDOR_FROM_DATABASE": "NVIDIA Corporation",
                           "ID_MODEL_FROM_DATABASE": "GH100 [H200 SXM 141GB]"} if path.endswith("06.0") else {}


def _fake_pyudev():
    m = types.ModuleType("pyudev")
    m.Context = lambda: object()
    m.Devices = types.SimpleNamespace(from_sys_path=lambda ctx, path: _Dev(path))
    return m


class _LiveWithUdev(Source):
    def exists(self, path):
        return path == "/run/udev" or super().exists(path)


def test_names_from_udev_are_recorded_and_replayed(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyudev", _fake_pyudev())
    devs = [PciFunction(bdf="0000:00:06.0", root="0000:00"), PciFunction(bdf="0000:00:03.0", root="0000:00")]
    src = _LiveWithUdev("/", record=True)
    got = names_mod.collect_names(src, devs)
    assert got == {"0000:00:06.0": "NVIDIA Corporation GH100 [H200 SXM 141GB]"}
    kind, data = src.recorded[names_mod.NAMES_FILE]
    (tmp_path / "gdrcheck").mkdir()
    (tmp_path / "gdrcheck" / "names.json").write_bytes(data)
    assert names_mod.collect_names(Source(str(tmp_path), live=False), devs) == got


def test_no_udev_means_no_names(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyudev", None)  # not installed
    devs = [PciFunction(bdf="0000:00:06.0", root="0000:00")]
    assert names_mod.collect_names(_LiveWithUdev("/"), devs) == {}
    assert json.loads("{}") == {}
