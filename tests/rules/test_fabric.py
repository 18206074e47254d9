"""NVSwitch fabric state and NVLink link state (GDR200-GDR202), on the captured four-H200 NVSwitch node
(fixtures/nccl-runs-4gpu-vm) with its NVML answers as captured and changed the way a broken node answers:
fabric still in progress, fabric failed, one link down."""

from __future__ import annotations

import io
import json
import tarfile
import types
from pathlib import Path

import pytest

from gdrcheck.collectors.inputs import load_facts
from gdrcheck.rules.engine import evaluate

SNAP = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-runs-4gpu-vm" / "snapshot.tar.gz"
GPUS = ["0000:00:06.0", "0000:00:07.0", "0000:00:08.0", "0000:00:09.0"]
HEALTHY = {"state": 3, "status": 0, "clique_id": 0, "cluster_uuid": "00" * 16}


def _fields(links, speed=26562):
    out = {"91": {"ret": 0, "value": 18}, "147": {"ret": 0, "value": 18}, "90": {"ret": 3, "value": None}}
    for i in links:
        out[f"164:{i}"] = {"ret": 0, "value": speed} if speed else {"ret": 3, "value": None}
    return out


def _node(tmp_path, change=None, healthy=True):
    """The captured snapshot; with ``healthy`` each GPU also answers fabric Completed/Success, NVLink 4.0 per
    link and 26.562 GB/s per link (what this node's nvidia-smi -q and nvlink -s said); ``change(gpus)`` edits."""
    src = tarfile.open(SNAP)
    rec = json.load(src.extractfile("gdrcheck/nvml.json"))
    if healthy:
        for g in rec["gpus"]:
            g["fabric"] = dict(HEALTHY)
            for link in g["nvlinks"]:
                link["version"] = 6
            g["nvlink_fields"] = _fields([x["link"] for x in g["nvlinks"]])
    if change:
        change(rec["gpus"])
    out = tmp_path / "node.tar.gz"
    with tarfile.open(out, "w:gz") as dst:
        for m in src.getmembers():
            if m.name == "gdrcheck/nvml.json":
                data = json.dumps(rec).encode()
                m.size = len(data)
                dst.addfile(m, io.BytesIO(data))
            else:
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return evaluate(load_facts(str(out)))


def _codes(ev, code):
    return [f for f in ev.findings if f.code == code]


def _verdicts(ev):
    return {k: v for k, v in ev.verdicts.items() if k[0] in GPUS and k[1] in GPUS}


def test_healthy_fabric_and_all_links_say_nothing(tmp_path):
    ev = _node(tmp_path)
    assert not [f for f in ev.findings if f.code in ("GDR200", "GDR201", "GDR202")]
    assert set(_verdicts(ev).values()) == {"ok"}
    g = next(x for x in ev.snap.gpus if x.bdf == GPUS[0])
    assert g.extra["fabric"]["ok"] is True and g.extra["fabric"]["state"] == "Completed"
    assert g.extra["nvlink"] == {"links": 18, "active": 18, "down": [], "to_nvswitch": 18, "version": "4.0",
                                 "rate_gb_per_s": 26.562, "rate_basis": "NVML's per-link speed"}


def test_the_capture_as_it_was_has_no_fabric_state(tmp_path):
    ev = _node(tmp_path, healthy=False)
    assert len(_codes(ev, "GDR202")) == 4 and not _codes(ev, "GDR200")
    assert set(_verdicts(ev).values()) == {"ok"}  # the links alone decide; the finding says what is missing


def _set_fabric(i, **kw):
    def change(gpus):
        gpus[i]["fabric"].update(kw)
    return change


def test_fabric_in_progress_fails_the_gpus_pairs(tmp_path):
    ev = _node(tmp_path, _set_fabric(2, state=2, status=0))
    got = _codes(ev, "GDR200")
    assert len(got) == 1 and got[0].effect == "fail" and got[0].subject == (GPUS[2],)
    assert "still being set up" in got[0].message and "nvidia-fabricmanager" in got[0].message
    assert sorted(got[0].pairs) == sorted(tuple(sorted((GPUS[2], b))) for b in GPUS if b != GPUS[2])
    v = _verdicts(ev)
    assert {k for k, x in v.items() if x == "fail"} == set(got[0].pairs)
    assert v[(GPUS[0], GPUS[1])] == "ok"


def test_fabric_failed_on_two_gpus_fails_each_pair_once(tmp_path):
    def change(gpus):
        for i in (0, 1):
            gpus[i]["fabric"].update(state=3, status=999)
    ev = _node(tmp_path, change)
    got = _codes(ev, "GDR200")
    assert [f.subject for f in got] == [(GPUS[0],), (GPUS[1],)]
    pairs = [p for f in got for p in f.pairs]
    assert len(pairs) == len(set(pairs)) == 5  # every pair with GPU0 or GPU1, the pair of both once
    assert "status Unknown" in got[0].message


def test_fabric_not_supported_is_no_finding(tmp_path):
    ev = _node(tmp_path, _set_fabric(1, state=0, status=3))
    assert not _codes(ev, "GDR200") and not _codes(ev, "GDR202")


def test_a_link_down_degrades_the_gpus_pairs_and_names_it(tmp_path):
    def change(gpus):
        gpus[1]["nvlinks"][5] = {"link": 5, "active": False}
    ev = _node(tmp_path, change)
    got = _codes(ev, "GDR201")
    assert len(got) == 3 and all(f.effect == "degraded" for f in got)
    assert all(GPUS[1] in f.subject for f in got)
    assert "17 of 18 NVLinks active (link 5 down)" in got[0].message and "NV17" in got[0].message
    v = _verdicts(ev)
    assert v[(GPUS[0], GPUS[1])] == "degraded" and v[(GPUS[0], GPUS[2])] == "ok"
    assert ev.snap.gpus[1].extra["nvlink"]["down"] == [5]


def test_the_probe_plan_holds_a_pair_to_links_times_rate(tmp_path):
    from gdrcheck.probe.plan import build_plan

    plan = build_plan(_node(tmp_path), only=("p2p",))
    exp = plan.steps[0].expected
    assert exp["gb_per_s"] == 478.1 and exp["degraded_below_gb_per_s"] == 358.6 and exp["link"] == "NV18"
    assert "NVML's per-link speed" in exp["basis"]
    # without NVML's speed, the part's NVLink generation gives it
    (tmp_path / "old").mkdir()
    old = build_plan(_node(tmp_path / "old", healthy=False), only=("p2p",)).steps[0].expected
    assert old["gb_per_s"] == 478.1 and "NVLink 4.0" in old["basis"]


def test_topology_json_carries_fabric_and_links(tmp_path):
    from gdrcheck.documents.topology import topology_doc

    doc = topology_doc(_node(tmp_path).topo)
    gpu = next(d for d in doc["devices"] if d["bdf"] == GPUS[0])
    assert gpu["fabric"]["state"] == "Completed" and gpu["nvlink"]["active"] == 18
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "gdrcheck" / "schemas" / "topology.schema.json")
                        .read_text())
    jsonschema.validate(json.loads(json.dumps(doc)), schema)





@pytest.mark.parametrize("struct_ok", [True, False])
def test_nvml_fabric_asked_by_reference(struct_ok):
    """The live questions, against a stand-in for pynvml: the struct goes by reference; a refusal is recorded."""
    import ctypes

    from gdrcheck.collectors import nvml_fabric

    class Info(ctypes.Structure):
        _fields_ = [("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_int), ("cliqueId", ctypes.c_uint32),
                    ("state", ctypes.c_uint)]

    def get(h, ref):
        if not struct_ok:
            raise type("NVMLError_NotSupported", (Exception,), {"value": 3})()
        info = ref._obj
        info.state, info.status, info.cliqueId = 2, 0, 7
        return 0

    nv = types.SimpleNamespace(c_nvmlGpuFabricInfo_t=Info, nvmlDeviceGetGpuFabricInfo=get)
    got = nvml_fabric.ask_fabric(nv, object())
    if struct_ok:
        assert got == {"state": 2, "status": 0, "clique_id": 7, "cluster_uuid": "00" * 16}
        assert nvml_fabric.fabric_facts({"fabric": got})["state"] == "In Progress"
    else:
        assert got["error"]["error"] == "NotSupported"
        assert nvml_fabric.fabric_facts({"fabric": got}) == {"error": "NotSupported"}


def test_the_report_shows_links_and_fabric(tmp_path):
    from support.cli_util import call

    def change(gpus):
        gpus[1]["nvlinks"][5] = {"link": 5, "active": False}
    _node(tmp_path, change)
    page = tmp_path / "r.html"
    p = call("report", "--from", tmp_path / "node.tar.gz", "-o", page)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    assert "Completed / Success" in html and "17 of 18 active, down: 5" in html and "26.562 GB/s" in html


def test_a_forged_link_count_is_not_believed():
    from gdrcheck.collectors.nvml_fabric import nvlink_facts

    g = {"nvlinks": [{"link": 0, "active": True}, {"link": 10 ** 12, "active": False}],
         "nvlink_fields": {"91": {"ret": 0, "value": 10 ** 12}}}
    got = nvlink_facts(g)
    assert got["links"] == 1 and got["active"] == 1 and got["down"] == []
