#!/usr/bin/env bash
# The probe's time on a multi-GPU node, before and after, from one call, and what it measured per GPU pair.
#
#   bash benchmarks/gpu_node/probe_speed.sh OUT_DIR [BEFORE_TREE]   (from the repository root, on the GPU node)
#
# BEFORE_TREE: a checkout of the earlier gdrcheck (one worker process per step) to time beside this one.
# OUT_DIR/probe-before.json, probe-after-N.json (three runs), probe-p2p-1g.json (--copy-size 1GiB),
# probe-kill.json (a 1.5 s step deadline), snapshot.tar.gz (--redact), topology.json, pairs.json,
# timing.txt (wall seconds of each run) and pairs.tsv (per GPU pair: prediction, expected, measured).
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${1:?OUT_DIR}
BEFORE=${2:-}
mkdir -p "$OUT"
WHL=.whl
[ -d "$WHL" ] || WHL=$BEFORE/.whl
if ls "$WHL"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHL"/*.whl || exit 1
fi
python3 -m compileall -q gdrcheck
[ -n "$BEFORE" ] && (cd "$BEFORE" && python3 -m compileall -q gdrcheck)
T="$OUT/timing.txt"
timed() {  # label, then the command
  local label=$1; shift
  local t0 t1 rc
  t0=$(date +%s.%N); "$@"; rc=$?; t1=$(date +%s.%N)
  python3 -c "import sys; print(f'{sys.argv[1]}: rc={sys.argv[2]} wall {float(sys.argv[4]) - float(sys.argv[3]):.2f} s')" \
    "$label" "$rc" "$t0" "$t1" | tee -a "$T"
}
{ date -u; nvidia-smi -L; uname -r; } > "$OUT/node.txt" 2>&1
if [ -n "$BEFORE" ]; then
  (cd "$BEFORE" && PYTHONPATH=/tmp/site:$PWD timed "before: probe" python3 -m gdrcheck probe --json \
    -o "$OUT/probe-before.json")
fi
export PYTHONPATH=/tmp/site:$PWD
for i in 1 2 3; do
  timed "after: probe (run $i)" python3 -m gdrcheck probe --json -o "$OUT/probe-after-$i.json"
done
GDRCHECK_PROBE_SERIAL=1 timed "after: probe, every step alone (GDRCHECK_PROBE_SERIAL=1)" python3 -m gdrcheck probe \
  --json -o "$OUT/probe-serial.json"
timed "after: probe --check cuda" python3 -m gdrcheck probe --check cuda --json -o "$OUT/probe-cuda.json"
timed "after: probe --check p2p" python3 -m gdrcheck probe --check p2p --json -o "$OUT/probe-p2p.json"
timed "after: probe --check p2p --copy-size 1GiB" python3 -m gdrcheck probe --check p2p --copy-size 1GiB --json \
  -o "$OUT/probe-p2p-1g.json"
timed "after: a 1.5 s step deadline over 4 GiB host copies" python3 -m gdrcheck probe --check host-bandwidth \
  --copy-size 4GiB --step-timeout 1.5 --json -o "$OUT/probe-kill.json"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$OUT/after-kill.txt" 2>&1
{  # the probe itself SIGKILLed mid-run: its worker goes with it (PR_SET_PDEATHSIG), nothing stays on the GPUs
  python3 -m gdrcheck probe --check p2p --copy-size 4GiB --json -o /dev/null & P=$!
  sleep 2; echo "worker before: $(pgrep -f 'probe/worker.py' | tr '\n' ' ')"; kill -9 $P; wait $P 2>/dev/null
  sleep 1; echo "worker after SIGKILL of the probe: $(pgrep -f 'probe/worker.py' | tr '\n' ' ')(none listed: gone)"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} >> "$OUT/after-kill.txt" 2>&1
python3 -m gdrcheck snapshot --redact -o "$OUT/snapshot.tar.gz"; echo "snapshot rc=$?"
python3 -m gdrcheck topology --json -o "$OUT/topology.json"
python3 -m gdrcheck pairs --json -o "$OUT/pairs.json"
python3 - "$OUT" <<'PY' | tee "$OUT/pairs.tsv"
import json, sys
out = sys.argv[1]
after = json.load(open(f"{out}/probe-after-1.json"))
big = json.load(open(f"{out}/probe-p2p-1g.json"))
one_g = {tuple(c["subjects"]): c for c in big["checks"] if c["check"] == "p2p"}
print("a\tb\tverdict\tlink\texpected_GB/s\ta->b\tb->a\tbidir\tstaged\tstatus\t1GiB a->b\t1GiB b->a\t1GiB bidir\tstep_s")
for c in after["checks"]:
    if c["check"] != "p2p":
        continue
    m, e, p = c.get("measured") or {}, c.get("expected") or {}, c.get("predicted") or {}
    g = (one_g.get(tuple(c["subjects"])) or {}).get("measured") or {}
    print("\t".join(str(x) for x in (*c["subjects"], p.get("verdict"), e.get("link"), e.get("gb_per_s"),
          m.get("a_to_b_gb_per_s"), m.get("b_to_a_gb_per_s"), m.get("bidir_gb_per_s"), m.get("staged_gb_per_s"),
          c["status"], g.get("a_to_b_gb_per_s"), g.get("b_to_a_gb_per_s"), g.get("bidir_gb_per_s"),
          c.get("elapsed_s"))))
for c in after["checks"]:
    if c["check"] != "p2p":
        print(c["check"], c["subjects"], c["status"], c.get("elapsed_s"),
              {k: v for k, v in (c.get("measured") or {}).items() if "gb_per_s" in k},
              (c.get("evidence") or {}).get("worker_opened", ""))
print("summary:", after.get("summary_line"), "elapsed", after.get("elapsed_s"))
kill = json.load(open(f"{out}/probe-kill.json"))
print("kill run:", [(c["subjects"], c["status"], (c.get("evidence") or {}).get("error")) for c in kill["checks"]
                    if c.get("status") != "skipped"][:4])
PY
