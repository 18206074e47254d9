#!/usr/bin/env bash
# Hold gdrcheck's NCCL prediction to NCCL itself on this GPU node: run PyTorch's NCCL (one rank per GPU,
# NCCL_DEBUG=INFO, NCCL_TOPO_DUMP_FILE), then compare NCCL's <gpu gdr>/<net gdr>, its "GPU Direct RDMA"
# and DMA-BUF lines and its version with `gdrcheck pairs --json` on the live node and on the dump.
# Usage (from anywhere): benchmarks/gpu_node/nccl_harness.sh [OUTDIR]   (default $OUT, else /tmp/nccl_harness)
set -u
cd "$(dirname "$0")/../.." || exit 2
. benchmarks/gpu_node/env.sh
dest=${1:-${OUT:-/tmp/nccl_harness}}
mkdir -p "$dest"
exec python3 benchmarks/gpu_node/nccl_harness.py --out "$dest"
