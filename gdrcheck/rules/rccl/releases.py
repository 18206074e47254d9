"""Which RCCL judges an AMD node, and whether a node is RCCL's.

RCCL numbers its releases after the NCCL release it is merged with (``CHANGELOG.md``: "RCCL 2.20.5 for ROCm
6.2.0 ... Compatibility with NCCL 2.20.5"); its log names it in ``RCCL version 2.20.5+hip6.2``
(``src/init.cc:686@rocm-6.2.2``) or ``RCCL version : 2.21.5`` (``src/init.cc:719`` on develop). The releases
modelled are those read at a named tag of ``ROCm/rccl``:

* RCCL 2.18.6, ROCm 6.1 (tag ``rocm-6.1.0``);
* RCCL 2.20.5, ROCm 6.2 (tags ``rocm-6.2.0`` to ``rocm-6.2.2``);
* RCCL 2.21.5, ROCm 6.3 (``develop`` at ``0cbce2a7``, the ``release-staging/rocm-rel-6.3`` branch; the
  ``rocm-6.3.x`` tags are not in the repository, which moved into ``ROCm/rocm-systems``).

A node is RCCL's when its GPUs are AMD's (PCI vendor 0x1002), or its input is RCCL's: an RCCL topology dump
(``<gpu gcn>``, ``<xgmi>`` links) or an RCCL log.

Pure: each function takes the snapshot and topology it reads.
"""

from __future__ import annotations

from gdrcheck.host_facts import host_record, host_value
from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from gdrcheck.rules.nccl.core import Version

AMD_GPU_VENDOR = 0x1002


@record(frozen=True)
class Release:
    version: Version  # RCCL's own number
    nccl_base: Version  # the NCCL release it is merged with (its path types and level names)
    rocm: str
    tag: str  # where gdrcheck read it: the tag, or the branch and commit


RELEASES = (
    Release((2, 18, 6), (2, 18, 6), "6.1", "rocm-6.1.0"),
    Release((2, 20, 5), (2, 20, 5), "6.2", "rocm-6.2.2"),
    Release((2, 21, 5), (2, 21, 5), "6.3", "develop@0cbce2a7"),
)
NEWEST = RELEASES[-1]


def vstr(v: Version) -> str:
    from gdrcheck.rules.nccl.core import version_str

    return version_str(v)


def label(r: Release) -> str:
    """``RCCL 2.20.5 (NCCL 2.20.5 base)``: the words the document and the text use."""
    return f"RCCL {vstr(r.version)} (NCCL {vstr(r.nccl_base)} base)"


def rccl_reason(snap, topo, log_library: Optional[str] = None) -> Optional[str]:
    """Why the node is judged with RCCL's rules; None when it is not RCCL's."""
    gpus = [topo.by_bdf[b] for b in topo.of_kind("gpu")]
    amd = [d.bdf for d in gpus if d.vendor == AMD_GPU_VENDOR]
    if amd:
        return f"AMD GPUs (PCI vendor 0x1002: {', '.join(amd[:2])}{' ...' if len(amd) > 2 else ''})"
    for d in gpus:
        attrs = d.extra.get("nccl_gpu") if d.extra else None
        if attrs and attrs.get("gcn"):
            return f"RCCL's topology dump (<gpu gcn=\"{attrs.get('gcn')}\"> on {d.bdf})"
        if d.extra and d.extra.get("xgmi"):
            return f"RCCL's topology dump (<xgmi> links on {d.bdf})"
    if log_library == "rccl":
        return "the job's log is RCCL's (its 'RCCL version' line)"
    return None


def newer_than_modelled(requested: Optional[str]) -> bool:
    """Whether the release asked for (a log's or ``--nccl-version``) is newer than the newest modelled."""
    from gdrcheck.rules.nccl.core import parse_version

    try:
        v = parse_version(str(requested or "").split("+")[0].strip(), floor=False)
    except ValueError:
        return False
    return v is not None and v > NEWEST.version


def choose(requested: Optional[str]) -> tuple[Release, str]:
    """The release that judges: the job's log or ``--nccl-version`` (read as RCCL's number), else the newest
    modelled. A number between releases is judged with the newest modelled one at or below it."""
    from gdrcheck.rules.nccl.core import parse_version

    if requested:
        try:
            v = parse_version(str(requested).split("+")[0].strip(), floor=False)
        except ValueError:
            v = None
        if v is not None:
            at_or_below = [r for r in RELEASES if r.version <= v]
            r = at_or_below[-1] if at_or_below else RELEASES[0]
            if r.version == v:
                return r, f"RCCL {vstr(v)} asked for ({requested})"
            if not at_or_below:
                return r, (f"RCCL {vstr(v)} asked for ({requested}) is older than the oldest release modelled: "
                           f"judged with {vstr(r.version)}")
            return r, (f"RCCL {vstr(v)} asked for ({requested}): judged with {vstr(r.version)}, the newest release "
                       "modelled at or below it")
    return NEWEST, (f"no RCCL release named (an RCCL log or --nccl-version): the newest release modelled, "
                    f"RCCL {vstr(NEWEST.version)} of ROCm {NEWEST.rocm}")


def _log(snap):
    """The job's log (:class:`gdrcheck.collectors.pastes.nccl_log.NcclLog`) the host fact ``nccl_log`` holds."""
    record = host_record(snap, "nccl_log")
    return record.get("log") if record is not None else host_value(snap, "nccl_log")


def log_library(snap) -> Optional[str]:
    """``rccl`` where the job's log (the host fact ``nccl_log``) is RCCL's."""
    return getattr(_log(snap), "library", None)


def log_release(snap) -> tuple[Optional[str], str]:
    """(the release an RCCL log names, why) ; (None, "") where the log is not RCCL's or names none."""
    value = _log(snap)
    version = getattr(value, "rccl_version", None)
    if log_library(snap) != "rccl" or not version:
        return None, ""
    return version, f"the job's RCCL log ({getattr(value, 'label', 'log')}): RCCL {version}"


_ASKED: list = []  # [(snapshot, topology, answer)]: the last node asked, by identity (rules ask it per pair)


def node_reason(snap, topo) -> Optional[str]:
    """:func:`rccl_reason` of a node, its log included, asked once per snapshot and topology."""
    if _ASKED and _ASKED[0][0] is snap and _ASKED[0][1] is topo:
        return _ASKED[0][2]
    got = rccl_reason(snap, topo, log_library(snap))
    _ASKED[:] = [(snap, topo, got)]
    return got
