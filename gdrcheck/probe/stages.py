"""How a worker says where it is: ``stage: <text>`` lines on stderr, read back by the runner when it must kill it."""

from __future__ import annotations

import sys

PREFIX = "stage: "


def stage(text: str) -> None:
    sys.stderr.write(f"{PREFIX}{text}\n")
    sys.stderr.flush()


def stages_of(err: str) -> list:
    """The stages a worker's stderr names, in order."""
    return [ln[len(PREFIX):] for ln in err.splitlines() if ln.startswith(PREFIX)]
