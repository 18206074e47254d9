"""``gdrcheck pairs`` as text: matrices like ``nvidia-smi topo -m``, then findings with their fixes."""

from __future__ import annotations

from gdrcheck.render.layout import blank, grid, put

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass

MARK = {"ok": " ", "degraded": "~", "fail": "!", "unknown": "?"}
UNUSED = "-"  # a GPU-NIC (GPU-NVMe) pair NCCL (cuFile) would not use: another is the GPU's; not a verdict
STYLE = {"ok": "green", "degraded": "yellow", "fail": "bold red", "unknown": "magenta"}
SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


PAIRS_SHOWN = 6  # pairs named under a finding said of many


def _short(dev: dict) -> str:
    kind = dev["kind"]
    if kind == "gpu":
        return f"GPU{dev['gpu_index']}" if "gpu_index" in dev else "GPU?"
    return kind.upper()


def _label_number(label: str) -> int:
    """The number in GPU3, NIC12, NVMe0 (labels without one sort first)."""
    digits = label[len(label.rstrip("0123456789")):]
    return int(digits) if digits else -1


def _column_names(doc) -> dict[str, str]:
    """The document's own labels (GPUn, NICn in nvidia-smi's order, NVMen); NICs that are not GPUDirect
    NICs have none and make no column."""
    return {dev["bdf"]: dev["label"] for dev in doc["devices"] if dev.get("label")}


def render_pairs(doc, console) -> None:
    from rich.text import Text

    names = _column_names(doc)
    cells = {(p["a"], p["b"]): p for p in doc["pairs"]}
    gpus = [d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"]
    numa = _numa_column(doc)
    put(console, Text(f"GPUDirect pairs on {doc.get('host') or 'this input'}", style="bold"))
    from gdrcheck.documents.capabilities import capability_lines

    for line in capability_lines(doc):
        put(console, line, 2)
    if not gpus:
        put(console, "No GPU found in this input: there are no GPUDirect pairs to judge.")
    for kind, title in (("gpu", "GPU-GPU"), ("nic", "GPU-NIC"), ("nvme", "GPU-NVMe")):
        cols = [d["bdf"] for d in doc["devices"] if d["kind"] == kind and d["bdf"] in names]
        if kind == "nic":
            cols.sort(key=lambda b: _label_number(names[b]))
        if not gpus or not cols or (kind == "gpu" and len(cols) < 2):
            continue
        blank(console)
        put(console, Text(_legend(doc, kind, title), style="bold"))
        header = [""] + [names[c] for c in cols] + ["NUMA"]
        rows = [[(names[g], "")] + [_cell(cells, g, c) for c in cols] + [(numa.get(g, "?"), "")] for g in gpus]
        for i, block in enumerate(grid(header, rows, console.width, keys=1, tail=1)):
            if i:
                blank(console)
            for line in block:
                console.print(line, soft_wrap=True)
    order = {"gpu": 0, "nic": 1, "nvme": 2}
    legend = sorted((d for d in doc["devices"] if d["kind"] in order and d["bdf"] in names),
                    key=lambda d: (order[d["kind"]], _label_number(names[d["bdf"]])))
    others = [d for d in doc["devices"] if d["kind"] == "nic" and d.get("rdma") is False]
    if legend or others:
        blank(console)
        for d in legend:
            extra = ", ".join(d.get("rdma_devices", []) + d.get("netdevs", []) + d.get("nvme_names", []))
            head = f"  {names[d['bdf']]}: "
            if d.get("synthetic"):  # a made-up address: say so instead, and not the made-up name either
                put(console, head + "no bus id in this input" + (f", {extra}" if extra else "")
                    + f"  NUMA {numa.get(d['bdf'], '?')}", len(head))
                continue
            put(console, head + d["bdf"] + (f" {extra}" if extra else "")
                + (f"  {d['name']}" if d.get("name") else "") + f"  NUMA {numa.get(d['bdf'], '?')}", len(head))
        if others:
            put(console, "  not GPUDirect NICs (no pairs): " + ", ".join(
                d["bdf"] + (f" {d['netdevs'][0]}" if d.get("netdevs") else "")
                + (f" ({d['rdma_basis']})" if d.get("rdma_basis") else "") for d in others), 4)
    line = expected_legend(doc)
    if line:
        blank(console)
        put(console, line, 2)
    from gdrcheck.documents.expected import otherwise_line

    line = otherwise_line(doc)
    if line:
        put(console, line, 2)
    _render_nccl(doc, console)
    _render_findings(doc, console)
    _render_summary(doc, console)


def _cell(cells, g: str, c: str):
    """One matrix cell: the path class and the verdict's mark, styled by the verdict."""
    if c == g:
        return ("X", "")
    p = cells.get((g, c)) or cells.get((c, g))
    if p is None:
        return ("", "")
    path = p["path"] or "/".join(p["path_candidates"]) or "?"
    if p.get("chosen") is False:
        return (path + UNUSED, "dim")
    e = p.get("expected")
    if p["verdict"] == "unknown" and e and e.get("verdict") in MARK:
        return ((e.get("path") or path) + "*" + MARK[e["verdict"]].strip(), STYLE["unknown"])
    return (path + MARK[p["verdict"]].strip(), STYLE[p["verdict"]])


def _legend(doc, kind: str, title: str) -> str:
    marks = ["~ degraded, ! fail, ? unknown"]
    if kind != "gpu" and any(p.get("chosen") is False and p["kind"] == f"gpu-{kind}" for p in doc["pairs"]):
        lib = "RCCL" if (doc.get("nccl") or {}).get("library") == "rccl" else "NCCL"
        marks.append("- not used: " + (f"{lib} uses the GPU's nearer NIC" if kind == "nic"
                                        else "the GPU's nearer drive is its own"))
    if _assumed(doc):
        marks.append("* expected, see below")
    return f"{title}  (path class; {'; '.join(marks)})"


def _assumed(doc) -> bool:
    return any(p["verdict"] == "unknown" and p.get("expected") for p in doc["pairs"])


def expected_legend(doc) -> str:
    """What ``*`` in a matrix means: the pair is undecided on this input, and what its class and mark assume."""
    if not _assumed(doc):
        return ""
    from gdrcheck.documents.expected import expected_rests_on

    briefs = expected_rests_on(doc) or "nothing"
    return f"* undecided on this input; the class and mark shown are expected if: {briefs}"


def _numa_column(doc) -> dict[str, str]:
    """Each device's NUMA column, made once (a scan of the device list per row was quadratic)."""
    return {d["bdf"]: "?" if d.get("numa_node") is None else str(d["numa_node"]) for d in doc["devices"]}


def _render_nccl(doc, console) -> None:
    n = doc["nccl"]
    blank(console)
    lib = "RCCL" if n.get("library") == "rccl" else "NCCL"
    beyond = f" (newer than the newest release modelled, {n['newest_modelled']})" if n.get("newest_modelled") else ""
    put(console, f"{n.get('rules') or 'NCCL ' + n['version']} rules{beyond}:")  # one line each: a source may hold ()
    if n.get("library_reason"):
        put(console, f"  library: {lib}, for {n['library_reason']}", 4)
    put(console, f"  GDR level {n['gdr_level']}: {n['gdr_level_source']}", 4)
    put(console, f"  P2P level {n['p2p_level']}: {n['p2p_level_source']}", 4)
    counts: dict[str, int] = {}
    for p in doc["pairs"]:
        key = "gdr" if p["kind"] == "gpu-nic" else "p2p" if p["kind"] == "gpu-gpu" else None
        if key and key in p["nccl"]:
            tag = f"{key.upper()} {p['nccl'][key]}"
            counts[tag] = counts.get(tag, 0) + 1
    if counts:
        put(console, f"{lib} would decide: " + ", ".join(f"{k} for {v} pair{'s' if v != 1 else ''}"
                                                         for k, v in sorted(counts.items())))
    if n.get("version_reason"):
        put(console, f"  version: {n['version_reason']}", 4)
    names = _column_names(doc)
    for gpu, nics in sorted((n.get("gpu_nics") or {}).items(), key=lambda kv: _label_number(names.get(kv[0], ""))):
        used = [names.get(x["nic"], x["nic"]) + (f" via {names.get(x['via'], x['via'])} (PXN)" if x.get("via") else "")
                for x in nics]
        if used:
            put(console, f"  {names.get(gpu, gpu)} sends through: {', '.join(used)}", 4)
    _render_log(doc, console, names)
    put_depends(doc, console)


def put_depends(doc, console) -> None:
    """How many pairs' decisions rest on the job, and how many on facts the input does not show."""
    depends = doc["nccl"].get("depends") or {}
    job, unshown = depends.get("job", 0), depends.get("not_in_input", 0)

    def n(k: int) -> str:
        return f"{k} pair{'s' if k != 1 else ''}"

    said = ([f"on the job for {n(job)} (which GPUs share the communicator, its environment)"] if job else []) + \
           ([f"on facts this input does not show for {n(unshown)}"] if unshown else [])
    if said:
        lib = "RCCL" if doc["nccl"].get("library") == "rccl" else "NCCL"
        put(console, f"  {lib}'s decision rests {', '.join(said)}: pairs --json gives depends_on", 4)


def _render_log(doc, console, names) -> None:
    """A job's NCCL log: the version and settings NCCL reported, then per pair what NCCL did beside the
    prediction (each pair once; the same choice on many pairs is one line)."""
    log = doc["nccl"].get("log")
    if not log:
        return
    blank(console)
    lib = f"RCCL {log['rccl_version']}" if log.get("rccl_version") else f"NCCL {log.get('version') or '?'}"
    head = f"{lib.split()[0]} log {log['file']}: {lib}"
    if log.get("host"):
        head += f", host {log['host']}"
    put(console, head + f": {log['summary']}")
    if log["settings"]:
        put(console, "  the job's settings (NCCL reported them set): "
            + ", ".join(f"{s['name']}={s['value']}" for s in log["settings"]), 4)
    rows: dict[tuple, list[str]] = {}
    for p in doc["pairs"]:
        obs = p["nccl"].get("observed")
        if not obs:
            continue
        key = "p2p" if p["kind"] == "gpu-gpu" else "gdr"
        mark = {True: "agrees", False: "DIFFERS", None: "settles it"}[obs.get("agrees")]
        said = (f"{key.upper()} predicted {p['nccl'].get(key)}, {lib.split()[0]} used {obs['transport']}"
                + (f" via {names.get(obs['via'], obs['via'])}" if obs.get("via") else "") + f": {mark}"
                + (f" ({obs['cause']})" if obs.get("cause") else ""))
        rows.setdefault((mark != "agrees", said), []).append(f"{names.get(p['a'], p['a'])}-{names.get(p['b'], p['b'])}")
    for (_differs, said), who in sorted(rows.items()):
        shown = ", ".join(who[:PAIRS_SHOWN]) + (f" and {len(who) - PAIRS_SHOWN} more" if len(who) > PAIRS_SHOWN else "")
        put(console, f"  {shown}: {said}", 4)


def _render_findings(doc, console) -> None:
    """Findings grouped by code and severity (a code can inform about one pair and warn about another),
    errors first; each group with the rule's title, its origin and the fix in force."""
    from rich.text import Text

    rules = doc.get("rules") or {}
    groups: dict[tuple, list[dict]] = {}
    for f in doc["findings"]:
        groups.setdefault((f["code"], f["severity"]), []).append(f)
    if not groups:
        return
    names = _column_names(doc)
    blank(console)
    put(console, Text("Findings", style="bold"))
    order = {"error": 0, "warning": 1, "info": 2}
    for code, sev in sorted(groups, key=lambda k: (order[k[1]], k[0])):
        items = groups[(code, sev)]
        rule = rules.get(code) or {}
        head = Text(f"{sev.upper():<7} {code} {rule.get('name', '')}: ", style=SEV_STYLE[sev])
        head.append(rule.get("title", ""), style="bold")
        if rule.get("origin"):
            head.append(f" [{rule['origin']}]")
        put(console, head, 8)
        for f in items[:8]:
            put(console, f"    - {f['message']}", 6)
            if len(f.get("pairs") or ()) > 1:
                shown = [f"{names.get(a, a)}-{names.get(b, b)}" for a, b in f["pairs"][:PAIRS_SHOWN]]
                more = (f", ... and {len(f['pairs']) - PAIRS_SHOWN} more: see --json" if len(f["pairs"]) > PAIRS_SHOWN
                        else "")
                put(console, f"      ({', '.join(shown)}{more})", 7)
        if len(items) > 8:
            put(console, f"    - ... and {len(items) - 8} more (see --json)", 6)
        if rule.get("fix") and sev != "info":
            put(console, f"    fix: {rule['fix']}", 9)
        elif items[0].get("settle"):
            put(console, f"    to settle: {items[0]['settle']}", 15)


def _render_summary(doc, console) -> None:
    from rich.text import Text

    s = doc["summary"]
    blank(console)
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(s["verdicts"].items()))
    exp: dict[str, int] = {}
    for p in doc["pairs"]:
        if p["verdict"] == "unknown" and (p.get("expected") or {}).get("verdict"):
            exp[p["expected"]["verdict"]] = exp.get(p["expected"]["verdict"], 0) + 1
    if exp:
        verdicts += " (expected: " + ", ".join(f"{n} {v}" for v, n in sorted(exp.items())) + ")"
    line = Text(f"{s['pairs']} pair{'' if s['pairs'] == 1 else 's'}: {verdicts or 'none'}; findings: "
                f"{s['findings']['error']} error, {s['findings']['warning']} warning, {s['findings']['info']} info")
    put(console, line)
    for c in doc.get("collectors", []):
        if c["status"] != "ok":
            hint = f" ({c['hint']})" if c.get("hint") else ""
            put(console, f"note: {c['name']}: {c['status']}: {c['detail']}{hint}", 6)
    for n in doc.get("notes", []):
        put(console, f"note: {n}", 6)
