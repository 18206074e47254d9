"""What the node commands do with their options, without click: the click commands
(:mod:`gdrcheck.cli.commands`) and a plain command line read by :mod:`gdrcheck.cli.node_argv` both
call these, with the keyword arguments click passes (one name per option, in the order
:mod:`gdrcheck.cli.options` declares them)."""

from __future__ import annotations

from gdrcheck.cli import views
from gdrcheck.cli.run import Run, fmt_of, run_view


def topology(from_path, fmt, as_json, redact, show_all, timeout, output) -> int:
    run = Run(fmt_of(fmt, as_json), output, from_path, timeout, redact)
    return run_view(views.TopologyView(show_all), run)


def pairs(from_path, fmt, as_json, redact, fail_on, nccl_version, env, as_jsonl, timeout, output) -> int:
    fmt = fmt_of(fmt_of(fmt, as_json), as_jsonl, "jsonl")
    options = views.options_of(nccl_version, env=env)
    return run_view(views.PairsView(fail_on), Run(fmt, output, from_path, timeout, redact), options)


def bar1(from_path, fmt, as_json, redact, fail_on, min_bar1, bar1_used_max, timeout, output) -> int:
    options = views.options_of(None, min_bar1, bar1_used_max)
    run = Run(fmt_of(fmt, as_json), output, from_path, timeout, redact)
    return run_view(views.Bar1View(fail_on), run, options)


def check(from_path, fmt, as_jsonl, require, per_pair_metrics, redact, fail_on, nccl_version, env, timeout,
          output) -> int:
    fmt = fmt_of(fmt, as_jsonl, "jsonl")  # --jsonl with --format nagios is refused, as pairs refuses it
    view = views.CheckView(fmt, require, per_pair_metrics, fail_on)
    options = views.options_of(nccl_version, env=env)
    return run_view(view, Run(fmt, output, from_path, timeout, redact), options)


def fingerprint(from_path, explain, addresses, as_json, timeout, output) -> int:
    run = Run("json" if as_json else "text", output, from_path, timeout)
    return run_view(views.FingerprintView(explain, addresses), run)
