"""What the append and status path costs in queries, and the shortcuts it takes to keep that low:
each shortcut must answer exactly what the plain ORM query answered."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from sessions_app.models import Checkpoint, Compaction, CompactionStatus, Message
from sessions_app.selectors import usage
from tests.hypothesis_budget import DATABASE

pytestmark = pytest.mark.django_db

STATUSES = [s.value for s in CompactionStatus]
BASE = timezone.now().replace(microsecond=0)

compaction_rows = st.lists(
    st.fixed_dictionaries(
        {
            "status": st.sampled_from(STATUSES),
            "created": st.integers(0, 50),  # minutes after BASE; ties on purpose (then the id decides)
            "started": st.none() | st.integers(0, 50),
            "finished": st.none() | st.integers(0, 60),
            "revertible": st.booleans(),
            "notes": st.lists(
                st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=20),
                max_size=3,
            ),
        }
    ),
    max_size=6,
)


def _orm_answer(session) -> dict | None:
    """What STATUS read with two ORM queries before the probe was written out."""
    latest = session.compactions.values("status", "created_at", "started_at", "notes").first()
    if latest is None:
        return None
    changed = (
        session.compactions.filter(status=CompactionStatus.SUCCEEDED, revertible_until__isnull=False)
        .order_by("-finished_at")
        .exclude(finished_at__isnull=True)
        .values_list("finished_at", flat=True)
        .first()
    )
    return {**latest, "last_changed_at": changed}


@hsettings(DATABASE)
@given(rows=compaction_rows)
def test_statuss_compaction_probe_answers_what_the_orm_answers(session_of, rows):
    session = session_of()
    Compaction.objects.filter(session=session).delete()
    for row in rows:
        minutes = timedelta(minutes=1)
        record = Compaction.objects.create(
            session=session, project_id=session.project_id, level="compact", trigger="manual"
        )
        # Only one queued or running compaction per session: others are recorded finished.
        status = row["status"]
        if (
            status in ("queued", "running")
            and Compaction.objects.filter(session=session, status__in=["queued", "running"]).exists()
        ):
            status = "failed"
        Compaction.objects.filter(pk=record.pk).update(
            status=status,
            created_at=BASE + row["created"] * minutes,
            started_at=None if row["started"] is None else BASE + row["started"] * minutes,
            finished_at=None if row["finished"] is None else BASE + row["finished"] * minutes,
            revertible_until=BASE + timedelta(days=1) if row["revertible"] else None,
            notes=row["notes"],
        )
    assert usage._latest_compaction(session) == _orm_answer(session)


def test_message_and_checkpoint_queries_do_not_join_the_session():
    # Ordering by the relation made every message query join AgentSession and sort by its columns.
    for queryset in (Message.objects.filter(session_id=1), Checkpoint.objects.filter(session_id=1)):
        sql = str(queryset.query).lower()
        assert "join" not in sql and "agentsession" not in sql


def test_an_append_makes_twelve_queries_or_fewer(team, api_as, session_of, django_assert_max_num_queries):
    session = session_of(model="claude-sonnet-4-5")
    api = api_as(team.bob)
    first = {"role": "user", "content": "hello", "client_id": "m0"}
    assert api.post(f"/api/v1/sessions/{session.pk}/messages/", first).status_code == 201
    call = {
        "role": "assistant",
        "client_id": "m1",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
    }
    # Key, session with role, BEGIN, lock, client ids, tool ids, two INSERTs, UPDATE, the day's figures,
    # COMMIT, STATUS's compaction probe: 12 (it was 15 before issue 16, without the day's figures). On
    # PostgreSQL the INSERTs, the UPDATE and the day's figures are one statement (``sql_rows.rows_with``).
    with django_assert_max_num_queries(9 if connection.vendor == "postgresql" else 12):
        answer = api.post(f"/api/v1/sessions/{session.pk}/messages/", call)
    assert answer.status_code == 201 and answer.json()["status"]["last_seq"] == 2


def test_the_session_lookup_takes_the_role_from_its_own_join(team, api_as, session_of):
    session = session_of()
    message = {"role": "user", "content": "hi"}
    assert api_as(team.carol).post(f"/api/v1/sessions/{session.pk}/messages/", message).status_code == 403
    assert api_as(team.mallory).post(f"/api/v1/sessions/{session.pk}/messages/", message).status_code == 404
    assert api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/messages/", message).status_code == 201
    assert Message.objects.filter(session=session).count() == 1


@pytest.mark.postgres  # index introspection below is PostgreSQL's
def test_the_index_migration_kept_the_one_active_compaction_rule_and_dropped_only_duplicates():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename LIKE 'sessions_app_%'")
        indexes = dict(cursor.fetchall())
    assert "UNIQUE" in indexes["compaction_one_active_per_session"]
    assert "WHERE (compaction_id IS NOT NULL)" in indexes["message_compaction"]
    single_session_id = [
        name for name, sql in indexes.items() if "sessions_app_message " in sql and sql.endswith("(session_id)")
    ]
    assert single_session_id == []
    # What the dropped indexes served is still served by a composite index leading with the column.
    assert any(sql.endswith("(session_id, seq)") for sql in indexes.values())
