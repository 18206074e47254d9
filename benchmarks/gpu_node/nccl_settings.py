"""Run PyTorch's NCCL on every GPU of this node under settings that change NCCL's P2P or path decision, and keep
each run's log, as an admin would paste it (``NCCL_DEBUG=INFO``, every rank's output in one stream).

One process per GPU (``torch.distributed``, backend ``nccl``) does an all_reduce and an all_to_all (so every
GPU pair gets a connection and a ``Channel .. via ..`` line). The first run also dumps NCCL's topology
(``NCCL_TOPO_DUMP_FILE``); two topology files are made from it for the ``NCCL_TOPO_FILE`` runs: the GPUs split
over two CPUs with their NVLinks kept, and split with the NVLinks removed.

    python3 benchmarks/gpu_node/nccl_settings.py --out DIR

Writes ``DIR/<name>/nccl.log``, ``DIR/<name>/env.txt`` (the settings) and, for the topology-file runs,
``DIR/<name>/topo.xml``; ``DIR/runs.json`` lists them with each run's exit codes and wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

WORKER = r"""
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"]); n = int(os.environ["WORLD_SIZE"]); torch.cuda.set_device(rank)
dist.init_process_group("nccl", rank=rank, world_size=n)
x = torch.ones(1 << 22, device="cuda"); dist.all_reduce(x)
y = torch.empty_like(x); dist.all_to_all_single(y, x); torch.cuda.synchronize()
assert float(x[0]) == n, float(x[0])
dist.destroy_process_group()
"""

SETTINGS = [
    ("default", {}),
    ("p2p-disable", {"NCCL_P2P_DISABLE": "1"}),
    ("p2p-level-LOC", {"NCCL_P2P_LEVEL": "LOC"}),
    ("p2p-level-NVL", {"NCCL_P2P_LEVEL": "NVL"}),
    ("p2p-level-PIX", {"NCCL_P2P_LEVEL": "PIX"}),
    ("p2p-level-PXB", {"NCCL_P2P_LEVEL": "PXB"}),
    ("p2p-level-SYS", {"NCCL_P2P_LEVEL": "SYS"}),
    ("p2p-level-loc-lower", {"NCCL_P2P_LEVEL": "loc"}),
    ("p2p-level-0-numeric", {"NCCL_P2P_LEVEL": "0"}),
    ("p2p-level-0x0-hex", {"NCCL_P2P_LEVEL": "0x0"}),
    ("p2p-use-cuda-memcpy", {"NCCL_P2P_USE_CUDA_MEMCPY": "1"}),
    ("shm-disable", {"NCCL_SHM_DISABLE": "1"}),
    ("p2p-disable-shm-disable", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}),
    ("net-gdr-level-PHB", {"NCCL_NET_GDR_LEVEL": "PHB"}),
    ("conf-file-p2p-loc", {"NCCL_CONF_FILE": "@conf"}),
    ("topo-file-split-cpu", {"NCCL_TOPO_FILE": "@split"}),
    ("topo-file-split-cpu-no-nvlink", {"NCCL_TOPO_FILE": "@split-nonvl"}),
    ("two-gpus-cuda-visible", {"CUDA_VISIBLE_DEVICES": "0,1"}),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_topology(dump: str, out: str, keep_nvlink: bool) -> None:
    """NCCL's own dump with the second half of the GPUs moved under a second CPU (NUMA node 1)."""
    tree = ET.parse(dump)
    root = tree.getroot()
    cpu = root.find("cpu")
    other = ET.SubElement(root, "cpu", dict(cpu.attrib, numaid="1"))
    if cpu.get("numaid") in (None, "-1"):
        cpu.set("numaid", "0")
    gpus = [p for p in cpu.findall("pci") if p.find("gpu") is not None]
    for p in gpus[len(gpus) // 2:]:
        cpu.remove(p)
        other.append(p)
    if not keep_nvlink:
        for g in root.iter("gpu"):
            for nv in g.findall("nvlink"):
                g.remove(nv)
    tree.write(out)


def run(name: str, extra: dict, out: str, n: int) -> dict:
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_NVLS_ENABLE="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()))
    for k in [k for k in env if k.startswith("NCCL_") and k not in ("NCCL_DEBUG", "NCCL_NVLS_ENABLE")]:
        del env[k]
    if name == "default":
        env["NCCL_TOPO_DUMP_FILE"] = os.path.join(out, "nccl-topo-dump.xml")
    for k, v in extra.items():
        if v == "@conf":
            v = os.path.join(d, "nccl.conf")
            with open(v, "w") as fh:
                fh.write("NCCL_P2P_LEVEL=LOC\n")
        elif v in ("@split", "@split-nonvl"):
            v2 = os.path.join(d, "topo.xml")
            split_topology(os.path.join(out, "nccl-topo-dump.xml"), v2, keep_nvlink=v == "@split")
            v = v2
        env[k] = v
    ranks = 2 if "CUDA_VISIBLE_DEVICES" in extra else n
    env["WORLD_SIZE"] = str(ranks)
    with open(os.path.join(d, "env.txt"), "w") as fh:
        fh.write("".join(f"{k}={v}\n" for k, v in sorted(extra.items())))
    t0 = time.time()
    with open(os.path.join(d, "nccl.log"), "w") as fh:
        procs = [subprocess.Popen([sys.executable, "-c", WORKER], env=dict(env, RANK=str(r)), stdout=fh,
                                  stderr=subprocess.STDOUT) for r in range(ranks)]
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=120))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append("hung")
    return {"name": name, "settings": extra, "ranks": ranks, "exit_codes": codes, "seconds": round(time.time() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import torch

    n = torch.cuda.device_count()
    meta = {"gpus": n, "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "runs": []}
    for name, extra in SETTINGS:
        if a.only and name not in a.only.split(","):
            continue
        r = run(name, extra, a.out, n)
        meta["runs"].append(r)
        print(json.dumps(r), flush=True)
    with open(os.path.join(a.out, "runs.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
