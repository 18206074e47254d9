#!/usr/bin/env bash
# On a multi-GPU NVLink node: everything the fabric, NCCL-log and probe work is held to, in one call.
#   bash benchmarks/gpu_node/multi_gpu_capture.sh OUT_DIR
# OUT_DIR/smi.tar.gz (nvidia-smi -q, topo -m/-mp/-p2p r,w,rw,n,a, nvlink -s), nvml-fabric.json, bandwidth.json,
# nccl-runs.tar.gz (benchmarks/gpu_node/nccl_settings.py), probe-timing.txt and probe.json (gdrcheck probe).
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${1:?OUT_DIR}
mkdir -p "$OUT" /tmp/cap/smi
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
python3 -m compileall -q gdrcheck
( cd /tmp/cap/smi
  nvidia-smi -q > q.txt 2>&1; nvidia-smi -q -x > q.xml 2>&1
  nvidia-smi topo -m > topo-m.txt 2>&1; nvidia-smi topo -mp > topo-mp.txt 2>&1
  for k in r w rw n a p; do nvidia-smi topo -p2p $k > topo-p2p-$k.txt 2>&1; done
  nvidia-smi nvlink -s > nvlink-s.txt 2>&1; nvidia-smi nvlink -c > nvlink-c.txt 2>&1
  systemctl status nvidia-fabricmanager > fabricmanager.txt 2>&1; nv-fabricmanager --version >> fabricmanager.txt 2>&1
  ls /proc/driver/nvidia-fs > nvidia-fs.txt 2>&1; cat /proc/driver/nvidia/gpus/*/information > gpus-information.txt 2>&1
  nvidia-smi -L > L.txt; uname -a >> L.txt )
tar -C /tmp/cap -czf "$OUT/smi.tar.gz" smi
python3 -m gdrcheck snapshot --redact -o "$OUT/snapshot.tar.gz" 2>&1 | tail -2
timeout 330 python3 "$HERE/nccl_settings.py" --out /tmp/cap/nccl-runs
tar -C /tmp/cap -czf "$OUT/nccl-runs.tar.gz" nccl-runs
for part in nvml nvml-v bandwidth; do python3 "$HERE/fabric_capture.py" --out "$OUT" --part $part 2>&1 | cut -c1-600; done
{ for what in "" "--check cuda" "--check host-bandwidth" "--check p2p"; do
    s=$EPOCHREALTIME; python3 -m gdrcheck probe --json $what -o /tmp/cap/probe$(echo $what | tr -d ' -').json >/dev/null 2>/tmp/cap/probe.err
    rc=$?; e=$EPOCHREALTIME; echo "probe $what: rc=$rc wall $(awk "BEGIN{print $e - $s}") s"; done; } > "$OUT/probe-timing.txt"
cp /tmp/cap/probe.json "$OUT/probe.json" 2>/dev/null; cat "$OUT/probe-timing.txt"
ls -la "$OUT"
