"""Which NCCL judges the node, and the settings in force for it: the versions found on the node (library, pip
wheel, PyTorch's requirement, a container's NCCL_VERSION), the one chosen and why, and the environment and
settings files applied as that version reads them (:mod:`gdrcheck.rules.nccl.settings`).

Pure: each function takes the snapshot or values it reads.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record
from gdrcheck.rules.nccl.core import NEWEST, parse_version, version_str
from gdrcheck.rules.nccl.settings import NcclSettings, effective_env, settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version


def versions_found(snap) -> list[dict[str, object]]:
    found = host_record(snap, "nccl_versions", known_only=True)
    out: list[dict[str, object]] = []
    if found is not None:
        out = [dict(e) for e in found.get("found", ())]
    # NVIDIA's containers record the NCCL they ship as NCCL_VERSION in their environment
    env = _recorded_env(snap)
    v = env.get("NCCL_VERSION") if env else None
    if v and not any(str(e.get("version")) == v for e in out):
        try:
            parse_version(v)
        except ValueError:
            return out
        out.append({"version": v, "kind": "environment", "where": "NCCL_VERSION in the environment"})
    return out


def _recorded_env(snap) -> dict[str, str]:
    conf = host_record(snap, "nccl_conf", known_only=True)
    if conf is not None and isinstance(conf.get("env"), dict):
        return conf["env"]
    env = host_record(snap, "nccl_env")
    if env is not None:
        return {k: str(v["value"]) if isinstance(v, dict) and "value" in v else str(v) for k, v in env.items()}
    return {}


def choose_version(requested, found: list[dict[str, object]]) -> tuple[Version, str]:
    """``requested``: ``--nccl-version``'s Version (or a version's text: another found, a job's log)."""
    if requested:
        return (requested if isinstance(requested, tuple) else parse_version(requested)), "--nccl-version"
    good = []
    for e in found:
        try:
            good.append((parse_version(str(e["version"])), e))
        except ValueError:
            continue
    if good:
        v, e = max(good, key=lambda x: x[0])
        return v, f"the newest NCCL found on the node ({e['kind']}: {e['where']})"
    return NEWEST, (f"no NCCL found on the node (library, pip wheel or PyTorch): the newest rules gdrcheck knows "
                    f"({version_str(NEWEST)})")


DEV_BRANCH = "2.31.0a7"  # NVIDIA/nccl's dev branch: the newest source public beside the v2.30.7 tag


def beyond_modelled(version: Version) -> Optional[str]:
    """What a version newer than the newest release gdrcheck models means for its rules, whichever way the
    version arrived (``--nccl-version``, a job's log, the node); None for a modelled one."""
    if version <= NEWEST:
        return None
    return (f"NCCL {version_str(version)} is newer than the newest release gdrcheck models "
            f"({version_str(NEWEST)}): each rule is {version_str(NEWEST)}'s where neither the release notes nor "
            f"NCCL's development branch ({DEV_BRANCH}) change it, and unknown where the branch does (the CPU "
            "link bandwidth of AMD and of Intel Granite Rapids/Sierra Forest)")


def with_beyond_modelled(version: Version, reason: str) -> str:
    """``reason`` with :func:`beyond_modelled`'s note after it."""
    note = beyond_modelled(version)
    return f"{reason}; {note}" if note else reason


def settings_for(snap, version: Version, options_env: Mapping[str, str], cpu: Optional[str], n_gpus: int,
                 version_reason: str, job_gpus: Optional[int] = None) -> NcclSettings:
    conf = host_record(snap, "nccl_conf", known_only=True)
    if conf is not None:
        v = conf
        got, read = effective_env(version, v.get("env"), v.get("env_source") or "environment",
                                  v.get("files") or {}, v.get("home") or {}, options_env)
        env = {k: s.value for k, s in got.items()}
        sources = {k: s.source for k, s in got.items()}
    else:  # an input without the raw layers: the collected values (newest file rules) and the options
        env, sources, read = {}, {}, []
        for k, val in (host_record(snap, "nccl_env") or {}).items():
            env[k] = str(val["value"]) if isinstance(val, dict) and "value" in val else str(val)
            sources[k] = val.get("source", "") if isinstance(val, dict) else ""
        for k, val in options_env.items():
            env[k], sources[k] = val, "gdrcheck options"
    from gdrcheck.rules.nccl.job_log import JOB_LOG, job_settings

    for k, val in job_settings(snap).items():  # what the job's log reports set reached the options: say so
        if options_env.get(k) == val and sources.get(k) == "gdrcheck options":
            sources[k] = JOB_LOG
    return settings(version, env, cpu, n_gpus, sources=sources, version_reason=version_reason, files_read=read,
                    job_gpus=job_gpus)
