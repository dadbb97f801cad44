"""Where the shared real transcripts live: ``../shared/data`` beside the project, or ``CTX_SHARED_DATA``."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CTX_SHARED_DATA") or ROOT.parent / "shared" / "data")
