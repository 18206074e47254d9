"""What a snapshot holds: the README's list of paths, held to the code; never ``/proc/kallsyms``.

Every path the collectors ask for (read, list, test, resolve) on several nodes, and every entry of the
snapshot made from them, must be one the README lists under "What a snapshot holds"; a file with content
must be a read path there, not only a name in a listed directory. A snapshot of a node whose kernel config
is missing and whose ``/proc/kallsyms`` is readable (the case where gdrcheck used to read it) carries no
symbol table and no kernel address, redacted or not.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from builders.scenarios import scenario
from gdrcheck.collectors.capture import capture, write_archive
from gdrcheck.collectors.gather import gather
from gdrcheck.collectors.inputs import unpack_archive
from gdrcheck.io.source import Source

ROOT = Path(__file__).resolve().parents[2]
CASES = ("healthy-gdr-node", "iommu-translating", "nvidia-fs-missing-with-p2pdma", "kvm-guest",
         "nccl-conf-overrides")
FIXTURES = ("h200-x4-vm",)
ADDRESS = "ffffffffa1234560"


def _regex(pattern: str) -> str:
    return "".join(".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part)
                   for part in re.split(r"(\*\*|\*)", pattern))


def readme_lists():
    """(read patterns, names-only directory patterns) from the README's block."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- snapshot-paths -->", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    read, names = [], []
    for line in block.splitlines():
        if not line.strip():
            continue
        pattern, _, note = line.partition(" ")
        (names if note.strip().startswith("names") else read).append(pattern)
    return re.compile("|".join(map(_regex, read)) + r"\Z"), re.compile("|".join(map(_regex, names)) + r"\Z")


class Asking(Source):
    """A source that remembers every path the collectors ask about, found or not."""

    def __init__(self, root):
        super().__init__(root, live=False, record=True)
        self.asked = set()

    def read_bytes(self, path, limit=1 << 20):
        self.asked.add(path)
        return super().read_bytes(path, limit)

    def listdir(self, path):
        self.asked.add(path)
        return super().listdir(path)

    def exists(self, path):
        self.asked.add(path)
        return super().exists(path)

    def readlink(self, path):
        self.asked.add(path)
        return super().readlink(path)

    def realpath(self, path):
        self.asked.add(path)
        return super().realpath(path)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = tmp_path_factory.mktemp("nodes")
    roots = [scenario(base / "s", c) for c in CASES]
    for name in FIXTURES:
        d = base / name
        d.mkdir()
        unpack_archive(str(ROOT / "fixtures" / name / "snapshot.tar.gz"), str(d))
        roots.append(d)
    return roots


def _allowed(path, read, names):
    parent = path.rsplit("/", 1)[0] or "/"
    return bool(read.match(path) or names.match(path) or names.match(parent))


def test_every_path_asked_or_kept_is_in_the_readme(nodes):
    read, names = readme_lists()
    stray = set()
    for root in nodes:
        src = Asking(str(root))
        gather(src, want_driver=True)
        stray |= {p for p in src.asked if not _allowed(p, read, names)}
        for path, (kind, value) in src.recorded.items():
            if kind == "f" and path not in src._placeholders and value:
                if not read.match(path):
                    stray.add(f"{path} (content)")
            elif not _allowed(path, read, names):
                stray.add(path)
    assert sorted(stray) == [], "\n".join(sorted(stray))


def test_every_literal_path_the_collectors_read_is_in_the_readme():
    read, names = readme_lists()
    call = re.compile(r"src\.(?:read_bytes|read_text|read_line|listdir|exists|readlink|link_name|realpath)"
                      r"\(\s*f?\"(/[^\"]*)\"")
    # the values of the two placeholders that name a place rather than a device (host_kernel, sysfs_pci)
    values = {"k": ("sys_vendor", "product_name"), "cls": ("net", "infiniband", "nvme")}
    stray = []
    for py in sorted((ROOT / "gdrcheck" / "collectors").rglob("*.py")):
        for literal in call.findall(py.read_text()):
            paths = [literal]
            for name, vals in values.items():
                paths = [p.replace("{" + name + "}", v) for p in paths for v in vals]
            for path in {re.sub(r"\{[^}]*\}", "x", p) for p in paths}:
                if not _allowed(path, read, names):
                    stray.append(f"{py.name}: {path}")
    assert stray == [], "\n".join(stray)


def test_the_readme_list_is_the_one_read():
    read, names = readme_lists()
    assert read.match("/proc/sys/kernel/hostname") and names.match("/sys/module")
    assert not read.match("/proc/kallsyms") and not names.match("/proc")


@pytest.mark.parametrize("redact", [True, False])
def test_no_symbol_table_in_a_snapshot_of_a_node_without_a_kernel_config(tmp_path, redact):
    root = scenario(tmp_path / "node", "healthy-gdr-node")
    for p in root.glob("boot/config-*"):
        p.unlink()
    (root / "proc" / "kallsyms").write_text(f"ffffffffa1000000 T _text\n{ADDRESS} d p2pdma_pgmap_ops\n")
    src, manifest = capture(redact=redact, root=str(root))
    out = tmp_path / "node.tar.gz"
    write_archive(src, manifest, str(out), redact=redact)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        data = b"".join(tar.extractfile(m).read() for m in tar if m.isfile())
    assert not [n for n in names if "kallsyms" in n]
    assert ADDRESS.encode() not in data
    assert "proc/config.gz" not in names and "proc/cmdline" in names
