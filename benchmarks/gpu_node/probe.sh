#!/usr/bin/env bash
# Run `gdrcheck probe` on a GPU node the way the issue asks it to be shown, and keep what it says.
#
#   bash benchmarks/gpu_node/probe.sh [OUT_DIR]     (from the repository root, on the GPU node)
#
# OUT_DIR/probe.json (the whole probe, --gds-path on local disk), probe-1g.json (host-bandwidth with
# 1 GiB copies), probe-kill.json (a 1.5 s step deadline over a 4 GiB copy: the worker is killed) and
# probe.log (the text output, the rdma-register worker run directly, timings, GPU state after the kill).
# An extracted libibverbs (Debian's libibverbs1 with no provider) can be put in .ibv/; it is
# put on LD_LIBRARY_PATH for the "no RDMA device" path.
export PYTHONUNBUFFERED=1
OUT=${1:-${OUT:-./gdrcheck-probe}}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
G="python3 -m gdrcheck"
LOG=$OUT/probe.log
{
  date -u; nvidia-smi -L; uname -r
  echo "== dry run"; /usr/bin/time -f "dry-run wall %e s" $G probe --dry-run
  mkdir -p /var/tmp/gdrcheck-gds
  echo "== probe (json)"
  /usr/bin/time -f "probe wall %e s" $G probe --json --gds-path /var/tmp/gdrcheck-gds -o "$OUT/probe.json"
  echo "probe rc=$?"
  echo "== probe (text)"; $G probe --gds-path /var/tmp/gdrcheck-gds; echo "probe text rc=$?"
  echo "== host-bandwidth, 1 GiB copies"
  $G probe --check host-bandwidth --copy-size 1GiB --json -o "$OUT/probe-1g.json"; echo "rc=$?"
  echo "== a 1.5 s step deadline over 4 GiB copies"
  nvidia-smi --query-gpu=memory.used,bar1.used --format=csv 2>/dev/null \
    || nvidia-smi -q -d MEMORY | grep -A3 BAR1
  /usr/bin/time -f "kill run wall %e s" $G probe --check host-bandwidth --copy-size 4GiB --step-timeout 1.5 --json \
    -o "$OUT/probe-kill.json"; echo "rc=$?"
  echo "-- after the kill: compute processes, then BAR1"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
  nvidia-smi -q -d MEMORY | grep -A3 BAR1
  echo "-- the GPU still answers"; $G probe --check cuda; echo "rc=$?"
  echo "== rdma-register worker, run directly (the node's libibverbs, then Debian's with no device)"
  B=$(python3 -c "import pynvml as n; n.nvmlInit(); b=n.nvmlDeviceGetPciInfo(n.nvmlDeviceGetHandleByIndex(0)).busId; print((b.decode() if isinstance(b, bytes) else b)[4:].lower())")
  S="{\"check\": \"rdma-register\", \"params\": {\"gpu\": \"$B\", \"nic\": \"0000:00:00.0\"}}"
  python3 -c "import json,sys; from gdrcheck.probe.runner import run_step; print(json.dumps(run_step(json.loads(sys.argv[1]), 30)))" "$S"
  S2=$(echo "$S" | sed s/rdma-register/rdma-loopback/)
  python3 -c "import json,sys; from gdrcheck.probe.runner import run_step; print(json.dumps(run_step(json.loads(sys.argv[1]), 30)))" "$S2"
  if [ -d .ibv ]; then
    LD_LIBRARY_PATH=$PWD/.ibv python3 -c "import json,sys; from gdrcheck.probe.runner import run_step; print(json.dumps(run_step(json.loads(sys.argv[1]), 30)))" "$S"
  fi
  echo "== report with the probe"; $G report --probe "$OUT/probe.json" -o /tmp/node.html; echo "report rc=$?"
  grep -c 'id="measured"' /tmp/node.html
  echo "== cuFile without nvidia-fs"; ls /proc/driver/nvidia-fs 2>&1; lsmod 2>/dev/null | grep -i nvidia
} > "$LOG" 2>&1
tail -n 60 "$LOG"
