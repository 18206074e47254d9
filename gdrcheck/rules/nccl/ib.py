"""Which RDMA devices and ports NCCL's IB transport lists: ``NCCL_IB_HCA`` and the ports' state.

Sources (``NVIDIA/nccl``; line numbers at the tag named):
* ``NCCL_IB_HCA``: v2.30.7 ``src/transport/net_ib/init.cc:313-322, 365-367`` (``^`` excludes, then ``=`` exact
  names, else prefixes); its entries, ``parseStringList`` ``src/misc/utils.cc:193-215`` (``name:port``, the
  port ``atoi``-ed, absent or empty -1), matched per port by ``matchIfList`` ``utils.cc:224-243`` (a port of -1
  on either side matches every port). A device is used when one of its ACTIVE ports is listed.
* only ACTIVE ports are listed: v2.30.7 ``net_ib/init.cc:363``, v2.18.1 ``net_ib.cc:210``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Tuple


def _atoi(text: str) -> int:
    i = 0
    while i < len(text) and text[i] in " \t\n\v\f\r":
        i += 1
    j = i + (1 if text[i:i + 1] in ("+", "-") else 0)
    k = j
    while k < len(text) and text[k].isdigit():
        k += 1
    return int(text[i:k]) if k > j else 0


def parse_hca(spec: str) -> Tuple[bool, bool, List[Tuple[str, int]]]:
    """(exclude, exact, [(name or prefix, port or -1)]) as NCCL reads ``NCCL_IB_HCA``."""
    s = spec
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    items = []
    for entry in (e for e in s.split(",") if e):
        parts = entry.split(":")
        if not parts[0]:
            continue
        port = _atoi(parts[1]) if len(parts) > 1 and parts[1] != "" else -1
        items.append((parts[0], port))
    return exclude, exact, items


def _listed(name: str, port: Optional[int], exact: bool, items: List[Tuple[str, int]]) -> Optional[bool]:
    """``matchIfList`` for one port; None when the port is not known and the answer depends on it."""
    if not items:
        return True
    hit, depends = False, False
    for prefix, want in items:
        if not (name == prefix if exact else name.startswith(prefix)):
            continue
        if want == -1 or port == want:
            hit = True
        elif port is None:
            depends = True
    return True if hit else None if depends else False


def hca_match(spec: str, names: Tuple[str, ...], ports: Mapping[str, Mapping[str, str]]) -> Optional[bool]:
    """Whether ``NCCL_IB_HCA=spec`` leaves NCCL one of the NIC's ports. ``ports``: ``{device: {port: state}}`` as
    the input shows them (ACTIVE ones count; none shown: the port is not known)."""
    if not names:
        return None
    exclude, exact, items = parse_hca(spec)
    seen: List[Optional[bool]] = []
    for dev in names:
        shown = ports.get(dev) or {}
        active = [int(p) for p, s in shown.items() if str(p).isdigit() and s == "ACTIVE"]
        for port in (active or ([None] if not shown else [])):
            got = _listed(dev, port, exact, items)
            seen.append(None if got is None else (got != exclude))
    if any(seen):
        return True
    return None if any(s is None for s in seen) else False


def ports_down(snap, rdma: Tuple[str, ...]) -> str:
    """The NIC's RDMA ports and their states, when every port is shown and none is ACTIVE; else ''."""
    states = port_states(snap)
    seen = [(dev, port, s) for dev in rdma for port, s in sorted((states.get(dev) or {}).items())]
    if not rdma or not seen or any(dev not in states for dev in rdma) or any(s == "ACTIVE" for _d, _p, s in seen):
        return ""
    return ", ".join(f"{dev} port {port} ({s})" for dev, port, s in seen)


def port_states(snap) -> Dict[str, Dict[str, str]]:
    f = snap.host.get("rdma_port_states")
    return f.value if f is not None and isinstance(f.value, dict) else {}
