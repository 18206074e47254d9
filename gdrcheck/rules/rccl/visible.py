"""Which of an AMD node's GPUs a job holds, from ``ROCR_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES`` and
``CUDA_VISIBLE_DEVICES`` (``--env``), as ROCm reads them.

ROCm's documentation ("GPU isolation techniques", rocm.docs.amd.com conceptual/gpu-isolation.html, and the HIP
environment variables reference): ``ROCR_VISIBLE_DEVICES`` is a list of device indices or UUIDs
(``GPU-<uuid>``) that the ROCm runtime exposes to every application; ``HIP_VISIBLE_DEVICES`` (HIP also honours
``CUDA_VISIBLE_DEVICES`` under that meaning) lists device indices exposed to HIP applications. The ROCm
runtime applies its list first, and HIP's indices count among the GPUs it left (PyTorch's
``torch.cuda._parse_visible_devices`` on ROCm reads them the same way). Where both HIP's and CUDA's are set,
HIP's is taken. The job's first visible GPU is ``hip:0`` (``cuda:0`` in PyTorch).

Assumed, and said in the answer: the runtime numbers the GPUs in the KFD topology's order, taken here as PCI
bus order (``rocm-smi --showbus`` lists the runtime's order); an entry that names no GPU ends the list, as
CUDA does (ROCm's documentation does not say).
"""

from __future__ import annotations

from gdrcheck.rules.cuda_visible import JobGpus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from gdrcheck.rules.cuda_visible import GpuId

NAMES = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
ORDER = ("the ROCm runtime's GPU order taken as PCI bus order (the KFD topology's order; rocm-smi --showbus "
         "lists it); an entry that names no GPU taken as the end of the list")


def _pick(setting: str, visible: list[str], gpus: Sequence[GpuId], name: str) -> tuple[Optional[list[str]], str]:
    """The GPUs of ``visible`` that ``setting`` names, in its order; (None, why) where the input cannot say."""
    if setting.strip() == "":
        return [], f"an empty {name} shows no GPU"
    got: list[str] = []
    for entry in (e.strip() for e in setting.split(",")):
        bdf: Optional[str] = None
        if entry.isdigit() and int(entry) < len(visible):
            bdf = visible[int(entry)]
        elif entry.upper().startswith("GPU-") and name == "ROCR_VISIBLE_DEVICES":
            if not any(g.uuid for g in gpus):
                return None, f"the input does not show which GPU {entry!r} names; rocm-smi --showuniqueid lists them"
            hits = [g.bdf for g in gpus if g.uuid and g.uuid.lower() == entry.lower() and g.bdf in visible]
            bdf = hits[0] if len(hits) == 1 else None
        if bdf is None or bdf in got:
            return got, f"{name} taken as ending at {entry!r}, {'a GPU named twice' if bdf else 'which names no GPU'}"
        got.append(bdf)
    return got, ""


def select(env: Mapping[str, str], gpus: Sequence[GpuId]) -> Optional[JobGpus]:
    """The job's GPUs from ``env`` (``None`` when it sets none of the three)."""
    from gdrcheck.model import bdf_key

    given = [(n, env[n]) for n in NAMES if n in env]
    if not given:
        return None
    if "HIP_VISIBLE_DEVICES" in env:  # HIP's own name first; CUDA's is its alias
        given = [(n, v) for n, v in given if n != "CUDA_VISIBLE_DEVICES"]
    named = ", ".join(f"{n}={v}" for n, v in given)
    visible: Optional[list[str]] = sorted((g.bdf for g in gpus), key=bdf_key)
    notes = []
    for name, value in given:
        visible, note = _pick(value, visible or [], gpus, name)
        if note:
            notes.append(note)
        if visible is None:
            return JobGpus(named, "PCI_BUS_ID", None, None, ORDER, "; ".join(notes), named=named, device="hip")
    got = tuple(visible or ())
    return JobGpus(named, "PCI_BUS_ID", got, len(got), ORDER if got else "", "; ".join(notes), named=named,
                   device="hip")
