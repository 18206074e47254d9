"""Where a measurement disagrees with the prediction (``gdrcheck probe``).

These rules never fire on facts alone: :func:`probe_findings` reads the checks of a
probe document (what was measured beside what ``pairs`` predicted). In the
registry their check is None, so ``pairs`` and ``check`` never run them.
"""

from __future__ import annotations

from gdrcheck.rules.base import Finding, Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Callable, Optional
    Detector = Callable[[dict[str, Any]], Optional[str]]

CUDA_UNAVAILABLE = Rule(
    "GDR140", "probe-cuda-unavailable", "error", "device",
    "The CUDA driver API does not work for a GPU the node shows",
    "cuInit, the primary context or finding the GPU by its bus id failed in a process of its own: no CUDA "
    "program, NCCL included, can use this GPU. The CUDA result says which layer refused (a missing "
    "libcuda.so.1, a driver/library version mismatch, a GPU hidden by CUDA_VISIBLE_DEVICES or fallen off "
    "the bus).",
    "Read the evidence: CUDA_ERROR_NO_DEVICE or a missing libcuda.so.1 -> install the driver's user-space "
    "libraries that match the kernel module (`cat /proc/driver/nvidia/version`, `ldconfig -p | grep "
    "libcuda`); CUDA_ERROR_SYSTEM_DRIVER_MISMATCH -> reboot after a driver update; a GPU not found by bus id "
    "-> `nvidia-smi -q | grep -i -e 'bus id' -e xid`, `dmesg | grep -i xid`.")
HOST_BANDWIDTH_LOW = Rule(
    "GDR141", "probe-host-bandwidth-low", "warning", "device",
    "Host-to-GPU copies are well below what the GPU's PCIe link should carry",
    "A pinned copy of hundreds of MiB reaches about 85% of the raw link rate (Gen5 x16 about 53 GB/s). "
    "Far less means a link trained below its capability under load, a riser or retimer problem, a slot "
    "shared through a switch with a busy device, host memory on the far socket, or a VM's IOMMU in the way; "
    "every GPUDirect path through that link suffers as well.",
    "Compare with `nvidia-smi -q -d PCIE` (link generation and width under load, replay counter) and "
    "`lspci -vvv -s <bdf> | grep -e LnkSta -e LnkCap`; reseat the GPU or riser, check the BIOS slot setting "
    "(Gen5/Auto, bifurcation), and run again pinned to the GPU's NUMA node.", pair_kinds=())
HOST_COPY_MISMATCH = Rule(
    "GDR142", "probe-host-copy-mismatch", "error", "device",
    "Data copied from host to GPU and back did not arrive as written",
    "The copy returned success but the bytes differ: memory, the link or DMA remapping corrupts data "
    "silently. Every job on this GPU may compute on garbage.",
    "Drain the node; run `dcgmi diag -r 3` and check `dmesg | grep -i -e xid -e dmar -e aer`; with a "
    "translating IOMMU boot with `iommu=pt`; reseat or replace the GPU if the mismatch repeats.")
P2P_DATA_MISMATCH = Rule(
    "GDR143", "probe-p2p-data-mismatch", "error", "pair",
    "A peer-to-peer copy between two GPUs returned wrong data",
    "CUDA allowed peer access and the copy reported success, but the destination does not hold the source "
    "pattern: typical of ACS redirect with a translating IOMMU or a switch that mishandles peer "
    "transactions. NCCL would use this path and produce wrong results without an error.",
    "Disable P2P for jobs now (`NCCL_P2P_DISABLE=1` in /etc/nccl.conf); then turn the IOMMU to "
    "pass-through (`iommu=pt`) or off and ACS redirect off on the path (see GDR040, GDR042), and check the "
    "switch firmware.", pair_kinds=("gpu-gpu",))
P2P_SLOWER_THAN_STAGED = Rule(
    "GDR144", "probe-p2p-slower-than-staged", "warning", "pair",
    "Direct peer copies are slower than copying through host memory",
    "NCCL prefers P2P when the path allows it, assuming it is faster; here a copy staged through pinned host "
    "memory beat it, which points at peer traffic routed up to the root complex (ACS, IOMMU) or a CPU that "
    "forwards peer traffic poorly between root ports.",
    "Check ACS on the path's bridges (GDR040) and the IOMMU mode (GDR042); for jobs now, cap P2P below this "
    "path type with `NCCL_P2P_LEVEL` (for example PXB) so NCCL uses shared memory.", pair_kinds=("gpu-gpu",))
P2P_DENIED = Rule(
    "GDR145", "probe-p2p-denied", "warning", "pair",
    "CUDA refuses peer access that the static view allows",
    "cuDeviceCanAccessPeer answered 0 (or enabling peer access failed) for a pair that NVML and the path "
    "allow: NCCL and CUDA programs fall back to copies through host memory.",
    "Check `nvidia-smi topo -p2p r`, the driver's PeerMappingOverride and IOMMU settings, and that both GPUs "
    "are in one VM or container; a virtualised node needs the hypervisor to expose peer access.",
    pair_kinds=("gpu-gpu",))
PEERMEM_NOT_WORKING = Rule(
    "GDR146", "probe-peermem-loaded-not-working", "error", "pair",
    "ibv_reg_mr on GPU memory failed although a peer-memory module is loaded",
    "nvidia-peermem is loaded, so NCCL takes the peer-memory path, but registering GPU memory with the NIC "
    "failed (EFAULT: no peer-memory client took the address; the classic 'ibv_reg_mr failed: Bad "
    "address'). Jobs fail at connection setup, or NCCL falls back to copies through host memory.",
    "Reload in order: `modprobe -r nvidia_peermem; modprobe nvidia_peermem`, check `dmesg | grep -i peer`; "
    "the module must be built against the running MLNX_OFED/inbox RDMA stack (reinstall the driver after an "
    "OFED update); or use DMA-BUF (open kernel module, kernel 5.12+, `NCCL_DMABUF_ENABLE=1`).",
    pair_kinds=("gpu-nic",))
DMABUF_NOT_WORKING = Rule(
    "GDR147", "probe-dmabuf-not-working", "warning", "pair",
    "DMA-BUF registration of GPU memory failed where it was expected to work",
    "The static view expects DMA-BUF (open kernel module, kernel support), but exporting GPU memory "
    "(cuMemGetHandleForAddressRange) or registering it with the NIC (ibv_reg_dmabuf_mr) failed; NCCL will "
    "not use GPUDirect RDMA through DMA-BUF here.",
    "EOPNOTSUPP from ibv_reg_dmabuf_mr: the kernel (5.12+) or the RDMA provider lacks DMA-BUF: update "
    "rdma-core/MLNX_OFED; a failed export: use the open kernel module (`modinfo nvidia | grep license` says "
    "Dual MIT/GPL) and a driver of 515 or later.", pair_kinds=("gpu-nic",))
GDR_WORKS_NCCL_BLIND = Rule(
    "GDR148", "probe-gdr-works-nccl-blind", "warning", "pair",
    "GPU memory registers with the NIC, but NCCL will not use GPUDirect RDMA on this pair",
    "Registration of GPU memory worked on the node, yet the static view says NCCL disables GPUDirect RDMA "
    "here (no peer-memory file NCCL looks for, DMA-BUF off, or the path beyond NCCL_NET_GDR_LEVEL): traffic "
    "is staged through host memory at a fraction of the speed.",
    "Read the pair's NCCL reason (`gdrcheck pairs`): load nvidia_peermem, set `NCCL_DMABUF_ENABLE=1`, or "
    "raise `NCCL_NET_GDR_LEVEL` where the path is known to be safe.", pair_kinds=("gpu-nic",))
REGISTRATION_ENOMEM = Rule(
    "GDR149", "probe-registration-out-of-memory", "error", "pair",
    "Registering GPU memory with the NIC ran out of memory (ENOMEM)",
    "The GPU's BAR1 aperture or the NIC's translation tables are exhausted: NCCL buffers will fail to "
    "register once jobs allocate more, long before GPU memory is full.",
    "Check BAR1 with `nvidia-smi -q -d MEMORY` (BAR1 Memory Usage) and `gdrcheck bar1`; enable resizable "
    "BAR / Above 4G decoding in the BIOS; raise the NIC's limits (`ulimit -l unlimited`, mlx5 `log_num_mtt`).",
    pair_kinds=("gpu-nic",))
LOOPBACK_FAILED = Rule(
    "GDR150", "probe-rdma-loopback-failed", "error", "pair",
    "An RDMA write from GPU memory to GPU memory through the NIC failed",
    "The memory registered, but the NIC could not complete a write between two GPU buffers on a queue pair "
    "connected to itself, or the data arrived wrong. A local protection error points at ACS or the IOMMU "
    "between the NIC and the GPU.",
    "Check ACS on the path (GDR040), the IOMMU mode (GDR042) and `dmesg` for DMAR/AER faults; "
    "`ib_write_bw --use_cuda=0 -d <dev>` reproduces it outside gdrcheck.", pair_kinds=("gpu-nic",))
GDS_COMPAT_MODE = Rule(
    "GDR151", "probe-gds-compat-mode", "warning", "device",
    "cuFile works only in compatibility mode: reads are bounced through host memory, not GPUDirect Storage",
    "cuFile opened without nvidia-fs (and without the kernel's P2PDMA mode), or compatibility mode is forced: "
    "reads succeed, silently, at host-copy speed.",
    "Load nvidia-fs (`modprobe nvidia-fs`, package nvidia-fs / nvidia-gds), check `/usr/local/cuda/gds/"
    "tools/gdscheck -p`, and set `\"allow_compat_mode\": false` in /etc/cufile.json to make a fallback "
    "fail loudly.")
GDS_READ_FAILED = Rule(
    "GDR152", "probe-gds-read-failed", "error", "device",
    "A GPUDirect Storage read failed or returned wrong data",
    "cuFile could not read the test file into GPU memory, or the bytes differ from a host read of the same "
    "file: storage jobs that use GDS fail or compute on wrong data.",
    "Run `gdscheck -p` and read /var/log/cufile.log (or the path in /etc/cufile.json); check the filesystem "
    "is supported by GDS (ext4/xfs on NVMe with data=ordered, or a supported parallel filesystem).")
STEP_HUNG = Rule(
    "GDR153", "probe-step-hung", "error", "device",
    "A probe step did not finish within its deadline and was killed",
    "A copy or registration that never completes usually means the device stopped answering (a translating "
    "IOMMU dropping peer requests, a hung GPU, an Xid). A process stuck inside the driver cannot be killed "
    "at all; then the GPU may need a reset.",
    "Check `dmesg | grep -i -e xid -e dmar -e aer`, and `nvidia-smi`; if the worker could not be killed, "
    "drain the node and reset the GPU (`nvidia-smi -r -i <index>`) or reboot.")
LEFT_BEHIND = Rule(
    "GDR154", "probe-resources-left", "warning", "device",
    "GPU resources were not released after a probe step",
    "BAR1 in use (or memory registered with a peer-memory client) did not return to where it was before the "
    "step, although the step's process has exited: the driver leaks mappings, which accumulate until "
    "registrations fail.",
    "Check `nvidia-smi -q -d MEMORY` (BAR1 used) against the start value; a leak that survives process exit "
    "is a driver bug: update the driver, and reset the GPU to reclaim it.")
P2P_BELOW_LINK = Rule(
    "GDR205", "probe-p2p-below-link-rate", "warning", "pair",
    "Peer copies between two GPUs are well below what their link should carry",
    "The expected rate is the pair's NVLinks times the per-link rate NVML gives (18 x 26.562 GB/s each way on "
    "H100/H200 through NVSwitch), or over PCIe the slower GPU link at 85% of its raw rate; a healthy pair "
    "reaches about 80% of the NVLink figure with large copies. Below 75% of it the pair runs on fewer links "
    "than it has, the fabric has fallen back, or peer traffic goes another way (PCIe, host memory).",
    "Compare `nvidia-smi nvlink -s` (per-link speed, inactive links) and `nvidia-smi topo -m` (NV# per pair) "
    "with a healthy node of the model, check `nvidia-smi -q | grep -A6 Fabric` and the NVLink error counters "
    "(`nvidia-smi nvlink -e`); `gdrcheck pairs` shows the links NVML reports down (GDR201).",
    pair_kinds=("gpu-gpu",))

CHECKS = tuple((r, None) for r in (
    CUDA_UNAVAILABLE, HOST_BANDWIDTH_LOW, HOST_COPY_MISMATCH, P2P_DATA_MISMATCH, P2P_SLOWER_THAN_STAGED,
    P2P_DENIED, PEERMEM_NOT_WORKING, DMABUF_NOT_WORKING, GDR_WORKS_NCCL_BLIND, REGISTRATION_ENOMEM,
    LOOPBACK_FAILED, GDS_COMPAT_MODE, GDS_READ_FAILED, STEP_HUNG, LEFT_BEHIND, P2P_BELOW_LINK))
PROBE_CODES = frozenset(r.code for r, _ in CHECKS)


def _m(c: dict[str, Any]) -> dict[str, Any]:
    return c.get("measured") or {}


def _cuda(c):
    if c["check"] == "cuda" and c["status"] == "fail":
        return "CUDA does not work for this GPU: " + str((c.get("evidence") or {}).get("error") or "see evidence")
    return None


def _host_low(c):
    if c["check"] != "host-bandwidth" or c["status"] != "degraded":
        return None
    m, e = _m(c), c.get("expected") or {}
    return (f"host copies {m.get('h2d_gb_per_s')} GB/s to the GPU, {m.get('d2h_gb_per_s')} GB/s back; "
            f"{e.get('link', 'the link')} should carry about {e.get('h2d_gb_per_s', '?')} GB/s"
            + (f"; {m['low_beside_node']}" if m.get("low_beside_node") else ""))


def _host_mismatch(c):
    if c["check"] == "host-bandwidth" and _m(c).get("verified") is False:
        return "host-to-GPU-to-host copy returned different bytes"
    return None


def _p2p_mismatch(c):
    if c["check"] == "p2p" and _m(c).get("verified") is False:
        return f"peer copy returned wrong data ({_m(c).get('mismatch', 'pattern differs')})"
    return None


def _p2p_slow(c):
    m = _m(c)
    if c["check"] == "p2p" and m.get("p2p_gb_per_s") is not None and m.get("staged_gb_per_s") is not None \
            and m.get("verified") and m["p2p_gb_per_s"] < m["staged_gb_per_s"]:
        return f"peer copy {m['p2p_gb_per_s']} GB/s, staged through host {m['staged_gb_per_s']} GB/s"
    return None


def _p2p_below_link(c):
    m = _m(c)
    if c["check"] == "p2p" and m.get("verified") and m.get("below_expected"):
        return "peer copy " + str(m["below_expected"])
    return None


def _p2p_denied(c):
    m = _m(c)
    if c["check"] != "p2p" or (c.get("predicted") or {}).get("nccl_p2p") != "enabled":
        return None
    if m.get("can_access_peer") is False or m.get("enable_peer_access_error"):
        return "CUDA denies peer access: " + (m.get("enable_peer_access_error") or "cuDeviceCanAccessPeer = 0")
    return None


def _reg(c, key) -> dict[str, Any]:
    return _m(c).get(key) or {}


def _peermem(c):
    if c["check"] != "rdma-register" or not (c.get("predicted") or {}).get("peermem_loaded"):
        return None
    r = _reg(c, "reg_mr")
    if r.get("ok") is False and r.get("errno") == "EFAULT" and not _reg(c, "reg_dmabuf_mr").get("ok"):
        return "ibv_reg_mr on GPU memory: EFAULT (Bad address) with nvidia_peermem loaded, and no DMA-BUF path"
    return None


def _dmabuf(c):
    if c["check"] != "rdma-register" or (c.get("predicted") or {}).get("dmabuf_expected") is not True:
        return None
    ex, reg = _reg(c, "dmabuf_export"), _reg(c, "reg_dmabuf_mr")
    if ex.get("ok") is False:
        return "DMA-BUF export failed: " + str(ex.get("error"))
    if reg.get("ok") is False:
        return "ibv_reg_dmabuf_mr failed: " + str(reg.get("errno"))
    return None


def _blind(c):
    if c["check"] != "rdma-register" or (c.get("predicted") or {}).get("nccl_gdr") != "disabled":
        return None
    works = [k for k in ("reg_mr", "reg_dmabuf_mr") if _reg(c, k).get("ok")]
    if works:
        return f"{' and '.join(works)} on GPU memory worked; NCCL: " + str(c["predicted"].get("nccl_reason"))
    return None


def _enomem(c):
    if c["check"] != "rdma-register":
        return None
    hit = [k for k in ("reg_mr", "reg_dmabuf_mr") if _reg(c, k).get("errno") == "ENOMEM"]
    sweep = _m(c).get("pin_sweep") or {}
    if sweep.get("stopped_by") == "ENOMEM":
        hit.append(f"ibv_reg_mr after {sweep['registered_mib']} MiB of {sweep['target_mib']} MiB pinned at once")
    return f"{', '.join(hit)}: ENOMEM" if hit else None


def _loopback(c):
    if c["check"] == "rdma-loopback" and c["status"] == "fail" and not _m(c).get("hung"):
        return "RDMA write through the NIC failed: " + str((c.get("evidence") or {}).get("error")
                                                           or _m(c).get("wc_status") or "")
    return None


def _gds_compat(c):
    if c["check"] == "gds-read" and _m(c).get("mode") == "compat":
        return "cuFile reads in compatibility mode: " + str(_m(c).get("mode_reason", ""))
    return None


def _gds_failed(c):
    if c["check"] == "gds-read" and c["status"] == "fail":
        return "cuFile read failed: " + str(_m(c).get("error") or "data differs from a host read")
    return None


def _hung(c):
    ev = c.get("evidence") or {}
    if ev.get("hung"):
        return (f"{c['check']} did not finish within {ev.get('deadline_s')} s; "
                + ("worker killed" if ev.get("killed") else "worker could not be killed: the GPU may need a reset"))
    return None


def _left(c):
    ev = c.get("evidence") or {}
    left = ev.get("left_behind")
    return f"after {c['check']}: {left}" if left else None


DETECTORS: tuple[tuple[Rule, Detector], ...] = (
    (CUDA_UNAVAILABLE, _cuda), (HOST_BANDWIDTH_LOW, _host_low), (HOST_COPY_MISMATCH, _host_mismatch),
    (P2P_DATA_MISMATCH, _p2p_mismatch), (P2P_SLOWER_THAN_STAGED, _p2p_slow), (P2P_DENIED, _p2p_denied),
    (PEERMEM_NOT_WORKING, _peermem), (DMABUF_NOT_WORKING, _dmabuf), (GDR_WORKS_NCCL_BLIND, _blind),
    (REGISTRATION_ENOMEM, _enomem), (LOOPBACK_FAILED, _loopback), (GDS_COMPAT_MODE, _gds_compat),
    (GDS_READ_FAILED, _gds_failed), (STEP_HUNG, _hung), (LEFT_BEHIND, _left), (P2P_BELOW_LINK, _p2p_below_link))


def probe_findings(checks: Iterable[dict[str, Any]]) -> list[Finding]:
    """The findings of a probe: every check document run past every detector."""
    out: list[Finding] = []
    for c in checks:
        if c.get("status") in ("planned", None):
            continue
        subj = tuple(c.get("subjects") or ())
        for rule, detect in DETECTORS:
            msg = detect(c)
            if msg:
                effect = {"error": "fail", "warning": "degraded"}.get(rule.severity)
                out.append(Finding(rule.code, rule.severity, subj, msg,
                                   pairs=(subj,) if len(subj) == 2 else (), effect=effect))
    out.sort(key=lambda f: (f.code, f.subject))
    return out
