"""The memory pruner with the clock moved forward (time-machine, no sleeping): archive, purge and
trim happen exactly when due, dry runs count what real runs do, headers survive, nothing twice."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import strategies as st

from ctxweb.celery import app
from sessions_app.errors import Conflict
from sessions_app.models import AgentSession, ArchiveEntry, Compaction, Message, MessageBackup, Project
from sessions_app.selectors import model_context
from sessions_app.services import compaction_runs, retention, reverting
from tests.sessions_app.compaction_helpers import agent_rounds, append, rows_of

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def at(delta: timedelta):
    return time_machine.travel(T0 + delta, tick=False)


def counts(**changes: int) -> dict:
    base = dict.fromkeys(
        (
            "sessions_archived",
            "messages_archived",
            "backups_purged",
            "context_documents_trimmed",
            "context_lines_archived",
        ),
        0,
    )
    return {**base, **changes}


@pytest.fixture
def quiet(session_of):
    """A session last active at T0."""
    with at(timedelta(0)):
        session = session_of(name="quiet", auto_compact=False)
        append(session, [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
    return session


def test_inactive_sessions_are_archived_exactly_when_due(quiet):
    rows = rows_of(quiet)
    with at(timedelta(days=30, seconds=-1)):
        assert retention.prune_run(dry_run=True) == {"dry_run": True, **counts()}
        assert retention.prune_run() == {"dry_run": False, **counts()}
    assert rows_of(quiet) == rows
    with at(timedelta(days=30, seconds=1)):
        planned = retention.prune_run(dry_run=True)
        assert rows_of(quiet) == rows and not ArchiveEntry.objects.exists()  # a dry run writes nothing
        done = retention.prune_run()
    assert planned == {**done, "dry_run": True} == {"dry_run": True, **counts(sessions_archived=1, messages_archived=2)}
    quiet.refresh_from_db()
    assert quiet.status == "archived" and quiet.active_message_count == 0 and quiet.message_tokens == 0
    assert list(Message.objects.filter(session=quiet).values_list("state", flat=True)) == ["archived", "archived"]
    # Out of the context, still there to read and download.
    assert model_context.session_context(quiet)["messages"] == []
    assert [m.content for m in model_context.message_list(quiet, state="archived")] == ["hello", "hi"]
    entry = ArchiveEntry.objects.get()
    contents = json.dumps(["hello", "hi"], sort_keys=True, ensure_ascii=False)
    assert (entry.kind, entry.session_id, entry.items) == ("messages", quiet.pk, 2)
    assert entry.content_hash == hashlib.sha256(contents.encode()).hexdigest() and "state=archived" in entry.location
    assert entry.created_at == T0 + timedelta(days=30, seconds=1)
    with at(timedelta(days=90)):
        assert retention.prune_run() == {"dry_run": False, **counts()}  # never twice
    assert ArchiveEntry.objects.count() == 1


def test_an_archived_session_takes_no_more_messages(api_as, team, quiet):
    with at(timedelta(days=31)):
        retention.prune_run()
    response = api_as(team.bob).post(f"/api/v1/sessions/{quiet.pk}/messages/", {"role": "user", "content": "back"})
    assert (response.status_code, response.json()["code"]) == (409, "session_closed")


def test_activity_and_the_policy_decide(quiet, session_of, team):
    with at(timedelta(days=20)):
        busy = session_of(name="busy", auto_compact=False)
        append(busy, [{"role": "user", "content": "still here"}])
    team.project.policy.prune_days = 45
    team.project.policy.save()
    with at(timedelta(days=31)):
        assert retention.prune_run(dry_run=True)["sessions_archived"] == 0
        assert retention.prune_run(dry_run=True, older_than_days=10)["sessions_archived"] == 2
    with at(timedelta(days=46)):
        assert retention.prune_run()["sessions_archived"] == 1
    busy.refresh_from_db()
    assert busy.status == "active"


def test_expired_backups_are_purged_and_logged(session_of):
    with at(timedelta(0)):
        session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
        append(session, agent_rounds(24))
        record = compaction_runs.compaction_request(session=session, level="compact", user=None)
        compaction_runs.compaction_run(record.pk)
    record.refresh_from_db()
    backups = MessageBackup.objects.filter(compaction=record).count()
    assert backups > 0 and record.revertible_until == T0 + timedelta(hours=24)
    with at(timedelta(hours=24, seconds=-1)):
        assert retention.prune_run(dry_run=True)["backups_purged"] == 0
    with at(timedelta(hours=24, seconds=1)):
        assert retention.prune_run(dry_run=True)["backups_purged"] == backups
        assert retention.prune_run()["backups_purged"] == backups
        with pytest.raises(Conflict) as refused:
            reverting.compaction_revert(compaction=record)
    assert refused.value.code == "revert_window_passed"
    assert not MessageBackup.objects.exists()
    entry = ArchiveEntry.objects.get(kind="backups")
    assert entry.items == backups and entry.session_id == session.pk and len(entry.content_hash) == 64


def test_a_session_waits_for_its_revert_window_before_it_is_archived(session_of):
    with at(timedelta(0)):
        session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
        append(session, agent_rounds(8))
        record = compaction_runs.compaction_request(session=session, level="compact", user=None)
        compaction_runs.compaction_run(record.pk)
    Compaction.objects.filter(pk=record.pk).update(revertible_until=T0 + timedelta(days=40))
    with at(timedelta(days=31)):
        assert retention.prune_run()["sessions_archived"] == 0
    with at(timedelta(days=41)):
        done = retention.prune_run()
    assert done["sessions_archived"] == 1 and done["backups_purged"] > 0


def document(sections: int, lines_each: int) -> str:
    out = []
    for s in range(sections):
        out.append(f"## Section {s}")
        out += [f"note {s}.{i}" for i in range(lines_each)]
    return "\n".join(out) + "\n"


def test_a_long_context_document_keeps_its_headers_and_archives_the_oldest_lines(team):
    text = document(12, 49)  # 600 lines, 12 headers
    Project.objects.filter(pk=team.project.pk).update(context_document=text)
    with at(timedelta(0)):
        planned = retention.prune_run(dry_run=True)
        assert Project.objects.get(pk=team.project.pk).context_document == text
        done = retention.prune_run()
    assert planned == {**done, "dry_run": True}
    assert (done["context_documents_trimmed"], done["context_lines_archived"]) == (1, 100)
    kept = Project.objects.get(pk=team.project.pk).context_document
    lines = kept.splitlines()
    assert len(lines) == 500
    assert [line for line in lines if line.startswith("#")] == [f"## Section {s}" for s in range(12)]
    archived = [line for line in text.splitlines() if not line.startswith("#")][:100]
    assert [line for line in lines if not line.startswith("#")] == [
        line for line in text.splitlines() if not line.startswith("#")
    ][100:]
    entry = ArchiveEntry.objects.get(kind="context_document")
    assert entry.content.splitlines() == archived and entry.items == 100
    assert entry.content_hash == hashlib.sha256(entry.content.encode()).hexdigest()
    assert retention.prune_run()["context_documents_trimmed"] == 0  # never twice


def test_headers_alone_over_the_limit_are_all_kept():
    text = "\n".join(f"# H{i}\nbody {i}" for i in range(8))
    kept, archived = retention.trim_document(text, 5)
    assert [line for line in kept.splitlines()] == [f"# H{i}" for i in range(8)]
    assert archived.splitlines() == [f"body {i}" for i in range(8)]


def test_ctx_prune_dry_run_reports_what_the_real_run_does(quiet):
    def run(*args: str) -> dict:
        out = io.StringIO()
        call_command("ctx", "prune", *args, "--json", stdout=out)
        return json.loads(out.getvalue())

    with at(timedelta(days=3)):
        assert run("--dry-run")["sessions_archived"] == 0
        preview = run("--dry-run", "--older-than", "2")
        real = run("--older-than", "2")
    assert preview == {**real, "dry_run": True} and real["messages_archived"] == 2
    assert AgentSession.objects.get(pk=quiet.pk).status == "archived"


def test_the_schedule_is_seeded_for_beat_and_names_real_tasks():
    from django_celery_beat.models import PeriodicTask

    app.loader.import_default_modules()
    jobs = dict(PeriodicTask.objects.values_list("task", "enabled"))
    expected = {
        "sessions_app.tasks.prune",
        "sessions_app.tasks.expire_compaction_backups",
        "sessions_app.tasks.requeue_stale_compactions",
    }
    assert set(jobs) >= expected and all(jobs[name] for name in expected)
    assert expected <= set(app.tasks)


def test_the_prune_task_runs_the_service(quiet):
    from sessions_app import tasks

    with at(timedelta(days=31)):
        assert tasks.prune.apply().get()["sessions_archived"] == 1
        assert tasks.expire_compaction_backups.apply().get()["sessions_archived"] == 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(items=st.lists(json_values, max_size=6))
def test_the_streamed_hash_is_the_hash_of_the_whole_list(items):
    assert retention._sha256_of_list(iter(items)) == retention._sha256(items)


def test_a_plan_reads_counts_per_project_and_a_run_archives_one_session_at_a_time(team, session_of):
    with at(timedelta(0)):
        sessions = [session_of(name=f"q{i}", auto_compact=False) for i in range(6)]
        for session in sessions:
            append(session, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    projects = Project.objects.count()
    with at(timedelta(days=31)), CaptureQueriesContext(connection) as planning:
        planned = retention.prune_plan()
    # One query for the projects, one per project, one for backups, one for documents: however many
    # sessions or messages there are, and no message id is read.
    assert len(planning.captured_queries) == projects + 3
    assert [s.messages for s in planned.sessions] == [2] * 6
    with at(timedelta(days=31)), CaptureQueriesContext(connection) as running:
        assert retention.prune_run()["messages_archived"] == 12
    sql = [q["sql"] for q in running.captured_queries]
    transactions = [q for q in sql if q.startswith(("SAVEPOINT", "BEGIN"))]
    assert len(transactions) >= len(sessions)  # a transaction (or savepoint, inside the test's) per session
    assert not [q for q in sql if q.startswith("UPDATE") and '"sessions_app_message"."id" IN' in q]  # by session
