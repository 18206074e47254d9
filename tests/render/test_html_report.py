"""``gdrcheck report``: one self-contained HTML page, and ``gdrcheck topology --format dot``.

Static checks read the page as a parser would (nothing it could load, every GPU
and NIC in the diagram and the matrix, well-formed SVG); headless Chromium then
looks at it as a reader would: on screen and in print at A4 width nothing spills
sideways, box labels stay inside their boxes and are large enough to read, the
page asks for nothing but itself, and it prints to A4 pages.
Set GDRCHECK_SCREENSHOTS=DIR to keep the screenshots and PDFs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.cli_util import ROOT, assert_clean_error, call, drain_pty

FIXTURES = ROOT / "fixtures"
H200 = FIXTURES / "h200-x4-vm" / "snapshot.tar.gz"
REALWORLD_INPUTS = (
    "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt",
    "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt",
    "kata-vra-a100x-bluefield2/host-lspci-tv-fragment.txt",
    "azure-ndv4/nccl-topo.xml",
    "rccl-mi300x-8p-8nic/nccl-topo.xml",
    "ibm-cloud-gx3d-h100x8-vsi/nccl-topo.xml",
    "aws-p5-48xlarge/nccl-topo.xml",
    "hwloc-nvidia-dgx2h/hwloc.xml",
    "hwloc-hp-sl390s-g7-3xtesla-cx2/hwloc.xml",
)
A4_TEXT_PX = 703  # 210 mm less 2 x 12 mm margins, at 96 px per inch
A4_PX = 794


# -- helpers ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_tree(tmp_path_factory):
    """The largest generated tree: 64 GPUs, 64 NICs, 64 NVMe behind nested switches, 8 NUMA nodes."""
    from support.shared_unpack import made_once

    from builders.servers import build

    return made_once("gen-64-64-64-nested",
                     lambda out: build(out, gpus=64, nics=64, nvme=64, sockets=8, nested=True), tmp_path_factory)


@pytest.fixture(scope="module")
def acs_and_x8(tmp_path_factory):
    """The healthy scenario node with ACS redirect on its switch ports and GPU0's link at x8."""
    from builders.scenarios import build
    from builders.sysfs_tree import ACS_CR, ACS_RR

    return build(tmp_path_factory.mktemp("scn") / "node", acs=ACS_RR | ACS_CR, gpu_width=8)


class Page(HTMLParser):
    """Tags with their attributes, and the text inside the diagram and inside the pair matrices."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.svg_text, self.matrix_text = [], []
        self._svg = self._matrix = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "svg":
            self._svg += 1
        if tag == "table" and "m" in (dict(attrs).get("class") or "").split():
            self._matrix += 1

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in ("text", "title", "td", "th"):
            self.handle_data("\n")
        if tag == "svg":
            self._svg -= 1
        if tag == "table" and self._matrix:
            self._matrix -= 1

    def handle_data(self, data):
        if self._svg:
            self.svg_text.append(data)
        if self._matrix:
            self.matrix_text.append(data)


def assert_self_contained(text: str) -> None:
    """Nothing the page could load: no script, stylesheet link, import, remote URL, image or frame."""
    low = text.lower()
    for bad in ("<script", "<link", "@import", "<img", "<iframe", "<object", "<embed", "<video", "<audio",
                "<base", "<form", "@font-face"):
        assert bad not in low, bad
    for m in re.finditer(r"url\(\s*['\"]?", low):
        assert low.startswith("data:", m.end()), low[m.start():m.start() + 60]
    page = Page(text)
    for tag, attrs in page.tags:
        for k, v in attrs.items():
            if k == "xmlns" and v == "http://www.w3.org/2000/svg":
                continue
            assert k not in ("src", "href", "xlink:href", "srcset", "action", "poster", "data", "background"), \
                (tag, k, v)
            assert not re.match(r"\s*(https?:|//|ftp:|file:)", v or "", re.I), (tag, k, v)
            if k == "http-equiv":
                assert (v or "").lower() not in ("refresh",), (tag, k, v)


def make_report(tmp_path: Path, source, *extra):
    out = tmp_path / "node.html"
    proc = call("report", "--from", source, "-o", out, *extra)
    return proc, out


_DOCS: dict[str, tuple[dict, dict, int]] = {}


def docs(source):
    """The topology and pairs documents of ``source`` and the pairs exit status, run once per input in this
    module (the inputs are not changed after they are built): read them, never change them."""
    key = str(source)
    if key not in _DOCS:
        topo = call("topology", "--json", "--from", source)
        assert topo.returncode == 0, topo.stderr
        pairs = call("pairs", "--json", "--from", source)
        _DOCS[key] = json.loads(topo.stdout), json.loads(pairs.stdout), pairs.returncode
    return _DOCS[key]


def check_page(tmp_path: Path, source) -> Path:
    """The report of ``source``: its exit status is the pairs status; it is whole, self-contained, complete."""
    proc, out = make_report(tmp_path, source)
    topo, pairs, code = docs(source)
    assert proc.returncode == code, (proc.returncode, code, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert "\r" not in proc.stderr and "wrote" not in proc.stderr  # no progress when stderr is not a terminal
    assert [p.name for p in tmp_path.iterdir()] == ["node.html"]  # the temporary file was renamed away
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert_self_contained(text)
    for svg in re.findall(r"<svg.*?</svg>", text, re.S):
        ET.fromstring(svg)  # well-formed: the diagram stays usable outside the page too
    page = Page(text)
    diagram, matrix = "".join(page.svg_text), "".join(page.matrix_text)
    # one numbering: the labels `pairs` gives (a NIC that is not a GPUDirect NIC has none)
    names = {d["bdf"]: d["label"] for d in pairs.get("devices") or []
             if d.get("kind") in ("gpu", "nic") and d.get("label")}
    for bdf, name in names.items():
        assert re.search(rf"\b{re.escape(name)} {re.escape(bdf)}\b", diagram), (name, bdf)
    gpus = [b for b, n in names.items() if n.startswith("GPU")]
    if gpus:
        for bdf, name in names.items():
            if name.startswith("NIC") or len(gpus) > 1:
                assert re.search(rf"\b{re.escape(name)}\b", matrix), name
    word = {"pass": "PASS", "fail": "FAIL", "unknown": "UNKNOWN"}[pairs["status"]] if "status" in pairs else None
    if word:
        assert f'<span class="word">{word}</span>' in text
    for f in pairs["findings"]:
        assert f["code"] in text
    return out


# -- the page ----------------------------------------------------------------------

@pytest.mark.parametrize("rel", REALWORLD_INPUTS)
def test_report_of_real_inputs(realworld, tmp_path, rel):
    check_page(tmp_path, realworld / rel)


def test_report_of_h200_snapshot(tmp_path):
    out = check_page(tmp_path, H200)
    text = out.read_text()
    topo, _pairs, _code = docs(H200)
    assert topo["host_facts"]["nvidia_driver_version"]["value"] in text
    assert topo["host_facts"]["kernel_release"]["value"] in text
    assert "NV18" in text  # the NVLink class in the GPU-GPU cells


@pytest.fixture(scope="module")
def big_page(tmp_path_factory, big_tree) -> Path:
    """The checked report of the largest generated tree, written once for the tests that read it."""
    return check_page(tmp_path_factory.mktemp("big-page"), big_tree)


def test_report_of_largest_generated_tree(big_page):
    text = big_page.read_text()
    svgs = re.findall(r"<svg.*?</svg>", text, re.S)
    assert len(svgs) >= 8 and sum("(continued)" not in s for s in svgs) == 8  # one band per NUMA node
    for svg in svgs:  # each slice of a band starts at a root bus: the cut fell between two of them
        assert svg.count("root bus") >= 1 and "(cont.)" not in svg and " ghost" not in svg
    assert "columns 61\u201364 of 64" in text  # the GPU-GPU matrix in column blocks


def test_tall_band_is_cut_at_switch_seams(tmp_path):
    """64 devices on one NUMA node: several diagrams, each cut between switches, none taller than a page."""
    from builders.servers import build
    from gdrcheck.render.svg_tree import render_svgs

    build(tmp_path / "one", gpus=32, nics=16, nvme=16, sockets=1, nested=True)
    doc = json.loads(call("topology", "--json", "--from", tmp_path / "one").stdout)
    svgs, forest = render_svgs(doc)
    assert len(svgs) >= 2 and forest.hidden == 0
    assert sum(s.count('class="box k-gpu') for s in svgs) == 32
    for svg in svgs[1:]:
        assert "(continued)" in svg
    for svg in svgs:
        _x, _y, w, h = map(float, re.search(r'viewBox="([^"]+)"', svg).group(1).split())
        assert h * min(1.0, 700 / w) <= 900


def test_marks_acs_redirect_and_narrow_link(tmp_path, acs_and_x8):
    out = check_page(tmp_path, acs_and_x8)
    svg = " ".join(re.findall(r"<svg.*?</svg>", out.read_text(), re.S))
    assert re.search(r'class="edge acs', svg) and ">ACS</text>" in svg  # downstream ports with redirect
    assert "Gen5 x8 (max Gen5 x16)" in svg and re.search(r'class="box k-gpu low', svg)
    topo, _p, _c = docs(acs_and_x8)
    assert any((d.get("acs") or {}).get("redirect") for d in topo["devices"])
    assert all("acs" in d for d in topo["devices"] if d["kind"].endswith(("port", "upstream", "downstream")))


def test_redact(tmp_path, acs_and_x8):
    plain, hidden = tmp_path / "plain.html", tmp_path / "hidden.html"
    assert call("report", "--from", acs_and_x8, "-o", plain).returncode == 1
    assert call("report", "--from", acs_and_x8, "-o", hidden, "--redact").returncode == 1
    assert "gpu-node-01" in plain.read_text()
    text = hidden.read_text()
    assert "gpu-node-01" not in text and "redacted-host" in text
    assert not re.search(r"GPU-[0-9a-f]{8}-(?!0000)", text)


def test_progress_only_on_a_terminal(tmp_path):
    """With stderr on a terminal a progress line shows and is wiped; the page is the same."""
    import pty

    main, sub = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "gdrcheck", "report", "--from", str(H200), "-o",
                           str(tmp_path / "t.html")], stdout=subprocess.PIPE, stderr=sub, env=env, timeout=120)
    os.close(sub)
    said = drain_pty(main)
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"gdrcheck: writing" in said and b"\x1b[2K" in said and b"wrote" in said


def test_render_time_of_largest_tree(big_tree):
    """The renderer is a function of the three documents: well under a second for 512 functions."""
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.documents.bar1 import bar1_doc
    from gdrcheck.documents.pairs import pairs_doc
    from gdrcheck.documents.rules import rules_part
    from gdrcheck.documents.topology import topology_doc
    from gdrcheck.render.html_report import render_html
    from gdrcheck.rules.engine import evaluate

    report = evaluate(load_facts(str(big_tree), endpoint_config=True))
    args = (topology_doc(report.topo, describe_input=True), pairs_doc(report),
            bar1_doc(report.snap, report.topo, report.findings), rules_part(f.code for f in report.findings))
    best = min(_timed(render_html, args) for _ in range(3))
    assert best < 0.5, best


def _timed(fn, args) -> float:
    """The CPU time ``fn`` takes in this process: what rendering costs, not how loaded the machine is."""
    t = time.process_time()
    fn(*args)
    return time.process_time() - t


def test_bad_usage_is_one_line(tmp_path, realworld):
    assert_clean_error(call("report", "--from", H200))  # -o is required
    assert_clean_error(call("report", "--from", tmp_path / "nothing", "-o", tmp_path / "x.html"))
    assert_clean_error(call("report", "--from", H200, "-o", tmp_path / "no" / "such" / "dir.html"))
    assert_clean_error(call("report", "--from", H200, "-o", tmp_path))
    notes = realworld / "azure-ncv4" / "SOURCE.md"  # none of the input kinds
    assert_clean_error(call("report", "--from", notes, "-o", tmp_path / "g.html"))
    assert_clean_error(call("report", "--from", H200, "-o", tmp_path / "v.html", "--nccl-version", "x"))
    assert list(tmp_path.iterdir()) == []


def test_replaces_an_existing_page(tmp_path):
    out = tmp_path / "node.html"
    out.write_text("old")
    proc = call("report", "--from", H200, "-o", out)
    assert proc.returncode == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node.html"]


# -- DOT ---------------------------------------------------------------------------

def test_dot_of_scenario_and_largest_tree(tmp_path, acs_and_x8, big_tree):
    for source in (acs_and_x8, big_tree, H200):
        proc = call("topology", "--format", "dot", "--from", source)
        assert proc.returncode == 0, proc.stderr
        dot = proc.stdout
        assert dot.startswith("digraph pcie {") and dot.rstrip().endswith("}")
        assert "subgraph cluster_numa_0" in dot and '"cluster_root_' in dot
        topo = docs(source)[0]
        for d in topo["devices"]:
            if d["kind"] in ("gpu", "nic", "nvme"):
                assert f'"{d["bdf"]}" [label=' in dot, d["bdf"]
        if shutil.which("dot"):
            svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=120)
            assert svg.returncode == 0, svg.stderr
            assert "<svg" in svg.stdout
    dot = call("topology", "--format", "dot", "--from", acs_and_x8).stdout
    assert "ACS redirect (RR CR)" in dot and 'penwidth=2.5' in dot
    assert 'style=dashed, penwidth=1.8, label="Gen5 x8 (max Gen5 x16)"' in dot
    every = call("topology", "--format", "dot", "--all", "--from", acs_and_x8).stdout
    assert every.count("[label=") >= dot.count("[label=")


def test_dot_to_file_and_json_unchanged(tmp_path):
    out = tmp_path / "t.dot"
    proc = call("topology", "--format", "dot", "--from", H200, "--output", out)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert out.read_text().startswith("digraph pcie {")
    assert_clean_error(call("pairs", "--format", "dot", "--from", H200))


# -- as a reader sees it -----------------------------------------------------------

MEASURE = r"""(function () {
  var W = document.documentElement.clientWidth, over = [], spill = [], labels = [], small = 1e9;
  document.querySelectorAll('body *').forEach(function (e) {
    if (e.closest('svg') && e.tagName.toLowerCase() !== 'svg') return;
    var r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > W + 0.5 || r.left < -0.5))
      over.push(e.tagName + '.' + (e.getAttribute('class') || ''));
  });
  document.querySelectorAll('svg.tree').forEach(function (svg) {
    var s = svg.getBoundingClientRect();
    svg.querySelectorAll('g').forEach(function (g) {
      var b = g.querySelector('rect').getBoundingClientRect();
      g.querySelectorAll('text').forEach(function (t) {
        var r = t.getBoundingClientRect();
        small = Math.min(small, r.height);
        if (r.right > b.right + 0.5 || r.left < b.left - 0.5) spill.push(t.textContent);
        if (t.querySelector('tspan.b') && r.top >= s.top - 0.5 && r.bottom <= s.bottom + 0.5
            && r.right <= s.right + 0.5)
          labels.push(t.textContent);
      });
    });
  });
  return {W: W, scroll: document.documentElement.scrollWidth, over: over.slice(0, 20), spill: spill.slice(0, 20),
          small: small, labels: labels};
})()"""


@pytest.fixture
def browser(tmp_path):
    from support.chromium import Chromium, executable

    exe = executable()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    if os.geteuid() != 0:
        pytest.skip("chromium runs here as root with --no-sandbox only")
    with Chromium(exe, tmp_path / "profile") as c:
        yield c


def _look(browser, page: Path, tmp_path: Path, names) -> None:
    keep = os.environ.get("GDRCHECK_SCREENSHOTS")
    for media, width in (("screen", 1240), ("screen", A4_PX), ("print", A4_TEXT_PX)):
        browser.open(page, width, media=media)
        m = browser.evaluate(MEASURE)
        asked = browser.requested()
        assert asked and set(asked) == {page.resolve().as_uri()}, asked  # the page itself, nothing else
        assert m["scroll"] <= m["W"], (media, width, m)
        assert not m["over"], (media, width, m["over"])
        assert not m["spill"], (media, width, m["spill"])
        assert m["small"] >= 6, (media, width, m["small"])  # the smallest label still about 5 pt on paper
        seen = " ".join(m["labels"])
        for bdf, name in names.items():
            assert f"{name} {bdf}" in seen, (media, width, name, bdf)
        shot = tmp_path / f"{page.stem}-{media}-{width}.png"
        browser.screenshot(shot)
        assert shot.stat().st_size > 1000
        if keep:
            shutil.copy(shot, keep)
    pdf = browser.pdf(tmp_path / f"{page.stem}.pdf")
    boxes = set(re.findall(rb"/MediaBox \[([^\]]*)\]", pdf))
    assert boxes and all(abs(float(b.split()[2]) - 595) < 2 and abs(float(b.split()[3]) - 842) < 2
                         for b in boxes), boxes  # A4
    pages = len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf))
    assert pages >= 1
    if keep:
        shutil.copy(tmp_path / f"{page.stem}.pdf", keep)



def _names(source):
    """GPUs and NICs as `gdrcheck pairs` names them (one numbering everywhere; a NIC that is not a GPUDirect NIC
    has no number)."""
    doc = docs(source)[1]
    names = {}
    for d in doc["devices"]:
        if d["kind"] in ("gpu", "nic"):
            names[d["bdf"]] = d.get("label") or d["kind"].upper()
    return names


# each leaves verdicts open (no driver, no BAR1 size in the input): unknown, 3
@pytest.mark.parametrize("rel", ("stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt",
                                 "rccl-mi300x-8p-8nic/nccl-topo.xml", "hwloc-nvidia-dgx2h/hwloc.xml"))
def test_browser_real_inputs(browser, realworld, tmp_path, rel):
    source = realworld / rel
    page = tmp_path / (rel.split("/")[0] + ".html")
    assert call("report", "--from", source, "-o", page).returncode == 3
    _look(browser, page, tmp_path, _names(source))


def test_browser_h200_and_marks(browser, tmp_path, acs_and_x8):
    # the H200 guest passes; ACS redirect on the switch fails GPUDirect RDMA there: 1
    for source, stem, status in ((H200, "h200-x4-vm", 0), (acs_and_x8, "acs-x8", 1)):
        page = tmp_path / f"{stem}.html"
        assert call("report", "--from", source, "-o", page).returncode == status, stem
        _look(browser, page, tmp_path, _names(source))


def test_browser_largest_tree(browser, tmp_path, big_tree, big_page):
    # a generated tree has no host facts (peer memory, IOMMU, NVLink): its verdicts stay open, 3 (the report's
    # status is the pairs status: check_page holds it)
    assert docs(big_tree)[2] == 3
    _look(browser, big_page, tmp_path, _names(big_tree))


def test_parents_that_loop_still_draw_every_device():
    """A damaged input whose parent pointers loop: the loop is cut, every GPU and NIC still drawn."""
    from gdrcheck.render.dot import render_dot
    from gdrcheck.render.svg_tree import render_svgs

    doc = {"roots": [{"root": "0000:00", "numa_node": None}], "devices": [
        {"bdf": "0000:01:00.0", "parent": "0000:02:00.0", "root": "0000:00", "kind": "bridge", "link": {}},
        {"bdf": "0000:02:00.0", "parent": "0000:01:00.0", "root": "0000:00", "kind": "bridge", "link": {}},
        {"bdf": "0000:03:00.0", "parent": "0000:02:00.0", "root": "0000:00", "kind": "gpu", "gpu_index": 0,
         "link": {}},
        {"bdf": "0000:04:00.0", "parent": "0000:04:00.0", "root": "0000:00", "kind": "nic", "link": {}}]}
    svg = " ".join(render_svgs(doc)[0])
    assert '<tspan class="b">GPU0</tspan> 0000:03:00.0' in svg and '<tspan class="b">NIC0</tspan> 0000:04:00.0' in svg
    dot = render_dot(doc)
    assert '"0000:03:00.0" [label=' in dot and '"0000:04:00.0" [label=' in dot
