"""Effective NCCL settings that gdrcheck honours, and where each came from (``docs/nccl.md``, "Settings").

NCCL applies its settings files with ``setenv(..., overwrite=0)``: the real
environment wins, then ``NCCL_CONF_FILE`` (or ``~/.nccl.conf``), then
``/etc/nccl.conf``; inside one file the first definition wins.
"""

from __future__ import annotations

import json
import os
import re

from gdrcheck.collectors.host_util import HostCtx, listdir_kept
from gdrcheck.io.read_as import read_named, setting_owner
from gdrcheck.model import Fact
from gdrcheck.patterns import lazy_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

HONOURED = ("NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_NET_GDR_READ", "NCCL_TOPO_FILE",
            "NCCL_IGNORE_DISABLED_P2P", "NCCL_DMABUF_ENABLE", "NCCL_NET_GDR_C2C")
ETC_CONF = "/etc/nccl.conf"
ENV_CAPTURE = "/gdrcheck/env.json"  # a snapshot's captured environment: {"NAME": "value", ...}
FROM_ENV = "environment"
FROM_CAPTURED_ENV = f"captured environment ({ENV_CAPTURE})"


def parse_nccl_conf(text: str) -> dict[str, str]:
    """NCCL's ``setEnvFile``: ``NAME=value`` per line, ``#`` lines skipped, no trimming, first wins."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if not line or line[0] == "#" or "=" not in line:
            continue
        name, value = line.split("=", 1)
        out.setdefault(name, value)
    return out


def _captured_env(ctx: HostCtx) -> Optional[dict[str, str]]:
    text = ctx.src.read_text(ENV_CAPTURE)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("env"), dict):
        data = data["env"]
    if not isinstance(data, dict):
        return None
    return {str(k): str(v) for k, v in data.items() if isinstance(k, str) and v is not None}


def _layers(ctx: HostCtx) -> tuple[list[tuple[str, Mapping[str, str]]], list[str]]:
    """Setting layers, strongest first, and the files that were read."""
    layers: list[tuple[str, Mapping[str, str]]] = []
    read: list[str] = []
    env: Optional[Mapping[str, str]] = None
    if ctx.src.live:
        env = os.environ
        layers.append((FROM_ENV, {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}))
    else:
        captured = _captured_env(ctx)
        if captured is not None:
            env = captured
            read.append(ENV_CAPTURE)
            layers.append((FROM_CAPTURED_ENV, {k: v for k, v in captured.items() if k.startswith("NCCL_")}))
    files: list[str] = []
    user = (env or {}).get("NCCL_CONF_FILE")
    if user:
        files.append(user)
    elif (env or {}).get("HOME"):  # this process's, or the one a snapshot captured
        files.append(os.path.join(env["HOME"], ".nccl.conf"))
    by_env = env_owner(ctx, env)
    for path in files + [ETC_CONF]:
        if not path.startswith("/"):
            continue
        text = read_named(ctx.src, path, 1 << 20, named_by=0 if path == ETC_CONF else by_env)
        if text is None:
            continue
        read.append(path)
        layers.append((path, parse_nccl_conf(text)))
    return layers, read


def nccl_env_fact(ctx: HostCtx) -> Fact:
    """{NAME: {"value", "source", "shadowed": [{"value", "source"}, ...]}} for the honoured names that are set."""
    layers, read = _layers(ctx)
    out: dict[str, dict[str, object]] = {}
    for name in HONOURED:
        hits = [(where, vals[name]) for where, vals in layers if name in vals]
        if not hits:
            continue
        where, value = hits[0]
        entry: dict[str, object] = {"value": value, "source": where}
        if len(hits) > 1:
            entry["shadowed"] = [{"value": v, "source": w} for w, v in hits[1:]]
        out[name] = entry
    sources = ([FROM_ENV] if ctx.src.live else []) + read
    return Fact(out, source=", ".join(sources) or f"{ETC_CONF} (absent)")


# ---------------------------------------------------------------------------
# raw settings layers, so that each NCCL version's own file rules can be applied (gdrcheck.rules.nccl.settings)

TOPO_DEFAULT = "/var/run/nvidia-topologyd/virtualTopology.xml"  # v2.30.7 src/graph/topo.cc:1774-1781
CONF_LIMIT = 1 << 20
TOPO_LIMIT = 8 << 20


def _homes(ctx: HostCtx, env: Optional[Mapping[str, str]]) -> dict[str, Optional[str]]:
    """``$HOME`` (NCCL 2.30.3+) and the passwd home directory (``getpwuid(getuid())``, up to 2.30.2)."""
    home = (env or {}).get("HOME")
    pw_dir: Optional[str] = None
    if ctx.src.live:
        try:
            import pwd

            pw_dir = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError):
            pw_dir = None
    elif env is not None:
        pw_dir = env.get("GDRCHECK_PW_DIR") or home
    return {"HOME": home, "pw_dir": pw_dir}


def env_owner(ctx: HostCtx, env: Optional[Mapping[str, str]]) -> int:
    """The user whose environment this is, for the files it names: root's run under another user's
    ``HOME`` (``sudo -E``) has that user's settings; 0 otherwise (and on every run not live as root)."""
    home = (env or {}).get("HOME")
    return setting_owner(ctx.src, home) if ctx.src.live and home and home.startswith("/") else 0


def nccl_conf_fact(ctx: HostCtx) -> Fact:
    """The layers every NCCL version could read: environment, each candidate settings file's text."""
    env: Optional[Mapping[str, str]] = None
    env_source = ""
    if ctx.src.live:
        env, env_source = dict(os.environ), FROM_ENV
    else:
        captured = _captured_env(ctx)
        if captured is not None:
            env, env_source = captured, FROM_CAPTURED_ENV
    homes = _homes(ctx, env)
    by_env = env_owner(ctx, env)
    candidates: dict[str, int] = {}  # path -> the user whose setting names it (0: root's own)
    user = (env or {}).get("NCCL_CONF_FILE")
    if user:
        candidates[user] = by_env
    for d, uid in ((homes["HOME"], by_env), (homes["pw_dir"], 0)):
        if d:
            candidates.setdefault(f"{d}/.nccl.conf", uid)
    candidates.setdefault(ETC_CONF, 0)
    files: dict[str, Optional[str]] = {}
    for path, uid in candidates.items():
        files[path] = read_named(ctx.src, path, CONF_LIMIT, named_by=uid) if path.startswith("/") else None
    value = {"env": None if env is None else {k: v for k, v in env.items() if k.startswith("NCCL_")},
             "env_source": env_source, "home": homes, "files": files}
    return Fact(value, source=", ".join([env_source] if env_source else [] + list(files)) or ETC_CONF)


def nccl_topo_file_fact(ctx: HostCtx, conf: Fact) -> Fact:
    """The text of every topology file NCCL may load before detection (NCCL_TOPO_FILE in the environment
    or any settings file, else the nvidia-topologyd default), for the rules to apply."""
    named_by: dict[str, int] = {}  # a path -> the user whose setting named it (0: root)
    v = conf.value if isinstance(conf.value, dict) else {}
    by_env = env_owner(ctx, os.environ if ctx.src.live else None)
    layers = [(by_env, v.get("env") or {})] + [(setting_owner(ctx.src, f), parse_nccl_conf(t))
                                          for f, t in (v.get("files") or {}).items() if t]
    for uid, layer in layers:
        p = layer.get("NCCL_TOPO_FILE")
        if p:
            named_by[p] = named_by.get(p) or uid
    named_by.setdefault(TOPO_DEFAULT, 0)
    out: dict[str, Optional[str]] = {}
    for p, uid in named_by.items():
        out[p] = read_named(ctx.src, p, TOPO_LIMIT, named_by=uid) if p.startswith("/") else None
    return Fact({"files": out}, source=", ".join(out))


# ---------------------------------------------------------------------------
# which NCCL the node carries: file names and package metadata only, nothing is loaded

LIB_DIRS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu", "/usr/lib/powerpc64le-linux-gnu", "/usr/local/cuda/lib64",
            "/usr/local/nccl/lib", "/opt/nccl/lib", "/opt/conda/lib", "/opt/amazon/ofi-nccl/lib",
            "/opt/amazon/aws-ofi-nccl/lib")
PY_BASES = ("/usr/lib", "/usr/lib64", "/usr/local/lib", "/opt/conda/lib")
_LIBNCCL = lazy_pattern(r"^libnccl\.so\.(\d+)\.(\d+)\.(\d+)$")
_WHEEL = lazy_pattern(r"^nvidia_nccl_cu\d+-(\d+)\.(\d+)\.(\d+)[^/]*\.dist-info$")
_TORCH = lazy_pattern(r"^torch-([^-]+)\.dist-info$")
_TORCH_NCCL = lazy_pattern(r"^Requires-Dist:\s*nvidia-nccl-cu\d+\s*==\s*(\d+)\.(\d+)\.(\d+)", re.M)


SITE_DIRS_FILE = "/gdrcheck/python_site_dirs.json"  # in a snapshot: the site directories the live run looked in


def _site_dirs(ctx: HostCtx) -> list[str]:
    out: list[str] = []
    for base in PY_BASES:
        for n in ctx.src.listdir(base):
            if n.startswith("python3"):
                for sub in ("site-packages", "dist-packages"):
                    out.append(f"{base}/{n}/{sub}")
    src = ctx.src
    if src.live:
        import sys

        extra = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
        if src.recording:  # the interpreter's own site directories: a replay looks in the same places
            src.recorded[SITE_DIRS_FILE] = ("f", json.dumps(extra).encode())
    else:
        try:
            extra = json.loads(src.read_text(SITE_DIRS_FILE) or "[]")
        except ValueError:
            extra = []
        if not isinstance(extra, list):
            extra = []
    out.extend(p for p in extra if isinstance(p, str) and p.startswith("/"))
    return list(dict.fromkeys(out))


def nccl_versions_fact(ctx: HostCtx) -> Fact:
    """``{"found": [{"version", "where", "kind"}], "net_plugins": [paths]}``."""
    src = ctx.src
    found: list[dict[str, object]] = []
    plugins: list[str] = []
    dirs = list(LIB_DIRS)
    if src.live:
        dirs.extend(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p.startswith("/"))
    for d in dict.fromkeys(dirs):
        # the soname link ldconfig keeps (libnccl.so.2 -> libnccl.so.2.X.Y): cheap to capture, unlike a listing
        for link in ("libnccl.so.2", "libnccl.so"):
            target = src.readlink(f"{d}/{link}")
            n = target.rsplit("/", 1)[-1] if target else ""
            m = _LIBNCCL.match(n)
            if m:
                found.append({"version": ".".join(m.groups()), "where": f"{d}/{n}", "kind": "library"})
                break
        if src.exists(f"{d}/libnccl-net.so"):  # the plugin NCCL loads when NCCL_NET_PLUGIN is unset
            plugins.append(f"{d}/libnccl-net.so")
    for site in _site_dirs(ctx):
        for n in src.listdir(site):
            if not n.startswith(("nvidia_nccl", "torch-")):  # a venv lists hundreds; only these two can match
                continue
            m = _WHEEL.match(n)
            if m:
                found.append({"version": ".".join(m.groups()), "where": f"{site}/{n}", "kind": "pip wheel"})
                continue
            t = _TORCH.match(n)
            if t:
                meta = src.read_text(f"{site}/{n}/METADATA", 1 << 20) or ""
                pin = _TORCH_NCCL.search(meta)
                if pin:
                    found.append({"version": ".".join(pin.groups()), "where": f"{site}/{n}/METADATA",
                                  "kind": f"PyTorch {t.group(1)} requirement"})
    found.sort(key=lambda e: (tuple(int(x) for x in str(e["version"]).split(".")), str(e["where"])), reverse=True)
    return Fact({"found": found, "net_plugins": sorted(set(plugins))},
                source="library directories and Python site-packages (file names and METADATA only)")


def rdma_port_rates_fact(ctx: HostCtx) -> Fact:
    """``{rdma device: {port: rate text}}`` from /sys/class/infiniband/*/ports/*/rate (NCCL's NET speed)."""
    return Fact(_port_attribute(ctx, "rate", lambda text: text), source=f"{IB_CLASS}/*/ports/*/rate")


IB_CLASS = "/sys/class/infiniband"


def _port_attribute(ctx: HostCtx, name: str, conv) -> dict[str, dict[str, str]]:
    """``{rdma device: {port: conv(text)}}`` for one attribute file of every port of every RDMA device."""
    out: dict[str, dict[str, str]] = {}
    for dev in listdir_kept(ctx.src, IB_CLASS):
        for port in listdir_kept(ctx.src, f"{IB_CLASS}/{dev}/ports"):
            text = ctx.src.read_line(f"{IB_CLASS}/{dev}/ports/{port}/{name}")
            if text:
                out.setdefault(dev, {})[port] = conv(text)
    return out


BCM_LINKS = "/sys/kernel/pci_switch_link/virtual_switch_links"


def bcm_switch_links_fact(ctx: HostCtx) -> Fact:
    """``{switch port: [peer switch ports]}``: the virtual links the Broadcom switch driver publishes between
    PEX switches, as NCCL reads them (v2.30.7 ``os/linux.cc:676-704``, first v2.22.3 ``xml.cc:410-429``): for a
    function of vendor 0x1000, every entry of ``virtual_switch_links/<busid>/`` that names a PCI function."""
    from gdrcheck.model import is_bdf

    out: dict[str, list] = {}
    if not ctx.src.listdir(BCM_LINKS):  # no Broadcom switch driver: nothing to look up per switch port
        return Fact(out, source=BCM_LINKS)
    for d in ctx.devices:
        if d.vendor != 0x1000 or not d.is_bridge:
            continue
        peers = [n for n in listdir_kept(ctx.src, f"{BCM_LINKS}/{d.bdf}")
                 if len(n) == 12 and is_bdf(n) and ctx.src.exists(f"/sys/bus/pci/devices/{n}")]
        if peers:
            out[d.bdf] = sorted(peers)
    return Fact(out, source=BCM_LINKS)


def rdma_port_states_fact(ctx: HostCtx) -> Fact:
    """``{rdma device: {port: state}}`` from /sys/class/infiniband/*/ports/*/state (``4: ACTIVE``): NCCL's IB
    transport lists only ACTIVE ports (v2.30.7 ``net_ib/init.cc:363``; v2.18.1 ``net_ib.cc:210``)."""
    return Fact(_port_attribute(ctx, "state", lambda text: text.split(":", 1)[-1].strip()),
                source=f"{IB_CLASS}/*/ports/*/state")
