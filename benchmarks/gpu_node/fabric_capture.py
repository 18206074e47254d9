"""On a node with NVLink: what NVML says of each GPU's NVSwitch fabric and NVLink links, and what a GPU pair
carries, for gdrcheck's fabric facts and the probe's expected bandwidth.

    python3 benchmarks/gpu_node/fabric_capture.py --out DIR

``DIR/nvml-fabric.json``: per GPU, ``nvmlDeviceGetGpuFabricInfo``/``...V`` (state, status, clique id, cluster
UUID), per link ``nvmlDeviceGetNvLinkState``, ``...Version``, ``...RemotePciInfo``, ``...RemoteDeviceType``,
and the field values for link count and per-link speed; every call's error is kept beside it.
``DIR/bandwidth.json``: PyTorch copies per GPU pair, one direction and both at once, at several sizes (the
plateau), and a copy staged through pinned host memory.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def _s(v):
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if hasattr(v, "_fields_"):
        return {f[0]: _s(getattr(v, f[0])) for f in v._fields_}
    if not isinstance(v, str) and hasattr(v, "__len__"):
        try:
            return [_s(x) for x in v]
        except TypeError:
            return repr(v)
    return v


def call(fn, *a):
    try:
        return {"value": _s(fn(*a))}
    except Exception as e:  # noqa: BLE001 - a capture: keep the error
        return {"error": f"{type(e).__name__}: {e}"}


def _fabric(N, h):
    info = N.c_nvmlGpuFabricInfo_t()
    N.nvmlDeviceGetGpuFabricInfo(h, __import__("ctypes").byref(info))
    return info


def nvml_capture() -> dict:
    import pynvml as N

    N.nvmlInit()
    out = {"driver": _s(N.nvmlSystemGetDriverVersion()), "nvml": _s(N.nvmlSystemGetNVMLVersion()), "gpus": []}
    fields = {k: getattr(N, k) for k in ("NVML_FI_DEV_NVLINK_LINK_COUNT", "NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON",
                                          "NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT") if hasattr(N, k)}
    for i in range(N.nvmlDeviceGetCount()):
        h = N.nvmlDeviceGetHandleByIndex(i)
        g = {"index": i, "name": _s(N.nvmlDeviceGetName(h)), "bus_id": _s(N.nvmlDeviceGetPciInfo(h).busId),
             "fabric": call(lambda hh: _fabric(N, hh), h)}
        try:
            vals = N.nvmlDeviceGetFieldValues(h, list(fields.values()))
            g["fields"] = {k: {"ret": v.nvmlReturn, "value": _s(v.value)} for k, v in zip(fields, vals)}
        except Exception as e:  # noqa: BLE001
            g["fields"] = {"error": f"{type(e).__name__}: {e}"}
        links = []
        for link in range(18):
            links.append({"link": link, "state": call(N.nvmlDeviceGetNvLinkState, h, link),
                          "version": call(N.nvmlDeviceGetNvLinkVersion, h, link),
                          "remote_pci": call(lambda hh, ll: N.nvmlDeviceGetNvLinkRemotePciInfo(hh, ll).busId, h, link),
                          "remote_type": call(N.nvmlDeviceGetNvLinkRemoteDeviceType, h, link)})
        g["links"] = links
        g["links_beyond_18"] = call(N.nvmlDeviceGetNvLinkState, h, 18)
        out["gpus"].append(g)
    N.nvmlShutdown()
    return out


def nvml_fabric_v() -> dict:
    import pynvml as N

    N.nvmlInit()
    out = []
    for i in range(N.nvmlDeviceGetCount()):
        h = N.nvmlDeviceGetHandleByIndex(i)
        info = N.c_nvmlGpuFabricInfo_v2_t()
        info.version = N.nvmlGpuFabricInfo_v2
        out.append(call(lambda hh: (N.nvmlDeviceGetGpuFabricInfoV(hh, __import__("ctypes").byref(info)), info)[1], h))
    N.nvmlShutdown()
    return {"gpus": out}


def bandwidth() -> dict:
    import torch

    n = torch.cuda.device_count()
    res = {"gpus": n, "pairs": []}

    def timed(fn, reps):
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        for d in range(n):
            torch.cuda.synchronize(d)
        return (time.perf_counter() - t0) / reps

    for a in range(n):
        for b in range(a + 1, n):
            row = {"a": a, "b": b, "can_access_peer": torch.cuda.can_device_access_peer(a, b), "sizes": []}
            for mib in (16, 64, 256, 1024):
                nbytes = mib << 20
                xa = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{a}")
                xb = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{b}")
                ya = torch.empty_like(xa)
                yb = torch.empty_like(xb)
                sa = torch.cuda.Stream(device=a)
                sb = torch.cuda.Stream(device=b)
                one = timed(lambda: xb.copy_(xa, non_blocking=True), 5)
                back = timed(lambda: ya.copy_(xb, non_blocking=True), 5)

                def both():
                    with torch.cuda.stream(sa):
                        yb.copy_(xa, non_blocking=True)
                    with torch.cuda.stream(sb):
                        ya.copy_(xb, non_blocking=True)
                    sa.synchronize()
                    sb.synchronize()

                bi = timed(both, 5)
                row["sizes"].append({"mib": mib, "a_to_b_GBps": round(nbytes / one / 1e9, 1),
                                     "b_to_a_GBps": round(nbytes / back / 1e9, 1),
                                     "bidir_total_GBps": round(2 * nbytes / bi / 1e9, 1)})
            res["pairs"].append(row)
    host = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True)
    d0 = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
    res["host_to_gpu0_GBps"] = round((256 << 20) / timed(lambda: d0.copy_(host, non_blocking=True), 5) / 1e9, 1)
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--part", choices=("nvml", "nvml-v", "bandwidth"), help="one part only (each runs alone: a "
                    "driver call that crashes the process loses only its own part)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    parts = {"nvml": ("nvml-fabric.json", nvml_capture), "nvml-v": ("nvml-fabric-v.json", nvml_fabric_v),
             "bandwidth": ("bandwidth.json", bandwidth)}
    for name, fn in [parts[a.part]] if a.part else parts.values():
        try:
            data = fn()
        except Exception as e:  # noqa: BLE001
            data = {"error": f"{type(e).__name__}: {e}"}
        with open(os.path.join(a.out, name), "w") as fh:
            json.dump(data, fh, indent=1)
        print(name, json.dumps(data)[:3000], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
