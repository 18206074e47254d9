"""Each input read once while several commands run on it in one process: for the tests whose point is what the
commands make of the facts (their words, their widths, their agreement), not the reading, which its own tests
cover. The facts are one immutable record, so every command still gets what a fresh read gives it."""

from __future__ import annotations

import contextlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


@contextlib.contextmanager
def facts_read_once() -> Iterator[None]:
    """Within the block, ``load_facts`` of the same input with the same reading choices (the driver wanted, the
    endpoints' config space) reads it once; the function is put back after."""
    from gdrcheck.collectors import inputs

    load, kept = inputs.load_facts, {}

    def once(from_path, **kwargs):
        if from_path is None:  # this machine: read as it is now
            return load(from_path, **kwargs)
        key = (str(from_path), kwargs.get("want_driver", True), kwargs.get("endpoint_config", True))
        if key not in kept:
            kept[key] = load(from_path, **kwargs)
        return kept[key]

    inputs.load_facts = once
    try:
        yield
    finally:
        inputs.load_facts = load
