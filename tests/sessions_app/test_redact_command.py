"""``ctx redact``: what was stored in the clear before redaction came is redacted in place, originals and
documents included; a dry run writes nothing; a run stopped after any batch continues where it
stopped; the sessions' totals stay the sums of their messages as stored."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum

from compaction.redact import MARKER
from sessions_app.engine import offline_tokenizer
from sessions_app.models import (
    CONTEXT_STATES,
    AgentSession,
    BackfillCursor,
    Checkpoint,
    HandoffDocument,
    Message,
    MessageBackup,
    TranscriptChunk,
)
from sessions_app.services import agent_sessions, compaction_runs, redaction_backfill, reverting
from tests.redacted import table_text
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

GITHUB = "ghp_" + "Zq8mW2xK4vN7bT1cR5yL9pD3" + "fH6jA0sE2uG8"
AWS = "AKIA" + "Q7XW2ZK9PL4M8N3R"
LINE = '{"type": "user", "message": {"content": "export AWS_ACCESS_KEY_ID=' + AWS + '"}}\n'


def clear_text_history(team) -> AgentSession:
    """A session written as an older ctxweb wrote it: secrets in its prompt, messages, the originals
    a compaction kept, its checkpoint, a handoff document and the sync's raw text."""
    session = agent_sessions.session_create(
        user=team.alice.user, project=team.project, name="old", context_window=6_000, auto_compact=False
    )
    append(session, agent_rounds(8, seed=3, output_lines=40))
    record = compaction_runs.compaction_request(session=session, level="compact", user=None)
    compaction_runs.compaction_run(record.pk)
    # What redaction would have replaced, written over the rows as they were before it came.
    AgentSession.objects.filter(pk=session.pk).update(system_prompt=f"token {GITHUB}")
    for row in Message.objects.filter(session=session).order_by("seq")[:6]:
        Message.objects.filter(pk=row.pk).update(content=f"{row.content!s:.200} key {AWS} and {GITHUB}")
    MessageBackup.objects.filter(compaction_id=record.pk).update(content=f"the original with {GITHUB}")
    Checkpoint.objects.create(session=session, version=99, data={"summary_text": f"used {AWS}"}, upto_seq=1)
    HandoffDocument.objects.create(session=session, text=f"Keys: {GITHUB}", markdown=f"`{AWS}`", data={})
    TranscriptChunk.objects.create(session=session, start=0, data=LINE.encode())
    return session


def run(*args: str) -> dict:
    out = StringIO()
    call_command("ctx", "redact", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def test_a_dry_run_counts_and_writes_nothing_then_a_run_leaves_no_secret(team):
    session = clear_text_history(team)
    before = table_text()
    counted = run("--dry-run")
    assert table_text() == before and not BackfillCursor.objects.exists()
    assert counted["found"]["github-token"] >= 9 and counted["found"]["aws-access-key"] >= 7
    assert counted["tables"]["messages"]["changed"] == 6

    done = run()
    assert done["found"] == counted["found"]
    stored = table_text()
    assert GITHUB not in stored and AWS not in stored and MARKER.search(stored)
    session.refresh_from_db()
    # Totals are of what is stored now: every message recounted, the context's sum kept.
    for row in Message.objects.filter(session=session):
        assert row.tokens == offline_tokenizer().count_message(row.role, row.content)
    in_context = Message.objects.filter(session=session, state__in=CONTEXT_STATES).aggregate(n=Sum("tokens"))["n"]
    assert session.message_tokens == in_context
    assert session.redactions["github-token"] >= 7 and session.redactions["aws-access-key"] == 6
    again = run("--restart")  # from the first row: everything read again, nothing left to replace
    assert again["found"] == {} and again["tables"]["messages"]["read"] == Message.objects.count()


def test_a_run_stopped_after_any_batch_continues_where_it_stopped(team):
    clear_text_history(team)
    stopped = redaction_backfill.stored_redact(batch=2)
    first = next(stopped)
    assert (first.table, first.read) == ("messages", 2)
    stopped.close()  # the process died here
    rest = run("--batch", "3")
    assert rest["tables"]["messages"]["read"] == Message.objects.count() - 2  # not from the first row again
    stored = table_text()
    assert GITHUB not in stored and AWS not in stored


def test_a_revert_after_the_run_restores_the_redacted_original(team):
    session = clear_text_history(team)
    run()
    record = session.compactions.get(status="succeeded")
    backups = dict(MessageBackup.objects.filter(compaction=record).values_list("message_id", "content"))
    reverting.compaction_revert(compaction=record)
    restored = dict(Message.objects.filter(pk__in=backups).values_list("pk", "content"))
    assert restored == backups and all(GITHUB not in json.dumps(c) for c in restored.values())
