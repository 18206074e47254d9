#!/usr/bin/env bash
# Capture a GPU node for gdrcheck's fixtures and hold gdrcheck beside nvidia-smi and NVML on it.
#
#   bash benchmarks/gpu_node/capture.sh [OUT_DIR]     (from the repository root, on the GPU node)
#
# Writes OUT_DIR/snapshot.tar.gz, OUT_DIR/snapshot-redacted.tar.gz and OUT_DIR/results.tar.gz
# (gdrcheck topology/pairs/bar1 as text and JSON, the replay comparison, nvidia-smi topo -m/-mp/-p2p r/w/n,
# nvidia-smi -q and -q -x, NVML's common ancestor and P2P status per GPU pair, and the timing of
# `gdrcheck pairs` against `nvidia-smi topo -m`). A new fixture is the redacted snapshot plus
# nvidia-smi-topo.txt and nvml-pairs.json from results, in fixtures/<machine>/ with a NOTE.md.
# Wheels that the node lacks can be put in .whl/ (e.g. defusedxml); they are installed to /tmp/site.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${1:-${OUT:-./gdrcheck-capture}}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
python3 -c "import click, rich, pynvml, psutil, defusedxml" || exit 1
python3 -m compileall -q gdrcheck >/dev/null  # as pip install does
G="python3 -m gdrcheck"
R=$OUT/r; mkdir -p "$R"
$G --version
$G snapshot -o "$OUT/snapshot.tar.gz"
$G snapshot --redact -o "$OUT/snapshot-redacted.tar.gz"
for c in topology pairs bar1; do
  $G $c > "$R/$c.txt" 2>&1; echo "$c text rc=$?" >> "$R/rc.txt"
  $G $c --json > "$R/$c.json" 2>"$R/$c.err"; echo "$c json rc=$?" >> "$R/rc.txt"
  $G $c --json --from "$OUT/snapshot.tar.gz" > "$R/$c-replay.json" 2>/dev/null
  cmp -s "$R/$c.json" "$R/$c-replay.json" && echo "$c replay identical" >> "$R/rc.txt" \
    || echo "$c replay DIFFERS" >> "$R/rc.txt"
done
for a in "-m" "-mp" "-p2p r" "-p2p w" "-p2p n"; do echo "== nvidia-smi topo $a"; nvidia-smi topo $a; done \
  > "$R/nvidia-smi-topo.txt" 2>&1
nvidia-smi -q > "$R/nvidia-smi-q.txt" 2>&1; nvidia-smi -q -x > "$R/nvidia-smi-q.xml" 2>&1
python3 "$HERE/nvml_pairs.py" > "$R/nvml-pairs.json" 2>&1
python3 "$HERE/live_timing.py" 11 > "$R/timing.txt" 2>&1
python3 "$HERE/cfgtime.py" > "$R/config-read-times.txt" 2>&1
cat "$R/rc.txt" "$R/timing.txt"
tar czf "$OUT/results.tar.gz" -C "$OUT" r && rm -rf "$R"
