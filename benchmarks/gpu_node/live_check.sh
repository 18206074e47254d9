#!/usr/bin/env bash
# The gate on a live GPU node, as an admin runs it: check in each engine's format, pairs, topology's NIC
# verdicts, bar1 in a narrow window without colour, and the probe (JSON to $OUT).
#   OUT=/tmp/out bash benchmarks/gpu_node/live_check.sh     (from the repository root, on the GPU node)
set -x
OUT=${OUT:-./gdrcheck-live}; mkdir -p "$OUT"
. benchmarks/gpu_node/env.sh
G="python3 -m gdrcheck"
$G --version
$G check; echo rc=$?
$G check --require gdr,p2p; echo rc=$?
$G check --require gdr --format npd; echo rc=$?
$G check --format nagios; echo rc=$?
$G pairs; echo rc=$?
$G pairs --json > $OUT/pairs.json; echo rc=$?
$G topology --json | python3 -c "import json,sys; d=json.load(sys.stdin); print([(x['bdf'],x['kind'],x.get('rdma'),x.get('rdma_basis')) for x in d['devices'] if x['kind'] in ('gpu','nic')])"
COLUMNS=60 NO_COLOR=1 $G bar1; echo rc=$?
$G pairs | head -1 ; echo rc=$?
$G probe --json > $OUT/probe.json; echo rc=$?
python3 -c "import json; d=json.load(open('$OUT/probe.json')); print(d['status'], d['summary_line']); [print(c['check'], c['status'], c.get('measured',{}).get('h2d_gb_per_s'), c.get('measured',{}).get('d2h_gb_per_s')) for c in d['checks']]"
