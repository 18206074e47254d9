"""The command line: the commands and their options, nothing more.

The only place help and usage errors come from. The options of the commands that read a node are made
from their one declaration, :mod:`gdrcheck.cli.options`; what the node commands do is in
:mod:`gdrcheck.cli.node_commands`, and a plain command line of one of them runs there without click
(:mod:`gdrcheck.cli.node_argv` reads it with the same table).

Each command hands what it was given to :func:`gdrcheck.cli.run.run_view` with a view from
:mod:`gdrcheck.cli.views` (which facts, which document, which text, which exit status); the
entry point with its one-line errors is :mod:`gdrcheck.cli.entry`.
"""

from __future__ import annotations

import click

from gdrcheck import __version__
from gdrcheck.cli import node_commands, views
from gdrcheck.cli.options import COMMANDS, SNAPSHOT_TIMEOUT
from gdrcheck.cli.run import Run, fmt_of, run_view
from gdrcheck.status import exit_status


def _click_option(opt):
    """click's option made from the table's (gdrcheck.cli.options)."""
    kw = {"help": opt.help_text()}
    if opt.flag:
        kw["is_flag"] = True
    if opt.multiple:
        kw["multiple"] = True
    if opt.choices is not None:
        kw["type"] = click.Choice(list(opt.values()))
    elif opt.bounds is not None:
        kw["type"] = click.FloatRange(min=opt.bounds[0], max=opt.bounds[1])
    if opt.default is not None and not opt.flag:
        kw["default"] = opt.default
    for name in ("show_default", "required"):
        if getattr(opt, name):
            kw[name] = True
    if opt.metavar is not None:
        kw["metavar"] = opt.metavar
    if opt.callback is not None:
        kw["callback"] = _click_callback(opt.callback)
    return click.option(*opt.names, opt.dest, **kw)


def _click_callback(callback):
    def checked(_ctx, _param, value):
        try:
            return callback(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None

    return checked


def declared(name: str):
    """The options of command ``name``, as the table declares them."""
    def declare(f):
        for opt in reversed(COMMANDS[name]):
            f = _click_option(opt)(f)
        return f

    return declare


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="gdrcheck", message="%(prog)s %(version)s")
def cli() -> None:
    """Will GPUDirect RDMA, GPU peer-to-peer and GPUDirect Storage work on this node?

    Reads the PCIe tree, the kernel and the NVIDIA driver (read-only), or a snapshot
    of them, and says per GPU/NIC/NVMe pair what will work, what will not, why, and
    the fix.
    """


@cli.command()
@declared("topology")
def topology(**params):
    """The PCIe tree that matters: root complexes, switches, GPUs, NICs, NVMe."""
    return node_commands.topology(**params)


@cli.command()
@declared("pairs")
def pairs(**params):
    """Every GPU-GPU, GPU-NIC and GPU-NVMe pair: path class, NCCL's decision, verdict and findings."""
    return node_commands.pairs(**params)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="print the registry as JSON")
def rules(as_json):
    """List every rule gdrcheck applies, with its code and severity."""
    Run(watch=False).deliver(views.rules_listing(as_json))
    return exit_status("pass")


@cli.command()
@click.argument("code")
def explain(code):
    """Explain one rule: why it matters and the exact fix."""
    Run(watch=False).deliver(views.explanation(code))
    return exit_status("pass")


@cli.command()
@click.option("-o", "--output", "output", required=True, metavar="FILE.tar.gz",
              help="archive to write (written to a temporary file and renamed into place; - is stdout)")
@click.option("--redact", is_flag=True,
              help="drop the host name, serial numbers, UUIDs, MAC and IP addresses, user names in paths")
@_click_option(SNAPSHOT_TIMEOUT)
def snapshot(output, redact, timeout):
    """Capture everything gdrcheck reads on this machine, replayable with --from."""
    from gdrcheck.cli.run import capture_to

    return capture_to(output, redact, timeout)


@cli.command()
@declared("report")
def report(from_path, output, redact, fail_on, nccl_version, probe_file):
    """One self-contained HTML page to hand on: host, PCIe tree, pairs, BAR1, every finding and its fix.

    Exit status as for pairs.
    """
    options = views.options_of(nccl_version)
    run = Run("html", output, from_path, redact=redact)  # the default deadline, as the node commands have
    return run_view(views.HtmlView(fail_on, probe_file), run, options)


@cli.command()
@declared("probe")
def probe(from_path, fmt, as_json, redact, fail_on, nccl_version, dry_run, risky, force, gds_path, only,
          step_timeout, copy_size, output):
    """Do on the node, small and bounded, what pairs predicts: measure it, and say where they differ."""
    from gdrcheck.cli.probe import run_probe

    return run_probe(from_path, dry_run, risky, force, gds_path, only, step_timeout, fmt_of(fmt, as_json), redact,
                     fail_on, output, nccl_version, copy_size)


@cli.command()
@declared("bar1")
def bar1(**params):
    """BAR1 aperture per GPU (total, used, free) against what GPUDirect needs."""
    return node_commands.bar1(**params)


@cli.command()
@declared("check")
def check(**params):
    """The gate for health checks: pass, fail or unknown, in the format the engine reads.

    Exit status: the contract's 0/1/3 (2 bad usage); --format npd maps 3 to 2,
    --format nagios gives 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    """
    return node_commands.check(**params)


@cli.command()
@declared("fingerprint")
def fingerprint(**params):
    """One line that is identical on identically built nodes (for clush -b / --diff and fleet grouping)."""
    return node_commands.fingerprint(**params)


@cli.command()
@click.argument("document", type=click.Choice(["pairs", "topology", "bar1", "fleet", "probe"]))
def schema(document):
    """Print the JSON Schema of a document (pairs, topology, bar1, fleet, probe)."""
    Run(watch=False).deliver(views.schema_text(document))
    return exit_status("pass")


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
              help="write to FILE instead of stdout (a temporary file renamed into place; - is stdout)")
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
