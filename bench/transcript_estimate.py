"""How close a recorded transcript's session's estimate comes to Claude Code's own count of it.

    .venv/bin/python bench/transcript_estimate.py [FILES …]   (default: $CTX_SHARED_DATA or ../shared/data)

Each file is imported (a fresh SQLite database under /tmp, as ``ctx import`` stores it). Where its last
message is a counted reply, STATUS is ``exact``: the newest response's input + cache tokens. The
estimate STATUS would give in its place (the exact count set aside) is compared with it twice: as
shipped, with the harness worked out from the first response (``selectors.usage.harness_tokens``),
and without it (the transcript's messages alone). Prints each file's ratio and the spread. See
docs/INGEST.md, "Exact counts".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHARED = Path(os.environ.get("CTX_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    files = args.files or sorted((SHARED / "claude_code").glob("*.jsonl"))
    database = Path(tempfile.mkdtemp(prefix="ctx-estimate-")) / "db.sqlite3"
    os.environ.update(DJANGO_SETTINGS_MODULE="ctxweb.settings", DATABASE_URL=f"sqlite:///{database}")
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from compaction.transcripts import read_transcript
    from sessions_app.models import AgentSession
    from sessions_app.selectors.usage import session_status
    from sessions_app.services import importing, projects

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("bench")
    shipped, bare = [], []
    print(f"{'file':42} {'exact':>8} {'estimate':>9} {'ratio':>6} {'no harness':>11} {'ratio':>6}")
    for n, path in enumerate(files):
        project = projects.project_create(user=user, name=f"{n} {path.name}")
        project.policy.auto = False
        project.policy.save()
        result = importing.session_import(
            user=user, project=project, transcript=read_transcript(path.read_bytes(), "claude-code")
        )
        status = session_status(result.session)
        if status["token_source"] != "exact":
            continue
        exact = status["used"]
        AgentSession.objects.filter(pk=result.session.pk).update(exact_upto_seq=None)
        estimate = session_status(AgentSession.objects.get(pk=result.session.pk))["used"]
        AgentSession.objects.filter(pk=result.session.pk).update(harness_read_tokens=None)
        without = session_status(AgentSession.objects.get(pk=result.session.pk))["used"]
        shipped.append(estimate / exact)
        bare.append(without / exact)
        print(f"{path.name[:42]:42} {exact:8} {estimate:9} {estimate / exact:6.2f} {without:11} {without / exact:6.2f}")
    for name, ratios in (("with the harness", shipped), ("messages alone", bare)):
        print(f"{name}: {len(ratios)} files, estimate ÷ exact min {min(ratios):.2f} median "
              f"{statistics.median(ratios):.2f} max {max(ratios):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
