#!/usr/bin/env bash
# On a node with several GPUs: gdrcheck's prediction per GPU pair held to what the node measures, and the time
# of gdrcheck beside nvidia-smi topo -m.
#
#   bash benchmarks/gpu_node/multi_gpu.sh [OUT_DIR] [RUNS]     (from the repository root, on the GPU node)
#
# OUT_DIR/probe.json (every check that applies), pairs.json, smi.txt (topo -m, -p2p r, -p2p w), pairs.tsv (per
# GPU pair: nvidia-smi's class and P2P answers, NVML's P2P status, gdrcheck's path, verdict and NCCL's P2P
# decision, the probe's cuDeviceCanAccessPeer, verified copy and bandwidths) and timing.txt (medians of RUNS,
# alternating: pairs --json, probe --check p2p, nvidia-smi topo -m).
export PYTHONUNBUFFERED=1
OUT=${1:-${OUT:-./gdrcheck-multi}}
RUNS=${2:-11}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
python3 -m compileall -q gdrcheck  # images that set PYTHONDONTWRITEBYTECODE would compile every module per run
{
  date -u; nvidia-smi -L; uname -r
  echo "== topo -m"; nvidia-smi topo -m
  echo "== topo -p2p r"; nvidia-smi topo -p2p r
  echo "== topo -p2p w"; nvidia-smi topo -p2p w
} > "$OUT/smi.txt" 2>&1
/usr/bin/time -f "probe wall %e s" python3 -m gdrcheck probe --json -o "$OUT/probe.json" 2> "$OUT/probe.err"
echo "probe rc=$?"
python3 -m gdrcheck pairs --json -o "$OUT/pairs.json"; echo "pairs rc=$?"
python3 - "$OUT" "$RUNS" <<'EOF'
import json, statistics, subprocess, sys, time

out, runs = sys.argv[1], int(sys.argv[2])
pairs = json.load(open(f"{out}/pairs.json"))
probe = json.load(open(f"{out}/probe.json"))
gpus = [d for d in pairs.get("devices", []) if d.get("kind") == "gpu"]
rows = ["a\tb\tpath\tverdict\tnccl_p2p\tnccl_path_type\tnvml_p2p_read\tnvml_p2p_write\tcan_access_peer\tverified"
        "\tp2p_GB/s\tstaged_GB/s\tprobe_status"]
nvml = {}
try:
    import pynvml as N
    N.nvmlInit()
    hs = {}
    for i in range(N.nvmlDeviceGetCount()):
        h = N.nvmlDeviceGetHandleByIndex(i)
        bus = N.nvmlDeviceGetPciInfo(h).busId
        hs[(bus.decode() if isinstance(bus, bytes) else bus)[-12:].lower()] = h
    names = {0: "OK", 1: "chipset", 2: "GPU", 3: "IOH topology", 4: "disabled by reg", 5: "NS", 6: "unknown"}
    for a in hs:
        for b in hs:
            if a < b:
                nvml[(a, b)] = tuple(names.get(N.nvmlDeviceGetP2PStatus(hs[a], hs[b], k), "?") for k in (0, 1))
    N.nvmlShutdown()
except Exception as e:  # noqa: BLE001 - a measurement script: say it and go on
    print("NVML P2P status not read:", e)
by = {}
for c in probe.get("checks", []):
    if c.get("check") == "p2p":
        by[tuple(sorted(c.get("subjects") or ()))] = c
for p in pairs["pairs"]:
    if p["kind"] != "gpu-gpu":
        continue
    c = by.get(tuple(sorted((p["a"], p["b"])))) or {}
    m = c.get("measured") or {}
    n = p.get("nccl") or {}
    st = dict(zip(("read", "write"), nvml.get(tuple(sorted((p["a"], p["b"]))), ())))
    rows.append("\t".join(str(x) for x in (
        p["a"], p["b"], p.get("path"), p.get("verdict"), n.get("p2p"), n.get("path_type"), st.get("read"),
        st.get("write"), m.get("can_access_peer"), m.get("verified"), m.get("p2p_gb_per_s"),
        m.get("staged_gb_per_s"), c.get("status"))))
open(f"{out}/pairs.tsv", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
print("probe checks:", [(c.get("check"), c.get("subjects"), c.get("status")) for c in probe.get("checks", [])])

cmds = {"pairs --json": [sys.executable, "-m", "gdrcheck", "pairs", "--json"],
        "probe --check p2p": [sys.executable, "-m", "gdrcheck", "probe", "--check", "p2p", "--json"],
        "nvidia-smi topo -m": ["nvidia-smi", "topo", "-m"]}
times = {k: [] for k in cmds}
for _ in range(runs):
    for k, argv in cmds.items():
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[k].append((time.perf_counter() - t0) * 1000)
lines = [f"{k}: median {statistics.median(v):.1f} ms (min {min(v):.1f}, max {max(v):.1f}, {runs} runs)"
         for k, v in times.items()]
open(f"{out}/timing.txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
cat "$OUT/probe.err" | tail -3
