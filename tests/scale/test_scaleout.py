"""Two web nodes and three workers (one per queue) on one Postgres and Redis, 10 agents writing, the
compaction worker killed with SIGKILL and a web node restarted mid-run: ``bench/scaleout.py``'s
integrity checks, run small. Needs Postgres, Redis and the shared transcripts (CI has them)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench._server import ROOT
from tests.conftest import _postgres_configured, _redis_configured, need
from tests.shared_data import SHARED_DATA

pytestmark = [pytest.mark.services, pytest.mark.slow]

CHECKS = (
    "every acknowledged message stored exactly once",
    "seqs gapless, last_seq = max(seq)",
    "cached totals equal the sums over the rows",
    "no two compactions of one session overlapped",
    "no 5xx",
    "no client errors",
    "the compaction queue drained",
    "the Redis queues are empty",
)


def test_two_web_nodes_a_killed_worker_and_a_restarted_node_lose_and_double_nothing():
    need(_postgres_configured(), "DATABASE_URL does not point at Postgres")
    need(_redis_configured(), "REDIS_URL is not set")
    need((SHARED_DATA / "claude_code").is_dir(), f"the shared transcripts are not at {SHARED_DATA}")
    run = subprocess.run(
        [sys.executable, "bench/scaleout.py", "--agents", "10", "--messages", "40", "--window", "4000",
         "--db", f"ctxweb_ci_scaleout_{os.getpid()}"],
        cwd=ROOT, capture_output=True, text=True, timeout=420,
        env={**os.environ, "CTX_SHARED_DATA": str(SHARED_DATA)},
    )  # fmt: skip
    out = run.stdout + run.stderr[-3000:]
    assert run.returncode == 0, out
    for check in CHECKS:
        assert f"PASS  {check}" in run.stdout, out
    assert "FAIL" not in run.stdout, out
    # The faults did happen, and the work reached every kind of worker.
    assert "compaction worker killed (SIGKILL)" in run.stdout and "web node b stopped" in run.stdout, out
    served = [line for line in run.stdout.splitlines() if line.startswith("web node ")]
    assert len(served) == 2 and all(" 0 responses" not in line for line in served), out
    ran = {line.split()[1].rstrip(":"): int(line.split()[2].replace(",", "")) for line in run.stdout.splitlines()
           if line.startswith("worker ")}  # fmt: skip
    assert ran["compaction"] > 0 and ran["counting"] > 0 and ran["maintenance"] > 0, out
