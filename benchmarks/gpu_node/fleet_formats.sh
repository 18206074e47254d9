#!/usr/bin/env bash
# On a GPU node: every `gdrcheck check` format live, --require, --timeout at several limits, NODE_NAME,
# fingerprint, and the timing of the fleet-facing commands against `nvidia-smi topo -m`.
#
#   bash benchmarks/gpu_node/fleet_formats.sh [OUT_DIR]     (from the repository root, on the GPU node)
#
# Wheels that the node lacks can be put in .whl/ (e.g. defusedxml); they are installed to /tmp/site.
export PYTHONUNBUFFERED=1
OUT=${1:-${OUT:-./gdrcheck-fleet}}
R=$OUT/f; mkdir -p "$R"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
python3 -m compileall -q gdrcheck >/dev/null  # as pip install does
G="python3 -m gdrcheck"
for f in text nhc npd nagios prometheus json; do
  $G check --format $f > "$R/check-$f.out" 2>"$R/check-$f.err"; echo "check $f rc=$? bytes=$(wc -c < "$R/check-$f.out")" >> "$R/rc.txt"
done
for r in gdr p2p gds; do $G check --format npd --require $r >> "$R/require.txt" 2>&1; echo "require $r rc=$?" >> "$R/require.txt"; done
$G fingerprint > "$R/fingerprint.txt"; $G fingerprint --explain > "$R/fingerprint-explain.txt"
NODE_NAME=k8s-node-7 $G pairs --jsonl > "$R/pairs-nodename.jsonl"; echo "nodename rc=$?" >> "$R/rc.txt"
for t in 0.001 0.05 0.2 1; do
  $G pairs --json --timeout $t > "$R/timeout-$t.json" 2>"$R/timeout-$t.err"; rc=$?
  echo "timeout $t rc=$rc $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['status'], d['timed_out'], d['summary_line'])" "$R/timeout-$t.json")" >> "$R/rc.txt"
done
python3 "$HERE/live_timing.py" > "$R/timing.txt"
cat "$R/rc.txt" "$R/require.txt" "$R/timing.txt" "$R/fingerprint.txt"
