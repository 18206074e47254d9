"""The command line: parse options, call the pipeline, print, exit per the contract.

Kept thin: facts come from :mod:`gdrcheck.collectors.inputs`, verdicts from
:mod:`gdrcheck.rules.engine`, text from :mod:`gdrcheck.render`.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import click

from gdrcheck import __version__
from gdrcheck.cli.run import RUN, deliver_text, emit, end_progress, fmt_of, load, progress_reporter, redacted
from gdrcheck.errors import InputError
from gdrcheck.status import EXIT_INTERRUPTED, EXIT_PASS, EXIT_UNKNOWN, EXIT_USAGE, NAGIOS_UNKNOWN

FROM_HELP = ("read facts from PATH instead of this machine; repeat it for several files of one node "
             "(merged): a directory laid out like / or a snapshot archive (gdrcheck snapshot), "
             "lspci -tv, sudo lspci -vvv, nvidia-smi -q (or -q -x), nvidia-smi topo -m (or -mp), "
             "an NCCL topology XML (NCCL_TOPO_DUMP_FILE) or an hwloc XML (lstopo FILE.xml)")


def _from_paths(_ctx, _param, value):
    """() -> None (this machine); one path -> that path; several -> the tuple (one node's files, merged)."""
    if not value:
        return None
    return value[0] if len(value) == 1 else tuple(value)


def from_option(f):
    return click.option("--from", "from_path", metavar="PATH", multiple=True, callback=_from_paths,
                        help=FROM_HELP)(f)


def format_options(f, formats=("text", "json")):
    f = click.option("--redact", is_flag=True,
                     help="replace the host name, serial numbers, UUIDs and MAC addresses in the output")(f)
    f = click.option("--json", "as_json", is_flag=True, help="same as --format json")(f)
    f = click.option("--format", "fmt", type=click.Choice(list(formats)), default="text", show_default=True,
                     help="output format" + ("; dot: Graphviz (dot -Tsvg)" if "dot" in formats else ""))(f)
    return f


def topology_formats(f):
    return format_options(f, ("text", "json", "dot"))


def _no_nan(_ctx, _param, value):
    if value is not None and value != value:
        raise click.BadParameter("not a number of seconds")
    return value


def run_options(f):
    """--timeout and --output, for every command that reads a machine."""
    from gdrcheck.io.deadline import DEFAULT_SECONDS

    f = click.option("-o", "--output", "output", metavar="FILE",
                     help="write to FILE instead of stdout (a temporary file renamed into place)")(f)
    f = click.option("--timeout", "timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
                     callback=_no_nan,
                     help=f"give up on what has not answered by then: those verdicts become unknown (exit 3); "
                          f"default {DEFAULT_SECONDS:g} on a live machine, none with --from; 0 waits forever")(f)
    return f



@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="gdrcheck", message="%(prog)s %(version)s")
def cli() -> None:
    """Will GPUDirect RDMA, GPU peer-to-peer and GPUDirect Storage work on this node?

    Reads the PCIe tree, the kernel and the NVIDIA driver (read-only), or a snapshot
    of them, and says per GPU/NIC/NVMe pair what will work, what will not, why, and
    the fix.
    """


@cli.command()
@from_option
@topology_formats
@click.option("--all", "show_all", is_flag=True, help="show every PCI function, not only the paths that matter")
@run_options
def topology(from_path, fmt, as_json, redact, show_all, timeout, output):
    """The PCIe tree that matters: root complexes, switches, GPUs, NICs, NVMe."""
    from gdrcheck.documents.topology import topology_doc
    from gdrcheck.pcie.topology import Topology

    RUN.start(timeout, fmt_of(fmt, as_json), output, from_path)
    topo = Topology(redacted(load(from_path, want_driver=True), redact))
    if fmt_of(fmt, as_json) == "dot":
        from gdrcheck.render.dot import render_dot

        if RUN.begin_output():
            deliver_text(render_dot(topology_doc(topo, describe_input=True), show_all=show_all), redact, output)
        return EXIT_PASS

    def text(_doc, console):
        from gdrcheck.render.topology_text import render_topology

        render_topology(topo, console, show_all=show_all)

    emit(topology_doc(topo) if fmt_of(fmt, as_json) == "json" else None, fmt, as_json, redact, text, output)


def _options(nccl_version: Optional[str], min_bar1: Optional[str] = None, bar1_used_max: Optional[float] = None):
    import re

    from gdrcheck.rules import nccl
    from gdrcheck.rules.base import Options

    if nccl_version is not None and not re.fullmatch(r"\s*v?\d{1,3}\.\d{1,3}(\.\d{1,3})?\s*", nccl_version):
        raise click.BadParameter(f"not an NCCL version: {nccl_version[:40]!r} (expected e.g. 2.21.5)",
                                 param_hint="--nccl-version")
    try:
        asked = nccl.parse_version(nccl_version)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--nccl-version") from None
    if asked > nccl.NEWEST:
        newest = ".".join(map(str, nccl.NEWEST))
        sys.stderr.write(f"gdrcheck: note: NCCL {nccl_version.strip()} is newer than the newest release gdrcheck "
                         f"knows; judged with the rules of NCCL {newest}\n")
    kw = {"nccl_version": nccl_version}
    if min_bar1 is not None:
        kw["min_bar1_bytes"] = _parse_size(min_bar1)
    if bar1_used_max is not None:
        kw["bar1_used_max_pct"] = bar1_used_max
    return Options(**kw)


def _parse_size(text: str) -> int:
    from gdrcheck.units import parse_size

    n = parse_size(text)
    if n is None:
        raise click.BadParameter(f"not a size: {text!r} (e.g. 1GiB, 256MiB)", param_hint="--min-bar1")
    return n


def fail_on_option(f):
    return click.option("--fail-on", type=click.Choice(["error", "warning"]), default="error", show_default=True,
                        help="lowest finding severity that makes the exit status 1")(f)


def nccl_option(f):
    return click.option("--nccl-version", metavar="X.Y.Z",
                        help="judge with the rules of this NCCL release (default: the newest NCCL found on the "
                             "node: libnccl.so.2.X.Y, a pip nvidia-nccl wheel or PyTorch's; else the newest known)")(f)


def _finish(report, fail_on: str) -> int:
    from gdrcheck.documents.pairs import exit_status

    code, missing = exit_status(report, fail_on)
    if code == 3:
        sys.stderr.write("gdrcheck: could not decide every verdict; missing: " + "; ".join(missing[:5])
                         + (f"; and {len(missing) - 5} more" if len(missing) > 5 else "") + "\n")
    return code


@cli.command()
@from_option
@format_options
@fail_on_option
@nccl_option
@click.option("--jsonl", "as_jsonl", is_flag=True, help="the JSON document on one line (for 'host: line' streams)")
@run_options
def pairs(from_path, fmt, as_json, redact, fail_on, nccl_version, as_jsonl, timeout, output):
    """Every GPU-GPU, GPU-NIC and GPU-NVMe pair: path class, NCCL's decision, verdict and findings."""
    from gdrcheck.documents.pairs import pairs_doc
    from gdrcheck.rules.engine import evaluate

    fmt = fmt_of(fmt_of(fmt, as_json), as_jsonl, "jsonl")
    options = _options(nccl_version)
    RUN.start(timeout, fmt, output, from_path)
    report = evaluate(redacted(load(from_path), redact), options)

    def text(doc, console):
        from gdrcheck.render.pairs_text import render_pairs

        render_pairs(doc, console)

    emit(pairs_doc(report, fail_on), fmt, False, redact, text, output)
    return _finish(report, fail_on)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="print the registry as JSON")
def rules(as_json):
    """List every rule gdrcheck applies, with its code and severity."""
    from gdrcheck.rules import all_rules

    items = all_rules()
    if as_json:
        from gdrcheck import FORMAT_VERSION, __version__
        from gdrcheck.render.json_out import render_json

        doc = {"format_version": FORMAT_VERSION, "gdrcheck_version": __version__, "rules": [r.to_doc() for r in items]}
        sys.stdout.write(render_json(pretty=sys.stdout.isatty(), doc=doc))
        return EXIT_PASS
    from gdrcheck.io.output import deliver

    tags = {"nccl": "NCCL", "nvidia-docs": "NVDA", "kernel": "KERN"}
    deliver("".join(f"{r.code}  {r.severity:<7} {tags.get(r.origin, '    ')} {r.name:<36} {r.title}\n"
                    for r in items), None)
    return EXIT_PASS


@cli.command()
@click.argument("code")
def explain(code):
    """Explain one rule: why it matters and the exact fix."""
    from gdrcheck.rules import all_rules

    code_u = code.strip().upper()
    for r in all_rules():
        if r.code == code_u or r.name == code.strip().lower():
            from gdrcheck.rules.base import ORIGIN_WORDS

            origin = ORIGIN_WORDS[r.origin]
            click.echo(f"{r.code} {r.name} ({r.severity}, {r.scope}; {origin})")
            click.echo(f"\n{r.title}\n")
            click.echo(f"Why: {r.rationale}\n")
            click.echo(f"Fix: {r.remediation}")
            if r.vm_remediation:
                click.echo(f"\nIn a virtual machine: {r.vm_remediation}")
            return EXIT_PASS
    raise InputError(f"no rule {code!r} (gdrcheck rules lists them)")


@cli.command()
@click.option("-o", "--output", "output", required=True, metavar="FILE.tar.gz",
              help="archive to write (written to a temporary file and renamed into place)")
@click.option("--redact", is_flag=True, help="drop the host name, serial numbers, UUIDs and MAC addresses")
def snapshot(output, redact):
    """Capture everything gdrcheck reads on this machine, replayable with --from."""
    from gdrcheck.collectors.capture import capture, write_archive

    progress = progress_reporter()
    try:
        src, manifest = capture(redact=redact, progress=progress)
        if progress:
            progress("writing " + output)
        count = write_archive(src, manifest, output, redact=redact)
    finally:
        end_progress(progress)
    click.echo(f"gdrcheck: wrote {output} ({count} entries); replay with: gdrcheck pairs --from {output}", err=True)
    return EXIT_PASS


@cli.command()
@from_option
@click.option("-o", "--output", "output", required=True, metavar="FILE.html",
              help="page to write (written to a temporary file and renamed into place); - for stdout")
@click.option("--redact", is_flag=True, help="replace the host name, serial numbers, UUIDs and MAC addresses")
@fail_on_option
@nccl_option
@click.option("--probe", "probe_file", metavar="FILE", help="add a Measured section from `gdrcheck probe --json`")
def report(from_path, output, redact, fail_on, nccl_version, probe_file):
    """One self-contained HTML page to hand on: host, PCIe tree, pairs, BAR1, every finding and its fix.

    Exit status as for pairs.
    """
    from gdrcheck.documents.node import node_documents
    from gdrcheck.io.output import check_target, write_atomic
    from gdrcheck.rules.engine import evaluate

    options = _options(nccl_version)
    to_stdout = output == "-"
    if not to_stdout:
        check_target(output)
    extra = []
    if probe_file:
        from gdrcheck.probe.html import load_probe, measured_section
        from gdrcheck.rules import all_rules

        extra.append(measured_section(load_probe(probe_file), all_rules()))
    # the Resizable BAR capability is in the GPU's config space
    result = evaluate(redacted(load(from_path, endpoint_config=True), redact), options)
    progress = progress_reporter() if not to_stdout else None
    try:
        if progress:
            progress("writing " + output)
        from gdrcheck.render.html_report import render_html
        from gdrcheck.rules import all_rules

        docs = node_documents(result, fail_on, describe_input=True)
        page = render_html(docs["topology"], docs["pairs"], docs["bar1"], all_rules(), extra)
        if redact:
            from gdrcheck.io.redact import redact_text

            page = redact_text(page, None)
        if to_stdout:
            from gdrcheck.io.output import deliver

            deliver(page, None)
        else:
            write_atomic(output, page)
    finally:
        end_progress(progress)
    if progress:
        click.echo(f"gdrcheck: wrote {output}", err=True)
    return _finish(result, fail_on)


@cli.command()
@from_option
@format_options
@fail_on_option
@nccl_option
@click.option("--dry-run", is_flag=True, help="print the plan (which checks on which devices, and why); run nothing")
@click.option("--risky", is_flag=True, help="also copy on pairs the static check fails for ACS redirect or a "
                                            "translating IOMMU (they may hang or return garbage)")
@click.option("--force", is_flag=True, help="probe a busy node (compute processes, MIG, non-default compute mode)")
@click.option("--gds-path", metavar="DIR", help="run gds-read with a test file in DIR, on the target filesystem")
@click.option("--check", "only", multiple=True, metavar="NAME",
              type=click.Choice(["cuda", "host-bandwidth", "p2p", "rdma-register", "rdma-loopback", "gds-read"]),
              help="run only this check (repeatable)")
@click.option("--step-timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS", callback=_no_nan,
              help="deadline of every step (default: each check's own); a worker past it is killed")
@click.option("--copy-size", metavar="SIZE", help="bytes per host copy (default 256MiB; P2P copies at most 64MiB)")
@click.option("-o", "--output", "output", metavar="FILE", help="write to FILE instead of stdout")
def probe(from_path, fmt, as_json, redact, fail_on, nccl_version, dry_run, risky, force, gds_path, only,
          step_timeout, copy_size, output):
    """Do on the node, small and bounded, what pairs predicts: measure it, and say where they differ."""
    from gdrcheck.cli.probe import run_probe

    return run_probe(from_path, dry_run, risky, force, gds_path, only, step_timeout, fmt_of(fmt, as_json), redact,
                     fail_on, output, nccl_version, copy_size)


@cli.command()
@from_option
@format_options
@fail_on_option
@click.option("--min-bar1", metavar="SIZE", default="1GiB", show_default=True,
              help="smallest BAR1 that is not a finding")
@click.option("--max-used", "bar1_used_max", type=click.FloatRange(0, 100), default=90.0, show_default=True,
              help="BAR1 use (percent) above which it is a finding")
@run_options
def bar1(from_path, fmt, as_json, redact, fail_on, min_bar1, bar1_used_max, timeout, output):
    """BAR1 aperture per GPU (total, used, free) against what GPUDirect needs."""
    from gdrcheck.documents.bar1 import bar1_doc, bar1_exit, is_bar1_code
    from gdrcheck.rules.engine import evaluate

    options = _options(None, min_bar1, bar1_used_max)
    RUN.start(timeout, fmt_of(fmt, as_json), output, from_path)
    # the Resizable BAR capability is in the GPU's config space
    snap = redacted(load(from_path, endpoint_config=True), redact)
    report = evaluate(snap, options)
    findings = [f for f in report.findings if is_bar1_code(f.code)]

    def text(doc, console):
        from gdrcheck.render.bar1_text import render_bar1

        render_bar1(doc, console)

    doc = bar1_doc(snap, report.topo, findings)
    emit(doc, fmt, as_json, redact, text, output)
    code, why = bar1_exit(doc, snap, report.topo, findings, fail_on)
    if why:
        sys.stderr.write(f"gdrcheck: {why}\n")
    return code


CHECK_FORMATS = ("text", "json", "jsonl", "nhc", "npd", "nagios", "prometheus")


def _requirements(text: str):
    from gdrcheck.rules.engine import PAIR_KIND_OF

    caps = [c.strip().lower() for c in text.split(",") if c.strip()]
    bad = [c for c in caps if c not in PAIR_KIND_OF]
    if bad or not caps:
        raise click.BadParameter(f"{text!r}: name one or more of gdr, p2p, gds, comma-separated",
                                 param_hint="--require")
    return caps


@cli.command()
@from_option
@click.option("--format", "fmt", type=click.Choice(CHECK_FORMATS), default="text", show_default=True,
              help="text; json/jsonl (the pairs document); nhc, npd, nagios (one line, each engine's exit "
                   "codes); prometheus (node_exporter textfile)")
@click.option("--jsonl", "as_jsonl", is_flag=True, help="same as --format jsonl")
@click.option("--require", "require", default=None, metavar="LIST",
              help="what must work: gdr (GPU-NIC), p2p (GPU-GPU), gds (GPU-NVMe); one that nothing on the node "
                   "could satisfy fails. Default: judge the pairs the node has (a node without a GPU fails)")
@click.option("--per-pair-metrics", is_flag=True, help="prometheus: also one series per pair")
@click.option("--redact", is_flag=True, help="replace the host name, serial numbers, UUIDs and MAC addresses")
@fail_on_option
@nccl_option
@run_options
def check(from_path, fmt, as_jsonl, require, per_pair_metrics, redact, fail_on, nccl_version, timeout, output):
    """The gate for health checks: pass, fail or unknown, in the format the engine reads.

    Exit status: the contract's 0/1/3 (2 bad usage); --format npd maps 3 to 2,
    --format nagios gives 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    """
    from gdrcheck.documents.pairs import exit_status, pairs_doc
    from gdrcheck.rules.engine import evaluate, restrict

    fmt = "jsonl" if as_jsonl else fmt
    caps = _requirements(require) if require is not None else ["gdr", "p2p", "gds"]
    options = _options(nccl_version)
    RUN.start(timeout, fmt, output, from_path)
    report = evaluate(redacted(load(from_path, endpoint_config=fmt == "prometheus"), redact), options)
    gate = restrict(report, caps, required=require is not None)
    doc = pairs_doc(gate, fail_on)
    code = exit_status(gate, fail_on)[0]
    if fmt in ("json", "jsonl"):
        emit(doc, fmt, False, redact, None, output)
        return _finish(gate, fail_on)
    if fmt == "prometheus":
        import time

        from gdrcheck.documents.node import node_documents
        from gdrcheck.render.prometheus import render_prometheus

        docs = node_documents(report, pairs=doc)
        text = render_prometheus(docs["pairs"], docs["bar1"], docs["topology"], __version__,
                                 time.monotonic() - RUN.started, time.time(), per_pair=per_pair_metrics)
    else:
        from gdrcheck.render import adapters

        text, code = {"text": adapters.check_text, "nhc": adapters.nhc, "npd": adapters.npd,
                      "nagios": adapters.nagios}[fmt](doc)
    if RUN.begin_output():
        deliver_text(text, redact, output)
    return code


@cli.command()
@from_option
@click.option("--explain", is_flag=True, help="print the canonical key=value lines the hashes are made of")
@click.option("--addresses", is_flag=True, help="with --explain: PCI addresses instead of positions (gpu0, nic1)")
@click.option("--json", "as_json", is_flag=True, help="hashes, lines and positions as JSON")
@run_options
def fingerprint(from_path, explain, addresses, as_json, timeout, output):
    """One line that is identical on identically built nodes (for clush -b / --diff and fleet grouping)."""
    from gdrcheck.documents.fingerprint import fingerprint as make
    from gdrcheck.documents.fingerprint import one_line
    from gdrcheck.rules.engine import evaluate

    RUN.start(timeout, "json" if as_json else "text", output, from_path)
    report = evaluate(load(from_path))
    fp = make(report)
    if as_json:
        from gdrcheck import FORMAT_VERSION, __version__
        from gdrcheck.render.json_out import render_json

        doc = {"format_version": FORMAT_VERSION, "gdrcheck_version": __version__, **fp.to_doc(),
               "topology_lines": list(fp.topology_lines), "line": one_line(report, fp)}
        text = render_json(doc, pretty=not output and sys.stdout.isatty())
    elif explain:
        text = "\n".join(fp.topology_lines if addresses else fp.shape_lines) + "\n"
    else:
        text = one_line(report, fp) + "\n"
    if RUN.begin_output():
        deliver_text(text, False, output)
    from gdrcheck.documents.pairs import timed_out

    if timed_out(report):
        sys.stderr.write("gdrcheck: the --timeout ran out; the fingerprint is of what was read in time\n")
        return EXIT_UNKNOWN
    return EXIT_PASS


@cli.command()
@click.argument("document", type=click.Choice(["pairs", "topology", "bar1", "fleet", "probe"]))
def schema(document):
    """Print the JSON Schema of a document (pairs, topology, bar1, fleet, probe)."""
    from importlib.resources import files

    sys.stdout.write(files("gdrcheck").joinpath("schemas", f"{document}.schema.json").read_text())
    return EXIT_PASS


@cli.group()
def fleet() -> None:
    """Views over many nodes' reports (gdrcheck pairs --json collected by clush, pdsh, srun or Ansible)."""


@fleet.command("summarize")
@click.option("--expect", metavar="NODESET",
              help="the nodes that should have reported, e.g. gpu[001-128] or $SLURM_JOB_NODELIST")
@click.option("--reference", metavar="FILE", help="a golden report to compare with (default: the largest group)")
@click.option("--input-format", "input_format", type=click.Choice(["auto", "json", "prefixed"]), default="auto",
              show_default=True, help="json: report files or JSONL; prefixed: 'host: {json}' lines (pdsh, clush)")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True,
              help="text, the fleet JSON document, or Markdown for a ticket")
@click.option("-o", "--output", "output", metavar="FILE",
              help="write to FILE instead of stdout (a temporary file renamed into place)")
@click.argument("paths", nargs=-1, required=True, metavar="PATH... | -")
def fleet_summarize(expect, reference, input_format, fmt, output, paths):
    """Group nodes by fingerprint, show what differs from the reference, findings by code.

    PATH is a report file, a JSONL file, a directory of per-node files (clush --outdir,
    dshbak -d, srun --output=%N.json, Ansible fetch; top level only, hidden and *.err
    files skipped), or - for stdin.

    Exit status: 0 all nodes alike and passing; 1 nodes not alike or failing; 3 missing,
    unknown or unreadable reports (and nothing for 1); 2 bad usage.
    """
    from gdrcheck.fleet import summarize_command

    return summarize_command(paths, expect, reference, input_format, fmt, output)

def _engine_format(argv) -> Optional[str]:
    """'npd' or 'nagios' when the command line asks for one of those one-line formats."""
    args = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(args):
        for fmt in ("npd", "nagios"):
            if a == f"--format={fmt}" or (a == "--format" and args[i + 1:i + 2] == [fmt]):
                return fmt
    return None


def _usage_status(argv, message: str = "") -> int:
    """2 by the contract; 3 (UNKNOWN) under --format nagios, so a broken invocation does not page as
    CRITICAL. NPD and Nagios read stdout: they get one line saying why too."""
    fmt = _engine_format(argv)
    if fmt is not None:
        from gdrcheck.render.adapters import usage_line

        sys.stdout.write(usage_line(fmt, message))
    return NAGIOS_UNKNOWN if fmt == "nagios" else EXIT_USAGE


def main(argv=None) -> None:
    """Entry point: one-line errors, never a traceback."""
    try:
        rv = cli.main(args=argv, prog_name="gdrcheck", standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else EXIT_PASS)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        sys.stderr.write("gdrcheck: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as e:
        msg = e.format_message()
        ctx = getattr(e, "ctx", None)
        if isinstance(e, click.UsageError) and ctx is not None:
            msg = f"{msg} (try '{ctx.command_path} --help')"
        sys.stderr.write(f"gdrcheck: error: {msg}\n")
        sys.exit(_usage_status(argv, _one_line(msg)) if isinstance(e, click.UsageError) or e.exit_code == EXIT_USAGE
                 else e.exit_code)
    except InputError as e:
        sys.stderr.write(f"gdrcheck: error: {_one_line(str(e))}\n")
        sys.exit(_usage_status(argv, _one_line(str(e))))
    except BrokenPipeError:  # the reader of stdout went away: nothing to say (rules, explain)
        from gdrcheck.io.output import stdout_closed

        stdout_closed()
        sys.exit(EXIT_PASS)
    except KeyboardInterrupt:
        sys.stderr.write("gdrcheck: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    except RecursionError:
        sys.stderr.write("gdrcheck: error: input nests too deeply\n")
        sys.exit(EXIT_USAGE)
    except Exception as e:  # noqa: BLE001 - the contract promises no traceback
        if os.environ.get("GDRCHECK_DEBUG"):
            raise
        sys.stderr.write(f"gdrcheck: internal error: {e.__class__.__name__}: {_one_line(str(e))} "
                         "(GDRCHECK_DEBUG=1 shows where)\n")
        sys.exit(EXIT_UNKNOWN)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]
