"""Fleet views over many nodes' reports: ``gdrcheck fleet summarize``.

``reader`` turns files, directories and ``host: {json}`` streams into one report
at a time; ``summarize`` folds them into small per-node records, groups nodes by
fingerprint and builds the fleet document; ``render`` prints it as text or
Markdown; ``nodeset`` folds node names (``gpu[001-076,078]``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional


def summarize_command(paths: Sequence[str], expect: Optional[str], reference: Optional[str], input_format: str,
                      fmt: str, output: Optional[str]) -> int:
    """Read every report, print the fleet summary, return the exit status."""
    import sys

    from gdrcheck.errors import InputError
    from gdrcheck.fleet import reader
    from gdrcheck.fleet.nodeset import NodeSetError, expand
    from gdrcheck.fleet.summarize import Fleet

    reader.check_paths(paths)
    expected = None
    if expect is not None:
        try:
            expected = expand(expect)
        except NodeSetError as e:
            raise InputError(f"--expect: {e}") from None
    ref_doc = reader.read_reference(reference) if reference else None
    output = None if output == "-" else output  # -o -: stdout
    if output is not None:
        from gdrcheck.io.output import check_target

        check_target(output)
    fleet = Fleet()
    for item in reader.read_inputs(paths, input_format, stdin=sys.stdin.buffer):
        fleet.add(item)
    # names and messages from the reports are shown as text shows an input's strings: never a terminal's
    # escape sequences, never a line of their own
    from gdrcheck.collectors.clip import printable

    for name in fleet.duplicates[:5]:
        sys.stderr.write(f"gdrcheck: warning: more than one report for {printable(name)}; the worst one is "
                         "used\n")
    if len(fleet.duplicates) > 5:
        sys.stderr.write(f"gdrcheck: warning: {len(fleet.duplicates) - 5} more nodes reported more than once\n")
    doc = fleet.document(expected=expected, reference=ref_doc, reference_path=reference)
    if fmt == "json":
        from gdrcheck.render.json_out import render_json

        text = render_json(doc, pretty=not output and sys.stdout.isatty())
    else:
        from gdrcheck.fleet import render

        shown = printable(doc)
        text = render.render_md(shown) if fmt == "md" else render.render_text(shown)
    from gdrcheck.io.output import deliver

    deliver(text, output)
    return doc["exit_status"]
