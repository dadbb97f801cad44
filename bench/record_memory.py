"""What storing one long reply costs a process: peak memory and CPU of ``ingest.message_append`` for
one assistant message of a single run of text (``--chars`` of one letter: the shape that costs the
offline count most), with the count in pieces (as shipped) and counted whole (``--whole``, as before).

    .venv/bin/python bench/record_memory.py            # as shipped
    .venv/bin/python bench/record_memory.py --whole    # the text counted in one piece

Each run is its own process (peak RSS only grows); the session lives in bench/_replay's SQLite file.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._replay import bench_user  # sets Django up
from compaction import tokens
from compaction.messages import normalize_message
from sessions_app.services import agent_sessions, ingest, projects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=4_000_000, help="the reply's length (default: 4 MB)")
    parser.add_argument("--whole", action="store_true", help="count the text in one piece")
    args = parser.parse_args()
    if args.whole:
        tokens._PIECE = sys.maxsize
    user = bench_user("record-memory")
    project = projects.project_create(user=user, name=f"record memory {time.time():.0f}")
    session = agent_sessions.session_create(user=user, project=project, name="m", model="claude-sonnet-4-5")
    ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": "Write."})])
    reply = normalize_message({"role": "assistant", "content": [{"type": "text", "text": "y" * args.chars}]})
    before, cpu = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.process_time()
    ingest.message_append(session=session, messages=[reply])
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    how = "counted whole" if args.whole else "counted in pieces"
    print(f"{args.chars:,} characters, {how}: peak RSS +{grown:.0f} MB, {time.process_time() - cpu:.1f} s CPU")


if __name__ == "__main__":
    main()
