"""Property-based tests of every input parser: any input parses or is refused cleanly.

The contract of each parser, checked here with random input and with small
damage done to valid input:

* ``parse_lspci_tree``, ``parse_nccl_xml``, ``parse_hwloc_xml``: a Snapshot or
  :class:`InputError`;
* ``parse_smi_xml``: rows or ``ValueError`` (its documented contract; the
  collector turns that into a fallback); ``parse_smi_text``: rows, never raises;
* ``parse_resource``, ``parse_speed``, ``parse_int``: a value or ``None``/``()``,
  never raise;
* ``parse_acs``, ``parse_rebar``, ``kinds.port_type``: config space of any
  length and content, never raise;
* ``Source.run`` replaying ``/gdrcheck/commands.json`` of any content: a
  :class:`CommandResult`, never raises;
* ``parse_topo_matrix``, ``parse_lspci_verbose`` (pastes, issue 17): their facts or
  :class:`InputError`; merged alone or with a tree, a Snapshot (or InputError) that evaluates.

``benchmarks/fuzz_campaign.py`` runs the same properties with many more
examples; ``GDRCHECK_FUZZ_EXAMPLES`` sets the count per property here.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from typing import Callable, Optional

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdrcheck.collectors.pastes.hwloc_xml import parse_hwloc_xml
from gdrcheck.collectors.pastes.lspci_tree import parse_lspci_tree
from gdrcheck.collectors.pastes.nccl_xml import parse_nccl_xml
from gdrcheck.collectors.pastes.nvidia_smi import parse_smi_text, parse_smi_xml
from gdrcheck.collectors.sysfs_pci import parse_int, parse_resource, parse_speed
from gdrcheck.errors import InputError
from gdrcheck.io.source import CommandResult, Source
from gdrcheck.model import PciFunction, Snapshot
from gdrcheck.pcie.acs import AcsState, parse_acs
from gdrcheck.pcie.kinds import port_type
from gdrcheck.pcie.rebar import parse_rebar

EXAMPLES = int(os.environ.get("GDRCHECK_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])

CASES: Counter = Counter()  # property name -> examples run (read by the campaign)


# ---------------------------------------------------------------------------
# the properties


def expect_snapshot_or_input_error(parse: Callable[[str, str], Snapshot], text: str, what: str) -> None:
    CASES[what] += 1
    try:
        snap = parse(text, "fuzz.txt")
    except InputError as e:
        msg = str(e)
        assert msg.startswith("fuzz.txt"), msg
        return
    assert isinstance(snap, Snapshot)


def expect_smi_rows(text: str, xml: bool) -> None:
    CASES["nvidia-smi-xml" if xml else "nvidia-smi-text"] += 1
    if xml:
        try:
            rows = parse_smi_xml(text)
        except ValueError:
            return
    else:
        rows = parse_smi_text(text)
    assert isinstance(rows, list)
    for r in rows:
        assert isinstance(r["bdf"], str)


def expect_config_parses(cfg: bytes) -> None:
    CASES["config-space"] += 1
    st_ = parse_acs(cfg)
    assert isinstance(st_, AcsState)
    rb = parse_rebar(cfg)
    assert isinstance(rb, dict)
    pt = port_type(PciFunction(bdf="0000:01:00.0", root="0000:00", parent=None, config=cfg))
    assert pt is None or 0 <= pt <= 15


def expect_sysfs_values(text: str) -> None:
    CASES["sysfs-values"] += 1
    bars = parse_resource(text)
    assert isinstance(bars, tuple)
    for b in bars:
        assert b.size >= 0
    s = parse_speed(text)
    assert s is None or isinstance(s, float)
    for base in (0, 10, 16):
        v = parse_int(text, base)
        assert v is None or isinstance(v, int)


_REPLAY_DIR: Optional[str] = None


def expect_replay(content: bytes, keys: list[str]) -> None:
    global _REPLAY_DIR
    CASES["commands-replay"] += 1
    if _REPLAY_DIR is None:
        _REPLAY_DIR = tempfile.mkdtemp(prefix="gdrcheck-fuzz-")
        atexit.register(shutil.rmtree, _REPLAY_DIR, True)
        os.makedirs(os.path.join(_REPLAY_DIR, "gdrcheck"))
    with open(os.path.join(_REPLAY_DIR, "gdrcheck", "commands.json"), "wb") as f:
        f.write(content)
    src = Source(_REPLAY_DIR, live=False)
    for key in keys + ["nvidia-smi -q -x", "nvidia-smi -q"]:
        argv = key.split(" ") if key else [""]
        res = src.run(argv)
        assert isinstance(res, CommandResult)
        assert isinstance(res.stdout, str) and isinstance(res.stderr, str)
        assert res.rc is None or isinstance(res.rc, int)
        assert res.error is None or isinstance(res.error, str)
        _ = res.ok


# ---------------------------------------------------------------------------
# mutations of valid text


MUT_CHARS = "-+\\|[]:.0123456789abcdef \t\n<>/=\"'&;!?xX\x00\ufeff\u00e9"


@st.composite
def mutated(draw, base: str, extra_lines=()):
    """``base`` with characters and lines inserted, deleted, replaced, duplicated or swapped."""
    text = base
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(("ins", "del", "rep", "dup_line", "del_line", "swap_lines", "ins_line",
                                   "cut")))
        n = len(text)
        pos = draw(st.integers(0, max(n - 1, 0)))
        if op == "ins":
            text = text[:pos] + draw(st.text(alphabet=MUT_CHARS, min_size=1, max_size=6)) + text[pos:]
        elif op == "del":
            text = text[:pos] + text[pos + draw(st.integers(1, 12)):]
        elif op == "rep":
            text = text[:pos] + draw(st.sampled_from(MUT_CHARS)) + text[pos + 1:]
        elif op == "cut":
            text = text[:pos]
        else:
            lines = text.split("\n")
            i = draw(st.integers(0, max(len(lines) - 1, 0)))
            j = draw(st.integers(0, max(len(lines) - 1, 0)))
            if op == "dup_line":
                lines.insert(i, lines[i])
            elif op == "del_line" and len(lines) > 1:
                del lines[i]
            elif op == "swap_lines":
                lines[i], lines[j] = lines[j], lines[i]
            elif op == "ins_line":
                pool = list(extra_lines) or [""]
                lines.insert(i, draw(st.sampled_from(pool) | st.text(alphabet=MUT_CHARS, max_size=30)))
            text = "\n".join(lines)
    return text


# ---------------------------------------------------------------------------
# lspci -t trees: drawn the way pciutils' ls-tree.c draws them


NAMES = ("NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330]", "Mellanox Technologies MT2910 Family [ConnectX-7]",
         "Samsung Electronics Co Ltd NVMe SSD Controller PM9A1", "Broadcom / LSI PEX890xx PCIe Gen 5 Switch",
         "Intel Corporation Device 09a2", "10de:2330", "", "Intel Corporation Ice Lake Xeon Non-Transparent Bridge")


class _Line:
    def __init__(self) -> None:
        self.buf: list[str] = []
        self.out: list[str] = []

    def put(self, p: int, s: str) -> int:
        need = p + len(s) - len(self.buf)
        if need > 0:
            self.buf.extend(" " * need)
        self.buf[p:p + len(s)] = list(s)
        return p + len(s)

    def emit(self, p: int) -> None:
        self.out.append("".join(self.buf[:p]))
        self.buf[:p] = ["|" if c in "+|" else " " for c in self.buf[:p]]


def _show_bus(ln: _Line, devs, p: int, verbose: bool) -> None:
    if not devs:
        ln.emit(p)
    elif len(devs) == 1:
        _show_dev(ln, devs[0], ln.put(p, "--"), verbose)
    else:
        for d in devs[:-1]:
            ln.put(p, "+-")
            _show_dev(ln, d, p + 2, verbose)
        ln.put(p, "\\-")
        _show_dev(ln, devs[-1], p + 2, verbose)


def _show_dev(ln: _Line, d, p: int, verbose: bool) -> None:
    dev, fn, name, bridge = d
    p = ln.put(p, f"{dev:02x}.{fn:x}")
    if bridge is not None:
        sec, sub, kids = bridge
        p = ln.put(p, f"-[{sec:02x}]-" if sec == sub else f"-[{sec:02x}-{sub:02x}]-")
        _show_bus(ln, kids, p, verbose)
        return
    if verbose and name:
        p = ln.put(p, "  " + name)
    ln.emit(p)


def lspci_text(seed: int, *, size: int = 1) -> str:
    """A valid ``lspci -t``/``-tv`` tree: 1-3 root buses, nested bridges, multi-function devices."""
    rng = random.Random(seed)
    verbose = rng.random() < 0.6
    roots = []
    nxt = [1]

    def fill(depth: int, limit: int):
        devs = []
        for dev in sorted(rng.sample(range(32), rng.randint(1, min(32, 4 * size)))):
            if depth < 4 and nxt[0] < limit and rng.random() < 0.4:
                sec = nxt[0]
                nxt[0] += 1
                kids = fill(depth + 1, limit) if rng.random() < 0.9 else []
                devs.append((dev, 0, None, (sec, nxt[0] - 1, kids)))
            else:
                for fn in range(rng.choice((1, 1, 2, 4))):
                    devs.append((dev, fn, rng.choice(NAMES), None))
        return devs

    starts = sorted(rng.sample([0x00, 0x40, 0x80, 0xC0], rng.randint(1, 3)))
    for k, rb in enumerate(starts):
        nxt[0] = rb + 1
        limit = starts[k + 1] if k + 1 < len(starts) else 0xFF
        roots.append((rb, fill(0, limit)))
    ln = _Line()
    if len(roots) == 1:
        p = ln.put(0, f"-[0000:{roots[0][0]:02x}]-")
        _show_bus(ln, roots[0][1], p, verbose)
    else:
        ln.put(0, "-")
        for i, (rb, devs) in enumerate(roots):
            p = ln.put(1, ("\\-" if i == len(roots) - 1 else "+-") + f"[0000:{rb:02x}]-")
            _show_bus(ln, devs, p, verbose)
    return "\n".join(s.rstrip() for s in ln.out) + "\n"


def test_generated_trees_are_valid():
    for seed in range(40):
        text = lspci_text(seed)
        snap = parse_lspci_tree(text, "gen.txt")
        assert snap.devices, text


LSPCI_NOISE = ("$ lspci -tv", "```", "[sudo] password for user:", "           |", "             Memory at f0000000",
               "-", "+-00.0", "\\-1f.0  ISA bridge", "-+-[0000:00]-+-00.0", "  ...")


@FUZZ
@given(st.integers(0, 2 ** 32), st.data())
def test_lspci_mutations(seed, data):
    text = data.draw(mutated(lspci_text(seed), LSPCI_NOISE))
    expect_snapshot_or_input_error(parse_lspci_tree, text, "lspci-mutated")


@FUZZ
@given(st.lists(st.one_of(
    st.text(alphabet="-+\\|[]:.0123456789abcdef ", max_size=60),
    st.sampled_from(LSPCI_NOISE),
    st.text(max_size=40)), max_size=30).map("\n".join))
def test_lspci_random_text(text):
    expect_snapshot_or_input_error(parse_lspci_tree, text, "lspci-random")


# ---------------------------------------------------------------------------
# XML: random element trees and damaged valid documents


NCCL_DOC = """<system version="1">
  <cpu numaid="0" affinity="00000000,0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:1a:00.0" class="0x060400" vendor="0x1000" device="0xc030"
         link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:1b:00.0" class="0x030200" vendor="0x10de" device="0x2330"
           link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="0000:5a:00.0" count="18" tclass="0x030200"/>
          <nvlink target="fffffff:ffff:ff" count="4" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:1c:00.0" class="0x020700" vendor="0x15b3" device="0x1021"
           link_speed="32.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="400000" port="1" guid="0x1" maxconn="131072" gdr="1"/></nic>
      </pci>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="ffff0000" arch="x86_64">
    <pci busid="0000:5a:00.0" class="0x030200" vendor="0x10de" device="0x2330">
      <gpu dev="1" sm="90" rank="1" gdr="1"/>
    </pci>
  </cpu>
</system>
"""

HWLOC_DOC = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" nodeset="0x00000001" gp_index="3" local_memory="1"/>
      <object type="Bridge" gp_index="4" bridge_type="0-1" depth="0" bridge_pci="0000:[00-02]">
        <object type="Bridge" gp_index="5" bridge_type="1-1" depth="1" bridge_pci="0000:[01-02]"
                pci_busid="0000:00:01.0" pci_type="0604 [8086:2030] [0000:0000] 07" pci_link_speed="15.753846">
          <object type="PCIDev" gp_index="6" pci_busid="0000:01:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1">
            <object type="OSDev" gp_index="7" name="nvml0" subtype="NVML" osdev_type="1">
              <info name="GPUModel" value="NVIDIA H100"/>
            </object>
          </object>
          <object type="PCIDev" gp_index="8" pci_busid="0000:01:00.1" pci_type="0207 [15b3:1021] [15b3:0041] 00">
            <object type="OSDev" gp_index="9" name="mlx5_0" osdev_type="3"/>
            <object type="OSDev" gp_index="10" name="ib0" osdev_type="2"/>
          </object>
        </object>
      </object>
    </object>
  </object>
  <distances2hetero nbobjs="1" kind="9" name="NVLinkBandwidth" indexing="gp">
    <indexes length="2">7</indexes>
    <u64values length="2">0</u64values>
  </distances2hetero>
</topology>
"""

TAGS = ("system", "cpu", "pci", "gpu", "nic", "net", "nvlink", "xgmi", "c2c", "pcilink", "graphs", "topology",
        "object", "info", "distances2", "distances2hetero", "indexes", "u64values", "x")
ATTRS = ("version", "numaid", "affinity", "busid", "class", "vendor", "device", "subsystem_vendor",
         "subsystem_device", "link_speed", "link_width", "dev", "rank", "gdr", "target", "count", "tclass", "name",
         "type", "os_index", "cpuset", "nodeset", "gp_index", "pci_busid", "pci_type", "pci_link_speed",
         "bridge_type", "bridge_pci", "depth", "subtype", "osdev_type", "value", "nbobjs", "kind", "indexing",
         "length", "speed", "port")
VALUES = ("0", "1", "-1", "2", "2.0", "1.11", "0x030200", "0x060400", "0x10de", "0xffff", "0000:1b:00.0",
          "ffff:ff:01.0", "fffffff:ffff:ff", "0000:[00-ff]", "0000:[01-01]", "0-1", "1-1", "16.0 GT/s PCIe",
          "Unknown", "", "0x1", "0x0000000f", "0302 [10de:2330] [10de:16c1] a1", "0604 [8086:2030] [0000:0000] 07",
          "Machine", "Package", "NUMANode", "Bridge", "PCIDev", "OSDev", "Group", "NVML", "NVLinkBandwidth",
          "mlx5_0", "ib0", "nvme0n1", "nvml0", "GPUModel", "1 2 3", "1000000 0 0 1000000", "9" * 30, "zz", "-0x1")


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


xml_text_value = st.sampled_from(VALUES) | st.text(alphabet="0123456789abcdefx -:.[]GT/s", max_size=20)
xml_element = st.recursive(
    st.tuples(st.sampled_from(TAGS), st.dictionaries(st.sampled_from(ATTRS), xml_text_value, max_size=5),
              st.just(()), st.sampled_from(("", "", " ", "1 2", "text"))),
    lambda kids: st.tuples(st.sampled_from(TAGS), st.dictionaries(st.sampled_from(ATTRS), xml_text_value,
                                                                  max_size=5),
                           st.lists(kids, max_size=5), st.sampled_from(("", "", " ", "7"))),
    max_leaves=25)


def render_xml(el) -> str:
    tag, attrs, kids, text = el
    a = "".join(f' {k}="{_esc(v)}"' for k, v in attrs.items())
    body = _esc(text) + "".join(render_xml(k) for k in kids)
    return f"<{tag}{a}>{body}</{tag}>" if body else f"<{tag}{a}/>"


@st.composite
def xml_docs(draw, root_tag: str):
    _, attrs, kids, text = draw(xml_element)
    if draw(st.booleans()):
        attrs = dict(attrs, version=draw(st.sampled_from(("1", "2", "2.0", "1.11", "x", ""))))
    prolog = draw(st.sampled_from(("", '<?xml version="1.0"?>\n', '<?xml version="1.0" encoding="UTF-8"?>\n')))
    return prolog + render_xml((draw(st.sampled_from((root_tag, root_tag, "x"))), attrs, kids, text))


XML_NOISE = ("<!DOCTYPE x>", "<!ENTITY a \"b\">", "&a;", "<![CDATA[x]]>", "<!-- c -->", "</pci>", "<pci>",
             '<?xml version="1.0" encoding="latin-1"?>', '<?xml version="1.0" encoding="bogus"?>')


@FUZZ
@given(xml_docs("system"))
def test_nccl_xml_random_trees(text):
    expect_snapshot_or_input_error(parse_nccl_xml, text, "nccl-xml-random")


@FUZZ
@given(mutated(NCCL_DOC, XML_NOISE))
def test_nccl_xml_mutations(text):
    expect_snapshot_or_input_error(parse_nccl_xml, text, "nccl-xml-mutated")


@FUZZ
@given(xml_docs("topology"))
def test_hwloc_xml_random_trees(text):
    expect_snapshot_or_input_error(parse_hwloc_xml, text, "hwloc-xml-random")


@FUZZ
@given(mutated(HWLOC_DOC, XML_NOISE))
def test_hwloc_xml_mutations(text):
    expect_snapshot_or_input_error(parse_hwloc_xml, text, "hwloc-xml-mutated")


# ---------------------------------------------------------------------------
# nvidia-smi -q, text and XML


SMI_TEXT = """
==============NVSMI LOG==============

Timestamp                                 : Tue Apr 16 14:07:52 2024
Driver Version                            : 550.54.15
CUDA Version                              : 12.4

Attached GPUs                             : 2
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Serial Number                         : 1652422095319
    GPU UUID                              : GPU-6513270e-269e-0d37-f2a7-4de452e6b438
    Minor Number                          : 0
    PCI
        Bus                               : 0x18
        Bus Id                            : 00000000:18:00.0
    FB Memory Usage
        Total                             : 81559 MiB
        Used                              : 0 MiB
    BAR1 Memory Usage
        Total                             : 131072 MiB
        Used                              : 1 MiB
        Free                              : 131071 MiB
    Processes
        GPU instance ID                   : N/A
        Process ID                        : 1234
            Type                          : C
            Name                          : python3
            Used GPU Memory               : 512 MiB

GPU 00000000:2A:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    BAR1 Memory Usage
        Total                             : [N/A]
        Used                              : [Not Supported]
    Processes                             : None
"""

SMI_XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>550.54.15</driver_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:18:00.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <serial>1652422095319</serial>
    <uuid>GPU-6513270e-269e-0d37-f2a7-4de452e6b438</uuid>
    <minor_number>0</minor_number>
    <pci><pci_bus_id>00000000:18:00.0</pci_bus_id></pci>
    <fb_memory_usage><total>81559 MiB</total><used>0 MiB</used></fb_memory_usage>
    <bar1_memory_usage><total>131072 MiB</total><used>1 MiB</used><free>131071 MiB</free></bar1_memory_usage>
    <processes>
      <process_info><pid>1234</pid><type>C</type><process_name>python3</process_name>
        <used_memory>512 MiB</used_memory></process_info>
    </processes>
  </gpu>
</nvidia_smi_log>
"""

SMI_LABELS = ("GPU 00000000:18:00.0", "GPU 0000:2a:00.0", "GPU zz", "Driver Version", "Product Name", "GPU UUID",
              "Serial Number", "Minor Number", "PCI", "Bus Id", "BAR1 Memory Usage", "FB Memory Usage", "Total",
              "Used", "Free", "Processes", "Process ID", "Type", "Name", "Used GPU Memory", "")
SMI_VALUES = ("", "N/A", "[N/A]", "[Not Supported]", "0", "0x1f", "-1", "12 MiB", "99999999999999999999 GiB",
              "1 KiB", "3 B", "00000000:18:00.0", "abc", ":", "None")


@st.composite
def smi_text_random(draw):
    lines = []
    for _ in range(draw(st.integers(0, 40))):
        indent = draw(st.sampled_from((0, 0, 4, 8, 12, 1, 3))) * " "
        if draw(st.booleans()):
            indent = draw(st.sampled_from(("\t", " \t", "")))
        label = draw(st.sampled_from(SMI_LABELS) | st.text(max_size=12))
        if draw(st.booleans()):
            lines.append(f"{indent}{label}")
        else:
            lines.append(f"{indent}{label} : {draw(st.sampled_from(SMI_VALUES) | st.text(max_size=12))}")
    return "\n".join(lines)


@FUZZ
@given(smi_text_random() | mutated(SMI_TEXT, SMI_LABELS))
def test_nvidia_smi_text(text):
    expect_smi_rows(text, xml=False)


SMI_TAGS = ("nvidia_smi_log", "driver_version", "gpu", "pci", "pci_bus_id", "product_name", "uuid", "serial",
            "minor_number", "bar1_memory_usage", "fb_memory_usage", "total", "used", "free", "processes",
            "process_info", "pid", "type", "process_name", "used_memory")
smi_element = st.recursive(
    st.tuples(st.sampled_from(SMI_TAGS), st.dictionaries(st.just("id"), st.sampled_from(SMI_VALUES), max_size=1),
              st.just(()), st.sampled_from(SMI_VALUES)),
    lambda kids: st.tuples(st.sampled_from(SMI_TAGS),
                           st.dictionaries(st.just("id"), st.sampled_from(SMI_VALUES), max_size=1),
                           st.lists(kids, max_size=5), st.sampled_from(("", " "))),
    max_leaves=30)


@FUZZ
@given(smi_element.map(lambda el: render_xml(("nvidia_smi_log",) + el[1:])) | mutated(SMI_XML, XML_NOISE))
def test_nvidia_smi_xml(text):
    expect_smi_rows(text, xml=True)


# ---------------------------------------------------------------------------
# pastes (issue 17): nvidia-smi topo -m, lspci -vvv, and their merge with a tree

# the Puget WRX90 node's matrix and an excerpt of its lspci -vvv (../shared/realworld/stelline-puget-*)
TOPO_M = """\
        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      PHB     NODE    NODE    0-23    0               N/A
GPU1    PHB      X      NODE    NODE    0-23    0               N/A
NIC0    NODE    NODE     X      PIX
NIC1    NODE    NODE    PIX      X

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""
TOPO_NOISE = ("GPU0", "NIC1", "\tGPU0\tGPU1\tNIC0\tCPU Affinity", "GPU0\tX\tOK", "== nvidia-smi topo -mp", "mlx5_0",
              "NV12", "SOC", "PIX", " X ", "\t", "CPU Affinity", "NUMA Affinity",
              "GPU NUMA ID", "$ nvidia-smi topo -m", "[sudo] password for x:", "  NIC2: mlx5_2", "Legend:", "N/A")
LSPCI_VVV = ("$ sudo lspci -vvv -s c1:00.0\n"
             "c1:00.0 VGA compatible controller: NVIDIA Corporation AD102GL [RTX 6000 Ada Generation] (rev a1) "
             "(prog-if 00 [VGA controller])\n") + """\
\tSubsystem: NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]
\tNUMA node: 0
\tBus: primary=00, secondary=01, subordinate=13, sec-latency=0
\tRegion 0: Memory at b4000000 (32-bit, non-prefetchable) [size=16M]
\tRegion 1: Memory at 13000000000 (64-bit, prefetchable) [size=64G]
\tCapabilities: [78] Express (v2) Legacy Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L1, Exit Latency L1 <4us
\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x16
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-
\tCapabilities: [bb0 v1] Physical Resizable BAR
\t\tBAR 1: current size: 64GB, supported: 64MB 128MB 256MB 512MB 1GB 2GB 4GB 8GB 16GB 32GB 64GB
\tKernel driver in use: nvidia
00: de 10 b1 26 07 04 10 00 a1 00 00 03 00 00 80 00
21:00.0 Ethernet controller [0200]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]
\tCapabilities: <access denied>
"""
VVV_NOISE = ("\tACSCtl:\tSrcValid+ ReqRedir+", "\tRegion 2: Memory at <unassigned> (64-bit, prefetchable)",
             "\tCapabilities: [100 v1] Advanced Error Reporting", "\t\tBAR 0: current size: 16MB, supported: 16MB",
             "10: 0c 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00", "c2:00.0 PCI bridge: X", "```", "GPU #1")
PUGET_TREE = """\
-+-[0000:00]-+-00.0  Advanced Micro Devices, Inc. [AMD] Device 14a4
 +-[0000:20]-+-01.1-[21]--+-00.0  Mellanox Technologies MT2910 Family [ConnectX-7]
 |           |            \\-00.1  Mellanox Technologies MT2910 Family [ConnectX-7]
 \\-[0000:c0]-+-01.1-[c1]--+-00.0  NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]
             \\-03.1-[c2]----00.0  NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]
"""


def expect_paste(kind: str, text: str) -> None:
    """A paste parses to its facts or raises InputError naming the file; merged with a tree, it evaluates."""
    from gdrcheck.collectors.inputs import sniff
    from gdrcheck.collectors.pastes.lspci_verbose import parse_lspci_verbose
    from gdrcheck.collectors.pastes.merge import Part, merge
    from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrices
    from gdrcheck.rules.engine import evaluate

    CASES[kind] += 1
    assert sniff(text) in (None, "lspci", "nccl-xml", "hwloc-xml", "nvidia-smi-q-xml", "nvidia-smi-q",
                           "topo-matrix", "topo-matrix-mp", "lspci-vvv", "acsctl-grep")
    try:
        data = (parse_topo_matrices(text, "fuzz.txt") if kind == "topo-matrix"
                else parse_lspci_verbose(text, "fuzz.txt"))
    except InputError as e:
        assert str(e).startswith("fuzz.txt"), str(e)
        return
    if kind == "lspci-vvv":
        for fn in data:
            expect_config_parses(fn.config or b"")
    tree = parse_lspci_tree(PUGET_TREE, "tree.txt")
    for parts in ([Part("fuzz.txt", kind, data)], [Part("tree.txt", "lspci", tree), Part("fuzz.txt", kind, data)]):
        try:
            snap = merge(parts)
        except InputError as e:
            assert str(e).startswith(("fuzz.txt", "tree.txt")), str(e)
            continue
        assert isinstance(snap, Snapshot)
        evaluate(snap)


@FUZZ
@given(mutated(TOPO_M, TOPO_NOISE))
def test_topo_matrix_mutations(text):
    expect_paste("topo-matrix", text)


@FUZZ
@given(st.lists(st.sampled_from(TOPO_NOISE + ("GPU1", "PHB", "NODE", "SYS", "0", "1", "\n", "    ")),
                max_size=60).map(" ".join))
def test_topo_matrix_random_text(text):
    expect_paste("topo-matrix", text)


@FUZZ
@given(mutated(LSPCI_VVV, VVV_NOISE))
def test_lspci_vvv_mutations(text):
    expect_paste("lspci-vvv", text)


# ---------------------------------------------------------------------------
# sysfs values, config space


RESOURCE_LINE = st.sampled_from((
    "0x00000000fb000000 0x00000000fbffffff 0x0000000000040200",
    "0x0000380000000000 0x0000381fffffffff 0x000000000014220c",
    "0x0000000000000000 0x0000000000000000 0x0000000000000000",
    "0xffffffffffffffff 0x0 0x20000000", "0x10 0x0f 0x200", "1 2", "0x1 0x2 0x3 0x4", "zz 0x1 0x2", "")) | st.text(
    alphabet="0123456789abcdefx \t-+_", max_size=60)


@FUZZ
@given(st.lists(RESOURCE_LINE, max_size=20).map("\n".join) | st.text(max_size=80) | st.sampled_from((
    "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s PCIe", "Unknown", "0", "0x10", "  12  ", "1e5 GT/s", "1_000",
    "\u0661\u0662", "-1", "9" * 5000)))
def test_sysfs_values(text):
    expect_sysfs_values(text)


@st.composite
def config_spaces(draw):
    """Random bytes, or a plausible header with a capability chain and random extended space."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=4200))
    size = draw(st.sampled_from((0, 1, 63, 64, 65, 255, 256, 257, 259, 260, 300, 4095, 4096, 5000)))
    cfg = bytearray(draw(st.binary(min_size=size, max_size=size)))
    if size >= 0x40:
        cfg[6] |= 0x10
        cfg[0x34] = draw(st.sampled_from((0x40, 0x34, 0xFC, 0x00, 0x60, 0xFF)))
    for off in draw(st.lists(st.sampled_from((0x100, 0x104, 0x140, 0x200, 0xFFC, 0xFF8)), max_size=6)):
        if off + 4 <= size:
            cap = draw(st.sampled_from((0x000D, 0x0015, 0x0024, 0xFFFF, 0)))
            nxt = draw(st.sampled_from((0, 0x100, 0x140, 0x200, 0xFFC, 0x040, off)))
            hdr = cap | (1 << 16) | (nxt << 20)
            cfg[off:off + 4] = hdr.to_bytes(4, "little")
    return bytes(cfg)


@FUZZ
@given(config_spaces())
def test_config_space(cfg):
    expect_config_parses(cfg)


# ---------------------------------------------------------------------------
# command replay from a capture


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=15)
command_records = st.dictionaries(
    st.sampled_from(("rc", "stdout", "stderr", "error", "x")), json_values, max_size=5)
KEYS = ("nvidia-smi -q -x", "nvidia-smi -q", "uname -r", "modinfo nvidia", "")


@FUZZ
@given(st.one_of(
    st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=10), command_records | json_values,
                    max_size=5).map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass"))),
    st.lists(st.sampled_from(KEYS) | st.text(max_size=10), max_size=3))
def test_commands_replay(content, keys):
    expect_replay(content, keys)


# ---------------------------------------------------------------------------
# linear time


def _best_of_3(fn: Callable[[], object]) -> float:
    """The least CPU time of three calls, in this process: what parsing costs, however loaded the machine is."""
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _assert_linear(make: Callable[[int], str], parse: Callable[[str], object], small: int) -> None:
    a, b = make(small), make(small * 10)
    assert len(b) >= 8 * len(a)
    ta = max(_best_of_3(lambda: parse(a)), 1e-4)
    tb = _best_of_3(lambda: parse(b))
    assert tb < 30 * ta + 0.05, (ta, tb)


def _many_roots_lspci(n: int) -> str:
    lines = ["-+-[0000:00]-+-00.0  Host bridge"]
    for i in range(n):
        lines.append(f" +-[{i + 1:04x}:00]-+-00.0  NVIDIA Corporation Device [10de:2330]")
        lines.append(" |            +-01.0-[01]----00.0  Mellanox Technologies [15b3:1021]")
        lines.append(" |            \\-02.0  Samsung NVMe SSD")
    lines.append(" \\-[ffff:00]---00.0  last")
    return "\n".join(lines) + "\n"


def _wide_nccl(n: int) -> str:
    body = "".join(f'<pci busid="{i // 200:04x}:{i % 200:02x}:00.0" class="0x030200" vendor="0x10de">'
                   f'<gpu dev="{i}" rank="{i}"/></pci>' for i in range(n))
    return f'<system version="1"><cpu numaid="0">{body}</cpu></system>'


def _wide_hwloc(n: int) -> str:
    body = "".join(f'<object type="PCIDev" gp_index="{i + 10}" pci_busid="{i // 200:04x}:{i % 200:02x}:00.0" '
                   f'pci_type="0302 [10de:2330] [10de:16c1] a1"/>' for i in range(n))
    return (f'<topology version="2.0"><object type="Machine" nodeset="0x1" gp_index="1">'
            f'<object type="Bridge" gp_index="2" bridge_type="0-1" bridge_pci="0000:[00-ff]">{body}</object>'
            f'</object></topology>')


def _smi_many(n: int) -> str:
    return "Driver Version : 1\n" + "".join(
        f"GPU 0000:{i % 256:02x}:00.0\n    Product Name : X\n    BAR1 Memory Usage\n        Total : 1 MiB\n"
        for i in range(n))


def test_parsers_take_linear_time():
    _assert_linear(_many_roots_lspci, lambda t: parse_lspci_tree(t, "big.txt"), 100)  # up to 4,096 functions
    _assert_linear(_wide_nccl, lambda t: parse_nccl_xml(t, "big.xml"), 150)
    _assert_linear(_wide_hwloc, lambda t: parse_hwloc_xml(t, "big.xml"), 150)
    # many comments or processing instructions between elements (quadratic in TreeBuilder's own handlers)
    _assert_linear(lambda n: '<system version="1">\n' + "<!-- x -->\n<?pi x?>\n" * n + "</system>\n",
                   lambda t: parse_nccl_xml(t, "c.xml"), 20000)
    _assert_linear(lambda n: '<topology version="2.0">' + "<!-- x -->\n" * n + "</topology>",
                   lambda t: parse_hwloc_xml(t, "c.xml"), 20000)
    _assert_linear(_smi_many, parse_smi_text, 50)  # 500 GPUs: a node may have up to 512
    from gdrcheck.collectors.pastes.lspci_verbose import parse_lspci_verbose
    from gdrcheck.collectors.pastes.topo_matrix import parse_topo_matrix

    _assert_linear(lambda n: "".join(f"{i // 32:02x}:{i % 32:02x}.0 PCI bridge: X\n\tBus: primary=00, "
                                     f"secondary=01, subordinate=02\n\tACSCtl:\tSrcValid- ReqRedir-\n"
                                     for i in range(n)), lambda t: parse_lspci_verbose(t, "v.txt"), 200)
    # a matrix grows as the square of its devices; linear in its text: one matrix behind many pasted lines
    _assert_linear(lambda n: "$ x\n" * n + TOPO_M, lambda t: parse_topo_matrix(t, "m.txt"), 2000)
    _assert_linear(lambda n: "\n".join("0x00000000fb000000 0x00000000fbffffff 0x0000000000040200"
                                       for _ in range(n)), parse_resource, 2000)
