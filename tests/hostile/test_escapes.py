"""Terminal escapes and forged lines from every input, into every output.

A string an input carries (an NCCL setting's value from the environment, a settings file or a snapshot's
env.json; a netdev or RDMA device name read from a sysfs directory name; a device name in an ``lspci -tv``,
``nvidia-smi -q``, NCCL or hwloc XML paste) may hold ESC, BEL, CR, a line break, a C1 control or a Unicode
line separator. Text outputs show it through the one sanitiser (:func:`gdrcheck.collectors.clip.printable`):
no raw control character reaches a terminal, and no value begins a line of its own (``fingerprint
--explain`` is compared with ``clush --diff``). JSON keeps the string exactly, every control escaped.

Each source is a real input (a captured tree's layout, a real paste) with escapes put into its strings.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.nccl_nodes import build

ROOT = Path(__file__).resolve().parents[2]
# what a terminal would obey: C0 but \n, DEL, C1, and the Unicode line/paragraph separators
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")
MARK = "FORGED"
ESC = f"\x1b]0;owned\x07\x1b[2J\r\n{MARK}=1\x1b[31m\x9b1m\u2028{MARK}\x85"  # title, clear, CR, new line...
XML_ESC = f"&#13;&#10;{MARK}=1\u009b31m\u2028{MARK}\u0085"  # what XML 1.0 can carry: CR, LF, C1, U+2028

TEXT_OUTPUTS = (
    ("pairs",), ("topology",), ("topology", "--all"), ("topology", "--format", "dot"),
    ("fingerprint",), ("fingerprint", "--explain"), ("fingerprint", "--explain", "--addresses"),
    ("check",), ("check", "--format", "nhc"), ("check", "--format", "npd"), ("check", "--format", "nagios"),
    ("check", "--format", "prometheus"), ("bar1",), ("report", "-o", "-"),
)
JSON_OUTPUTS = (("pairs", "--json"), ("topology", "--json"), ("check", "--format", "jsonl"))


def _rename_class(root: Path, cls: str, old: str, new: str) -> None:
    """``/sys/class/<cls>/<old>`` and the directory it points to, renamed ``new``."""
    link = root / "sys/class" / cls / old
    target = os.readlink(link)
    real = (link.parent / target).resolve()
    real.rename(real.with_name(new))
    link.unlink()
    (link.parent / new).symlink_to(target.rsplit("/", 1)[0] + "/" + new)


def _node(root: Path, env_json: str = "{}", conf: str = "") -> Path:
    build(root, devices=[("gpu", "0000:03:00.0", 0, "switch"), ("nic", "0000:04:00.0", 0, "switch"),
                         ("gpu", "0000:83:00.0", 1, "root")],
          files={"/gdrcheck/env.json": env_json, "/etc/nccl.conf": conf})
    return root


def _sysfs_names(tmp: Path):
    root = _node(tmp / "sysfs")
    _rename_class(root, "net", "ib0", "ib" + ESC)
    _rename_class(root, "infiniband", "mlx5_0", "mlx5_" + ESC)
    return [str(root)], ["ib" + ESC, "mlx5_" + ESC]


def _nccl_conf(tmp: Path):
    conf = f"NCCL_P2P_LEVEL=SYS{ESC}\nNCCL_NET_GDR_LEVEL=PHB{ESC}\nNCCL_TOPO_FILE=/t{ESC}\n"
    return [str(_node(tmp / "conf", conf=conf))], ["SYS" + ESC.split("\r")[0]]  # a line of the file ends at CR LF


def _env_json(tmp: Path):
    env = {"NCCL_P2P_LEVEL": "NVL" + ESC, "NCCL_DMABUF_ENABLE": "0" + ESC, "NCCL_NET_GDR_READ": ESC}
    return [str(_node(tmp / "env", env_json=json.dumps(env)))], ["NVL" + ESC]


def _snapshot(tmp: Path):
    """A real snapshot (fixtures/h100-x2-vm) whose env.json and /etc/nccl.conf were edited."""
    import tarfile

    out = tmp / "node.tar.gz"
    with tarfile.open(ROOT / "fixtures/h100-x2-vm/snapshot.tar.gz") as src, tarfile.open(out, "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name.endswith("gdrcheck/env.json"):
                env = json.loads(data)
                env.update({"NCCL_P2P_LEVEL": "PIX" + ESC, "NCCL_TOPO_FILE": "/x" + ESC})
                data = json.dumps(env).encode()
            elif m.name.endswith("etc/nccl.conf"):
                data += f"NCCL_NET_GDR_LEVEL=SYS{ESC}\n".encode()
            if data is not None:
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    unpacked = tmp / "node"  # what --from makes of the archive, once rather than in every command
    with tarfile.open(out) as t:
        t.extractall(unpacked, **({"filter": "tar"} if hasattr(tarfile, "data_filter") else {}))
    return [str(unpacked)], ["PIX" + ESC]


def _lspci(tmp: Path, realworld: Path):
    text = (realworld / "stelline-puget-wrx90-2xrtx6000ada/lspci-tv.txt").read_text()
    text = text.replace("NVIDIA Corporation", "NVIDIA" + ESC.replace("\n", "").replace("\r", ""))
    p = tmp / "lspci-tv.txt"
    p.write_text(text)
    return [str(p)], []


def _nvidia_smi(tmp: Path):
    text = (ROOT / "fixtures/nvidia-smi-q/h100-sxm-550.txt").read_text()
    text = text.replace("NVIDIA H100 80GB HBM3", "H100" + ESC.replace("\n", "").replace("\r", ""))
    p = tmp / "nvidia-smi-q.txt"
    p.write_text(text)
    return [str(p)], []


def _nccl_xml(tmp: Path, realworld: Path):
    text = (realworld / "ibm-cloud-gx3d-h100x8-vsi/nccl-topo.xml").read_text()
    text = text.replace('name="mlx5_7"', f'name="mlx5_7{XML_ESC}"')
    p = tmp / "nccl-topo.xml"
    p.write_text(text)
    return [str(p)], []


def _hwloc_xml(tmp: Path, realworld: Path):
    text = (realworld / "hwloc-hp-sl390s-g7-3xtesla-cx2/hwloc.xml").read_text()
    text = text.replace('name="ib0"', f'name="ib0{XML_ESC}"').replace('name="mlx4_0"', f'name="mlx4_0{XML_ESC}"')
    p = tmp / "hwloc.xml"
    p.write_text(text)
    return [str(p)], []


def _allowed(argv) -> tuple:
    """The exit statuses of a verdict in this output (NPD's unknown is 2, Nagios' critical 2)."""
    return {"npd": (0, 1, 2), "nagios": (0, 1, 2, 3)}.get(argv[-1] if "--format" in argv else "", (0, 1, 3))


def _gdrcheck(argv, capsys):
    from gdrcheck.cli.entry import main

    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def _assert_shown(out: str, what) -> None:
    bad = RAW.search(out)
    assert bad is None, (what, repr(out[max(0, bad.start() - 60):bad.end() + 60]))
    forged = [ln for ln in out.splitlines() if ln.startswith(MARK)]  # wrapped text goes on indented
    assert not forged, (what, forged)


SOURCES = ("sysfs-names", "nccl.conf", "env.json", "snapshot", "lspci", "nvidia-smi", "nccl-xml", "hwloc-xml")


@pytest.mark.parametrize("source", SOURCES)
def test_no_control_character_reaches_a_text_output(source, tmp_path, realworld, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    make = {"sysfs-names": _sysfs_names, "nccl.conf": _nccl_conf, "env.json": _env_json, "snapshot": _snapshot,
            "lspci": lambda t: _lspci(t, realworld), "nvidia-smi": _nvidia_smi,
            "nccl-xml": lambda t: _nccl_xml(t, realworld), "hwloc-xml": lambda t: _hwloc_xml(t, realworld)}[source]
    paths, exact = make(tmp_path)
    froms = [a for p in paths for a in ("--from", p)]
    reached = False
    for argv in TEXT_OUTPUTS:
        code, out, err = _gdrcheck([*argv, *froms], capsys)
        assert code in _allowed(argv), (argv, code, err)
        _assert_shown(out, argv)
        _assert_shown(err, argv)
        reached = reached or "?]0;owned" in out or "?31m" in out
    assert reached, f"the escapes of {source} reach no output: the test no longer tests it"
    docs = []
    for argv in JSON_OUTPUTS:
        code, out, err = _gdrcheck([*argv, *froms], capsys)
        assert not RAW.search(out), argv
        docs += [json.loads(line) for line in out.splitlines()] if "jsonl" in argv else [json.loads(out)]
    text = json.dumps(docs)
    for s in exact:  # the exact string, escaped, as the input had it
        assert json.dumps(s)[1:-1] in text, s


def test_the_live_environment(tmp_path, capsys, monkeypatch):
    """``NCCL_*`` in the environment of a live run: the same layer as a snapshot's env.json, read from
    ``os.environ``; the facts are collected live and rendered by the commands as they are."""
    from gdrcheck.cli.run import Run
    from gdrcheck.collectors.host import collect_host
    from gdrcheck.collectors.inputs import load_facts
    from gdrcheck.io.source import Source
    from gdrcheck.record import replace

    root = _node(tmp_path / "live")
    monkeypatch.setenv("NCCL_P2P_LEVEL", "PIX" + ESC)
    monkeypatch.setenv("NCCL_NET_GDR_LEVEL", ESC)
    live_host, _ = collect_host(Source(str(root), live=True), [])
    assert live_host["nccl_env"].value["NCCL_P2P_LEVEL"]["source"] == "environment"
    facts = load_facts(str(root))
    facts = replace(facts, host={**facts.host, "nccl_env": live_host["nccl_env"],
                                 "nccl_conf": live_host["nccl_conf"]})
    monkeypatch.setattr(Run, "load", lambda self, **kw: facts)
    reached = False
    for argv in TEXT_OUTPUTS:
        code, out, err = _gdrcheck([*argv, "--from", str(root)], capsys)
        assert code in _allowed(argv), (argv, code, err)
        _assert_shown(out, argv)
        reached = reached or "PIX?]0;owned" in out
    assert reached
    code, out, _ = _gdrcheck(["fingerprint", "--json", "--from", str(root)], capsys)
    assert f"host.nccl.NCCL_P2P_LEVEL=PIX{ESC}" in json.loads(out)["lines"]


def test_a_probe_file_in_the_report(tmp_path, capsys):
    """``report --probe FILE``: the probe's JSON (messages, names, errors) is an input too."""
    def hostile(v):
        if isinstance(v, dict):
            return {k: hostile(x) for k, x in v.items()}
        if isinstance(v, list):
            return [hostile(x) for x in v]
        return v + ESC if isinstance(v, str) and len(v) > 12 and not v[0].isdigit() else v

    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(hostile(json.loads((ROOT / "fixtures/h100-x1-vm/probe.json").read_text()))))
    code, out, err = _gdrcheck(["report", "--probe", str(probe), "--from",
                                str(ROOT / "fixtures/h100-x1-vm/snapshot.tar.gz"), "-o", "-"], capsys)
    assert code == 0, err  # the H100 guest passes; the probe's words change no verdict
    assert "?]0;owned" in out
    _assert_shown(out, "report --probe")


def test_explain_lines_stay_one_fact_a_line(tmp_path, capsys):
    """``fingerprint --explain`` is meant for ``clush --diff``: every line is one ``key=value``."""
    paths, _ = _env_json(tmp_path)
    code, out, _ = _gdrcheck(["fingerprint", "--explain", "--from", paths[0]], capsys)
    lines = out.splitlines()
    assert lines and all(re.match(r"^[a-z][a-z0-9_.\[\],]*(\.[A-Za-z0-9_]+)*=", ln) for ln in lines), lines
    assert any(ln.startswith("host.nccl.NCCL_P2P_LEVEL=NVL?]0;owned") for ln in lines)


def test_json_escapes_c1_and_line_separators():
    from gdrcheck.render.json_out import render_json

    doc = {"name": "a\x1b\x9b\u2028\u2029\x7fb"}
    for pretty in (False, True):
        text = render_json(doc, pretty=pretty)
        assert not RAW.search(text.replace("\n", ""))
        assert json.loads(text) == doc


def test_the_sanitiser_on_documents():
    from gdrcheck.collectors.clip import printable

    assert printable({"k\x1b": ["a\nb", ("c\u2028",), 3, None]}) == {"k?": ["a b", ["c?"], 3, None]}
    assert printable("plain") == "plain"


def test_lone_surrogates(tmp_path, capsys):
    """A JSON input's ``"\\ud800"`` and a netdev name that is not UTF-8 (byte 0xff) are strings no output can
    encode: each output shows '?' (JSON the escape), never ``internal error: UnicodeEncodeError``."""
    root = _node(tmp_path / "s", env_json='{"NCCL_P2P_LEVEL": "SYS\\ud800"}')
    _rename_class(root, "net", "ib0", "ib\udcff")  # os.fsencode: the byte 0xff
    for argv in (*TEXT_OUTPUTS, *JSON_OUTPUTS):
        code, out, err = _gdrcheck([*argv, "--from", str(root)], capsys)
        assert code in _allowed(argv), (argv, code, err)
        out.encode()
        assert "internal error" not in err
    code, out, _ = _gdrcheck(["pairs", "--json", "--from", str(root)], capsys)
    assert '"SYS\\ud800"' in out and "ib\\udcff" in out


# ---------------------------------------------------------------------------
# every writer, on documents whose input strings are anything (benchmarks/fuzz_campaign.py runs it long)

EXAMPLES = int(os.environ.get("GDRCHECK_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CASES: Counter = Counter()  # property name -> examples run (read by the campaign)
# the fields of a document that carry an input's strings (names, messages, where a fact came from)
FREE = ("name", "host", "message", "label", "source", "detail", "hint", "evidence", "rdma_basis", "reason",
        "netdevs", "rdma_devices", "nvme_names", "driver", "path", "value")
HOSTILE = st.text(alphabet=st.sampled_from("ab |`<>&\"'\\\n\r\t\x00\x07\x1b[]\x7f\x85\x9b\u2028\u2029\ud800\udcff"
                                          "\u00e9\u4e2d\U0001f600"), max_size=10)
_DOCS: dict = {}


def node_docs() -> dict:
    """The documents (pairs, topology, bar1, rules) of a fake node with a NIC, built once."""
    if not _DOCS:
        from gdrcheck.collectors.inputs import load_facts
        from gdrcheck.documents.node import node_documents
        from gdrcheck.rules.engine import evaluate

        with tempfile.TemporaryDirectory() as d:
            root = _node(Path(d), env_json=json.dumps({"NCCL_P2P_LEVEL": "PIX", "NCCL_IB_HCA": "mlx5_0"}))
            _DOCS.update(node_documents(evaluate(load_facts(str(root))), describe_input=True))
    return json.loads(json.dumps(_DOCS))


def _free_strings(value, at=()):
    """The places of the strings an input could have put in a document."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in FREE and isinstance(v, str):
                yield at + (k,)
            elif k in FREE and isinstance(v, list):
                yield from (at + (k, i) for i, s in enumerate(v) if isinstance(s, str))
            else:
                yield from _free_strings(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _free_strings(v, at + (i,))


@st.composite
def hostile_docs(draw):
    docs = node_docs()
    places = list(_free_strings(docs))
    for at in draw(st.lists(st.sampled_from(places), min_size=1, max_size=12)):
        parent = docs
        for k in at[:-1]:
            parent = parent[k]
        parent[at[-1]] = parent[at[-1]] + draw(HOSTILE)
    return docs


def expect_clean_writers(docs: dict) -> None:
    """Every text writer shows the documents without a raw control character, in text UTF-8 can carry; JSON
    keeps each string exactly, written through the output file writer."""
    from gdrcheck.collectors.clip import printable
    from gdrcheck.io.output import deliver
    from gdrcheck.render import adapters
    from gdrcheck.render.bar1_text import render_bar1
    from gdrcheck.render.console import make_console
    from gdrcheck.render.dot import render_dot
    from gdrcheck.render.html_report import render_html
    from gdrcheck.render.json_out import render_json
    from gdrcheck.render.pairs_text import render_pairs
    from gdrcheck.render.prometheus import render_prometheus
    from gdrcheck.render.topology_text import render_topology

    CASES["writers"] += 1
    shown = printable(docs)
    outs = [render_dot(shown["topology"], show_all=True),
            render_prometheus(shown["pairs"], shown["bar1"], shown["topology"], "0", 0.1, 0.0, per_pair=True),
            render_html(shown["topology"], shown["pairs"], shown["bar1"], shown["rules"], [])]
    outs += [fn(shown["pairs"])[0] for fn in (adapters.check_text, adapters.nhc, adapters.npd, adapters.nagios)]
    for render, doc in ((render_pairs, shown["pairs"]), (render_topology, shown["topology"]),
                        (render_bar1, shown["bar1"])):
        console = make_console(to_file=True)
        console.file = buf = io.StringIO()
        render(doc, console)
        outs.append(buf.getvalue())
    for out in outs:
        out.encode()
        _assert_shown(out, "writer")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "pairs.json")
        deliver(render_json(docs["pairs"]), path)
        raw = Path(path).read_bytes()
    assert not RAW.search(raw.decode().replace("\n", ""))
    # exact as JSON can say it (a lone high surrogate then a lone low one read back as one character)
    assert json.loads(raw) == json.loads(json.dumps(docs["pairs"]))


@FUZZ
@given(hostile_docs())
def test_every_writer_shows_any_input_string_safely(docs):
    expect_clean_writers(docs)

