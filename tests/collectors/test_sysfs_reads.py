"""The shortcuts of the sysfs reader give the facts the direct read gives: a link resolved once and then
looked up, a link read in a directory already resolved, a target spelled with ``//`` or ``/./``, and a
function's ``local_cpulist`` read only where it is asked for (or needed to place the function)."""

from __future__ import annotations

import os
import shutil

from builders.servers import build
from gdrcheck.collectors.inputs import load_facts
from gdrcheck.collectors.sysfs_pci import collect_sysfs_pci
from gdrcheck.io.source import Source
from gdrcheck.record import replace

DEVICES = "sys/bus/pci/devices"


def _node(tmp_path, name="node"):
    build(tmp_path / name, gpus=2, nics=2, nvme=1, sockets=2, nested=True)
    return tmp_path / name


def _facts(root, **kw):
    return load_facts(str(root), want_driver=True, endpoint_config=False, **kw)


def _respell_links(root, spell) -> int:
    """Every link under the device list and each device's driver link rewritten by ``spell``; how many."""
    n = 0
    for dirpath, dirnames, filenames in os.walk(root / "sys"):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                target = os.readlink(path)
                os.unlink(path)
                os.symlink(spell(target), path)
                n += 1
    return n


def _same_devices(a, b) -> None:
    assert len(a.devices) == len(b.devices) > 0
    for x, y in zip(a.devices, b.devices):
        assert x == y, (x.bdf, y.bdf)
    assert a.roots == b.roots and a.root_numa == b.root_numa and a.notes == b.notes


def test_a_link_target_with_doubled_slashes_and_dots_gives_the_same_facts(tmp_path):
    plain = _node(tmp_path)
    odd = tmp_path / "odd"
    shutil.copytree(plain, odd, symlinks=True)
    assert _respell_links(odd, lambda t: t.replace("/", "//").replace("../", ".././", 1)) > 10
    assert "//" in os.readlink(odd / DEVICES / sorted(os.listdir(odd / DEVICES))[0])
    _same_devices(_facts(plain), _facts(odd))
    assert _facts(odd).devices[0].driver is not None or any(d.driver for d in _facts(odd).devices)


def test_a_link_read_in_a_resolved_directory_is_the_link_read_directly(tmp_path):
    root = _node(tmp_path)
    names = sorted(os.listdir(root / DEVICES))
    warm, cold = Source(str(root), live=False), Source(str(root), live=False)
    for name in names:
        base = f"/{DEVICES}/{name}"
        assert warm.read_line(f"{base}/class") is not None  # the device's directory is now resolved and kept
        for link in ("driver", "iommu_group", "physfn", "subsystem", "class", "nothing"):
            assert warm.readlink(f"{base}/{link}") == cold.readlink(f"{base}/{link}"), (name, link)
            assert warm.link_name(f"{base}/{link}") == cold.link_name(f"{base}/{link}")


def test_a_resolved_path_asked_again_in_another_spelling_resolves_the_same(tmp_path):
    root = _node(tmp_path)
    name = sorted(os.listdir(root / DEVICES))[-1]
    src = Source(str(root), live=False)
    real = src.realpath(f"/{DEVICES}/{name}")
    assert real is not None and real.startswith("/sys/devices/pci")
    for spelling in (f"/{DEVICES}/{name}", f"//{DEVICES}//{name}/", f"/{DEVICES}/./{name}", f"{DEVICES}/{name}",
                     f"/sys/bus/../bus/pci/devices/{name}"):
        assert src.realpath(spelling) == real == Source(str(root), live=False).realpath(spelling), spelling
    assert src.realpath(real) == real


def test_a_path_too_deep_is_refused_even_where_a_link_led_there_before(tmp_path):
    root = tmp_path / "deep"
    deep = "/".join(["d"] * 70)
    os.makedirs(root / deep)
    os.symlink("/" + deep, root / "link")
    src = Source(str(root), live=False)
    assert src.realpath("/link") == "/" + deep  # reached through a link, which the depth limit does not count
    assert src.realpath("/" + deep) is None
    assert src.why("/" + deep) == "path too deep"


def test_local_cpulists_are_read_only_when_asked_and_nothing_else_changes(tmp_path):
    root = _node(tmp_path)
    asked, default = _facts(root, cpulists=True), _facts(root)
    assert all(d.local_cpulist for d in asked.devices)
    assert not any(d.local_cpulist for d in _facts(root, cpulists=False).devices)
    assert default.devices[0].local_cpulist  # load_facts' default reads them, as a probe needs
    without = _facts(root, cpulists=False)
    _same_devices(asked, replace(without, devices=tuple(replace(d, local_cpulist=c.local_cpulist)
                                                           for d, c in zip(without.devices, asked.devices))))


def test_a_function_without_numa_node_is_placed_by_its_cpulist_when_cpulists_are_not_asked(tmp_path):
    root = _node(tmp_path)
    for name in os.listdir(root / DEVICES):
        d = os.path.realpath(root / DEVICES / name)
        for f in ("numa_node", "local_cpus"):
            if os.path.exists(os.path.join(d, f)):
                os.unlink(os.path.join(d, f))
    asked, without = _facts(root, cpulists=True), _facts(root, cpulists=False)
    _same_devices(asked, without)
    assert any(d.numa_node is not None for d in without.devices)
    assert all(d.local_cpulist for d in without.devices)


def test_a_recording_source_reads_every_cpulist(tmp_path):
    root = _node(tmp_path)
    devices = collect_sysfs_pci(Source(str(root), live=False, record=True), endpoint_config=False,
                                cpulists=False)[0]
    assert devices and all(d.local_cpulist for d in devices)


def test_an_input_without_records_has_the_statuses_their_readers_give(tmp_path):
    """Without the driver's records the NVML, CUDA and nvidia-smi readers are not loaded; an input whose
    commands' record holds nothing goes through them: the same collectors' statuses, the same facts."""
    plain = _node(tmp_path)
    empty = tmp_path / "empty-records"
    shutil.copytree(plain, empty, symlinks=True)
    (empty / "gdrcheck").mkdir()
    (empty / "gdrcheck" / "commands.json").write_text("{}")
    a, b = _facts(plain), _facts(empty)
    assert [c for c in a.collectors if c.name in ("nvml", "nvidia-smi")] == \
        [c for c in b.collectors if c.name in ("nvml", "nvidia-smi")]
    assert len([c for c in a.collectors if c.name in ("nvml", "nvidia-smi")]) == 2
    assert a.collectors == b.collectors and a.host == b.host and a.gpus == b.gpus
    _same_devices(a, b)
