"""Run PyTorch's NCCL on this node and hold gdrcheck's prediction to what NCCL itself decided.

One process per GPU (``torch.distributed``, backend ``nccl``) does one all_reduce with ``NCCL_DEBUG=INFO``
and ``NCCL_TOPO_DUMP_FILE``; NCCL writes its fused topology (``<gpu gdr>``, ``<net gdr>``) and logs its
decisions. gdrcheck then judges the live node (``--nccl-version`` = PyTorch's NCCL) and the dump, and the two
are compared:

* the NCCL version: PyTorch's (``torch.cuda.nccl.version()``) must be among the versions gdrcheck found;
* each GPU's ``gdr`` attribute in the dump against gdrcheck's GPU flag (``nccl.gpus``);
* each ``<net gdr>`` against gdrcheck's GPU-NIC decisions for that NIC (a socket NIC makes no gdrcheck pair:
  gdrcheck lists it as not an RDMA device, NCCL as ``gdr="0"``);
* every ``GPU Direct RDMA Enabled|Disabled for GPU ... / HCA ...`` line (NCCL <= 2.29) against the pair;
* ``DMA-BUF is available on GPU device N`` against gdrcheck's DMA-BUF judgement.

Writes ``nccl-debug.log``, ``nccl-topo.xml``, ``gdrcheck-live.json``, ``gdrcheck-dump.json`` and
``nccl_harness.json`` (the comparison) into ``--out``; exit 0 when nothing contradicts, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

WORKER = r"""
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"]); torch.cuda.set_device(rank)
dist.init_process_group("nccl", rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
x = torch.ones(1 << 20, device="cuda"); dist.all_reduce(x); torch.cuda.synchronize()
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_nccl(out: str) -> dict:
    import torch

    n = torch.cuda.device_count()
    version = ".".join(map(str, torch.cuda.nccl.version()))
    dump = os.path.join(out, "nccl-topo.xml")
    log = os.path.join(out, "nccl-debug.log")
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,GRAPH,NET,ENV", NCCL_TOPO_DUMP_FILE=dump,
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(n))
    procs = []
    with open(log, "w") as fh:
        for r in range(n):
            procs.append(subprocess.Popen([sys.executable, "-c", WORKER], env=dict(env, RANK=str(r)),
                                          stdout=fh, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=300) for p in procs]
    return {"gpus": n, "torch": torch.__version__, "nccl_version": version, "exit_codes": codes,
            "dump": dump if os.path.exists(dump) else None, "log": log}


def gdrcheck(args, out_file: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "gdrcheck", "pairs", "--json", *args], capture_output=True, text=True,
                       timeout=300)
    with open(out_file, "w") as fh:
        fh.write(p.stdout)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {"error": (p.stderr or "no output").strip()[-2000:]}


def dump_flags(path: str):
    root = ET.parse(path).getroot()
    gpus, nets = {}, {}
    for pci in root.iter("pci"):
        for child in pci:
            if child.tag == "gpu":
                gpus[pci.get("busid", "").lower()] = {k: child.get(k) for k in ("gdr", "sm", "dev", "rank")}
            if child.tag == "nic":
                for net in child.iter("net"):
                    nets[net.get("name")] = {"gdr": net.get("gdr"), "busid": pci.get("busid", "").lower(),
                                             "speed": net.get("speed")}
    for cpu in root.iter("cpu"):  # a NIC NCCL found no PCI path for (virtio-net, ...) hangs off the CPU
        for nic in cpu.findall("nic"):
            for net in nic.iter("net"):
                nets[net.get("name")] = {"gdr": net.get("gdr"), "busid": None, "speed": net.get("speed")}
    return gpus, nets


LINE_PAIR = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for GPU (\S+) / HCA (\S+)")
LINE_HCA = re.compile(r"NET/(\S+) : GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']+)'")
LINE_DMABUF = re.compile(r"DMA-BUF is available on GPU device (\d+)")
# v2.28.9 src/transport/p2p.cc:386-398 and shm.cc:128: "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
# (rank[NVML index] of each end); a GPU pair NCCL connects over SHM or NET does not use P2P
LINE_CHANNEL = re.compile(r"Channel \d+(?:/\d+)? : \d+\[(\d+)\] -> \d+\[(\d+)\] via (P2P|SHM|NET)(\S*)")


def compare(nccl: dict, live: dict, dumped: dict) -> dict:
    checks = []

    def check(what, ok, detail):
        checks.append({"check": what, "ok": ok, "detail": detail})

    top = live.get("nccl") or {}
    found = sorted({e["version"] for e in top.get("versions_found", ())})
    check("nccl-version-found", nccl["nccl_version"] in found,
          f"PyTorch's NCCL {nccl['nccl_version']}; gdrcheck found {found or 'none'}")
    if nccl.get("dump"):
        gpus, nets = dump_flags(nccl["dump"])
        mine = top.get("gpus") or {}
        for bus, attrs in gpus.items():
            g = mine.get(bus)
            want = None if g is None else g.get("gdr")
            got = attrs.get("gdr") == "1"
            said = "not listed" if g is None else f"gdr={want} ({g.get('gdr_source')})"
            check(f"gpu-gdr {bus}", want is None or want == got,
                  f"NCCL <gpu gdr={attrs.get('gdr')!r} sm={attrs.get('sm')!r}>; gdrcheck {said}")
            if g is not None and attrs.get("sm") and g.get("sm") is not None:
                check(f"gpu-sm {bus}", str(g["sm"]) == attrs["sm"], f"NCCL sm={attrs['sm']}; gdrcheck sm={g['sm']}")
        pairs = {(p["a"], p["b"]): p for p in live.get("pairs", ())}
        devs = {d["bdf"]: d for d in live.get("devices", ())}
        for name, attrs in nets.items():
            bus = attrs["busid"]
            if bus is None:
                nic_pairs = [p for p in pairs.values() if p["kind"] == "gpu-nic"]
                enabled = [f"{p['a']}-{p['b']}" for p in nic_pairs if p["nccl"].get("gdr") == "enabled"]
                check(f"net-gdr {name}", attrs["gdr"] != "0" or not enabled,
                      f"NCCL <net name={name!r} gdr={attrs['gdr']!r}> with no PCI path (under <cpu>); gdrcheck's "
                      f"GPU-NIC pairs: " + ("; ".join(f"{p['b']} gdr={p['nccl'].get('gdr')} ({p['nccl'].get('reason')})"
                                                       for p in nic_pairs) or "none"))
                continue
            mine_pairs = [p for (a, b), p in pairs.items() if b == bus]
            if not mine_pairs:
                rdma = (devs.get(bus) or {}).get("rdma")
                check(f"net-gdr {name}", attrs["gdr"] == "0",
                      f"NCCL <net name={name!r} gdr={attrs['gdr']!r}> at {bus}; gdrcheck makes no pair with it "
                      f"(rdma={rdma!r}): consistent only if NCCL does not use GDR on it")
                continue
            for p in mine_pairs:
                word = p["nccl"].get("gdr")
                agree = word == "unknown" or (word == "enabled") == (attrs["gdr"] == "1") or attrs["gdr"] == "1"
                check(f"net-gdr {name} {p['a']}", agree,
                      f"NCCL <net gdr={attrs['gdr']!r}> (the NIC flag); gdrcheck pair gdr={word}: "
                      f"{p['nccl'].get('reason')}")
    log = open(nccl["log"], errors="replace").read() if nccl.get("log") else ""
    for m in LINE_PAIR.finditer(log):
        check(f"gdr-line GPU {m.group(2)} HCA {m.group(3)}", None, m.group(0))
    for m in LINE_HCA.finditer(log):
        check(f"hca-line {m.group(4)}", None, m.group(0))
    by_index = {d.get("gpu_index"): d["bdf"] for d in live.get("devices", ()) if d.get("kind") == "gpu"}
    seen = {}
    for a, b, how, rest in LINE_CHANNEL.findall(log):
        ga, gb = by_index.get(int(a)), by_index.get(int(b))
        if ga and gb and ga != gb:
            seen.setdefault(tuple(sorted((ga, gb))), set()).add(how + rest)
    gg = {(p["a"], p["b"]): p for p in live.get("pairs", ()) if p["kind"] == "gpu-gpu"}
    for key, hows in sorted(seen.items()):
        p = gg.get(key)
        word = (p or {}).get("nccl", {}).get("p2p")
        used = any(h.startswith("P2P") for h in hows)
        agree = word == "unknown" or (word == "enabled") == used
        check(f"p2p {key[0]}-{key[1]}", agree if p else False,
              f"NCCL connected them via {', '.join(sorted(hows))}; gdrcheck p2p={word} "
              f"({(p or {}).get('path')}; {(p or {}).get('nccl', {}).get('reason')})")
    dm = sorted(set(LINE_DMABUF.findall(log)))
    check("dmabuf-line", None, f"NCCL: DMA-BUF available on GPU device(s) {dm or 'none'}")
    for k in ("version", "version_reason", "gdr_level", "p2p_level", "cpu"):
        check(f"gdrcheck {k}", None, json.dumps(top.get(k)))
    if dumped.get("error"):
        check("gdrcheck-reads-dump", False, dumped["error"])
    else:
        dtop = dumped.get("nccl") or {}
        check("gdrcheck-reads-dump", True, f"dump judged: gpus {json.dumps(dtop.get('gpus'))}")
    bad = [c for c in checks if c["ok"] is False]
    return {"nccl": nccl, "checks": checks, "contradictions": len(bad)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    nccl = run_nccl(a.out)
    live = gdrcheck(["--nccl-version", nccl["nccl_version"]], os.path.join(a.out, "gdrcheck-live.json"))
    dumped = gdrcheck(["--from", nccl["dump"], "--nccl-version", nccl["nccl_version"]],
                      os.path.join(a.out, "gdrcheck-dump.json")) if nccl.get("dump") else {"error": "no dump"}
    result = compare(nccl, live, dumped)
    with open(os.path.join(a.out, "nccl_harness.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    for c in result["checks"]:
        mark = {True: "ok  ", False: "DIFF", None: "info"}[c["ok"]]
        print(f"{mark} {c['check']}: {c['detail']}")
    print(f"NCCL {nccl['nccl_version']} (PyTorch {nccl['torch']}), {nccl['gpus']} GPU(s), rank exit codes "
          f"{nccl['exit_codes']}: {result['contradictions']} contradiction(s)")
    return 1 if result["contradictions"] or any(nccl["exit_codes"]) else 0


if __name__ == "__main__":
    sys.exit(main())
