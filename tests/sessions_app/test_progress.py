"""Progress of long CLI work: the services report (done, total) from 0 up to the total, never back;
the CLI draws it on stderr, and `--json` keeps stdout to one JSON object with no bar anywhere."""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from sessions_app.models import AgentSession, IngestRejection, Message
from sessions_app.services import importing, recorded, retention
from tests.sessions_app.compaction_helpers import agent_rounds, append
from tests.shared_data import SHARED_DATA

pytestmark = pytest.mark.django_db

FILES = sorted((SHARED_DATA / "claude_code").glob("*.jsonl"))[:12] or [SHARED_DATA / "missing.jsonl"]


def assert_climbs_to_the_total(calls: list[tuple[int, int]]) -> int:
    assert calls and calls[0][0] == 0
    totals = {total for _, total in calls}
    assert len(totals) == 1, totals
    (total,) = totals
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == total
    return total


@pytest.mark.data
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_an_import_reports_every_message_of_every_conversation(shared_data, team, path):
    calls: list[tuple[int, int]] = []
    transcript = importing.transcript_parse(path.read_bytes(), "claude-code")
    result = importing.session_import(
        user=team.alice.user,
        project=team.project,
        transcript=transcript,
        on_progress=lambda done, total: calls.append((done, total)),
    )
    total = assert_climbs_to_the_total(calls)
    sessions = [result.session, *result.sidechains]
    imported = [next(c for c in transcript.conversations if not c.sidechain)]
    imported += [c for c in transcript.conversations if c.sidechain]
    assert total == sum(len(recorded.candidates(c, Counter())) for c in imported)
    # Every message counted is stored or recorded as skipped, in one of the sessions made.
    stored = Message.objects.filter(session__in=sessions).count()
    rejected = IngestRejection.objects.filter(session__in=sessions).count()
    assert 0 < stored + rejected <= total


def test_prune_reports_each_item(team, session_of):
    sessions = [session_of(name=f"old{n}", auto_compact=False) for n in range(4)]
    for session in sessions:
        append(session, agent_rounds(1, output_lines=5))
    AgentSession.objects.filter(pk__in=[s.pk for s in sessions[:3]]).update(
        last_activity_at=timezone.now() - timedelta(days=90)
    )
    calls: list[tuple[int, int]] = []
    counts = retention.prune_run(on_progress=lambda done, total: calls.append((done, total)))
    assert assert_climbs_to_the_total(calls) == 3 == counts["sessions_archived"]
    assert len(calls) == 4  # 0, 1, 2, 3


def test_the_cli_draws_a_bar_on_stderr_and_json_stays_one_object(team, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": f"message {n}"} for n in range(30)]))
    out, err = io.StringIO(), io.StringIO()
    call_command("ctx", "import", str(path), "--format", "openai", "--json", stdout=out, stderr=err)
    data = json.loads(out.getvalue())
    assert data["messages"] == 30
    assert "Storing" not in err.getvalue() and "━" not in out.getvalue() + err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    call_command("ctx", "import", str(path), "--format", "openai", "--progress", stdout=out, stderr=err)
    assert "Storing messages" in err.getvalue() and "30/30" in err.getvalue()
    assert "Imported 30 messages" in out.getvalue()
    out, err = io.StringIO(), io.StringIO()
    call_command("ctx", "prune", "--json", stdout=out, stderr=err)
    assert set(json.loads(out.getvalue())) >= {"sessions_archived", "backups_purged"} and err.getvalue() == ""
