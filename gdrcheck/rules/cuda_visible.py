"""Which of the node's GPUs a job holds, and how it numbers them, from the ``CUDA_VISIBLE_DEVICES`` and
``CUDA_DEVICE_ORDER`` it sets (``--env``).

CUDA's rules (CUDA Programming Guide, "CUDA Environment Variables", 5.2.1): a comma-separated list of GPU
indices, GPU UUIDs (``GPU-...``, any prefix that names one GPU) or MIG ids (``MIG-GPU-<uuid>/<gi>/<ci>``);
the job sees them in the list's order (``cuda:0`` first); at the first invalid entry the list ends (``0,2,-1,1``
shows GPUs 0 and 2); an empty value shows no GPU. An index counts in ``CUDA_DEVICE_ORDER``: ``PCI_BUS_ID``
is PCI bus order; ``FASTEST_FIRST`` (the default) puts the fastest GPU first by a heuristic CUDA does not
publish, and leaves the order of equal GPUs unsaid (in practice PCI bus order).
"""

from __future__ import annotations

from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import record
from gdrcheck.rules.nccl.decision import Decision, cause, need

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

_INDEX = lazy_pattern(r"\d+")
_MIG_OF_GPU = lazy_pattern(r"MIG-(GPU-[0-9A-Fa-f-]+)(/\d+/\d+)?")


@record(frozen=True)
class GpuId:
    """What the selection needs of one GPU of the node."""

    bdf: str
    model: Optional[str] = None  # the PCI device id or the model name: equal GPUs have equal models
    sm: Optional[int] = None  # compute capability x 10, where known
    uuid: Optional[str] = None


@record(frozen=True)
class JobGpus:
    """The job's GPUs: ``gpus`` in the job's numbering (``cuda:0`` first), ``None`` where the input cannot say
    which (``count`` may still be known); ``assumes`` what the order rests on; ``note`` what ended the list."""

    setting: str
    order: str
    gpus: Optional[tuple[str, ...]]
    count: Optional[int]
    assumes: str = ""
    note: str = ""
    named: str = ""  # how the settings are said where not CUDA's (an AMD node: ROCR_/HIP_VISIBLE_DEVICES)
    device: str = "cuda"  # how the job names its GPUs (cuda:0; hip:0 on an AMD node)

    def said(self) -> str:
        return self.named or f"CUDA_VISIBLE_DEVICES={self.setting}"


def _order(order: str, gpus: Sequence[GpuId]) -> tuple[Optional[list[str]], str]:
    """The node's GPUs in CUDA's index order, and what that order rests on (``None``: the input cannot say)."""
    from gdrcheck.model import bdf_key

    pci = sorted((g.bdf for g in gpus), key=bdf_key)
    if order == "PCI_BUS_ID":
        return pci, ""
    models = {g.model for g in gpus}
    if len(models) == 1 and None not in models:
        return pci, ("CUDA_DEVICE_ORDER=FASTEST_FIRST (CUDA's default) on GPUs of one model: taken in PCI bus "
                     "order, which is what CUDA does in practice but does not promise (set "
                     "CUDA_DEVICE_ORDER=PCI_BUS_ID in the job, or compare nvidia-smi -L with the job's "
                     "torch.cuda.get_device_properties)")
    if all(g.sm is not None for g in gpus):
        ranked = sorted(gpus, key=lambda g: (-(g.sm or 0), bdf_key(g.bdf)))
        return [g.bdf for g in ranked], (
            "CUDA_DEVICE_ORDER=FASTEST_FIRST (CUDA's default) on GPUs of different models: taken as the highest "
            "compute capability first, then PCI bus order; CUDA's heuristic is not published (set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID in the job, or compare nvidia-smi -L with the job's "
            "torch.cuda.get_device_properties)")
    return None, ("CUDA_DEVICE_ORDER=FASTEST_FIRST (CUDA's default) on GPUs whose models or compute "
                  "capabilities the input does not show: which GPU an index names is not known (nvidia-smi -L)")


def _by_uuid(prefix: str, gpus: Sequence[GpuId]) -> tuple[Optional[str], str]:
    """The GPU a UUID or UUID prefix names; (None, why) when none or several do, or the input shows no UUID."""
    if not any(g.uuid for g in gpus):
        return None, "unknown"
    hits = [g.bdf for g in gpus if g.uuid and g.uuid.lower().startswith(prefix.lower())]
    return (hits[0], "") if len(hits) == 1 else (None, "invalid")


def select(env: Mapping[str, str], gpus: Sequence[GpuId]) -> Optional[JobGpus]:
    """The job's GPUs from ``env`` (``None`` when it does not set ``CUDA_VISIBLE_DEVICES``)."""
    setting = env.get("CUDA_VISIBLE_DEVICES")
    if setting is None:
        return None
    order = (env.get("CUDA_DEVICE_ORDER") or "FASTEST_FIRST").strip().upper()
    if order not in ("PCI_BUS_ID", "FASTEST_FIRST"):
        order = "FASTEST_FIRST"  # CUDA takes any other value as its default
    if setting.strip() == "":
        return JobGpus(setting, order, (), 0, note="an empty CUDA_VISIBLE_DEVICES shows no GPU")
    indexed, assumes = _order(order, gpus)
    got: list[str] = []
    count: Optional[int] = 0
    note = ""
    undecided = False
    for entry in (e.strip() for e in setting.split(",")):
        bdf: Optional[str] = None
        status = "invalid"
        if _INDEX.fullmatch(entry):
            if int(entry) < len(gpus):
                status = ""
                if indexed is None:
                    undecided = True
                else:
                    bdf = indexed[int(entry)]
        elif entry.upper().startswith(("GPU-", "MIG-GPU-")):
            m = _MIG_OF_GPU.fullmatch(entry)
            bdf, status = _by_uuid(m.group(1) if m else entry, gpus)
        elif entry.upper().startswith("MIG-"):
            status = "unknown"  # a MIG device's own UUID: the input does not show MIG devices
        if status == "unknown":
            return JobGpus(setting, order, None, None, assumes,
                           f"the input does not show which GPU {entry!r} names; nvidia-smi -L lists the UUIDs")
        if status == "invalid" or (bdf is not None and bdf in got):
            note = (f"CUDA ends the list at {entry!r}, "
                    f"{'a GPU named twice' if bdf is not None else 'which names no GPU of this node'}")
            break
        if bdf is not None:
            got.append(bdf)
        count = (count or 0) + 1
    if undecided:
        return JobGpus(setting, order, None, count, assumes, note)
    return JobGpus(setting, order, tuple(got), count, assumes if got else "", note)


def numbering(job: JobGpus, labels: Optional[Mapping[str, str]] = None) -> str:
    """The job's GPUs in words: "GPU0 as cuda:0, GPU2 as cuda:1 (CUDA_VISIBLE_DEVICES=0,2, CUDA_DEVICE_ORDER=...)"."""
    where = f"by {job.named}" if job.named else \
        f"by CUDA_VISIBLE_DEVICES={job.setting} and CUDA_DEVICE_ORDER={job.order}"
    if job.gpus is None:
        held = f"{job.count} GPU(s), which ones not known" if job.count is not None else "GPUs not known"
    elif not job.gpus:
        held = "no GPU"
    else:
        held = ", ".join(f"{(labels or {}).get(b, b)} as {job.device}:{i}" for i, b in enumerate(job.gpus))
    return f"the job holds {held}, {where}{'; ' + job.note if job.note else ''}"


def gpu_ids(snap, topo) -> list[GpuId]:
    """The node's GPUs as :func:`select` needs them: the model from the PCI id or name, the compute capability
    and UUID from the driver's view."""
    from gdrcheck.device_models import gpu_model, nvidia_device_id

    driver: dict[str, object] = {g.bdf: g for g in getattr(snap, "gpus", ()) or ()}
    out: list[GpuId] = []
    for b in topo.of_kind("gpu"):
        d = topo.by_bdf[b]
        dg = driver.get(b)
        dev = nvidia_device_id(d)
        model = (f"10de:{dev:04x}" if dev is not None else None) or gpu_model(d) or getattr(dg, "name", None) \
            or d.name
        cc = getattr(dg, "cuda_compute", None)
        sm = cc[0] * 10 + cc[1] if cc else None
        out.append(GpuId(b, model, sm, getattr(dg, "uuid", None)))
    return out


def pair_in_job(job: JobGpus, a: str, b: str, view: Decision) -> Decision:
    """A GPU pair's P2P decision, saying whether the job's communicator holds the pair, and as which devices."""
    if job.gpus is None:
        return view.plus(need("job.gpus", text=job.note or job.assumes or job.said()))
    out = tuple(g for g in (a, b) if g not in job.gpus)
    said = cause("job.not_in", gpus=out, setting=job.said()) if out else \
        cause("job.devices", a=job.gpus.index(a), b=job.gpus.index(b), device=job.device)
    return view.plus(said, *((need("job.assumes", text=job.assumes),) if job.assumes else ()))

