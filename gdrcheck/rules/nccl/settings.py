"""How NCCL reads its settings, per version: files, environment, numbers and level names.

Sources (``NVIDIA/nccl``):
* settings files, ``src/misc/param.cc``: v2.18.1 ``:25-60`` and v2.22.3 ``:25-60`` (``~/.nccl.conf`` from
  ``getpwuid(getuid())->pw_dir`` (``:21``), then ``/etc/nccl.conf``; no ``NCCL_CONF_FILE``); v2.23.4
  ``:51-66`` (a non-empty ``NCCL_CONF_FILE`` replaces ``~/.nccl.conf``); v2.26.2 ``:35`` (lines starting with
  ``#`` skipped); v2.30.3 ``:23-24, 36-37`` (``$HOME``; a trailing ``\\r`` stripped). Each line is
  ``NAME=value`` split at the first ``=``, nothing trimmed, applied with ``setenv(..., 0)``: the environment
  wins, then the first file, and inside a file the first line.
* numbers, ``ncclLoadParam`` v2.30.7 ``param.cc:89-102`` (v2.18.1 ``:62-81``): an empty value keeps the
  default; otherwise ``strtoll(str, NULL, 0)`` (base 0: ``0x`` hex, leading ``0`` octal, non-numeric text
  is 0), and only ``ERANGE`` falls back to the default.
* levels, ``ncclGetLevel`` v2.30.7 ``src/graph/paths.cc:243-281`` (same logic since v2.8.4
  ``paths.cc:207-240``): ``NCCL_P2P_DISABLE`` is ``strtol(str, NULL, 0)`` into an ``int`` and only ``== 1``
  means LOC; a level is ``strcmp``-ed with ``topoPathTypeStr[0..SYS]`` of that version (case-sensitive, no
  trimming); else a value whose first character is a digit is ``strtol(str, NULL, 0)``, clamped to 5 and
  mapped with ``levelsOldToNew`` (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4-5 SYS); anything else keeps the default.
"""

from __future__ import annotations

from gdrcheck.record import field, record
from gdrcheck.rules.nccl.core import HONOURED_ENV, LEGACY_LEVELS, NEWEST, path_order, version_str

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version

_SPACE = " \t\n\v\f\r"


def c_strtol(text: str, bits: int = 64) -> tuple[int, bool]:
    """C's ``strtol(text, NULL, 0)`` / ``strtoll``: the value and whether it overflowed (``ERANGE``)."""
    i, n = 0, len(text)
    while i < n and text[i] in _SPACE:
        i += 1
    sign = 1
    if i < n and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    base = 10
    if text[i:i + 2] in ("0x", "0X") and i + 2 < n and text[i + 2] in "0123456789abcdefABCDEF":
        base, i = 16, i + 2
    elif text[i:i + 1] == "0":
        base = 8
    digits = "0123456789abcdef"[:base]
    value = 0
    while i < n and text[i].lower() in digits:
        value = value * base + digits.index(text[i].lower())
        i += 1
    value *= sign
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if value > hi:
        return hi, True
    if value < lo:
        return lo, True
    return value, False


def to_c_int(value: int) -> int:
    """A ``long`` stored into an ``int`` (two's complement truncation, as gcc does on x86_64 and arm64)."""
    return ((value + (1 << 31)) % (1 << 32)) - (1 << 31)


def param(env: Mapping[str, str], name: str, default: int) -> tuple[int, str]:
    """``ncclLoadParam``: the value NCCL uses for ``NCCL_<name>`` and how it got it."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default, "NCCL default"
    value, erange = c_strtol(raw)
    if erange:
        return default, f"{name}={raw!r} is out of range: NCCL default"
    return value, f"{name}={raw}"


def parse_level(value: Optional[str], version: Version = NEWEST) -> Optional[str]:
    """``NCCL_*_LEVEL`` as ``ncclGetLevel`` of ``version`` reads it; None when NCCL ignores it."""
    if value is None:
        return None
    names = path_order(version)
    if value in names:
        return value
    if value[:1].isdigit() and value[0] in "0123456789":
        old = to_c_int(c_strtol(value)[0])
        if old < 0:  # an int overflow: levelsOldToNew[negative] is undefined behaviour in NCCL
            return None
        return LEGACY_LEVELS[min(old, 5)]
    return None


def p2p_disabled(env: Mapping[str, str]) -> bool:
    raw = env.get("NCCL_P2P_DISABLE")
    return raw is not None and to_c_int(c_strtol(raw)[0]) == 1


# ---------------------------------------------------------------------------
# settings files


def conf_file_lines(text: str, version: Version) -> dict[str, str]:
    """``setEnvFile`` of ``version``: NAME -> value, first definition wins."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if version >= (2, 30, 3) and line.endswith("\r"):
            line = line[:-1]
        if version >= (2, 26, 0) and line.startswith("#"):
            continue
        if "=" not in line:
            continue
        name, value = line.split("=", 1)
        out.setdefault(name[:1023], value[:1023])
    return out


def conf_files(version: Version, env: Mapping[str, str], home: Mapping[str, Optional[str]]) -> list[str]:
    """The settings files ``version`` reads, in order. ``home``: ``{"HOME": ..., "pw_dir": ...}``."""
    files: list[str] = []
    user = env.get("NCCL_CONF_FILE") if version >= (2, 23, 0) else None
    if user:
        files.append(user)
    else:
        d = home.get("HOME") if version >= (2, 30, 3) else home.get("pw_dir")
        if d:
            files.append(f"{d}/.nccl.conf")
    files.append("/etc/nccl.conf")
    return files


@record(frozen=True)
class Setting:
    value: str
    source: str
    shadowed: tuple[tuple[str, str], ...] = ()


def effective_env(version: Version, env: Optional[Mapping[str, str]], env_source: str,
                  files: Mapping[str, Optional[str]], home: Mapping[str, Optional[str]],
                  options_env: Mapping[str, str]) -> tuple[dict[str, Setting], list[str]]:
    """Every ``NCCL_*`` setting ``version`` sees, with where it came from, and the files it read.

    ``files``: path -> text (None when absent) for every candidate file the collector read. The options'
    settings (``--env``-like) count as the job's environment and win over everything."""
    layers: list[tuple[str, Mapping[str, str]]] = []
    if options_env:
        layers.append(("gdrcheck options", dict(options_env)))
    base_env = dict(env or {})
    if env is not None:
        layers.append((env_source, {k: v for k, v in base_env.items() if k.startswith("NCCL_")}))
    lookup = dict(base_env)
    lookup.update(options_env)
    read: list[str] = []
    for path in conf_files(version, lookup, home):
        text = files.get(path)
        if text is None:
            continue
        read.append(path)
        layers.append((path, conf_file_lines(text, version)))
    out: dict[str, Setting] = {}
    names = sorted({k for _, vals in layers for k in vals if k.startswith("NCCL_")})
    for name in names:
        hits = [(where, vals[name]) for where, vals in layers if name in vals]
        where, value = hits[0]
        out[name] = Setting(value, where, tuple((w, v) for w, v in hits[1:]))
    return out, read


# ---------------------------------------------------------------------------
# the settings in force


@record(frozen=True)
class NcclSettings:
    """NCCL's effective settings for this node at one version, and where they came from."""

    version: Version
    gdr_level: str  # NCCL_NET_GDR_LEVEL in force (the default of the version when unset)
    gdr_level_source: str
    p2p_levels: tuple[str, ...]  # the level for a communicator of every GPU of the node; where it rests on a
    # fact the input does not show (the CPU vendor, the job's GPU count), each level it may be
    p2p_level_source: str
    gdr_read: Optional[int]  # NCCL_NET_GDR_READ as NCCL reads it; None when unset (-2, auto)
    ignore_disabled_p2p: int
    dmabuf_enabled: bool
    overrides: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=dict)  # every NCCL_* value in force
    sources: Mapping[str, str] = field(default_factory=dict)
    user_p2p_level: Optional[str] = None  # NCCL_P2P_DISABLE / NCCL_P2P_LEVEL when they decide
    user_gdr_level: Optional[str] = None
    version_reason: str = ""
    files_read: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()  # settings NCCL ignores as written (unknown level names ...)

    def param(self, name: str, default: int) -> int:
        return param(self.env, name, default)[0]

    @property
    def p2p_level(self) -> str:
        """The P2P level as the JSON contract writes it: ``PXB``, or ``PXB|SYS`` where it is one of several."""
        return "|".join(self.p2p_levels)

    @property
    def p2p_check_level(self) -> Optional[str]:
        """The level a GPU pair's path type is held to: NCCL_P2P_DISABLE / NCCL_P2P_LEVEL where they decide, else
        the default; None where the default rests on a fact the input does not show ("A|B")."""
        return self.user_p2p_level or (self.p2p_levels[0] if len(self.p2p_levels) == 1 else None)


def gdr_default_level(version: Version, env: Mapping[str, str]) -> tuple[str, str]:
    """v2.30.7 ``paths.cc:511`` (2.29.2+): P2C when ``NCCL_NET_GDR_C2C`` (default 1, v2.27.3 ``paths.cc:386``;
    0 in v2.26.2 ``paths.cc:381``), else PXB; up to 2.28 always PXB (v2.28.9 ``ncclTopoCheckGdr``)."""
    if version >= (2, 29, 0):
        c2c, how = param(env, "NCCL_NET_GDR_C2C", 1)
        if c2c:
            return "P2C", "NCCL default: P2C while NCCL_NET_GDR_C2C is on, PXB on machines without C2C"
        return "PXB", f"NCCL default with {how}"
    return "PXB", "NCCL default"


def settings(version: Version, env: Mapping[str, str], cpu_vendor: Optional[str] = None,
             n_gpus: int = 0, sources: Optional[Mapping[str, str]] = None, version_reason: str = "",
             files_read: Sequence[str] = (), job_gpus: Optional[int] = None) -> NcclSettings:
    """The settings of ``version`` given the values in force (``env``: NAME -> value, files applied);
    ``job_gpus``: the node's GPUs in the job's communicator, where known."""
    from gdrcheck.rules.nccl.cpu import cpu_kind
    from gdrcheck.rules.nccl.p2p import default_p2p_level

    sources = dict(sources or {})
    ignored: list[str] = []
    overrides = {k: env[k] for k in HONOURED_ENV if k in env and env[k] != ""}
    user_gdr = parse_level(env.get("NCCL_NET_GDR_LEVEL"), version)
    if env.get("NCCL_NET_GDR_LEVEL") is not None and user_gdr is None:
        ignored.append(f"NCCL_NET_GDR_LEVEL={env['NCCL_NET_GDR_LEVEL']!r} (not a level name of NCCL "
                       f"{version_str(version)}: the default is kept)")
    if user_gdr:
        gdr_level, gdr_src = user_gdr, f"NCCL_NET_GDR_LEVEL={env['NCCL_NET_GDR_LEVEL']}"
    else:
        gdr_level, gdr_src = gdr_default_level(version, env)
    user_p2p: Optional[str] = None
    if p2p_disabled(env):
        user_p2p, p2p_src = "LOC", f"NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']}"
    else:
        user_p2p = parse_level(env.get("NCCL_P2P_LEVEL"), version)
        p2p_src = f"NCCL_P2P_LEVEL={env.get('NCCL_P2P_LEVEL')}" if user_p2p else ""
        if env.get("NCCL_P2P_LEVEL") is not None and user_p2p is None:
            ignored.append(f"NCCL_P2P_LEVEL={env['NCCL_P2P_LEVEL']!r} (not a level name of NCCL "
                           f"{version_str(version)}: the default is kept)")
    if user_p2p:
        p2p_levels: tuple[str, ...] = (user_p2p,)
    else:
        d = default_p2p_level(version, cpu_kind(cpu_vendor), n_gpus, job_gpus)
        p2p_levels = (d.level,) if d.level else tuple(sorted({lv for lv, _ in d.alternatives}))
        p2p_src = d.reason
    gdr_read = env.get("NCCL_NET_GDR_READ")
    return NcclSettings(
        version=version, gdr_level=gdr_level, gdr_level_source=gdr_src, p2p_levels=p2p_levels,
        p2p_level_source=p2p_src,
        gdr_read=param(env, "NCCL_NET_GDR_READ", -2)[0] if gdr_read not in (None, "") else None,
        ignore_disabled_p2p=param(env, "NCCL_IGNORE_DISABLED_P2P", 0)[0],
        dmabuf_enabled=param(env, "NCCL_DMABUF_ENABLE", 1)[0] != 0,
        overrides=overrides, env=dict(env), sources=sources, user_p2p_level=user_p2p, user_gdr_level=user_gdr,
        version_reason=version_reason, files_read=tuple(files_read), ignored=tuple(ignored))
