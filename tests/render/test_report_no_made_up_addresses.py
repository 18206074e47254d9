"""The HTML report names a matrix's devices as ``pairs`` does (GPU0, NIC mlx5_0), never by the addresses
gdrcheck made up for them (ffff:...): not in the diagram, the matrix headers, the device table or BAR1."""

from __future__ import annotations

from support.cli_util import call

DELLA = "princeton-della-cryoem-4xa100sxm/nvidia-smi-topo-m.txt"  # topo -m: four GPUs and mlx5_0, no bus ids


def test_della_topo_m_report_shows_names_not_ffff(realworld, tmp_path):
    out = tmp_path / "r.html"
    r = call("report", "--from", realworld / DELLA, "-o", out)
    assert r.returncode == 3, r.stderr
    page = out.read_text()
    body, _, notes = page.partition('<section id="notes">')
    assert "ffff:" not in body and "<svg" not in body.split('<section id="pairs">')[0]
    assert "GPU0 (NUMA 0), GPU1 (NUMA 0), GPU2 (NUMA 1), GPU3 (NUMA 1), NIC mlx5_0 (NUMA ?)" in body
    assert '<th title="no bus id in this input">GPU0</th>' in body
    assert '<td class="mono">no bus id in this input</td>' in body
    assert "GPU0 of nvidia-smi topo -m" not in body
    assert "5 PCI functions placed in no PCIe tree the input shows" in body  # not "on 5 root buses"
    assert "synthetic addresses in domain ffff" in notes  # said once, as what --json holds


def test_a_tree_input_still_draws_its_addresses(realworld, tmp_path):
    out = tmp_path / "r.html"
    call("report", "--from", realworld / "stelline-puget-wrx90-2xrtx6000ada" / "lspci-tv.txt", "-o", out)
    page = out.read_text()
    assert "<svg" in page and "0000:c1:00.0" in page and "no bus id" not in page


def test_dot_draws_a_matrix_without_made_up_root_buses_or_addresses(realworld):
    """`topology --format dot` of a topo -m paste: its devices in one cluster, not placed, and no ffff label."""
    dot = call("topology", "--format", "dot", "--from", realworld / DELLA).stdout
    assert "not placed in a PCIe tree" in dot and "root bus" not in dot
    assert not [ln for ln in dot.splitlines() if "label=" in ln and "\\nffff:" in ln]
