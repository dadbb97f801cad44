"""Fixtures for the engine tests (no database)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real transcripts in ``../shared/data``: skipped where absent (a fresh clone), a failure in CI
    (``CTX_REQUIRE_SERVICES=1``)."""
    if not SHARED_DATA.is_dir():
        reason = f"the shared transcripts are not at {SHARED_DATA} (see the project README)"
        if os.environ.get("CTX_REQUIRE_SERVICES") == "1":
            pytest.fail(f"CTX_REQUIRE_SERVICES=1 but {reason}")
        pytest.skip(reason)
    return SHARED_DATA
