"""The probe asks an mlx5 device NCCL's data-direct question (v2.30.7 net_ib/init.cc:378-392)."""

from __future__ import annotations

import ctypes
import errno

from gdrcheck.probe import verbs


class _Mlx5:
    def __init__(self, rc, path=b""):
        self.rc, self.path = rc, path

    def mlx5dv_get_data_direct_sysfs_path(self, ctx, buf, size):
        ctypes.memmove(buf, self.path, len(self.path))
        return self.rc


def test_data_direct_function_answers_its_path(monkeypatch):
    """data-direct-probe-path: the device has a data-direct function: NCCL lists <dev>_dma on its path."""
    path = b"/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.1"
    monkeypatch.setattr(verbs, "load", lambda soname, **kw: _Mlx5(0, path))
    assert verbs.data_direct_sysfs_path(1) == {"ok": True, "path": "/sys" + path.decode()}


def test_no_data_direct_function_is_enodev(monkeypatch):
    """data-direct-probe-enodev: ENODEV is NCCL's 'not data direct' (misc/mlx5dvwrap.cc:65-66)."""
    monkeypatch.setattr(verbs, "load", lambda soname, **kw: _Mlx5(errno.ENODEV))
    got = verbs.data_direct_sysfs_path(1)
    assert got["ok"] is False and got["errno"] == "ENODEV"


def test_without_libmlx5_there_is_no_answer(monkeypatch):
    def missing(soname, **kw):
        raise OSError("libmlx5.so.1: cannot open shared object file")

    monkeypatch.setattr(verbs, "load", missing)
    got = verbs.data_direct_sysfs_path(1)
    assert got["ok"] is None and "libmlx5.so.1" in got["error"]
