"""The GPU's own flags NCCL reads and the NIC's Data Direct device (docs/nccl.md, "GPU-NIC GPUDirect RDMA").

* the GPU flag and the GPU side of DMA-BUF: the CUDA driver's attributes where ``gdrcheck snapshot`` read
  them (``/gdrcheck/cuda.json``), else the model;
* ``NCCL_NET_GDR_MLOPART`` (2.30): an MLOPart partition gets no GDR unless it is 1;
* ``NCCL_IB_DATA_DIRECT`` (2.27+): an mlx5 NIC on a node with a Data Direct DMA function may be judged on
  that function's PCI path, which no file shows.

Each case is named after what it holds and sits beside the neighbour NCCL decides the other way.
"""

from __future__ import annotations

import ctypes
import json

import pytest
from support import nccl_nodes as N

from gdrcheck.collectors import cuda_attrs
from gdrcheck.io.source import Source

G0, NIC0, DD = "0000:03:00.0", "0000:05:00.0", "0000:06:00.0"


def cuda_record(gdr=1, dmabuf=1, name="NVIDIA H100 80GB HBM3", driver=13000, bus="0000:03:00.0") -> str:
    return json.dumps({"version": 1, "init": None, "driver_version": driver,
                       "devices": [{"index": 0, "bus_id": bus, "name": name, "gpu_direct_rdma_supported": gdr,
                                    "dma_buf_supported": dmabuf}]})


def close_pair(tmp_path, name, record=None, extra=(), files=None, **kw):
    """One GPU and one ConnectX under one switch (PIX); ``record``: what gdrcheck snapshot read from libcuda."""
    files = dict(files or {})
    if record is not None:
        files["/gdrcheck/cuda.json"] = record
    devices = [("gpu", G0, 0, "switch"), ("nic", NIC0, 0, "switch")] + list(extra)
    return N.build(tmp_path / name, devices=devices, files=files, **kw)


def gdr(root, version="2.30.7", env=None):
    top, pairs = N.decide(root, version, env)
    return pairs[(G0, NIC0)], top


# ---------------------------------------------------------------------------
# the GPU flag: the driver's attribute (gdrcheck snapshot) or the model


@pytest.mark.parametrize("case,kw,record,word,said", [
    ("cuda-attr-gdr-0", {}, cuda_record(gdr=0), "disabled", "cudaDevAttrGPUDirectRDMASupported = 0, read by "
                                                            "gdrcheck snapshot"),
    ("cuda-attr-gdr-1-geforce", {"gpu_name": "NVIDIA GeForce RTX 4090", "cc": (8, 9)},
     cuda_record(gdr=1, name="NVIDIA GeForce RTX 4090"), "enabled", "cudaDevAttrGPUDirectRDMASupported = 1"),
    ("model-geforce-no-record", {"gpu_name": "NVIDIA GeForce RTX 4090", "cc": (8, 9)}, None, "disabled",
     "from the model"),
    ("cuda-attr-gdr-0-old-cuda-driver", {}, cuda_record(gdr=0, driver=11020), "enabled", "from the model"),
    # the driver agrees with the model: the replay says what the live run (which never asks CUDA) says
    ("cuda-attr-gdr-1-agrees-with-the-model", {}, cuda_record(gdr=1), "enabled", "from the model"),
])
def test_gpu_gdr_flag(tmp_path, case, kw, record, word, said):
    v, _ = gdr(close_pair(tmp_path, case, record, **kw))
    assert v["gdr"] == word, (case, v)
    assert said in v["reason"], (case, v["reason"])
    if record is None:
        assert "gdrcheck snapshot" in v["reason"]  # how to settle it


@pytest.mark.parametrize("case,kw,record,word", [
    ("cuda-attr-dmabuf-0", {"peermem": False}, cuda_record(dmabuf=0), "disabled"),
    ("cuda-attr-dmabuf-1-proprietary", {"peermem": False, "flavor": "proprietary"}, cuda_record(dmabuf=1),
     "enabled"),
    ("model-dmabuf-proprietary", {"peermem": False, "flavor": "proprietary"}, None, "disabled"),
    ("cuda-driver-11.6-dmabuf", {"peermem": False}, cuda_record(dmabuf=1, driver=11060), "disabled"),
])
def test_gpu_dmabuf_attribute(tmp_path, case, kw, record, word):
    """DMA-BUF's GPU side is the driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (v2.30.7 init.cc:401-420)."""
    v, _ = gdr(close_pair(tmp_path, case, record, **kw))
    assert v["gdr"] == word, (case, v)
    if record is not None:
        assert "read by gdrcheck snapshot" in v["reason"] or "11.6" in v["reason"], (case, v["reason"])


# ---------------------------------------------------------------------------
# the collector: snapshot only, one status line without libcuda


def test_live_run_never_loads_libcuda(monkeypatch):
    def boom():
        raise AssertionError("libcuda loaded by a live run")

    monkeypatch.setattr(cuda_attrs, "_load_libcuda", boom)
    assert cuda_attrs.collect_cuda_attrs(Source("/", live=True)) == (None, None)


def test_snapshot_without_libcuda_says_unavailable_once(monkeypatch):
    def missing():
        raise cuda_attrs.CudaUnavailable("libcuda.so.1 not loaded (no such file)")

    monkeypatch.setattr(cuda_attrs, "_load_libcuda", missing)
    src = Source("/", live=True, record=True)
    fact, st = cuda_attrs.collect_cuda_attrs(src)
    assert fact is None and st.name == "cuda" and st.status == "unavailable" and "libcuda.so.1" in st.detail
    assert json.loads(src.recorded[cuda_attrs.CUDA_FILE][1])["init"]


class _Fn:
    def __init__(self, body):
        self.body = body

    def __call__(self, *args):
        return self.body(*args)


class _FakeCuda:
    """libcuda as ctypes sees it: two devices, an H100 at 0000:03:00.0 and an MLOPart GPU at 0000:83:00.0."""

    DEVICES = [{"pci": (0, 3, 0), "name": b"NVIDIA H100 80GB HBM3", 116: 1, 124: 1},
               {"pci": (0, 0x83, 0), "name": b"NVIDIA B200 MLOPart1", 116: 1, 124: 0}]

    def __init__(self):
        self.cuInit = _Fn(lambda flags: 0)
        self.cuDriverGetVersion = _Fn(lambda ref: self._set(ref, 13000))
        self.cuDeviceGetCount = _Fn(lambda ref: self._set(ref, len(self.DEVICES)))
        self.cuDeviceGet = _Fn(lambda ref, i: self._set(ref, i.value))
        self.cuDeviceGetAttribute = _Fn(self._attr)
        self.cuDeviceGetName = _Fn(self._name)

    @staticmethod
    def _set(ref, value):
        ref._obj.value = value
        return 0

    def _attr(self, ref, code, dev):
        d = self.DEVICES[dev.value]
        value = {50: d["pci"][0], 33: d["pci"][1], 34: d["pci"][2]}.get(code.value, d.get(code.value))
        return 1 if value is None else self._set(ref, value)

    def _name(self, buf, size, dev):
        ctypes.memmove(buf, self.DEVICES[dev.value]["name"], len(self.DEVICES[dev.value]["name"]))
        return 0


def test_snapshot_records_the_attributes_and_a_replay_reads_them(monkeypatch, tmp_path):
    monkeypatch.setattr(cuda_attrs, "_load_libcuda", _FakeCuda)
    src = Source("/", live=True, record=True)
    fact, st = cuda_attrs.collect_cuda_attrs(src)
    assert st.status == "ok"
    assert fact.value["gpus"]["0000:03:00.0"] == {"gdr": 1, "dmabuf": 1, "names": ["NVIDIA H100 80GB HBM3"]}
    assert fact.value["gpus"]["0000:83:00.0"]["names"] == ["NVIDIA B200 MLOPart1"]
    # the recorded answer replayed from an input (as --from snapshot.tar.gz does)
    (tmp_path / "gdrcheck").mkdir()
    (tmp_path / "gdrcheck/cuda.json").write_bytes(src.recorded[cuda_attrs.CUDA_FILE][1])
    again, st2 = cuda_attrs.collect_cuda_attrs(Source(str(tmp_path), live=False))
    # the replay lists the collectors a live run lists (a live run never asks CUDA): the manifest says it
    assert again.value == fact.value and st2 is None


# ---------------------------------------------------------------------------
# NCCL_NET_GDR_MLOPART (v2.30.7 paths.cc:466, 487; mloPart from the CUDA device name, init.cc:722-723)

XML = """<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:01:00.0" class="0x060400" vendor="0x10b5" device="0xc040" link_speed="32.0 GT/s PCIe"
         link_width="16">
      <pci busid="0000:03:00.0" class="0x030200" vendor="0x10de" device="0x2901" link_speed="32.0 GT/s PCIe"
           link_width="16">
        <gpu dev="0" sm="100" rank="0" gdr="1"{mlopart}/>
      </pci>
      <pci busid="0000:05:00.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe"
           link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="400000" port="1" gdr="1"/></nic>
      </pci>
    </pci>
  </cpu>
</system>
"""


@pytest.mark.parametrize("case,mlopart,version,env,word", [
    ("mlopart-xml-partition", ' mlopart="0"', "2.30.7", {}, "disabled"),
    ("mlopart-xml-partition-gdr-mlopart-1", ' mlopart="1"', "2.30.7", {"NCCL_NET_GDR_MLOPART": "1"}, "enabled"),
    ("mlopart-xml-whole-gpu", ' mlopart="-1"', "2.30.7", {}, "enabled"),
    ("mlopart-xml-partition-2.29", ' mlopart="0"', "2.29.7", {}, "enabled"),
])
def test_mlopart_from_nccl_xml(tmp_path, case, mlopart, version, env, word):
    path = tmp_path / f"{case}.xml"
    path.write_text(XML.format(mlopart=mlopart))
    _top, pairs = N.decide(path, version, env)
    v = pairs[(G0, NIC0)]
    assert v["gdr"] == word, (case, v)
    if word == "disabled":
        assert "MLOPart" in v["reason"] and "NCCL_NET_GDR_MLOPART" in v["reason"]
    assert not any("MLOPart" in d for d in v.get("depends_on", ()))  # the input shows it


B200 = {"gpu_name": "NVIDIA B200", "cc": (10, 0)}


@pytest.mark.parametrize("case,kw,record,word,depends", [
    ("mlopart-cuda-name", B200, cuda_record(name="NVIDIA B200 MLOPart0"), "disabled", False),
    ("mlopart-cuda-name-whole-gpu", B200, cuda_record(name="NVIDIA B200"), "enabled", False),
    ("mlopart-b200-not-shown", B200, None, "enabled", True),
    ("mlopart-h100-cannot-split", {}, None, "enabled", False),
])
def test_mlopart_on_a_node(tmp_path, case, kw, record, word, depends):
    v, _ = gdr(close_pair(tmp_path, case, record, **kw))
    assert v["gdr"] == word, (case, v)
    assert any("MLOPart" in d for d in v.get("depends_on", ())) == depends, (case, v)


def test_mlopart_gdr_mlopart_1_needs_no_answer(tmp_path):
    """mlopart-b200-gdr-mlopart-1: with NCCL_NET_GDR_MLOPART=1 a partition keeps GDR, so nothing depends on it."""
    v, _ = gdr(close_pair(tmp_path, "mlopart-b200-gdr-mlopart-1", None, **B200), env={"NCCL_NET_GDR_MLOPART": "1"})
    assert v["gdr"] == "enabled" and not any("MLOPart" in d for d in v.get("depends_on", ()))


# ---------------------------------------------------------------------------
# NCCL_IB_DATA_DIRECT (v2.30.7 net_ib/init.cc:13, 374-427; v2.27.3 net_ib.cc:128, 650-660)

WITH_DD = [("data-direct", DD, 0, "switch")]


@pytest.mark.parametrize("case,extra,kw,version,env,word", [
    ("data-direct-function-present", WITH_DD, {}, "2.30.7", {}, "unknown"),
    ("data-direct-function-present-2.27", WITH_DD, {}, "2.27.7", {}, "unknown"),
    ("data-direct-function-present-2.26", WITH_DD, {}, "2.26.6", {}, "enabled"),
    ("data-direct-ib-data-direct-0", WITH_DD, {}, "2.30.7", {"NCCL_IB_DATA_DIRECT": "0"}, "enabled"),
    ("data-direct-ib-data-direct-minus-1-2.28", WITH_DD, {}, "2.28.9", {"NCCL_IB_DATA_DIRECT": "-1"}, "enabled"),
    ("data-direct-ib-data-direct-minus-1-2.27", WITH_DD, {}, "2.27.7", {"NCCL_IB_DATA_DIRECT": "-1"}, "unknown"),
    ("data-direct-no-dmabuf-kernel", WITH_DD, {"kernel": "5.4.0-200-generic"}, "2.30.7", {}, "enabled"),
    ("data-direct-function-absent", (), {}, "2.30.7", {}, "enabled"),
])
def test_data_direct(tmp_path, case, extra, kw, version, env, word):
    v, _ = gdr(close_pair(tmp_path, case, None, extra=extra, **kw), version, env)
    assert v["gdr"] == word, (case, v)
    if word == "unknown":
        assert DD in v["reason"]
        assert any("Data Direct DMA Interface is detected for device mlx5_0" in d for d in v["depends_on"])


def test_data_direct_leaves_a_nic_nccl_does_not_use(tmp_path):
    """data-direct-hca-excluded: NCCL_IB_HCA leaves the NIC out, so no data-direct device can change anything."""
    v, _ = gdr(close_pair(tmp_path, "data-direct-hca-excluded", None, extra=WITH_DD), env={"NCCL_IB_HCA": "^mlx5_0"})
    assert v["gdr"] == "disabled" and "NCCL_IB_HCA" in v["reason"]


def test_data_direct_in_nccl_dump_is_what_nccl_chose(tmp_path):
    """data-direct-nccl-dump: NCCL's own dump lists the `_dma` device on the data-direct function's path; the
    decision is the dump's, not open."""
    text = XML.format(mlopart="").replace('device="0x1021"', 'device="0x2100"').replace("mlx5_0", "mlx5_0_dma")
    path = tmp_path / "data-direct-nccl-dump.xml"
    path.write_text(text)
    _top, pairs = N.decide(path, "2.30.7")
    assert pairs[(G0, NIC0)]["gdr"] == "enabled", pairs[(G0, NIC0)]
