"""``gdrcheck report``: one self-contained HTML page from the topology, pairs and bar1 documents.

Inline CSS and inline SVG only: no script, no font, no image, nothing the page
would load. It prints on A4: the diagram scales to the page width, matrices are
cut into column blocks that fit it and their rows flow across pages under a
repeated header.
"""

from __future__ import annotations

import re
from html import escape

from gdrcheck.render import tree_model as tm
from gdrcheck.render.html_css import CSS
from gdrcheck.render.html_host import library_of
from gdrcheck.units import human_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Optional

MAX_COLS = 12  # matrix columns per block: fits the A4 text width
MAX_COLS_WIDE = 8  # when a cell names several candidate classes (NODE/SYS?)
MAX_MESSAGES = 12  # per finding code; the JSON has them all
MARK = {"ok": "", "degraded": "~", "fail": "!", "unknown": "?"}
STATUS = {"pass": ("PASS", "every pair judged; nothing at or above the failure threshold"),
          "fail": ("FAIL", "findings at or above the failure threshold"),
          "unknown": ("UNKNOWN", "a fact some verdict needs was not available")}
SEV_ORDER = {"error": 0, "warning": 1, "info": 2}
ORIGIN = {"nccl": "NCCL rule", "rccl": "RCCL rule", "nvidia-docs": "NVIDIA requirement", "kernel": "kernel rule",
          "gdrcheck": "gdrcheck check"}


def render_html(topology: dict[str, Any], pairs: dict[str, Any], bar1: dict[str, Any],
                rules: dict[str, dict[str, Any]], extra: Iterable[str] = ()) -> str:
    """The page. ``rules``: the rules part, ``{code: rule document}`` (``documents.rules.rules_part``);
    ``extra``: finished sections (HTML) placed before the findings, e.g. the probe's "Measured"."""
    from gdrcheck.render.svg_tree import render_svgs

    names = tm.device_names(topology)
    # addresses gdrcheck made up (a matrix's devices), and functions on no root bus the input shows (an lspci
    # -vvv alone): not drawn as a tree, listed by name
    shown_roots = {r["root"] for r in topology.get("roots") or []}
    made_up = [d for d in topology.get("devices") or [] if d.get("synthetic") or d["root"] not in shown_roots]
    drawn = topology
    if made_up:
        drawn = dict(topology, devices=[d for d in topology.get("devices") or [] if d not in made_up])
    svgs, forest = render_svgs(drawn, names)
    host = pairs.get("host") or topology.get("host") or (topology.get("input") or {}).get("label") or "this node"
    body = [
        _header(topology, pairs, host),
        _summary(topology, pairs),
        _tree(svgs, forest, topology, _unplaced(made_up, names), library_of(pairs) == "NCCL"),
        _matrix(pairs, names, topology),
        _nccl_log(pairs, names),
        _bar1(bar1, topology),
        *extra,
        _findings(pairs, bar1, rules),
        _notes(topology, pairs, bar1),
        f'<footer>gdrcheck {escape(str(topology.get("gdrcheck_version", "")))}, document format '
        f'{escape(str(pairs.get("format_version", "")))}. The same facts as JSON: '
        f'<code>gdrcheck topology --json</code>, <code>gdrcheck pairs --json</code>, '
        f'<code>gdrcheck bar1 --json</code>.</footer>',
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>gdrcheck report: {escape(host)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")


# -- sections ---------------------------------------------------------------------

def overall(pairs: dict[str, Any]) -> str:
    """pass, fail or unknown: the document's own word, else from its counts (as the exit status is)."""
    if pairs.get("status") in STATUS:
        return pairs["status"]
    s = pairs.get("summary") or {}
    if (s.get("findings") or {}).get("error"):
        return "fail"
    if (s.get("verdicts") or {}).get("unknown"):
        return "unknown"
    return "pass"


def _header(topology, pairs, host: str) -> str:
    from gdrcheck.render.html_host import capabilities

    status = overall(pairs)
    word, meaning = STATUS[status]
    inp = topology.get("input") or {}
    source = f"{inp.get('kind')}: {inp.get('label')}" if inp.get("kind") else ""
    line = pairs.get("summary_line") or meaning
    counts = (pairs.get("summary") or {}).get("verdicts") or {}
    n_deg = counts.get("degraded", 0)  # a passing node has no failing or unknown pair (gdrcheck.status)
    aside = ""
    if status == "pass" and n_deg:
        aside = (f'<span class="aside">{n_deg} pair{"s are" if n_deg != 1 else " is"} degraded: their findings '
                 "are below the failure threshold (see Findings)</span>")
    return (f'<header><h1>GPUDirect report: {escape(host)}</h1>'
            f'<p class="sub">gdrcheck {escape(str(pairs.get("gdrcheck_version", "")))}'
            + (f" \u00b7 read from {escape(source)}" if source else "") + "</p>"
            f'<div class="verdict v-{status}"><span class="word">{word}</span>'
            f'<span class="line">{escape(line)}{aside}{_expected_aside(pairs)}</span></div>'
            + capabilities(pairs) + '</header>')


def _expected_aside(pairs) -> str:
    from gdrcheck.documents.expected import expected_if

    said = expected_if(pairs)
    return f'<span class="aside">{escape(said)}</span>' if said else ""


def _fact_cell(facts: dict[str, Any], key: str, show=None) -> str:
    f = facts.get(key) or {}
    v = f.get("value")
    if v is None:
        why = f.get("reason") or "not in this input"
        return f'<span class="unknown">not known</span> <span class="why">({escape(why)})</span>'
    return escape(show(v) if show else str(v))


def _yes_no(v) -> str:
    return "yes" if v else "no"


def _summary(topology, pairs) -> str:
    from gdrcheck.render.html_host import amd_peer, cpu_of_pairs, virtual

    facts = topology.get("host_facts") or {}
    kinds: dict[str, int] = {}
    for d in topology.get("devices") or []:
        kinds[d.get("kind")] = kinds.get(d.get("kind"), 0) + 1
    drv = _fact_cell(facts, "nvidia_driver_version")
    if (facts.get("nvidia_driver_flavor") or {}).get("value"):
        drv += f' ({escape(str(facts["nvidia_driver_flavor"]["value"]))} kernel modules)'
    peer = _fact_cell(facts, "peermem")
    dmabuf = (facts.get("dmabuf_possible") or {}).get("value")
    if dmabuf is not None:
        peer += f"; DMA-BUF {'possible' if dmabuf else 'not possible'}"
    cpu = " ".join(str((facts.get(k) or {}).get("value")) for k in ("cpu_vendor", "cpu_arch")
                   if (facts.get(k) or {}).get("value"))
    n = pairs.get("nccl") or {}
    s = pairs.get("summary") or {}
    verdicts = ", ".join(f'<span class="chip v-{v}">{c} {escape(v)}</span>'
                         for v, c in sorted((s.get("verdicts") or {}).items(), key=lambda kv: _vorder(kv[0])))
    fc = s.get("findings") or {}
    rows = [
        ("Host", escape(str(pairs.get("host") or topology.get("host") or "not known"))),
        *((("NVIDIA driver", drv),) if library_of(pairs) == "NCCL" else ()),
        ("Kernel", _fact_cell(facts, "kernel_release")),
        ("IOMMU", _fact_cell(facts, "iommu_mode")),
        ("Peer memory", peer if library_of(pairs) == "NCCL" else amd_peer(n)),
        ("CPU", escape(cpu) if cpu else cpu_of_pairs(pairs)),
        ("Virtual machine", virtual(facts, pairs, _fact_cell(facts, "virtual", _yes_no))),
        ("NUMA nodes", _fact_cell(facts, "numa_nodes", lambda v: ", ".join(map(str, v)) or "none")),
        ("Devices", f"{kinds.get('gpu', 0)} GPU, {kinds.get('nic', 0)} NIC, {kinds.get('nvme', 0)} NVMe; "
                    f"{len(topology.get('devices') or [])} PCI functions "
                    + (f"on {_n(len(topology['roots']), 'root bus', 'root buses')}" if topology.get("roots")
                       else "placed in no PCIe tree the input shows")),
        ("RCCL rules" if n.get("library") == "rccl" else "NCCL rules",
         escape(f"{n.get('rules') or n.get('version', '?')}: GDR level {n.get('gdr_level', '?')}, "
                              f"P2P level {n.get('p2p_level', '?')}") if n else "not known"),
        *(((f"{library_of(pairs)} log", escape(f"{n['log'].get('file')}: {n['log'].get('summary')}")),)
          if n.get("log") else ()),
        ("Pairs", f"{s.get('pairs', 0)}" + (f": {verdicts}" if verdicts else "")),
        ("Findings", f"{fc.get('error', 0)} error, {fc.get('warning', 0)} warning, {fc.get('info', 0)} info"),
        ("Overall verdict", f'<span class="chip v-{overall(pairs)}">{STATUS[overall(pairs)][0]}</span>'),
    ]
    cells = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<section id="host"><h2>Host</h2><table class="facts">{cells}</table></section>'


def _n(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _vorder(v: str) -> int:
    return {"ok": 0, "degraded": 1, "fail": 2, "unknown": 3}.get(v, 4)


NO_BUS_ID = "no bus id in this input"
MADE_UP_NAME = " of nvidia-smi topo -m"  # the name a matrix's device is given (GPU0 of nvidia-smi topo -m)
KIND_WORD = {"gpu": "GPU", "nic": "NIC", "nvme": "NVMe", "nvswitch": "NVSwitch"}


def synthetic_name(d: dict[str, Any], names: dict[str, str]) -> str:
    """A device whose address gdrcheck made up, as ``gdrcheck pairs`` names it: ``GPU0``, ``NIC mlx5_0``."""
    label = names.get(d["bdf"]) or KIND_WORD.get(d.get("kind"), "")
    if d.get("kind") == "gpu":
        return label
    label = KIND_WORD.get(d.get("kind"), label)  # NIC mlx5_0, as pairs says
    own = ", ".join(list(d.get("rdma_devices") or ()) + list(d.get("netdevs") or ()))
    return f"{label} {own}".strip()


def _unplaced(made_up: list[dict[str, Any]], names: dict[str, str]) -> str:
    if not made_up:
        return ""
    kept = [d for d in made_up if d.get("synthetic") or d["bdf"] in names]  # GPUs, NICs, NVMe; not the rest
    if not kept:
        return ""
    no_id = all(d.get("synthetic") for d in kept)
    return (f"Not placed in a PCIe tree (the input does not show where they sit{', and gives no bus id' * no_id}): "
            + ", ".join((synthetic_name(d, names) if d.get("synthetic") else f"{names[d['bdf']]} {d['bdf']}")
                        + f" (NUMA {_numa(d.get('numa_node'))})" for d in kept) + ".")


def _tree(svgs: list[str], forest: tm.Forest, topology, unplaced: str = "", nvswitch: bool = True) -> str:
    keys = (("k-gpu", "GPU"), ("k-nic", "NIC"), ("k-nvme", "NVMe"), *((("k-nvs", "NVSwitch"),) if nvswitch else ()),
            ("k-sw", "switch (its downstream ports are the edges below it)"), ("k-rp", "root port"),
            ("acs", "ACS redirect: peer traffic goes up to the root complex"), ("low", "link below its maximum"))
    legend = '<p class="legend">' + " ".join(f'<span class="key"><span class="sw {c}"></span>{t}</span>'
                                             for c, t in keys) + "</p>"
    if not svgs:
        if unplaced:
            return f'<section id="tree"><h2>PCIe tree</h2><p>{escape(unplaced)}</p></section>'
        return ('<section id="tree"><h2>PCIe tree</h2><p>No GPU, NIC, NVMe or NVSwitch in this input'
                + (f" ({forest.total} other PCI functions)" if forest.total else "") + ".</p></section>")
    unread = sum(1 for d in topology.get("devices") or [] if (d.get("acs") or {}).get("redirect", False) is None)
    notes = []
    if forest.hidden:
        notes.append(f"{forest.hidden} of {forest.total} PCI functions lead to no GPU, NIC, NVMe or NVSwitch "
                     "and are not drawn (<code>gdrcheck topology --all</code> lists them).")
    if unread:
        notes.append(f"ACS of {unread} bridge{'s' if unread != 1 else ''} could not be read from this input; "
                     "they are drawn without an ACS mark.")
    if unplaced:
        notes.append(escape(unplaced))
    return ('<section id="tree"><h2>PCIe tree</h2>' + legend + '<div class="diagram">' + "\n".join(svgs)
            + "</div>" + "".join(f'<p class="note">{n}</p>' for n in notes) + "</section>")


def _path(p: Optional[dict[str, Any]]) -> str:
    if p is None:
        return ""
    return p.get("path") or "/".join(p.get("path_candidates") or []) or "?"


def _cell(p: Optional[dict[str, Any]], lib: str = "NCCL") -> str:
    if p is None:
        return '<td class="none"></td>'
    path = _path(p)
    v = p.get("verdict", "unknown")
    codes = ", ".join(p.get("findings") or [])
    nccl = p.get("nccl") or {}
    said = nccl.get("gdr") or nccl.get("p2p")
    tip = f"{v}" + (f"; {codes}" if codes else "") + (f"; {lib}: {said}" if said else "")
    obs = nccl.get("observed")
    if obs:
        tip += f"; the job's {lib} used {obs.get('transport')}"
    if p.get("chosen") is False:  # not the GPU's NIC (drive): marked as not used, not by its verdict
        tip = f"not used: {lib} (cuFile) uses another for this GPU; " + tip
        return f'<td class="unused" title="{escape(tip)}">{escape(path)}-</td>'
    e = p.get("expected") or {}
    if v == "unknown" and e.get("verdict") in MARK:
        tip += f"; expected {e['verdict']} if: " + ", ".join(a.get("brief") or a["fact"]
                                                            for a in e.get("assumes") or ())
        return (f'<td class="v-{escape(v)}" title="{escape(tip)}">{escape(e.get("path") or path)}*'
                f'{MARK.get(e["verdict"], "")}</td>')
    return f'<td class="v-{escape(v)}" title="{escape(tip)}">{escape(path)}{MARK.get(v, "")}</td>'


def _matrix(pairs, names: dict[str, str], topology) -> str:
    devices = pairs.get("devices") or []
    gpus = [d["bdf"] for d in devices if d.get("kind") == "gpu"]
    if not gpus:
        return '<section id="pairs"><h2>Pairs</h2><p>No GPU in this input: there are no GPUDirect pairs.</p></section>'
    numa = {d["bdf"]: d.get("numa_node") for d in devices}
    cells = {}
    for p in pairs.get("pairs") or []:
        cells[(p["a"], p["b"])] = p
        cells[(p["b"], p["a"])] = p

    made_up = {d["bdf"] for d in devices if d.get("synthetic")}

    def label(b: str) -> str:
        return names.get(b) or b

    def where(b: str) -> str:  # a header's tooltip: the address, or that there is none
        return NO_BUS_ID if b in made_up else b

    how = ("the path class as <code>nvidia-smi topo -m</code> prints it" if library_of(pairs) == "NCCL"
           else "the path class")
    links = "NV# NVLinks" if library_of(pairs) == "NCCL" else "XGMI# xGMI links"
    out = [f'<section id="pairs"><h2>Pairs</h2><p class="legend">Each cell: {how} (PIX one switch, PXB several '
           'switches, PHB one root complex, '
           f'NODE two root complexes of one NUMA node, SYS across NUMA nodes, {links}), coloured by verdict: '
           '<span class="chip v-ok">ok</span> <span class="chip v-degraded">degraded ~</span> '
           '<span class="chip v-fail">fail !</span> <span class="chip v-unknown">unknown ?</span>'
           + (f' <span class="chip unused">-</span> not used: {library_of(pairs)} (cuFile) uses the GPU\'s nearer '
              'NIC (drive)'
              if any(p.get("chosen") is False for p in pairs.get("pairs") or ()) else "")
           + (' <span class="chip v-unknown">*</span> undecided on this input: the class and mark expected if: '
              + escape(", ".join(dict.fromkeys(a.get("brief") or a["fact"] for a in pairs.get("assumes") or ())))
              if pairs.get("status") == "unknown" and pairs.get("assumes") else "") + '</p>']
    for kind, title in (("gpu", "GPU \u2013 GPU (peer-to-peer)"), ("nic", "GPU \u2013 NIC (GPUDirect RDMA)"),
                        ("nvme", "GPU \u2013 NVMe (GPUDirect Storage)")):
        # as in `gdrcheck pairs`: a NIC that is not a GPUDirect NIC (rdma false) makes no pair and gets no column
        cols = [d["bdf"] for d in devices if d.get("kind") == kind and not (kind == "nic" and d.get("rdma") is False)]
        if not cols or (kind == "gpu" and len(cols) < 2):
            continue
        wide = any(len(_path(cells.get((g, c)))) > 5 for g in gpus for c in cols)
        per = MAX_COLS_WIDE if wide else MAX_COLS
        blocks = [cols[i:i + per] for i in range(0, len(cols), per)]
        for n, block in enumerate(blocks):
            first, last = n * per + 1, n * per + len(block)
            span = f"column {first}" if first == last else f"columns {first}\u2013{last}"
            head = title + (f", {span} of {len(cols)}" if len(blocks) > 1 else "")
            rows = []
            for g in gpus:
                tds = "".join('<td class="self">X</td>' if c == g else _cell(cells.get((g, c)), library_of(pairs))
                              for c in block)
                rows.append(f'<tr><th class="row" title="{escape(where(g))}">{escape(label(g))}</th>{tds}'
                            f'<td class="numa">{_numa(numa.get(g))}</td></tr>')
            ths = "".join(f'<th title="{escape(where(c))}">{escape(label(c))}</th>' for c in block)
            out.append(f'<h3 class="mcap">{escape(head)}</h3><table class="m"><thead><tr><th></th>{ths}'
                       f'<th class="numa">NUMA</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    out.append(_device_table(devices, topology, label, where, made_up))
    out.append(_links(topology, label))
    out.append("</section>")
    return "".join(out)


def _device_table(devices, topology, label, where, made_up) -> str:
    """The matrices' key: each GPU, NIC and NVMe by name, address (or that it has none), Linux names, model."""
    order = {"gpu": 0, "nic": 1, "nvme": 2}
    legend = sorted((d for d in devices if d.get("kind") in order), key=lambda d: order[d["kind"]])
    ident = {d["bdf"]: tm.ident(d) for d in topology.get("devices") or []}
    models = {d["bdf"] for d in topology.get("devices") or [] if d.get("model")}  # named by gdrcheck's table
    lines = []
    for d in legend:
        extra = tm.names_text(d)
        name = ident[d["bdf"]] if d["bdf"] in models else d.get("name") or ident.get(d["bdf"], "")
        if d["bdf"] in made_up and name.endswith(MADE_UP_NAME):  # nor the made-up name ("GPU0 of ...")
            name = ""
        lines.append(f"<tr><th>{escape(label(d['bdf']))}</th><td class=\"mono\">{escape(where(d['bdf']))}</td>"
                     f"<td>{escape(extra)}</td><td>{escape(name)}</td><td>{_numa(d.get('numa_node'))}</td></tr>")
    return ('<table class="devices"><thead><tr><th>name</th><th>address</th><th>Linux names</th>'
            f'<th>device</th><th>NUMA</th></tr></thead><tbody>{"".join(lines)}</tbody></table>')


def _nccl_log(pairs, names: dict[str, str]) -> str:
    """A job's NCCL log: per pair the prediction beside what NCCL used, and the likely cause where they differ."""
    log = (pairs.get("nccl") or {}).get("log")
    if not log:
        return ""
    rows = []
    for p in pairs.get("pairs") or []:
        n = p.get("nccl") or {}
        obs = n.get("observed")
        if not obs:
            continue
        key = "p2p" if p.get("kind") == "gpu-gpu" else "gdr"
        agrees = obs.get("agrees")
        word, cls = {True: ("agrees", "ok"), False: ("differs", "degraded"), None: ("settles it", "unknown")}[agrees]
        via = f" via {names.get(obs['via'], obs['via'])}" if obs.get("via") else ""
        rows.append(f"<tr><th>{escape(names.get(p['a'], p['a']))} \u2013 {escape(names.get(p['b'], p['b']))}</th>"
                    f"<td>{escape(key.upper())} {escape(str(n.get(key)))}</td>"
                    f"<td class=\"mono\">{escape(obs.get('transport', ''))}{escape(via)}</td>"
                    f'<td><span class="chip v-{cls}">{word}</span> {escape(obs.get("cause", ""))}</td>'
                    f'<td class="mono">{escape(obs.get("line", ""))}</td></tr>')
    settings = ", ".join(f"{x['name']}={x['value']}" for x in log.get("settings") or [])
    lib = library_of(pairs)
    head = (f"<p>{escape(str(log.get('file')))}: {lib} "
            f"{escape(str(log.get('rccl_version') or log.get('version') or 'not shown'))}"
            + (f", host {escape(str(log['host']))}" if log.get("host") else "") + f". {escape(log.get('summary', ''))}."
            + (f" The job's settings: <code>{escape(settings)}</code>." if settings else "") + "</p>")
    table = (f'<table class="devices"><thead><tr><th>pair</th><th>predicted</th><th>{lib} used</th><th></th>'
             f'<th>{lib}\'s line</th></tr></thead><tbody>{"".join(rows)}</tbody></table>') if rows else ""
    return f'<section id="nccl-log"><h2>What {lib} did</h2>{head}{table}</section>'


def _links(topology, label) -> str:
    """Per GPU, NVML's NVLink state (active of the part's links, those down, version, per-link rate) and
    NVSwitch fabric state; nothing when the input has neither."""
    rows = []
    for d in topology.get("devices") or []:
        nvl, fab = d.get("nvlink") or {}, d.get("fabric") or {}
        if d.get("kind") != "gpu" or not (nvl or fab):
            continue
        links = (f"{nvl.get('active')} of {nvl.get('links')} active" if nvl else "")
        if nvl.get("down"):
            links += ", down: " + ", ".join(str(x) for x in nvl["down"])
        rate = f"{nvl['rate_gb_per_s']:g} GB/s" if isinstance(nvl.get("rate_gb_per_s"), (int, float)) else ""
        fabric = (fab.get("error") or f"{fab.get('state')} / {fab.get('status')}") if fab else "not recorded"
        rows.append(f"<tr><th>{escape(label(d['bdf']))}</th><td>{escape(links)}</td>"
                    f"<td>{escape(str(nvl.get('version') or ''))}</td><td>{escape(rate)}</td>"
                    f"<td>{escape(str(nvl.get('to_nvswitch') or ''))}</td><td>{escape(fabric)}</td></tr>")
    if not rows:
        return ""
    return ('<h3 class="mcap">NVLink and NVSwitch fabric (NVML)</h3><table class="devices"><thead><tr><th>GPU</th>'
            "<th>NVLinks</th><th>version</th><th>per link, each way</th><th>to NVSwitch</th>"
            f"<th>fabric state / status</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _numa(n) -> str:
    return "?" if n is None else escape(str(n))


def _bar1(bar1, topology=None) -> str:
    gpus = bar1.get("gpus") or []
    if not gpus:
        return ""
    models = {d["bdf"]: d["model"] for d in (topology or {}).get("devices") or [] if d.get("model")}
    rows = []
    for g in gpus:
        total, used = g.get("bar1_total_bytes"), g.get("bar1_used_bytes")
        label = f"GPU{g['index']}" if g.get("index") is not None else "GPU"
        if total:
            pct = 100.0 * used / total if used is not None else None
            shown = min(max(pct, 0.6 if used else 0.0), 100.0) if pct is not None else None  # a sliver when in use
            fill = (f'<span class="used" style="width:{shown:.1f}%"></span>' if pct is not None
                    else '<span class="nouse"></span>')
            bar = f'<span class="bar{" high" if pct is not None and pct >= 90 else ""}">{fill}</span>'
            text = (f"{human_bytes(used)} used of {human_bytes(total)} ({pct:.0f}%)" if pct is not None
                    else f"{human_bytes(total)}, use not known")
        else:
            bar, text = '<span class="bar none"></span>', "BAR1 size not known"
        mem = f"GPU memory {human_bytes(g['fb_total_bytes'])}" if g.get("fb_total_bytes") else ""
        gname = f"NVIDIA {models[g['bdf']]}" if g.get("bdf") in models else tm.short_name(g.get("name") or "")
        gname = "" if g.get("synthetic") and gname.endswith(MADE_UP_NAME) else gname
        bdf = NO_BUS_ID if g.get("synthetic") else g["bdf"]
        rows.append(f'<tr><th>{escape(label)}</th><td class="mono">{escape(bdf)}'
                    f'</td><td class="gname">{escape(gname)}</td>'
                    f'<td class="barcell">{bar}</td>'
                    f'<td>{escape(text)}</td><td class="muted">{escape(mem)}'
                    f'{" (" + escape(g["source"]) + ")" if g.get("source") else ""}</td></tr>')
    return ('<section id="bar1"><h2>BAR1 per GPU</h2><p class="legend">The aperture through which NICs and '
            'NVMe reach GPU memory: the bar is its total, the dark part what is mapped now.</p>'
            f'<table class="bar1">{"".join(rows)}</table></section>')


def _code_spans(text: str) -> str:
    """Escape, then show `...` as code."""
    return re.sub(r"`([^`]+)`", lambda m: f"<code>{m.group(1)}</code>", escape(text))


def _findings(pairs, bar1, rules: dict[str, dict[str, Any]]) -> str:
    seen = set()
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in list(pairs.get("findings") or []) + list(bar1.get("findings") or []):
        key = (f["code"], tuple(f.get("subject") or ()), f.get("message"))
        if key in seen:
            continue
        seen.add(key)
        groups.setdefault(f["code"], []).append(f)
    if not groups:
        return '<section id="findings"><h2>Findings</h2><p>None.</p></section>'
    out = ['<section id="findings"><h2>Findings and fixes</h2>']
    for code in sorted(groups, key=lambda c: (SEV_ORDER.get(groups[c][0]["severity"], 3), c)):
        items = groups[code]
        rule = rules.get(code) or {}
        sev = items[0]["severity"]
        origin = ORIGIN.get(rule.get("origin"), "")
        msgs = "".join(f"<li>{escape(f['message'])}</li>" for f in items[:MAX_MESSAGES])
        if len(items) > MAX_MESSAGES:
            msgs += (f"<li class=\"muted\">and {len(items) - MAX_MESSAGES} more "
                     "(<code>gdrcheck pairs --json</code>)</li>")
        settle = next((f["settle"] for f in items if f.get("settle")), "")
        out.append(
            f'<div class="finding s-{escape(sev)}"><h3><span class="sev">{escape(sev.upper())}</span> '
            f'{escape(code)} <span class="name">{escape(rule.get("name", ""))}</span>'
            + (f' <span class="origin">{escape(origin)}</span>' if origin else "") + "</h3>"
            + (f'<p class="title">{escape(rule["title"])}</p>' if rule.get("title") else "")
            + f"<ul>{msgs}</ul>"
            + (f'<p><b>Why:</b> {_code_spans(rule["rationale"])}</p>' if rule.get("rationale") else "")
            + (f'<p class="fix"><b>Fix:</b> {_code_spans(rule["remediation"])}</p>' if rule.get("remediation")
               else "")
            + (f'<p><b>To settle:</b> {_code_spans(settle)}</p>' if settle else "")
            + "</div>")
    out.append("</section>")
    return "".join(out)


def _notes(topology, pairs, bar1) -> str:
    lines, seen = [], set()
    for doc in (topology, pairs, bar1):
        for c in doc.get("collectors") or []:
            if c.get("status") != "ok":
                text = (f"{c['name']}: {c['status']}: {c.get('detail', '')}"
                        + (f" ({c['hint']})" if c.get("hint") else ""))
                if text not in seen:
                    seen.add(text)
                    lines.append(text)
        for n in doc.get("notes") or []:
            if n not in seen:
                seen.add(n)
                lines.append(n)
    if not lines:
        return ""
    return ('<section id="notes"><h2>Notes on the input</h2><ul>'
            + "".join(f"<li>{escape(t)}</li>" for t in lines) + "</ul></section>")
