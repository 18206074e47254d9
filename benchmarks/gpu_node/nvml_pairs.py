"""NVML answers beside gdrcheck: BAR1 per GPU, common ancestor and P2P status per ordered GPU pair."""
import itertools
import json

import pynvml as N

N.nvmlInit()
n = N.nvmlDeviceGetCount()
hs = [N.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
bus = []
for h in hs:
    b = N.nvmlDeviceGetPciInfo(h).busId
    bus.append(b if isinstance(b, str) else b.decode())
out = {"driver": N.nvmlSystemGetDriverVersion(), "gpus": [], "pairs": []}
for i, h in enumerate(hs):
    b1 = N.nvmlDeviceGetBAR1MemoryInfo(h)
    m = N.nvmlDeviceGetMemoryInfo(h)
    out["gpus"].append({"index": i, "bus_id": bus[i], "bar1_total": b1.bar1Total, "bar1_used": b1.bar1Used,
                        "bar1_free": b1.bar1Free, "fb_total": m.total})
for i, j in itertools.permutations(range(n), 2):
    e = {"a": bus[i], "b": bus[j]}
    try:
        e["common_ancestor"] = N.nvmlDeviceGetTopologyCommonAncestor(hs[i], hs[j])
    except N.NVMLError as x:
        e["common_ancestor"] = str(x)
    for name, idx in (("read", 0), ("write", 1), ("nvlink", 2), ("atomics", 3), ("prop", 4)):
        try:
            e[name] = N.nvmlDeviceGetP2PStatus(hs[i], hs[j], idx)
        except N.NVMLError as x:
            e[name] = str(x)
    out["pairs"].append(e)
N.nvmlShutdown()
print(json.dumps(out, indent=1))
