"""Faults of a live node and of damaged inputs that nvidia-smi/NVML tests do not cover.

* sysfs entries that vanish between the listing of ``/sys/bus/pci/devices`` and
  the reads that follow (a device hot-removed, a GPU falling off the bus);
* config space that cannot be read (``EACCES`` on open, or the 64 bytes a
  non-root user gets): verdicts that need ACS are never ``ok`` for it;
* symbolic-link loops inside a ``--from`` tree or archive: a clean result or
  exit 2, never a hang;
* a 1 MiB line and files of many lines as ``--from`` input (linear time: ten times the lines, not a hundred
  times the CPU time).

Each run must end with a result or one line on stderr: never a traceback,
never an "internal error".
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from support.cli_util import ROOT, assert_clean_error, call
from support.limits import assert_linear_cpu, cpu_seconds_at_most, hang_guard

from builders.scenarios import GPUS, NICS, SWITCH_DSP, scenario
from gdrcheck.collectors.gather import gather
from gdrcheck.collectors.pastes.lspci_tree import parse_lspci_tree
from gdrcheck.collectors.pastes.nvidia_smi import parse_smi_text
from gdrcheck.documents.bar1 import bar1_doc
from gdrcheck.documents.pairs import pairs_doc
from gdrcheck.documents.topology import topology_doc
from gdrcheck.errors import InputError
from gdrcheck.io.source import Source
from gdrcheck.rules.engine import evaluate

DEVICES = "/sys/bus/pci/devices"


def assert_result_or_clean_error(proc, status: int):
    """The run ends with ``status``: a result on stdout, or (2) one line that says why the input is refused."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode == status, (proc.args, proc.returncode, proc.stderr)
    if status == 2:
        assert_clean_error(proc)
    else:
        assert proc.stdout.strip()


def full_report(src: Source):
    """Everything the pairs, topology and bar1 commands compute from one source."""
    snap = gather(src)
    report = evaluate(snap)
    pairs_doc(report)
    topology_doc(report.topo)
    bar1_doc(snap, report.topo, report.findings)
    return snap, report


# ---------------------------------------------------------------------------
# entries that vanish between listing and reading


class VanishAfterListing(Source):
    """Removes the victims' sysfs directories right after ``/sys/bus/pci/devices`` was listed."""

    def __init__(self, root, victims, *, unlink_only=False):
        super().__init__(str(root), live=False)
        self.victims, self.unlink_only, self.done = victims, unlink_only, False

    def listdir(self, path):
        names = super().listdir(path)
        if path == DEVICES and not self.done:
            self.done = True
            for v in self.victims:
                link = Path(self._host(DEVICES)) / v
                if self.unlink_only:
                    link.unlink()
                else:
                    shutil.rmtree(link.resolve())
        return names


class VanishOnFirstRead(Source):
    """Removes a device's directory the first time one of its files is read (it fell off the bus)."""

    def __init__(self, root, victim):
        super().__init__(str(root), live=False)
        self.victim, self.done = victim, False

    def read_bytes(self, path, limit=1 << 20):
        # numa_node: read for every function after the listing pass (vendor comes from config where it is read)
        if not self.done and path.startswith(f"{DEVICES}/{self.victim}/") and path.endswith("/numa_node"):
            self.done = True
            shutil.rmtree(Path(self._host(DEVICES), self.victim).resolve())
        return super().read_bytes(path, limit)


VICTIMS = {"gpu": [GPUS[1]], "nic": [NICS[0]], "switch-port": [SWITCH_DSP[0][0]],
           "gpu-and-nic": [GPUS[2], NICS[1]]}


@pytest.mark.parametrize("case", sorted(VICTIMS))
def test_device_removed_after_listing(tmp_path, case):
    tree = scenario(tmp_path, "healthy-gdr-node")
    snap, report = full_report(VanishAfterListing(tree, VICTIMS[case]))
    bdfs = {d.bdf: d for d in snap.devices}
    for v in VICTIMS[case]:
        if v in bdfs:  # listed, then gone: its facts are unknown, not made up
            assert bdfs[v].vendor is None and bdfs[v].config is None and bdfs[v].class_code is None
        for (a, b), verdict in report.verdicts.items():
            assert v not in (a, b) or verdict != "ok", (a, b, verdict)
    assert set(GPUS) - set(VICTIMS[case]) <= set(bdfs)


def test_device_link_removed_after_listing(tmp_path):
    tree = scenario(tmp_path, "healthy-gdr-node")
    snap, report = full_report(VanishAfterListing(tree, [GPUS[0], NICS[1]], unlink_only=True))
    assert GPUS[0] not in {d.bdf for d in snap.devices if d.vendor is not None}
    assert not any(GPUS[0] in k for k, v in report.verdicts.items() if v == "ok")


@pytest.mark.parametrize("victim", [GPUS[0], NICS[0], SWITCH_DSP[1][1]])
def test_device_vanishes_while_being_read(tmp_path, victim):
    tree = scenario(tmp_path, "healthy-gdr-node")
    src = VanishOnFirstRead(tree, victim)
    snap, report = full_report(src)
    assert src.done
    gone = next((d for d in snap.devices if d.bdf == victim), None)
    if gone is not None:  # listed before it vanished: whatever is read after is unknown, not made up
        assert gone.vendor is None and gone.device is None and gone.link.cur_speed is None
    assert report.verdicts


# ---------------------------------------------------------------------------
# config space that cannot be read


def _verdicts(tree, src_cls=Source, **kw):
    return full_report(src_cls(str(tree), live=False, **kw))[1].verdicts


def test_config_space_permission_denied(tmp_path, monkeypatch):
    """``open()`` of every ``config`` fails with EACCES: Source's own error path, not a stub."""
    tree = scenario(tmp_path, "healthy-gdr-node")
    healthy = _verdicts(tree)
    real_open = os.open

    def deny(path, flags, *a, **k):
        if os.fsdecode(path).endswith("/config"):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", deny)
    src = Source(str(tree), live=False)
    snap, report = full_report(src)
    monkeypatch.setattr(os, "open", real_open)
    assert all(d.config is None for d in snap.devices)
    assert src.why(f"{DEVICES}/{GPUS[0]}/config") == "permission denied"
    assert set(report.verdicts) == set(healthy)
    # a PCIe path through a switch whose ACS is unknown is not 'ok' any more
    gpu_nic = (GPUS[0], NICS[0]) if (GPUS[0], NICS[0]) in report.verdicts else (NICS[0], GPUS[0])
    assert healthy[gpu_nic] == "ok"
    assert report.verdicts[gpu_nic] != "ok"


class NotRoot(Source):
    """What a non-root user reads: the first 64 bytes of config space."""

    def read_bytes(self, path, limit=1 << 20):
        data = super().read_bytes(path, limit)
        if data is not None and path.endswith("/config"):
            return data[:64]
        return data


class ConfigRaises(Source):
    """A source whose config reads raise instead of returning None: the collector must not crash either way."""

    def read_bytes(self, path, limit=1 << 20):
        if path.endswith("/config"):
            self._errors[path] = "permission denied"
            return None
        return super().read_bytes(path, limit)


@pytest.mark.parametrize("cls", [NotRoot, ConfigRaises])
def test_short_or_missing_config_space_is_unknown_not_ok(tmp_path, cls):
    tree = scenario(tmp_path, "healthy-gdr-node")
    healthy = _verdicts(tree)
    snap, report = full_report(cls(str(tree), live=False))
    changed = {k: v for k, v in report.verdicts.items() if v != healthy[k]}
    assert changed, "ACS could not be read, yet no verdict changed"
    assert all(v != "ok" for v in changed.values())
    assert any("config" in (c.detail or "") or c.status != "ok" for c in snap.collectors) or cls is ConfigRaises


# ---------------------------------------------------------------------------
# symbolic-link loops


def _loops(root: Path, case: str) -> None:
    sysd = root / "sys"
    devs = sysd / "bus" / "pci" / "devices"
    if case == "self":
        os.symlink("0000:99:00.0", devs / "0000:99:00.0")
    elif case == "pair":
        os.symlink("0000:98:00.0", devs / "0000:97:00.0")
        os.symlink("0000:97:00.0", devs / "0000:98:00.0")
    elif case == "dir-cycle":  # a directory that contains itself: a recursive walk never ends
        dev = (devs / GPUS[0]).resolve()
        os.symlink("..", dev / "up")
        os.symlink(".", dev / "here")
        os.symlink("/sys", sysd / "devices" / "sys")
    elif case == "attribute":
        for name in ("driver", "iommu_group", "numa_node", "config", "resource"):
            p = devs / GPUS[1] / name
            if p.is_symlink() or p.exists():
                p.unlink()
            os.symlink(name, p)
    elif case == "class":
        net = sysd / "class" / "net"
        net.mkdir(parents=True, exist_ok=True)
        (net / "loop0").mkdir()
        os.symlink("../loop1/device", net / "loop0" / "device")
        (net / "loop1").mkdir()
        os.symlink("../loop0/device", net / "loop1" / "device")
    elif case == "whole-bus":
        shutil.rmtree(sysd / "bus" / "pci" / "devices")
        os.symlink("devices", sysd / "bus" / "pci" / "devices")
    elif case == "absolute":
        os.symlink("/sys/bus/pci/devices/0000:96:00.0", devs / "0000:96:00.0")
    elif case == "commands":
        cmd = root / "gdrcheck" / "commands.json"
        if cmd.exists():
            cmd.unlink()
        os.symlink("commands.json", cmd)


LOOPS = ("self", "pair", "dir-cycle", "attribute", "class", "whole-bus", "absolute", "commands")


@pytest.mark.parametrize("case", LOOPS)
def test_symlink_loop_in_a_from_tree(tmp_path, case):
    """A loop beside the devices (or in one attribute) is passed over and the healthy node still passes; a
    devices folder that is a loop leaves no machine to read: refused, 2. A walk that never ends fails the guard."""
    tree = scenario(tmp_path, "healthy-gdr-node")
    _loops(tree, case)
    status = 2 if case == "whole-bus" else 0
    with hang_guard(300):
        for args in (("pairs",), ("topology", "--all"), ("bar1",)):
            proc = call(*args, "--from", tree)
            assert_result_or_clean_error(proc, status)


# an archive's link that leaves it (dir-cycle's /sys) or a devices folder that is a loop is refused, 2
@pytest.mark.parametrize("case,status", (("pair", 0), ("dir-cycle", 2), ("whole-bus", 2)))
def test_symlink_loop_in_an_archive(tmp_path, case, status):
    tree = scenario(tmp_path, "healthy-gdr-node")
    _loops(tree, case)
    archive = tmp_path / "loop.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="node")
    proc = call("pairs", "--from", archive)
    assert_result_or_clean_error(proc, status)


# ---------------------------------------------------------------------------
# huge lines and huge files


TREE = """-[0000:00]-+-00.0  Intel Corporation Device 09a2
           +-01.0-[01-02]----00.0-[02]--+-00.0  NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330]
           |                            \\-01.0  Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]
           \\-1f.0  Intel Corporation ISA bridge
"""
MIB = 1 << 20


def _huge_line_inputs():
    line = TREE.splitlines()
    return {
        "noise-after": TREE + "x" * MIB + "\n",
        "noise-before": "y" * MIB + "\n" + TREE,
        "long-name": "\n".join([line[0], line[1] + " " + "z" * MIB, *line[2:]]) + "\n",
        "bars": TREE + "|" * MIB + "\n",
        "dashes": "-" * MIB + "\n" + TREE,
        "deep-indent": "\n".join([line[0], " " * MIB + line[1].lstrip(), *line[2:]]) + "\n",
        "one-line-only": "-[0000:00]-+-00.0" + "-" * MIB + "\n",
    }


# the exit status each gives: 3 where the tree is read (an lspci tree alone leaves verdicts open), 0 where what
# is read holds no device, 2 where the file is not read as a tree at all (its first line is not one)
HUGE_LINE_STATUS = {"noise-after": 3, "noise-before": 2, "long-name": 3, "bars": 3, "dashes": 2,
                    "deep-indent": 2, "one-line-only": 0}


@pytest.mark.parametrize("case", sorted(_huge_line_inputs()))
def test_one_mebibyte_line_in_an_lspci_file(tmp_path, case):
    text = _huge_line_inputs()[case]
    with cpu_seconds_at_most(10):
        try:
            parse_lspci_tree(text, "big.txt")
        except InputError as e:
            assert len(str(e)) < 2000  # the message quotes the line, it does not carry it
    f = tmp_path / "big.txt"
    f.write_text(text)
    proc = call("pairs", "--from", f)
    assert_result_or_clean_error(proc, HUGE_LINE_STATUS[case])
    assert len(proc.stderr) < 2000


def _many_lines(n: int) -> dict[str, str]:
    return {
        "noise-after-tree": TREE + "not a tree line\n" * n,
        "blank-lines-then-tree": "\n" * n + TREE,
        "bars-then-tree": "|\n" * n + TREE,
        "resource-lines-inside": TREE.replace("\n", "\n             Memory at f0000000 (64-bit)\n", 1)
                                 .replace("Memory at f0000000 (64-bit)\n",
                                          "Memory at f0000000 (64-bit)\n" * n, 1),
        "repeated-tree-line": TREE.splitlines()[0] + "\n" + (TREE.splitlines()[1] + "\n") * n,
        # each line a root bus and a device: 40 us a line, so a fifth as many
        "many-roots": "".join(f"-[{i:04x}:00]---00.0  dev\n" for i in range(n // 5)),
    }


def _parsed_or_refused_briefly(text: str) -> None:
    try:
        parse_lspci_tree(text, "big.txt")
    except InputError as e:
        assert len(str(e)) < 2000


@pytest.mark.parametrize("case", sorted(_many_lines(1)))
def test_many_line_lspci_file_in_linear_time(case):
    """20,000 lines and 200,000: ten times the lines, not a hundred times the CPU time (a million lines took
    over 30 s of it before)."""
    assert_linear_cpu(lambda n: _many_lines(n)[case], _parsed_or_refused_briefly, 20_000)


def test_many_line_file_through_the_cli(tmp_path):
    f = tmp_path / "big.txt"
    f.write_text(TREE + "not a tree line\n" * 200_000)
    proc = call("topology", "--from", f)
    assert_result_or_clean_error(proc, 0)
    g = tmp_path / "big.xml"
    g.write_text('<system version="1">\n' + "<!-- x -->\n" * 200_000 + "</system>\n")
    proc = call("topology", "--from", g)
    assert_result_or_clean_error(proc, 0)


def test_many_line_nvidia_smi_text_in_linear_time():
    def smi(n: int) -> str:
        return "Driver Version : 1\nGPU 00000000:18:00.0\n" + "    Product Name : X\n" * n

    assert len(parse_smi_text(smi(1000))) == 1
    assert_linear_cpu(smi, parse_smi_text, 20_000)


def test_huge_sysfs_files_are_read_up_to_the_limit(tmp_path):
    """A sysfs attribute of many megabytes (a broken driver, a FUSE mount) is cut at 1 MiB, not slurped."""
    tree = scenario(tmp_path, "healthy-gdr-node")
    dev = (tree / "sys" / "bus" / "pci" / "devices" / GPUS[0]).resolve()
    (dev / "resource").write_text("0x0000000000000000 0x0000000000000000 0x0000000000000000\n" * 80_000)
    (dev / "numa_node").write_text("0\n" * 1_000_000)
    (dev / "current_link_speed").write_text("16.0 GT/s PCIe" + " " * (4 * MIB) + "\n")
    with cpu_seconds_at_most(30):
        snap, _ = full_report(Source(str(tree), live=False))
    gpu = next(d for d in snap.devices if d.bdf == GPUS[0])
    assert gpu.numa_node == 0
    proc = call("pairs", "--from", tree)
    assert_result_or_clean_error(proc, 0)


def _copying_begun(p, tmp) -> bool:
    """Waits until the run is inside the block that removes its copy (the copy's own folder is made there, the
    temporary directory just before it), however long a loaded machine makes that; False if the run ended."""
    while p.poll() is None:
        if any(os.path.isdir(os.path.join(tmp, d, "0")) for d in os.listdir(tmp)):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("sig,status,word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_a_signal_ends_the_run_and_removes_what_it_copied(tmp_path, sig, status, word, ctrl_c):
    """signal-while-reading-a-pipe: `--from <(...)` whose writer never comes; SIGTERM (a scheduler's or an
    engine's timeout) or Ctrl-C ends the run with one line and the shell's status for the signal, and the
    temporary directory the pipe was being copied into is gone."""
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env.update(PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""), TMPDIR=str(tmp))
    p = subprocess.Popen([sys.executable, "-m", "gdrcheck", "pairs", "--from", str(fifo)], env=env, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _copying_begun(p, tmp), "the run never began copying the pipe"
        p.send_signal(sig)
        out, err = p.communicate(timeout=300)  # a bound for a broken run only: it ends at once
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == status and err == f"gdrcheck: {word}\n" and out == "", (p.returncode, err)
    assert os.listdir(tmp) == []
