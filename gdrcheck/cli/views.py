"""What differs between the commands that read a node: which facts, which document, which text, which
status word (and the engine that reads it). :func:`gdrcheck.cli.run.run_view` takes one of these and does
the rest the one way.

Also the small decisions behind options (an NCCL version, a size, ``--require``), so that
:mod:`gdrcheck.cli.commands` only declares commands and options.
"""

from __future__ import annotations

import sys
from importlib import import_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Optional

    from gdrcheck.rules.nccl.core import Version


def env_of(pairs: Sequence[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` given any number of times: NAME -> VALUE, the last one of a name counting."""
    out: dict[str, str] = {}
    for item in pairs or ():
        name, eq, value = item.partition("=")
        if not eq or not name or not name.replace("_", "").isalnum() or name[0].isdigit():
            raise ValueError(f"{item!r} is not NAME=VALUE")
        out[name] = value
    return out


def options_of(nccl_version: Optional[Version], min_bar1: Optional[str] = None,
               bar1_used_max: Optional[float] = None, env: Sequence[str] = ()):
    """The rules' options from the command line (``nccl_version`` as ``--nccl-version``'s callback parsed it);
    a bad value is a usage error naming its option."""
    from gdrcheck.rules import nccl
    from gdrcheck.rules.base import Options

    if nccl_version is not None and nccl_version > nccl.NEWEST:
        sys.stderr.write(f"gdrcheck: note: NCCL {nccl_version} is newer than the newest release gdrcheck "
                         f"knows; judged with the rules of NCCL {nccl.NEWEST}\n")
    kw: dict[str, Any] = {"nccl_version": nccl_version}
    if env:
        kw["env"] = _or_bad_parameter(env_of, env, "--env")  # CUDA_VISIBLE_DEVICES: rules.cuda_visible
    if min_bar1 is not None:
        kw["min_bar1_bytes"] = _or_bad_parameter(size_of, min_bar1, "--min-bar1")
    if bar1_used_max is not None:
        kw["bar1_used_max_pct"] = bar1_used_max
    return Options(**kw)


def _or_bad_parameter(check, text, option: str):
    """``check(text)``, its ValueError a usage error naming ``option`` (click loads only then)."""
    try:
        return check(text)
    except ValueError as e:
        import click

        raise click.BadParameter(str(e), param_hint=option) from None


def size_of(text: str) -> int:
    """``--min-bar1``: bytes; ValueError when it is not a size."""
    from gdrcheck.units import parse_size

    n = parse_size(text)
    if n is None:
        raise ValueError(f"not a size: {text!r} (e.g. 1GiB, 256MiB)")
    return n


def requirements(text: Optional[str]) -> Sequence[str]:
    """``--require``: the capabilities named (gdr, p2p, gds); all three when not given."""
    return _or_bad_parameter(requirements_of, text, "--require")


def requirements_of(text: Optional[str]) -> Sequence[str]:
    """``--require`` as :func:`requirements`; ValueError when it names none or something else."""
    from gdrcheck.pair_classes import PAIR_KIND

    if text is None:
        return ["gdr", "p2p", "gds"]
    caps = [c.strip().lower() for c in text.split(",") if c.strip()]
    bad = [c for c in caps if c not in PAIR_KIND]
    if bad or not caps:
        raise ValueError(f"{text!r}: name one or more of gdr, p2p, gds, comma-separated")
    return caps


def pairs_status(evaluation, fail_on: str) -> str:
    """The status word of an evaluation; on unknown, what is missing goes to stderr."""
    from gdrcheck.documents.pairs import status_and_missing

    word, missing = status_and_missing(evaluation, fail_on)
    if word == "unknown":
        from gdrcheck.collectors.clip import printable

        missing = printable(missing)
        sys.stderr.write("gdrcheck: could not decide every verdict; missing: " + "; ".join(missing[:5])
                         + (f"; and {len(missing) - 5} more" if len(missing) > 5 else "") + "\n")
    return word


class View:
    """The defaults: the facts with the driver's, evaluated by the rules; status pass, read by no engine."""

    want_driver = True
    endpoint_config = False
    cpulists = False  # no node document shows a function's local CPUs (a probe pins by them: it asks)
    redact_text: Optional[bool] = None  # None: as --redact says
    engine = "contract"  # who reads the exit status (gdrcheck.status.exit_status)

    def subject(self, facts, options):
        from gdrcheck.rules.engine import evaluate

        return evaluate(facts, options)

    def prepare(self) -> None:
        """Load what judges the facts and writes the document, while a live run waits for the driver."""
        from gdrcheck.rules import registry

        registry()
        for name in self.prepares:
            import_module(name)

    prepares: tuple[str, ...] = ("gdrcheck.documents.pairs", "gdrcheck.documents.fingerprint",
                                 "gdrcheck.render.json_out")

    def document(self, subject, run):  # a JSON document, or text ready to print
        raise NotImplementedError

    def render_text(self, doc, console) -> None:
        raise NotImplementedError

    def status(self, subject, out) -> str:
        return "pass"


class TopologyView(View):
    def __init__(self, show_all: bool) -> None:
        self.show_all = show_all

    def subject(self, facts, options):
        from gdrcheck.pcie.topology import Topology

        return Topology(facts)

    def prepare(self) -> None:
        import_module("gdrcheck.documents.topology")

    def document(self, topo, run):
        from gdrcheck.documents.topology import topology_doc

        if run.fmt == "json":
            return topology_doc(topo)
        doc = topology_doc(topo, describe_input=True)
        if run.fmt == "dot":
            from gdrcheck.collectors.clip import printable
            from gdrcheck.render.dot import render_dot

            return render_dot(printable(doc), show_all=self.show_all)
        return doc

    def render_text(self, doc, console) -> None:
        from gdrcheck.render.topology_text import render_topology

        render_topology(doc, console, show_all=self.show_all)

    def status(self, topo, out) -> str:
        from gdrcheck.documents.topology import TOPOLOGY_STATUS

        return TOPOLOGY_STATUS


class PairsView(View):
    def __init__(self, fail_on: str) -> None:
        self.fail_on = fail_on

    def document(self, evaluation, run):
        from gdrcheck.documents.pairs import pairs_doc

        return pairs_doc(evaluation, self.fail_on)

    def render_text(self, doc, console) -> None:
        from gdrcheck.render.pairs_text import render_pairs

        render_pairs(doc, console)

    def status(self, evaluation, doc) -> str:
        return pairs_status(evaluation, self.fail_on)


class Bar1View(View):
    endpoint_config = True  # the Resizable BAR capability is in the GPU's config space

    def __init__(self, fail_on: str) -> None:
        self.fail_on = fail_on
        self.word, self.why = "unknown", ""

    def document(self, evaluation, run):
        from gdrcheck.documents.bar1 import bar1_document

        doc, self.why = bar1_document(evaluation.snap, evaluation.topo, evaluation.findings, self.fail_on)
        self.word = doc["status"]
        return doc

    def render_text(self, doc, console) -> None:
        from gdrcheck.render.bar1_text import render_bar1

        render_bar1(doc, console)

    def status(self, evaluation, doc) -> str:
        if self.why:
            from gdrcheck.collectors.clip import printable

            sys.stderr.write(f"gdrcheck: {printable(self.why)}\n")
        return self.word


class CheckView(View):
    """The gate: the pairs document of what is required, in the format a health-check engine reads."""

    def __init__(self, fmt: str, require: Optional[str], per_pair: bool, fail_on: str) -> None:
        self.fmt, self.per_pair, self.fail_on = fmt, per_pair, fail_on
        self.caps, self.required = requirements(require), require is not None
        self.endpoint_config = fmt == "prometheus"
        self.engine = fmt  # nhc, npd and nagios read the exit status their own way
        self.word = "pass"

    def subject(self, facts, options):
        from gdrcheck.rules.engine import restrict

        return restrict(super().subject(facts, options), self.caps, required=self.required)

    def document(self, gate, run):
        from gdrcheck.documents.pairs import pairs_doc

        doc = pairs_doc(gate, self.fail_on)
        if self.fmt in ("json", "jsonl"):
            return doc
        self.word = doc["status"]
        from gdrcheck.collectors.clip import printable

        if self.fmt == "prometheus":
            import time

            from gdrcheck import __version__
            from gdrcheck.documents.node import node_documents
            from gdrcheck.render.prometheus import render_prometheus

            docs = printable(node_documents(gate.whole, pairs=doc))
            return render_prometheus(docs["pairs"], docs["bar1"], docs["topology"], __version__,
                                     time.monotonic() - run.started, time.time(), per_pair=self.per_pair)
        from gdrcheck.render import adapters

        if self.fmt == "text":  # a terminal's lines are wrapped to its width; a log's kept whole
            from gdrcheck.render.console import tty_width

            text, self.word = adapters.check_text(printable(doc), None if run.output else tty_width())
            return text
        text, self.word = adapters.engine_line(self.fmt, printable(doc))
        return text

    def status(self, gate, out) -> str:
        if self.fmt in ("json", "jsonl"):
            return pairs_status(gate, self.fail_on)
        if self.fmt == "text" and self.word == "unknown":
            pairs_status(gate, self.fail_on)  # a person reads it: stderr says what is missing, as pairs does
        return self.word


class FingerprintView(View):
    redact_text = False

    def __init__(self, explain: bool, addresses: bool) -> None:
        self.explain, self.addresses = explain, addresses

    def subject(self, facts, options):
        from gdrcheck.rules.engine import evaluate

        return evaluate(facts)

    def document(self, evaluation, run):
        from gdrcheck.documents.fingerprint import fingerprint, fingerprint_status, one_line

        fp = fingerprint(evaluation)
        if run.fmt == "json":
            from gdrcheck import VIEW_FORMAT_VERSION, __version__

            return {"format_version": VIEW_FORMAT_VERSION, "gdrcheck_version": __version__, **fp.to_doc(),
                    "topology_lines": list(fp.topology_lines), "line": one_line(evaluation, fp),
                    "status": fingerprint_status(evaluation)}
        from gdrcheck.collectors.clip import printable

        if self.explain:  # one line per fact, as `clush --diff` compares them: no value can begin another
            return "\n".join(printable(fp.topology_lines if self.addresses else fp.shape_lines)) + "\n"
        return printable(one_line(evaluation, fp)) + "\n"

    def status(self, evaluation, out) -> str:
        from gdrcheck.documents.fingerprint import fingerprint_status

        word = fingerprint_status(evaluation)
        if word == "unknown":
            sys.stderr.write("gdrcheck: the --timeout ran out; the fingerprint is of what was read in time\n")
        return word


class HtmlView(View):
    """``gdrcheck report``: one page from the node's documents (and a probe's, when given)."""

    endpoint_config = True  # the Resizable BAR capability is in the GPU's config space

    def __init__(self, fail_on: str, probe_file: Optional[str]) -> None:
        self.fail_on = fail_on
        self.progress = None
        self.extra = []
        if probe_file:
            from gdrcheck.collectors.clip import printable
            from gdrcheck.documents.rules import rules_part
            from gdrcheck.probe.html import load_probe, measured_section

            probe = printable(load_probe(probe_file))  # a probe's JSON file is an input too
            codes = [f.get("code") for f in probe.get("findings") or [] if isinstance(f, dict)]
            self.extra.append(measured_section(probe, rules_part(codes)))

    def document(self, evaluation, run):
        from gdrcheck.cli.run import progress_reporter
        from gdrcheck.documents.node import node_documents
        from gdrcheck.render.html_report import render_html

        self.progress, self.output = (progress_reporter() if run.output else None), run.output
        if self.progress:
            self.progress("writing " + run.output)
        from gdrcheck.collectors.clip import printable

        docs = printable(node_documents(evaluation, self.fail_on, describe_input=True))
        return render_html(docs["topology"], docs["pairs"], docs["bar1"], docs["rules"], self.extra)

    def status(self, evaluation, out) -> str:
        from gdrcheck.cli.run import end_progress

        if self.progress:
            end_progress(self.progress)
            sys.stderr.write(f"gdrcheck: wrote {self.output}\n")
        return pairs_status(evaluation, self.fail_on)


def rules_listing(as_json: bool) -> str:
    """``gdrcheck rules``: the registry as lines, or as JSON."""
    from gdrcheck.rules import all_rules

    items = all_rules()
    if as_json:
        from gdrcheck import FORMAT_VERSION, __version__
        from gdrcheck.render.json_out import render_json

        doc = {"format_version": FORMAT_VERSION, "gdrcheck_version": __version__, "rules": [r.to_doc() for r in items]}
        return render_json(pretty=sys.stdout.isatty(), doc=doc)
    import textwrap

    from gdrcheck.render.console import text_width

    tags = {"nccl": "NCCL", "nvidia-docs": "NVDA", "kernel": "KERN"}
    width = text_width()
    wide = width >= 100  # the title beside the name; in a narrow window, below it
    out = []
    for r in items:
        tag = tags.get(r.origin, "    ")
        if wide:
            head = f"{r.code}  {r.severity:<7} {tag} {r.name:<36} "
            out.append(textwrap.fill(r.title, width, initial_indent=head, subsequent_indent=" " * len(head),
                                     break_on_hyphens=False))
        else:
            out.append(f"{r.code}  {r.severity:<7} {tag}".rstrip())
            out.append(textwrap.fill(f"{r.name}: {r.title}", width, initial_indent="      ",
                                     subsequent_indent="      ", break_on_hyphens=False))
    return "\n".join(out) + "\n"


def explanation(code: str) -> str:
    """``gdrcheck explain CODE``: why one rule matters and its exact fix."""
    from gdrcheck.errors import InputError
    from gdrcheck.rules import all_rules
    from gdrcheck.rules.base import ORIGIN_WORDS

    code_u = code.strip().upper()
    for r in all_rules():
        if r.code == code_u or r.name == code.strip().lower():
            import textwrap

            from gdrcheck.render.console import text_width

            width = text_width()
            paras = [f"{r.code} {r.name} ({r.severity}, {r.scope}; {ORIGIN_WORDS[r.origin]})", r.title,
                     f"Why: {r.rationale}", f"Fix: {r.remediation}"]
            if r.vm_remediation:
                paras.append(f"In a virtual machine: {r.vm_remediation}")
            return "\n\n".join(textwrap.fill(p, width, break_long_words=False, break_on_hyphens=False)
                                for p in paras) + "\n"
    raise InputError(f"no rule {code!r} (gdrcheck rules lists them)")


def schema_text(document: str) -> str:
    from importlib.resources import files

    return files("gdrcheck").joinpath("schemas", f"{document}.schema.json").read_text()
