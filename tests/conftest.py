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


@pytest.fixture(autouse=True)
def _no_nccl_env(monkeypatch):
    """Tests judge inputs, not the environment of whoever runs them."""
    for k in list(os.environ):
        if k.startswith("NCCL_") or k == "NODE_NAME":
            monkeypatch.delenv(k, raising=False)
from support.readonly_guard import guarded  # noqa: E402,F401  (the read-only guard fixture, for every test folder)
