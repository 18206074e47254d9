"""``gdrcheck pairs`` as text: matrices like ``nvidia-smi topo -m``, then findings with their fixes."""

from __future__ import annotations

from typing import Dict, List

MARK = {"ok": " ", "degraded": "~", "fail": "!", "unknown": "?"}
STYLE = {"ok": "green", "degraded": "yellow", "fail": "bold red", "unknown": "magenta"}
SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
MAX_COLS = 9  # columns per matrix block: 8 + 9 x 7 + "  NUMA n" fits 80 characters


def _short(dev: Dict) -> str:
    kind = dev["kind"]
    if kind == "gpu":
        return f"GPU{dev['gpu_index']}" if "gpu_index" in dev else "GPU?"
    return kind.upper()


def _column_names(doc) -> Dict[str, str]:
    """The document's own labels (GPUn, NICn in nvidia-smi's order, NVMen); NICs that are not GPUDirect
    NICs have none and make no column."""
    return {dev["bdf"]: dev["label"] for dev in doc["devices"] if dev.get("label")}


def render_pairs(doc, console) -> None:
    from rich.text import Text

    names = _column_names(doc)
    cells = {(p["a"], p["b"]): p for p in doc["pairs"]}
    gpus = [d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"]
    console.print(Text(f"GPUDirect pairs on {doc.get('host') or 'this input'}", style="bold"))
    if not gpus:
        console.print("No GPU found in this input: there are no GPUDirect pairs to judge.")
    for kind, title in (("gpu", "GPU-GPU"), ("nic", "GPU-NIC"), ("nvme", "GPU-NVMe")):
        cols = [d["bdf"] for d in doc["devices"] if d["kind"] == kind and d["bdf"] in names]
        if kind == "nic":
            cols.sort(key=lambda b: int(names[b][3:]))
        if not gpus or not cols or (kind == "gpu" and len(cols) < 2):
            continue
        for start in range(0, len(cols), MAX_COLS):
            block = cols[start:start + MAX_COLS]
            console.print()
            console.print(Text(f"{title}  (path class; ~ degraded, ! fail, ? unknown)", style="bold"))
            console.print(Text("        " + "".join(f"{names[c]:>7}" for c in block)))
            for g in gpus:
                line = Text(f"{names[g]:<8}")
                for c in block:
                    if c == g:
                        line.append(f"{'X':>6} ")
                        continue
                    p = cells.get((g, c)) or cells.get((c, g))
                    if p is None:
                        line.append(f"{'':>7}")
                        continue
                    path = p["path"] or "/".join(p["path_candidates"]) or "?"
                    line.append(f"{path:>6}", style=STYLE[p["verdict"]])
                    line.append(MARK[p["verdict"]], style=STYLE[p["verdict"]])
                line.append(f"  NUMA {_numa(doc, g)}")
                console.print(line)
    legend = [d for d in doc["devices"] if d["kind"] in ("nic", "nvme") and d["bdf"] in names]
    legend.sort(key=lambda d: (d["kind"], int(names[d["bdf"]].lstrip("NICVMe") or 0)))
    others = [d for d in doc["devices"] if d["kind"] == "nic" and d.get("rdma") is False]
    if legend or others:
        console.print()
        for d in legend:
            extra = ", ".join(d.get("rdma_devices", []) + d.get("netdevs", []) + d.get("nvme_names", []))
            console.print(f"  {names[d['bdf']]}: {d['bdf']}" + (f" {extra}" if extra else "")
                          + (f"  {d['name']}" if d.get("name") else "") + f"  NUMA {_numa(doc, d['bdf'])}")
        if others:
            console.print("  not GPUDirect NICs (no pairs): " + ", ".join(
                d["bdf"] + (f" {d['netdevs'][0]}" if d.get("netdevs") else "")
                + (f" ({d['rdma_basis']})" if d.get("rdma_basis") else "") for d in others))
    _render_nccl(doc, console)
    _render_findings(doc, console)
    _render_summary(doc, console)


def _numa(doc, bdf: str) -> str:
    for d in doc["devices"]:
        if d["bdf"] == bdf:
            return "?" if d.get("numa_node") is None else str(d["numa_node"])
    return "?"


def _render_nccl(doc, console) -> None:
    n = doc["nccl"]
    console.print()
    console.print(f"NCCL {n['version']} rules: GDR level {n['gdr_level']} ({n['gdr_level_source']}), "
                  f"P2P level {n['p2p_level']} ({n['p2p_level_source']})")
    counts: Dict[str, int] = {}
    for p in doc["pairs"]:
        key = "gdr" if p["kind"] == "gpu-nic" else "p2p" if p["kind"] == "gpu-gpu" else None
        if key and key in p["nccl"]:
            tag = f"{key.upper()} {p['nccl'][key]}"
            counts[tag] = counts.get(tag, 0) + 1
    if counts:
        console.print("NCCL would decide: " + ", ".join(f"{k} for {v} pair{'s' if v != 1 else ''}"
                                                         for k, v in sorted(counts.items())))


def _render_findings(doc, console) -> None:
    """Findings grouped by code and severity (a code can inform about one pair and warn about another),
    errors first; each group with the rule's title, its origin and the fix in force."""
    from rich.text import Text

    rules = doc.get("rules") or {}
    groups: Dict[tuple, List[dict]] = {}
    for f in doc["findings"]:
        groups.setdefault((f["code"], f["severity"]), []).append(f)
    if not groups:
        return
    console.print()
    console.print(Text("Findings", style="bold"))
    order = {"error": 0, "warning": 1, "info": 2}
    for code, sev in sorted(groups, key=lambda k: (order[k[1]], k[0])):
        items = groups[(code, sev)]
        rule = rules.get(code) or {}
        head = Text(f"{sev.upper():<7} {code} {rule.get('name', '')}: ", style=SEV_STYLE[sev])
        head.append(rule.get("title", ""), style="bold")
        if rule.get("origin"):
            head.append(f" [{rule['origin']}]")
        console.print(head)
        for f in items[:8]:
            console.print(Text(f"    - {f['message']}"))
        if len(items) > 8:
            console.print(f"    - ... and {len(items) - 8} more (see --json)")
        if rule.get("fix") and sev != "info":
            console.print(Text(f"    fix: {rule['fix']}"))
        elif items[0].get("settle"):
            console.print(Text(f"    to settle: {items[0]['settle']}"))


def _render_summary(doc, console) -> None:
    from rich.text import Text

    s = doc["summary"]
    console.print()
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(s["verdicts"].items()))
    line = Text(f"{s['pairs']} pair{'' if s['pairs'] == 1 else 's'}: {verdicts or 'none'}; findings: "
                f"{s['findings']['error']} error, {s['findings']['warning']} warning, {s['findings']['info']} info")
    console.print(line)
    for c in doc.get("collectors", []):
        if c["status"] != "ok":
            console.print(f"note: {c['name']}: {c['status']}: {c['detail']}" + (f" ({c['hint']})" if c.get("hint") else ""))
    for n in doc.get("notes", []):
        console.print(f"note: {n}")
