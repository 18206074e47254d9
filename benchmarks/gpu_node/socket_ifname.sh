#!/usr/bin/env bash
# NCCL_SOCKET_IFNAME that matches no interface, on a GPU node: what NCCL does (one rank, PyTorch's NCCL) and what
# gdrcheck says (GDR208). Usage, from the repository root: benchmarks/gpu_node/socket_ifname.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
. benchmarks/gpu_node/env.sh
python3 -c "from gdrcheck.io.source import Source; print(Source().ip_addresses().stdout)" > "$out/addresses.txt" 2>&1
cat > /tmp/one_rank.py <<'PY'
import os, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
t = torch.ones(4, device="cuda:0"); dist.all_reduce(t); torch.cuda.synchronize()
print("all_reduce ok", t.tolist()); dist.destroy_process_group()
PY
for ifname in nosuch0 lo "^lo" ""; do
  tag=${ifname:-unset}; tag=${tag//^/not-}
  ( if [ -n "$ifname" ]; then export NCCL_SOCKET_IFNAME=$ifname; else unset NCCL_SOCKET_IFNAME; fi
    export NCCL_DEBUG=WARN NCCL_NVLS_ENABLE=0
    timeout 120 python3 /tmp/one_rank.py > "$out/nccl-$tag.txt" 2>&1; echo "rc=$?" >> "$out/nccl-$tag.txt"
    timeout 60 python3 -m gdrcheck check > "$out/check-$tag.txt" 2>&1; echo "rc=$?" >> "$out/check-$tag.txt"
  )
done
NCCL_SOCKET_IFNAME=nosuch0 python3 -m gdrcheck snapshot -o "$out/snapshot.tar.gz" > /dev/null 2>&1
cat "$out/addresses.txt"; for f in "$out"/nccl-*.txt "$out"/check-*.txt; do echo "== $f"; grep -v '^\s*$' "$f" | tail -6; done
# one file back: the outputs and the snapshot (taken with NCCL_SOCKET_IFNAME=nosuch0 in the environment)
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")" && rm -rf "$out"
