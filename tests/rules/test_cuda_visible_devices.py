"""CUDA_VISIBLE_DEVICES (with CUDA_DEVICE_ORDER) selects which GPUs the job holds, as CUDA reads it: indices, GPU
UUIDs or their prefixes, MIG ids; the list ends at its first invalid entry (CUDA Programming Guide, "CUDA
Environment Variables")."""

from __future__ import annotations

from pathlib import Path

from support.fact_cases import pairs_json

from gdrcheck.rules.cuda_visible import GpuId, select

ROOT = Path(__file__).resolve().parents[2]
ESC8000A = "stelline-asus-esc8000a-e12-4xrtx6000ada/lspci-tv.txt"  # four RTX 6000 Ada on x86 AMD


def _gg(doc):
    names = {d["bdf"]: d.get("label", d["bdf"]) for d in doc["devices"]}
    return {(names[p["a"]], names[p["b"]]): p["nccl"] for p in doc["pairs"] if p["kind"] == "gpu-gpu"}


def test_esc8000a_amd_list_ends_at_the_first_invalid_entry(realworld):
    """'0,1,-1,2' shows GPUs 0 and 1 only: two GPUs on x86 AMD, so NCCL's default P2P level is SYS (counting
    every entry gave four GPUs and PXB)."""
    doc = pairs_json(realworld / ESC8000A, "--env", "CUDA_VISIBLE_DEVICES=0,1,-1,2",
                     "--env", "CUDA_DEVICE_ORDER=PCI_BUS_ID")
    assert doc["nccl"]["p2p_level"] == "SYS"
    assert "CUDA ends the list at '-1'" in doc["nccl"]["p2p_level_source"]
    gg = _gg(doc)
    assert gg[("GPU0", "GPU1")]["reason"].endswith("the job's cuda:0 and cuda:1")
    assert "not a pair of this job" in gg[("GPU2", "GPU3")]["reason"]


def test_esc8000a_amd_which_gpus_share_the_communicator(realworld):
    """'2,0' with PCI_BUS_ID: the job holds GPU2 as cuda:0 and GPU0 as cuda:1; the pairs with GPU1 or GPU3 are
    not the job's."""
    doc = pairs_json(realworld / ESC8000A, "--env", "CUDA_VISIBLE_DEVICES=2,0", "--env", "CUDA_DEVICE_ORDER=PCI_BUS_ID")
    gg = _gg(doc)
    assert gg[("GPU0", "GPU2")]["reason"].endswith("the job's cuda:1 and cuda:0")
    assert all("not a pair of this job" in v["reason"] for k, v in gg.items() if k != ("GPU0", "GPU2"))
    assert not any(v.get("depends_on") for v in gg.values())  # PCI_BUS_ID: no order assumed


def test_esc8000a_fastest_first_on_one_model_is_an_assumption(realworld):
    """CUDA's default order on four equal GPUs is PCI order in practice, not by promise: said, not hidden."""
    doc = pairs_json(realworld / ESC8000A, "--env", "CUDA_VISIBLE_DEVICES=0,1")
    said = " ".join(d for v in _gg(doc).values() for d in v.get("depends_on") or ())
    assert "FASTEST_FIRST" in said and "does not promise" in said


def test_h100_smi_q_uuid_prefix_names_a_gpu():
    """An nvidia-smi -q shows each GPU's UUID: a prefix that names one GPU selects it."""
    doc = pairs_json(ROOT / "fixtures" / "nvidia-smi-q" / "h100-sxm-550.txt",
                     "--env", "CUDA_VISIBLE_DEVICES=GPU-892f902b,GPU-6513270e")
    assert "0000:2a:00.0 as cuda:0, 0000:18:00.0 as cuda:1" in doc["nccl"]["p2p_level_source"]


def test_lspci_tree_cannot_resolve_a_uuid(realworld):
    doc = pairs_json(realworld / ESC8000A, "--env", "CUDA_VISIBLE_DEVICES=GPU-8932f937")
    assert doc["nccl"]["p2p_level"] == "PXB|SYS"  # the count is not known either
    assert all("which GPUs the job holds" in " ".join(v["depends_on"]) for v in _gg(doc).values())


def test_select_mixed_models_ranks_by_compute_capability():
    gpus = [GpuId("0000:01:00.0", "10de:1eb8", 75), GpuId("0000:41:00.0", "10de:2330", 90)]
    job = select({"CUDA_VISIBLE_DEVICES": "0"}, gpus)
    assert job.gpus == ("0000:41:00.0",) and "compute capability" in job.assumes
    job = select({"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, gpus)
    assert job.gpus == ("0000:01:00.0",) and job.assumes == ""
    # models differ and their speed is not shown: an index names no known GPU, the count stands
    job = select({"CUDA_VISIBLE_DEVICES": "0,1"}, [GpuId("0000:01:00.0", "a"), GpuId("0000:02:00.0", "b")])
    assert job.gpus is None and job.count == 2


def test_select_mig_ids_empty_and_repeated_entries():
    gpus = [GpuId("0000:01:00.0", "m", uuid="GPU-aaaa1111"), GpuId("0000:02:00.0", "m", uuid="GPU-bbbb2222")]
    assert select({"CUDA_VISIBLE_DEVICES": "MIG-GPU-bbbb2222/1/0"}, gpus).gpus == ("0000:02:00.0",)
    assert select({"CUDA_VISIBLE_DEVICES": "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"}, gpus).count is None
    assert select({"CUDA_VISIBLE_DEVICES": ""}, gpus).count == 0
    job = select({"CUDA_VISIBLE_DEVICES": "1,GPU-bbbb,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, gpus)
    assert job.gpus == ("0000:02:00.0",) and "named twice" in job.note
    assert select({"CUDA_VISIBLE_DEVICES": "GPU-,0"}, gpus).count == 0  # a prefix that names both GPUs
    assert select({}, gpus) is None
