import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REALWORLD = HERE.parents[1] / "shared" / "realworld"


@pytest.fixture
def realworld():
    if not REALWORLD.is_dir():
        pytest.skip("../shared/realworld is not present")
    return REALWORLD


@pytest.fixture
def ctrl_c():
    """Ctrl-C as a terminal delivers it: SIGINT raises KeyboardInterrupt in this process and is at its default in
    the processes it starts. A shell's background job (``pytest ... &``, some CI runners) starts Python with SIGINT
    ignored, and a child inherits that: a test of Ctrl-C would wait for a signal nothing receives."""
    import signal

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.fixture(autouse=True)
def _no_nccl_env(monkeypatch):
    """Tests judge inputs, not the environment of whoever runs them."""
    for k in list(os.environ):
        if k.startswith("NCCL_") or k == "NODE_NAME":
            monkeypatch.delenv(k, raising=False)
from support.readonly_guard import guarded  # noqa: E402,F401  (the read-only guard fixture, for every test folder)
