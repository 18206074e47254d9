"""The command line: the commands and their options, nothing more.

The one declaration of the command line and the only place help and usage errors come from. What the
node commands do is in :mod:`gdrcheck.cli.node_commands`; a plain command line of one of them runs
there without click (:mod:`gdrcheck.cli.node_argv`, whose table tests hold to these declarations).

Each command hands what it was given to :func:`gdrcheck.cli.run.run_view` with a view from
:mod:`gdrcheck.cli.views` (which facts, which document, which text, which exit status); the
entry point with its one-line errors is :mod:`gdrcheck.cli.entry`.
"""

from __future__ import annotations

import click

from gdrcheck import __version__
from gdrcheck.cli import node_commands, views
from gdrcheck.cli.run import Run, fmt_of, run_view
from gdrcheck.status import exit_status

FROM_HELP = ("read facts from PATH instead of this machine; repeat it for several files of one node "
             "(merged): a directory laid out like / or a snapshot archive (gdrcheck snapshot), "
             "lspci -tv, sudo lspci -vvv, nvidia-smi -q (or -q -x), nvidia-smi topo -m (or -mp), "
             "an NCCL topology XML (NCCL_TOPO_DUMP_FILE), an hwloc XML (lstopo FILE.xml) or a job's NCCL_DEBUG=INFO "
             "log (held beside the prediction)")


def _from_paths(_ctx, _param, value):
    """() -> None (this machine); one path -> that path; several -> the tuple (one node's files, merged)."""
    if not value:
        return None
    return value[0] if len(value) == 1 else tuple(value)


def _joined(_ctx, _param, value):
    """--require given several times: every list named, in one (a repeat used to keep only the last)."""
    return ",".join(value) if value else None


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
                     help="write to FILE instead of stdout (a temporary file renamed into place; - is stdout)")(f)
    f = click.option("--timeout", "timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
                     callback=_no_nan,
                     help=f"give up on what has not answered by then: those verdicts become unknown (exit 3); "
                          f"default {DEFAULT_SECONDS:g}, on a live machine and with --from; it covers writing the "
                          f"output; 0 waits forever")(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="gdrcheck", message="%(prog)s %(version)s")
def cli() -> None:
    """Will GPUDirect RDMA, GPU peer-to-peer and GPUDirect Storage work on this node?

    Reads the PCIe tree, the kernel and the NVIDIA driver (read-only), or a snapshot
    of them, and says per GPU/NIC/NVMe pair what will work, what will not, why, and
    the fix.
    """


def fail_on_option(f):
    return click.option("--fail-on", type=click.Choice(["error", "warning"]), default="error", show_default=True,
                        help="lowest finding severity that makes the exit status 1")(f)


def nccl_option(f):
    return click.option("--nccl-version", metavar="X.Y.Z",
                        help="judge with the rules of this NCCL release (default: the newest NCCL found on the "
                             "node: libnccl.so.2.X.Y, a pip nvidia-nccl wheel or PyTorch's; else the newest known)")(f)


def env_option(f):
    return click.option("--env", "env", multiple=True, metavar="NAME=VALUE",
                        help="what the job sets, applied last (repeatable): NCCL settings, and CUDA_VISIBLE_DEVICES "
                             "(which GPUs share the job's communicator); a paste carries none")(f)


@cli.command()
@from_option
@topology_formats
@click.option("--all", "show_all", is_flag=True, help="show every PCI function, not only the paths that matter")
@run_options
def topology(**params):
    """The PCIe tree that matters: root complexes, switches, GPUs, NICs, NVMe."""
    return node_commands.topology(**params)


@cli.command()
@from_option
@format_options
@fail_on_option
@nccl_option
@env_option
@click.option("--jsonl", "as_jsonl", is_flag=True, help="the JSON document on one line (for 'host: line' streams)")
@run_options
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
@click.option("--redact", is_flag=True, help="drop the host name, serial numbers, UUIDs and MAC addresses")
def snapshot(output, redact):
    """Capture everything gdrcheck reads on this machine, replayable with --from."""
    from gdrcheck.cli.run import capture_to

    return capture_to(output, redact)


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
    options = views.options_of(nccl_version)
    run = Run("html", output, from_path, redact=redact)  # the default deadline, as the node commands have
    return run_view(views.HtmlView(fail_on, probe_file), run, options)


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
@click.option("--copy-size", metavar="SIZE", help="bytes per host copy (default 256MiB; P2P copies at most 256MiB)")
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
def bar1(**params):
    """BAR1 aperture per GPU (total, used, free) against what GPUDirect needs."""
    return node_commands.bar1(**params)


CHECK_FORMATS = ("text", "json", "jsonl", "nhc", "npd", "nagios", "prometheus")


@cli.command()
@from_option
@click.option("--format", "fmt", type=click.Choice(CHECK_FORMATS), default="text", show_default=True,
              help="text; json/jsonl (the pairs document); nhc, npd, nagios (one line, each engine's exit "
                   "codes); prometheus (node_exporter textfile)")
@click.option("--jsonl", "as_jsonl", is_flag=True, help="same as --format jsonl")
@click.option("--require", "require", multiple=True, callback=_joined, metavar="LIST",
              help="what must work: gdr (GPU-NIC), p2p (GPU-GPU), gds (GPU-NVMe); one that nothing on the node "
                   "could satisfy fails; repeat it or list several. Default: judge the pairs the node has (a node "
                   "without a GPU fails)")
@click.option("--per-pair-metrics", is_flag=True, help="prometheus: also one series per pair")
@click.option("--redact", is_flag=True, help="replace the host name, serial numbers, UUIDs and MAC addresses")
@fail_on_option
@nccl_option
@env_option
@run_options
def check(**params):
    """The gate for health checks: pass, fail or unknown, in the format the engine reads.

    Exit status: the contract's 0/1/3 (2 bad usage); --format npd maps 3 to 2,
    --format nagios gives 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    """
    return node_commands.check(**params)


@cli.command()
@from_option
@click.option("--explain", is_flag=True, help="print the canonical key=value lines the hashes are made of")
@click.option("--addresses", is_flag=True, help="with --explain: PCI addresses instead of positions (gpu0, nic1)")
@click.option("--json", "as_json", is_flag=True, help="hashes, lines and positions as JSON")
@run_options
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
