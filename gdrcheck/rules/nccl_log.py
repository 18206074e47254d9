"""What NCCL did, from a job's NCCL log, held to what gdrcheck predicts for the node.

The log (``gdrcheck.collectors.pastes.nccl_log``, the host fact ``nccl_log``) is the job's: its NCCL version
and the settings NCCL reported as set replace the node's defaults and ``--nccl-version``
(:func:`job_options`, used by ``gdrcheck.rules.engine.nccl_node``). :func:`reconcile` then puts NCCL's choice
beside the prediction of every pair the log shows (``pairs[].nccl.observed``): for a GPU pair the transport of
its connections (``P2P/...`` is P2P, ``SHM/...`` or ``NET/...`` is not; v2.28.9 ``transport/p2p.cc:386-406``,
``shm.cc:128``, ``net.cc:313-359``), for a GPU and a NIC whether its ``NET/<net>/<dev>`` connections carry
``/GDRDMA``, or NCCL's own ``GPU Direct RDMA Enabled|Disabled for GPU .. / HCA ..`` line (up to 2.29,
``graph/paths.cc:473, 483`` at v2.28.9). Each disagreement is a finding with its most likely cause.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.record import replace
from gdrcheck.rules.base import Finding, Rule
from gdrcheck.rules.nccl.core import HONOURED_ENV, parse_version
from gdrcheck.rules.nccl.decision import Decision, cause
from gdrcheck.rules.nccl.job_log import hca_evidence, job_log  # noqa: F401 - hca_evidence: this module's API too

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, Optional

P2P_DIFFERS = Rule(
    "GDR180", "nccl-log-p2p-differs", "warning", "pair",
    "NCCL connected a GPU pair otherwise than gdrcheck predicts for the node",
    "The job's NCCL log says how NCCL connected each GPU pair (P2P, SHM or the network). Where that differs "
    "from what NCCL's rules give on this node with the job's version and settings, something the node's "
    "facts do not show decided: a setting of the job gdrcheck does not model or cannot read (a topology "
    "file not in the input), GPUs hidden by CUDA_VISIBLE_DEVICES, or gdrcheck's model is wrong here.",
    "Compare the job's environment (`env | grep NCCL_`, `CUDA_VISIBLE_DEVICES`, the container's /etc/nccl.conf) "
    "with the node's; rerun the job with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET,GRAPH and pass "
    "that log with `gdrcheck snapshot` of the node.",
    pair_kinds=("gpu-gpu",))
GDR_DIFFERS = Rule(
    "GDR181", "nccl-log-gdr-differs", "warning", "pair",
    "NCCL used GPUDirect RDMA on a GPU-NIC pair otherwise than gdrcheck predicts for the node",
    "The job's NCCL log shows whether each network connection carried /GDRDMA (or NCCL's own 'GPU Direct RDMA "
    "Enabled/Disabled' line for the GPU and HCA). Where that differs from the prediction, the job saw "
    "something the node does not show: a container without the peer-memory module, an external net plugin "
    "that decides GPUDirect RDMA itself, a setting of the job, or gdrcheck's model is wrong here.",
    "Inside the job's container check `ls /sys/kernel/mm/memory_peers/nv_mem/version` or `lsmod | grep "
    "nvidia_peermem` and NCCL_NET_PLUGIN; compare the job's NCCL_* settings with the node's.",
    pair_kinds=("gpu-nic",))
LOG_WARNED = Rule(
    "GDR182", "nccl-log-warned", "warning", "host",
    "NCCL warned in the job's log",
    "A line with NCCL WARN is NCCL reporting an error or a fallback (a failed connection, a transport it could "
    "not use, a setting it ignored); it often names why GPUDirect was not used.",
    "Read the WARN line and the INFO lines before it; NCCL's troubleshooting guide lists the usual causes "
    "(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html).")
OTHER_HOSTS = Rule(
    "GDR183", "nccl-log-other-hosts", "info", "host",
    "The job's NCCL log holds ranks of other hosts, kept apart",
    "A log of a multi-node job holds every node's lines; only one host's GPUs are this node's. The other hosts' "
    "GPU pairs are not judged here, and their connections to this host's ranks count as network connections.",
    "Pass each node's own inputs with the log to judge another host (`gdrcheck pairs --from <that node's "
    "snapshot> --from job.log`).")
NOT_THIS_NODE = Rule(
    "GDR184", "nccl-log-gpus-not-on-node", "warning", "host",
    "GPUs of the job's NCCL log are not on this node",
    "NCCL names each rank's GPU by its PCI bus id; a bus id the node's input does not show means the log is of "
    "another node (or of a virtual machine or container that numbers the bus otherwise), and its connections "
    "cannot be held to this node.",
    "Pass the log with the inputs of the node it ran on; in a virtual machine or container take `gdrcheck "
    "snapshot` inside it.")
VERSION_NOT_ON_NODE = Rule(
    "GDR185", "nccl-log-version-not-on-node", "info", "host",
    "The job ran an NCCL version the node does not carry",
    "The job's NCCL (a container image, a virtual environment, a build of its own) is not among the versions "
    "found on the node; the job's version decides, and versions decide differently (docs/nccl.md).",
    "Nothing to fix if that is intended; judge the node for the job's version with `--nccl-version`.")
PEERMEM_DIFFERS = Rule(
    "GDR186", "nccl-log-hca-gdr-differs", "warning", "device",
    "NCCL's view of a NIC's GPUDirect RDMA support differs from the node's",
    "NCCL logs per HCA whether the NIC can register GPU memory (peer memory or DMA-BUF, v2.28.9 "
    "graph/topo.cc:1357). 'Disabled' where the node has the peer-memory module or DMA-BUF means the job did not "
    "see them (a container without /sys/kernel/mm/memory_peers, an old rdma-core inside the image, "
    "NCCL_DMABUF_ENABLE=0); 'Enabled' where the node shows neither means the input misses a path NCCL found.",
    "Inside the job's container check `ls /sys/kernel/mm/memory_peers/nv_mem/version`, `lsmod | grep "
    "nvidia_peermem` and the rdma-core version; mount what is missing into the container.")

LOG_CODES = frozenset(r.code for r in (P2P_DIFFERS, GDR_DIFFERS, LOG_WARNED, OTHER_HOSTS, NOT_THIS_NODE,
                                       VERSION_NOT_ON_NODE, PEERMEM_DIFFERS))
MODEL_WRONG = "gdrcheck's model is wrong here"
# the settings a job's log reports that change NCCL's transport choice: those the model honours (a prediction
# takes them from the log: job_options) and these (docs/nccl.md)
TRANSPORT_SETTINGS = HONOURED_ENV + ("NCCL_CUMEM_ENABLE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_SHM_DISABLE")
# those the rules do not model: a cause of a disagreement (an honoured one is not, but for a file not in the input)
UNMODELLED = tuple(name for name in TRANSPORT_SETTINGS if name not in HONOURED_ENV)
TOPO_FILE = "NCCL_TOPO_FILE"  # honoured only where its file is in the input (rules.nccl.file_tree)


def job_options(snap, options, version: Optional[str] = None) -> tuple[Any, Optional[str], str]:
    """The options with the job's settings (every NCCL_* the log reports as set, under the options' own
    ``--env``), the job's NCCL version to judge with (None: the log names none) and why."""
    job = job_log(snap)
    if job is None:
        return options, None, ""
    log = job["log"]
    env = {name: value for name, value, _line in log.settings}
    env.update(options.env)
    options = replace(options, env=env)
    if version is not None or not log.version:
        return options, None, ""
    from gdrcheck.rules.nccl.core import OLDEST, version_str

    why = f"the job's NCCL log ({log.label}): NCCL {log.version}"
    v = parse_version(log.version, floor=False)
    if v < OLDEST:
        return options, version_str(OLDEST), (f"{why}, older than the oldest rules gdrcheck models: judged with "
                                              f"{version_str(OLDEST)}")
    if options.nccl_version and str(options.nccl_version) != log.version:
        why += f" (instead of --nccl-version {options.nccl_version}: the log says what the job ran)"
    return options, log.version, why


# ---------------------------------------------------------------------------
# reconcile


def reconcile(snap, topo, pairs, views: dict[tuple[str, str], dict], node,
              given: Optional[dict[str, str]] = None) -> Optional[dict[str, Any]]:
    """Put ``observed`` into the view of every pair the log shows; the summary of what agreed and what not.
    ``given``: the settings of ``--env``, which a prediction takes and the logged job may not have had."""
    job = job_log(snap)
    if job is None:
        return None
    from gdrcheck.rules import nccl_log_lines as log_lines  # read only where a job's log is

    job = dict(job, given=dict(given or {}), topo_files=_topo_files(snap))
    log, host = job["log"], job["host"]
    version = node.version if node is not None else None
    try:
        logv = parse_version(log.version, floor=False) if log.version else version
    except ValueError:
        logv = version
    rk = log_lines.Ranks(job, topo, logv)
    gpus = set(topo.of_kind("gpu"))
    missing = sorted({r[1] for r in rk.ranks.values() if r[1] and (r[0] == host or host is None)} - gpus
                     - set(job.get("unplaced") or ()))
    gg, gn = log_lines.connection_lines(job, topo, rk, gpus)
    log_lines.pair_gdr_lines(job, topo, rk, gpus, gn)
    summary = {"log": log.label, "host": host, "host_reason": job.get("host_reason"), "notes": rk.notes,
               "gpus_not_on_node": missing, "pairs": 0, "agree": 0, "differ": 0, "settled": 0,
               "connections": 0, "agree_connections": 0}
    node_env = _node_env(snap, node)
    from gdrcheck.rules.nccl_log_settle import SETTLED

    settled_p2p = host_record(snap, SETTLED) or {}
    local_hca = [h for h in log.hca_gdr if h.host in (host, None)]  # once: each GPU-NIC pair asks
    for p in pairs:
        key = (p.a, p.b)
        view = views.get(key)
        if view is None:
            continue
        if p.kind == "gpu-gpu" and key in gg:
            obs = _observed_p2p(gg[key], view, job, node_env, topo, rk.ranks)
        elif p.kind == "gpu-nic" and key in gn:
            obs = _observed_gdr(gn[key], view, job, node_env, snap, topo, p.b)
        else:
            continue
        views[key] = _with_log_line(view, obs, job, topo, p, local_hca, bool(settled_p2p.get(f"{p.a} {p.b}")))
        _count(summary, obs)
    return summary


def _with_log_line(view: Mapping[str, Any], obs: dict, job, topo, p, local_hca, p2p_settled: bool) \
        -> Mapping[str, Any]:
    """The pair's decision with what the job's log observed; a flag read from NCCL's XML in the input said instead
    from NCCL's own line in the job's log (or a connection through the NIC with /GDRDMA); the NVML P2P status the
    log settled said to come from the log."""
    from gdrcheck.rules import nccl_log_lines as log_lines  # read only where a job's log is

    if not isinstance(view, Decision):
        return dict(view, observed=obs)
    view = view.with_facts(observed=obs)
    if view.from_input() and p.kind == "gpu-nic":
        line = next((h.line for h in local_hca if log_lines.nic_of(job, topo, h.host, h.net, h.index) == p.b),
                    None)
        if line:
            view = view.plus(cause("log.line", line=line.split("NCCL INFO ", 1)[-1], how="own"))
        else:  # no HCA line: a connection through the NIC with /GDRDMA (rules.nccl.job_log.gdrdma_lines)
            used = _gdrdma_line(job, topo, p.b)
            if used:
                view = view.plus(cause("log.line", line=used.split("NCCL INFO ", 1)[-1], how="gdrdma"))
    if p2p_settled and view.has("p2p.nvml_ok"):
        view = view.restated(tuple(cause("p2p.nvml_ok", from_log=True) if c.code == "p2p.nvml_ok" else c
                                   for c in view.causes), view.needs)
    return view
    return view


def _gdrdma_line(job, topo, nic: str) -> Optional[str]:
    """The job's first ``/GDRDMA`` connection line through ``nic`` (by the RDMA device name NCCL listed)."""
    from gdrcheck.rules.nccl.job_log import gdrdma_lines

    d = topo.by_bdf.get(nic)
    names = tuple(d.rdma_devices) + tuple(d.netdevs) if d is not None else ()
    lines = gdrdma_lines(job)
    return next((lines[n] for n in names if n in lines), None)


def _count(summary: dict[str, Any], obs: dict) -> None:
    summary["pairs"] += 1
    summary["connections"] += obs["connections"]
    if obs["agrees"] is True:
        summary["agree"] += 1
        summary["agree_connections"] += obs["connections"]
    elif obs["agrees"] is False:
        summary["differ"] += 1
    else:
        summary["settled"] += 1


def _node_env(snap, node) -> dict[str, str]:
    """The settings the node itself gives NCCL (its environment capture and settings files), without the log."""
    if node is None:
        return {}
    from gdrcheck.rules.nccl.versions import settings_for

    st = settings_for(snap, node.version, {}, node.cpu, len(node.gpus), "")
    return dict(st.env)


def _given_cause(job) -> Optional[str]:
    """A setting given with --env that the logged job did not run with: the prediction is for another job."""
    logged = {name: value for name, value, _line in job["log"].settings}
    for name, value in sorted((job.get("given") or {}).items()):
        if name.startswith("NCCL_") and logged.get(name) != value:
            had = f"the log reports {name}={logged[name]}" if name in logged else "the log does not report it set"
            return f"--env {name}={value} is not what the logged job ran with ({had})"
    return None


def _topo_files(snap) -> frozenset[str]:  # the NCCL topology files the input carries, by path
    return frozenset((host_record(snap, "nccl_topo_file") or {}).get("files") or ())


def _job_setting_cause(job, node_env: dict[str, str]) -> Optional[str]:
    """The first setting of the job the node lacks that the prediction could not take: one gdrcheck's rules do
    not model, or a topology file the input does not carry."""
    for name, value, _line in job["log"].settings:
        if node_env.get(name) == value:
            continue
        if name in UNMODELLED:
            return f"a setting in the job that the node does not have: {name}={value}, which gdrcheck's rules " \
                   "do not model"
        if name == TOPO_FILE and value not in job.get("topo_files", ()):
            return f"a setting in the job that the node does not have: {name}={value} (the file is not in this input)"
    return None


def _kind_word(transport: str) -> str:
    return transport.split("/", 1)[0]


def _observed_p2p(conns, view: dict, job, node_env, topo, ranks) -> dict:
    transports = sorted({c.transport for c in conns})
    p2p = all(_kind_word(t) == "P2P" for t in transports)
    mixed = not p2p and any(_kind_word(t) == "P2P" for t in transports)
    said = "enabled" if p2p else "disabled"
    obs: dict[str, Any] = {"p2p": "mixed" if mixed else said, "transport": ", ".join(transports),
                           "line": conns[0].line, "connections": len(conns)}
    pred = view.get("p2p")
    if pred not in ("enabled", "disabled") or mixed:
        obs["agrees"] = None
        return obs
    obs["agrees"] = pred == said
    if not obs["agrees"]:
        obs["cause"] = _p2p_cause(view, job, node_env, topo, ranks)
    return obs


def _p2p_cause(view: dict, job, node_env, topo, ranks) -> str:
    given = _given_cause(job)
    if given:
        return given
    via = view.get("nvb_via")
    if via and via not in {r[1] for r in ranks.values()}:
        return (f"a CUDA_VISIBLE_DEVICES subset: the GPU NCCL would relay through (NVB, {via}) is not in the job's "
                "communicator")
    got = _job_setting_cause(job, node_env)
    if got:
        return got
    log = job["log"]
    if not log.version:
        return "another NCCL version: the log does not say which NCCL ran, the node's was judged"
    return MODEL_WRONG


def _observed_gdr(items, view: dict, job, node_env, snap, topo, nic: str) -> dict:
    lines = [it for it, _o in items]
    used = [o["gdrdma"] for _it, o in items]
    vias = sorted({o["via"] for _it, o in items if o.get("via")})
    # the receive side decides (net.cc: recv setup passes read=0); send lines count where no receive line is
    recv = [o["gdrdma"] for it, o in items if getattr(it, "side", "") == "receive" or o.get("pair_line")]
    basis = recv or used
    gdr = "enabled" if all(basis) else "disabled" if not any(basis) else "mixed"
    transports = sorted({getattr(it, "transport", None) or ("GDR " + ("Enabled" if o["gdrdma"] else "Disabled"))
                         for it, o in items})
    obs: dict[str, Any] = {"gdr": gdr, "transport": ", ".join(transports), "line": lines[0].line,
                           "connections": len(items)}
    if vias:
        obs["via"] = vias[0]
    pred = view.get("gdr")
    if pred not in ("enabled", "disabled") or gdr == "mixed":
        obs["agrees"] = None
        return obs
    obs["agrees"] = pred == gdr
    if not obs["agrees"]:
        obs["cause"] = _gdr_cause(view, gdr, job, node_env, snap, topo, nic)
    return obs


def _gdr_cause(view: dict, gdr: str, job, node_env, snap, topo, nic: str) -> str:
    from gdrcheck.rules import nccl_log_lines as log_lines  # read only where a job's log is

    given = _given_cause(job)
    if given:
        return given
    log = job["log"]
    if log.plugin:
        return f"an external net plugin ({log.plugin}) decides GPUDirect RDMA itself"
    relay = view.get("via")
    if relay and relay not in {r.bdf for r in log.ranks if r.host in (job["host"], None)} and log.ranks:
        return (f"a CUDA_VISIBLE_DEVICES subset: the GPU NCCL would relay through (PXN, {relay}) is not in the "
                "job's communicator")
    if gdr == "disabled" and any(not h.enabled and log_lines.nic_of(job, topo, h.host, h.net, h.index) == nic
                                 for h in log.hca_gdr if h.host in (job["host"], None)):
        return ("a container without the peer-memory module: NCCL found no peer memory or DMA-BUF for the HCA "
                "(its 'GPU Direct RDMA Disabled for HCA' line) where the node has one")
    got = _job_setting_cause(job, node_env)
    if got:
        return got
    if not log.version:
        return "another NCCL version: the log does not say which NCCL ran, the node's was judged"
    return MODEL_WRONG


# ---------------------------------------------------------------------------
# findings


def check(ctx) -> Iterable[Finding]:
    job = job_log(ctx.snap)
    if job is None:
        return
    log, host = job["log"], job["host"]
    names = _labels(ctx.topo)
    for key, view in ctx.nccl_view.items():
        obs = view.get("observed")
        if not obs or obs.get("agrees") is not False:
            continue
        a, b = key
        kind = "p2p" if "p2p" in obs else "gdr"
        cause = obs.get("cause", MODEL_WRONG)
        setting = cause.startswith("a setting in the job")
        worse = obs[kind] == "disabled"
        effect = "degraded" if worse and not setting else None
        what = "P2P" if kind == "p2p" else "GPUDirect RDMA"
        msg = (f"{names.get(a, a)}-{names.get(b, b)}: NCCL {'did not use' if worse else 'used'} {what} "
               f"({obs['transport']}), gdrcheck predicts {view.get(kind)} ({view.get('reason', '')}); most likely "
               f"cause: {cause}")
        code = P2P_DIFFERS.code if kind == "p2p" else GDR_DIFFERS.code
        yield Finding(code, "warning" if effect else "info", (a, b), msg, pairs=((a, b),), effect=effect,
                      evidence=obs.get("line", ""))
    for h, w in log.warnings[:20]:
        if host is None or h in (host, None):
            yield Finding(LOG_WARNED.code, "warning", ("host",), f"NCCL WARN{f' on {h}' if h else ''}: {w}",
                          evidence=w)
    others = [h for h in log.hosts if h != host]
    if host is not None and others:
        n_other = sum(1 for r in log.ranks if r.host != host) or \
            len({c.local for c in log.connections if c.host not in (host, None)})
        yield Finding(OTHER_HOSTS.code, "info", ("host",),
                      f"the log holds {len(log.hosts)} hosts; host {host} is this node ({job.get('host_reason')}); "
                      f"{n_other} rank(s) on {', '.join(others[:4])}{', ...' if len(others) > 4 else ''} are not "
                      "judged here")
    gpus = set(ctx.topo.of_kind("gpu"))
    missing = sorted({r.bdf for r in log.ranks if (r.host == host or host is None)} - gpus
                     - set(job.get("unplaced") or ()))  # a bus id a matrix cannot place is not elsewhere
    if missing:
        yield Finding(NOT_THIS_NODE.code, "warning", ("host",),
                      f"the log's ranks on {host or 'this host'} use GPUs at {', '.join(missing[:4])}"
                      f"{', ...' if len(missing) > 4 else ''}, which this input does not show: their connections "
                      "are not held to the node", settle="pass the inputs of the node the job ran on")
    node = _found_versions(ctx.snap)
    if log.version and node and log.version not in node:
        yield Finding(VERSION_NOT_ON_NODE.code, "info", ("host",),
                      f"the job ran NCCL {log.version}; the node carries {', '.join(sorted(node))}: the job's "
                      "version is judged")
    yield from _hca_findings(ctx, job, names)


def _found_versions(snap) -> list[str]:
    found = host_record(snap, "nccl_versions")
    return [] if found is None else [str(e.get("version")) for e in found.get("found", ())]


def _hca_findings(ctx, job, names) -> Iterable[Finding]:
    """NCCL's per-HCA GPUDirect RDMA line against the node's peer-memory facts (through the NIC-side flag
    gdrcheck derives for the node, ``rules.peermem.nic_gdr``)."""
    from gdrcheck.rules import nccl_log_lines as log_lines  # read only where a job's log is
    from gdrcheck.rules.peermem import nic_gdr

    log, host = job["log"], job["host"]
    if not log.hca_gdr:
        return
    ok, why = nic_gdr(ctx)
    for h in log.hca_gdr:
        if h.host not in (host, None) or h.net == "Socket":
            continue
        nic = log_lines.nic_of(job, ctx.topo, h.host, h.net, h.index)
        subject = nic or h.name
        if ok is True and not h.enabled:
            yield Finding(PEERMEM_DIFFERS.code, "warning", (subject,),
                          f"{h.name}{f' ({nic})' if nic else ''}: NCCL says GPU Direct RDMA Disabled for the HCA"
                          f"{' ' + h.detail if h.detail else ''}, the node has it ({why}): the job did not see the "
                          "peer-memory module or DMA-BUF (a container without them?)", evidence=h.line)
        elif ok is False and h.enabled:
            yield Finding(PEERMEM_DIFFERS.code, "warning", (subject,),
                          f"{h.name}{f' ({nic})' if nic else ''}: NCCL says GPU Direct RDMA Enabled for the HCA, the "
                          f"node's input says it cannot be ({why}): the input misses what NCCL found",
                          evidence=h.line)


def _labels(topo) -> dict[str, str]:
    out: dict[str, str] = {}
    for b in topo.of_kind("gpu"):
        d = topo.by_bdf[b]
        out[b] = f"GPU{d.gpu_index}" if d.gpu_index is not None else b
    for b in topo.of_kind("nic"):
        d = topo.by_bdf[b]
        if d.rdma_devices:
            out[b] = f"{d.rdma_devices[0]} ({b})"
    return out


CHECKS = (
    (P2P_DIFFERS, check),
    (GDR_DIFFERS, None),
    (LOG_WARNED, None),
    (OTHER_HOSTS, None),
    (NOT_THIS_NODE, None),
    (VERSION_NOT_ON_NODE, None),
    (PEERMEM_DIFFERS, None),
)
