"""One-line outputs for the engines that run gdrcheck: NHC/Slurm, Node Problem Detector, Nagios.

Each is a pure function of the ``pairs`` document (the same one ``--json``
prints) and returns ``(text, status word)``; :func:`gdrcheck.status.exit_status`
maps the word to the engine's exit status (docs/fleet.md has the table).

* NHC: silent on success, one line on failure, code first (it becomes the Slurm
  drain reason ``NHC: check_gdr: GDR040 ...``); the contract's status is kept and
  the NHC check decides what 3 means.
* NPD custom plugin: always one line of at most 80 bytes; 0 OK, 1 problem,
  2 unknown (NPD treats anything else as unknown, so 3 becomes 2).
* Nagios: ``GDRCHECK OK - ... | perfdata`` then the findings; 0 OK, 1 WARNING
  (warning findings), 2 CRITICAL (error findings), 3 UNKNOWN.
"""

from __future__ import annotations

from gdrcheck.status import STATUS_WORDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def nhc(doc: dict[str, Any]) -> tuple[str, str]:
    word = doc["status"]
    return ("" if word == "pass" else doc["summary_line"] + "\n"), word


def npd(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["summary_line"] + "\n", doc["status"]


def _counts(doc: dict[str, Any]) -> dict[str, int]:
    verdicts = doc.get("summary", {}).get("verdicts", {})
    return {v: int(verdicts.get(v, 0)) for v in ("ok", "degraded", "fail", "unknown")}


def nagios(doc: dict[str, Any]) -> tuple[str, str]:
    sev = {s: sum(f.get("folded", 1) for f in doc["findings"] if f["severity"] == s)
           for s in ("error", "warning", "info")}
    # the node's status decides (fail: CRITICAL, unknown: UNKNOWN); a passing node with warnings below
    # --fail-on is Nagios' WARNING
    from gdrcheck.status import NAGIOS_STATES

    word = "warning" if doc["status"] == "pass" and sev["warning"] else doc["status"]
    state = NAGIOS_STATES[word]
    headline = doc["summary_line"]
    if state == "WARNING" and doc["status"] == "pass":
        headline = _headline([f for f in doc["findings"] if f["severity"] == "warning"], doc.get("rules") or {})
    c = _counts(doc)
    perf = (f"pairs={len(doc['pairs'])};;;0 ok={c['ok']};;;0 degraded={c['degraded']};;;0 fail={c['fail']};;;0 "
            f"unknown={c['unknown']};;;0 errors={sev['error']};;;0 warnings={sev['warning']};;;0")
    lines = [f"GDRCHECK {state} - {_no_pipe(headline)} | {perf}"]
    lines += [_no_pipe(f"{f['code']} {f['severity']}: {f['message']}") for f in doc["findings"]
              if f["severity"] in ("error", "warning")]
    return "\n".join(lines) + "\n", word


def _no_pipe(text: str) -> str:
    """Text of a Nagios line with no ``|``: Nagios reads what follows one as performance data, so a ``|`` in a
    name or a setting from the input (``NCCL_SOCKET_IFNAME=eth0|ok=1``) could add figures of its own."""
    return text.replace("|", "/")


def _headline(findings: list[dict[str, Any]], rules: dict[str, Any]) -> str:
    """Code first, like the summary line: the first finding's code, rule name (from the document's
    ``rules``) and subject (+N more)."""
    from gdrcheck.documents.pairs import headline

    first = sorted(findings, key=lambda f: f["code"])[0]
    name = (rules.get(first["code"]) or {}).get("name")
    return headline(first["code"], name or first["severity"], first["subject"],
                    sum(f.get("folded", 1) for f in findings) - 1)


ENGINES = {"nhc": nhc, "npd": npd, "nagios": nagios}  # an engine's format -> its line of the pairs document


def engine_line(fmt: str, doc: dict[str, Any]) -> tuple[str, str]:
    """The line (and status word) the engine ``fmt`` reads of the pairs document."""
    return ENGINES[fmt](doc)


def cut_short_line(fmt: str, doc: dict[str, Any]) -> str:
    """What an engine reads when the run's ``--timeout`` ran out before any answer (the timeout document): its
    summary line, as Nagios' UNKNOWN for Nagios."""
    from gdrcheck.status import NAGIOS_STATES

    if fmt == "nagios":
        return f"GDRCHECK {NAGIOS_STATES['unknown']} - {doc['summary_line']}\n"
    return doc["summary_line"] + "\n"


def usage_line(fmt: str, message: str) -> str:
    """What an engine reads when gdrcheck could not run (bad usage, unreadable input): one line."""
    from gdrcheck.documents.pairs import _fit

    if fmt == "nagios":
        from gdrcheck.status import NAGIOS_STATES

        return f"GDRCHECK {NAGIOS_STATES['unknown']} - " + _no_pipe(_fit("gdrcheck error: " + message)) + "\n"
    return _fit("gdrcheck error: " + message) + "\n"


def _first_said(f: dict[str, Any]) -> str:
    """A finding's message; a folded one's without the count of pairs like it (the line counts them all)."""
    from gdrcheck.rules.base import folded_suffix

    msg = f["message"]
    suffix = folded_suffix(f["folded"]) if f.get("folded") else ""
    return msg[: -len(suffix)] if suffix and msg.endswith(suffix) else msg


def check_text(doc: dict[str, Any], width: Optional[int] = None) -> tuple[str, str]:
    """The gate as a person reads it: the verdict line, then each finding with where to read the fix. ``width``:
    a terminal's, to wrap each line to (a finding's under its message); None in a log, one line each."""
    word = STATUS_WORDS[doc["status"]]
    host = doc.get("host") or "this input"
    from gdrcheck.documents.capabilities import capability_brief, capability_lines
    from gdrcheck.documents.expected import expected_if, otherwise_line

    exp = expected_if(doc)
    brief = capability_brief(doc)
    if brief:  # the question first: will GPUDirect RDMA, P2P and GDS be used here; then the gate and why
        lines: list[str] = [f"gdrcheck {word} on {host}: {brief}", *capability_lines(doc)]
        other = otherwise_line(doc)
        lines += [other] if other else []
        lines += [f"gate: {exp}", f"why {word}: {why_line(doc)}"] if exp else [f"gate: {doc['summary_line']}"]
    elif exp:
        lines = [f"gdrcheck {word} on {host}; {exp}", f"why {word}: {why_line(doc)}"]
    else:
        lines = [f"gdrcheck {word} on {host}: {doc['summary_line']}"]
    c = _counts(doc)
    lines.append("pairs: " + ", ".join(f"{n} {v}" for v, n in c.items() if n) if doc["pairs"] else "pairs: none")
    shown = [f for f in doc["findings"] if f["severity"] != "info" or f.get("effect") == "unknown"]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for f in shown:  # one line per code and severity: the first finding, and how many more say the same
        groups.setdefault((f["code"], f["severity"]), []).append(f)
    order = {"error": 0, "warning": 1, "info": 2}
    for (fcode, sev), items in sorted(groups.items(), key=lambda kv: (order[kv[0][1]], kv[0][0])):
        n = sum(f.get("folded", 1) for f in items) - 1
        more = f" (+{n} more like it)" if n else ""
        lines.append(f"  {fcode} {sev:<7} {_first_said(items[0])}{more}")
    quiet = sum(f.get("folded", 1) for f in doc["findings"]) - sum(f.get("folded", 1) for f in shown)
    if quiet:
        lines.append(f"  ({quiet} informational finding{'s' if quiet > 1 else ''}: gdrcheck pairs shows them)")
    if shown:
        lines.append("fixes: gdrcheck explain CODE")
    if width:
        from gdrcheck.render.layout import wrap

        lines = [piece.plain.rstrip() for line in lines
                 for piece in wrap(line, width, _FINDING_HANG if line.startswith("  GDR") else 2)]
    return "\n".join(lines) + "\n", doc["status"]


def why_line(doc: dict[str, Any]) -> str:
    """Why a node is undecided: the facts that are missing, each with the command that shows it (the
    document's ``missing``); the summary line where nothing is missing (a failure, a timeout)."""
    missing = doc.get("missing") or []
    if doc["status"] != "unknown" or not missing or doc.get("timed_out"):
        return doc["summary_line"]
    return "not in this input: " + "; ".join(f"{m['fact']} ({m['code']}: {m['settle']})" for m in missing)


_FINDING_HANG = len("  GDR000 warning ")  # a finding's continuation lines start under its message
