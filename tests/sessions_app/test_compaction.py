"""The compaction lifecycle through REST and services (embedded mode: tasks run in-process)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from compaction.context import SUMMARY_OPEN
from sessions_app import tasks
from sessions_app.models import AgentSession, Checkpoint, Compaction, Message, MessageBackup
from sessions_app.selectors import model_context, usage
from sessions_app.services import compaction_records, compaction_runs, planning
from tests.sessions_app.compaction_helpers import agent_rounds, append, rows_of, totals_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy(session_of):
    """A session well past the compact threshold of a 30k window, auto-compaction off (tests drive it)."""
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    return session


def compact(api, session, level="compact", **extra):
    return api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": level, **extra})


def stored_totals_match(session: AgentSession) -> None:
    session.refresh_from_db()
    live = Message.objects.filter(session=session, state__in=["active", "compacted"])
    assert session.message_tokens == (live.aggregate(t=Sum("tokens"))["t"] or 0)
    assert session.active_message_count == live.count()


def last_user_text(session: AgentSession) -> str:
    row = Message.objects.filter(session=session, role="user").order_by("-seq").first()
    assert row is not None
    return row.content


def test_manual_compact_shrinks_old_tool_output_and_reports_items(busy, api_as, team):
    before = usage.session_status(busy)
    response = compact(api_as(team.bob), busy)
    assert response.status_code == 202, response.content
    record = response.json()
    assert record["status"] == "succeeded", record
    assert record["tokens_after"] < record["tokens_before"] == before["used"]
    assert record["saved_tokens"] == record["tokens_before"] - record["tokens_after"]
    assert record["items"] and {i["strategy"] for i in record["items"]} <= {"tool_output", "duplicate", "verbose"}
    assert all(i["tokens_after"] < i["tokens_before"] for i in record["items"])
    after = api_as(team.bob).get(f"/api/v1/sessions/{busy.pk}/status/").json()
    assert after["used"] == record["tokens_after"]
    assert after["compacted"] is True
    stored_totals_match(busy)
    changed = Message.objects.filter(session=busy, state="compacted")
    assert changed.count() == len({i["seq"] for i in record["items"]})
    assert MessageBackup.objects.filter(compaction_id=record["id"]).count() == changed.count()


def test_revert_restores_every_row_byte_for_byte(busy, api_as, team):
    rows, totals = rows_of(busy), totals_of(busy)
    context_before = model_context.session_context(busy)
    record = compact(api_as(team.bob), busy).json()
    assert rows_of(busy) != rows
    reverted = api_as(team.bob).post(f"/api/v1/compactions/{record['id']}/revert/")
    assert reverted.status_code == 200, reverted.content
    assert reverted.json()["status"] == "reverted"
    assert rows_of(busy) == rows
    assert totals_of(busy) == totals
    context_after = model_context.session_context(busy)
    context_before.pop("status"), context_after.pop("status")
    assert context_after == context_before
    again = api_as(team.bob).post(f"/api/v1/compactions/{record['id']}/revert/")
    assert (again.status_code, again.json()["code"]) == (409, "not_revertible")


def test_only_the_newest_compaction_within_its_window_reverts(busy, api_as, team):
    bob = api_as(team.bob)
    first = compact(bob, busy).json()
    append(busy, agent_rounds(12, seed=2, start=100))
    second = compact(bob, busy).json()
    assert second["status"] == "succeeded"
    older = bob.post(f"/api/v1/compactions/{first['id']}/revert/")
    assert (older.status_code, older.json()["code"]) == (409, "not_newest")
    Compaction.objects.filter(pk=second["id"]).update(revertible_until=timezone.now() - timedelta(seconds=1))
    expired = bob.post(f"/api/v1/compactions/{second['id']}/revert/")
    assert (expired.status_code, expired.json()["code"]) == (409, "revert_window_passed")


def test_stacked_compactions_revert_in_order_to_the_original(busy, api_as, team):
    bob = api_as(team.bob)
    rows = rows_of(busy)
    first = compact(bob, busy).json()
    second = compact(bob, busy, level="summarize").json()
    assert second["status"] == "succeeded", second["error"]
    assert bob.post(f"/api/v1/compactions/{second['id']}/revert/").status_code == 200
    assert bob.post(f"/api/v1/compactions/{first['id']}/revert/").status_code == 200
    assert rows_of(busy) == rows
    stored_totals_match(busy)


def test_dry_run_previews_and_writes_nothing(busy, api_as, team):
    rows, totals = rows_of(busy), totals_of(busy)
    response = compact(api_as(team.bob), busy, dry_run=True)
    assert response.status_code == 200
    preview = response.json()
    assert preview["dry_run"] is True and preview["saved_tokens"] > 0
    assert preview["strategies"] and all(v["tokens_after"] < v["tokens_before"] for v in preview["strategies"].values())
    summarize = compact(api_as(team.bob), busy, level="summarize", dry_run=True).json()
    assert "summarize" in summarize["strategies"] and summarize["checkpoint"]["objective"]
    assert rows_of(busy) == rows and totals_of(busy) == totals
    assert not Compaction.objects.exists() and not Checkpoint.objects.exists()


def test_summarize_checkpoints_old_turns_and_keeps_the_context_valid(busy, api_as, team):
    last_prompt = last_user_text(busy)
    record = compact(api_as(team.bob), busy, level="summarize").json()
    assert record["status"] == "succeeded", record
    status = api_as(team.bob).get(f"/api/v1/sessions/{busy.pk}/status/").json()
    assert status["usage_percent"] < 50
    assert status["summary"] > 0
    checkpoint = Checkpoint.objects.get(session=busy)
    assert checkpoint.version == 1 and checkpoint.lossy and checkpoint.compaction_id == record["id"]
    assert (
        checkpoint.data["compaction_info"]["messages_compacted"]
        == Message.objects.filter(session=busy, state="summarized").count()
        > 0
    )
    context = api_as(team.bob).get(f"/api/v1/sessions/{busy.pk}/context/").json()
    first = context["messages"][0]
    first_text = first["content"] if isinstance(first["content"], str) else first["content"][0]["text"]
    assert first_text.startswith(SUMMARY_OPEN)
    texts = json.dumps(context["messages"])
    assert json.dumps(last_prompt)[1:-1] in texts
    stored_totals_match(busy)
    listed = api_as(team.carol).get(f"/api/v1/sessions/{busy.pk}/checkpoints/").json()["results"]
    assert [c["id"] for c in listed] == [checkpoint.pk]


@pytest.mark.parametrize("length", [1, 188, 189, 200])
def test_a_continuation_keeps_the_name_within_its_column(busy, api_as, team, length):
    """ " (continued)" follows the old name; a name that fills the column is shortened to make room
    (a 200-character name used to make the handoff fail with a 400)."""
    AgentSession.objects.filter(pk=busy.pk).update(name="n" * length)
    response = api_as(team.bob).post(f"/api/v1/sessions/{busy.pk}/handoff/", {"continue": True})
    assert response.status_code == 201, response.content
    name = AgentSession.objects.get(pk=response.json()["continuation"]).name
    assert name.endswith(" (continued)") and len(name) <= 200
    assert name == "n" * length + " (continued)" if length <= 188 else name == "n" * 187 + "… (continued)"


def test_handoff_with_continue_starts_a_fresh_session(busy, api_as, team):
    response = api_as(team.bob).post(f"/api/v1/sessions/{busy.pk}/handoff/", {"continue": True})
    assert response.status_code == 201, response.content
    handoff = response.json()
    busy.refresh_from_db()
    assert busy.status == "handed_off"
    fresh = AgentSession.objects.get(pk=handoff["continuation"])
    assert (fresh.parent_id, fresh.model, fresh.system_prompt, fresh.tools) == (
        busy.pk,
        busy.model,
        busy.system_prompt,
        busy.tools,
    )
    first = Message.objects.get(session=fresh, seq=1)
    assert first.role == "user" and "CURRENT TASK" in json.dumps(first.content).upper()
    checkpoint = Checkpoint.objects.get(pk=handoff["checkpoint"])
    assert checkpoint.reason == "context_overflow"
    for section in (
        "CURRENT TASK",
        "COMPLETED",
        "IN PROGRESS",
        "NEXT STEPS",
        "FILES MODIFIED",
        "BLOCKING ISSUES",
        "DECISIONS MADE",
        "CONTEXT FOR CONTINUATION",
    ):
        assert section in handoff["text"]
    closed = api_as(team.bob).post(f"/api/v1/sessions/{busy.pk}/messages/", {"role": "user", "content": "hi"})
    assert (closed.status_code, closed.json()["code"]) == (409, "session_closed")


@pytest.mark.parametrize(
    ("fmt", "ctype"), [("txt", "text/plain"), ("md", "text/markdown"), ("json", "application/json")]
)
def test_handoff_downloads(busy, api_as, team, fmt, ctype):
    handoff = api_as(team.bob).post(f"/api/v1/sessions/{busy.pk}/handoff/", {}).json()
    busy.refresh_from_db()
    assert busy.status == "active"  # without continue the session stays open
    response = api_as(team.carol).get(f"/api/v1/handoffs/{handoff['id']}/download/?format={fmt}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith(ctype)
    assert "attachment" in response["Content-Disposition"] and response["Content-Disposition"].endswith(f'.{fmt}"')
    body = response.content.decode()
    if fmt == "json":
        assert json.loads(body) == handoff["data"]
    else:
        assert "NEXT STEPS" in body.upper().replace("#", "").replace("*", "")
    bad = api_as(team.carol).get(f"/api/v1/handoffs/{handoff['id']}/download/?format=pdf")
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_format")


def test_roles_and_outsiders(busy, api_as, team):
    viewer = compact(api_as(team.carol), busy)
    assert (viewer.status_code, viewer.json()["code"]) == (403, "permission_denied")
    record = compact(api_as(team.bob), busy).json()
    handoff = api_as(team.bob).post(f"/api/v1/sessions/{busy.pk}/handoff/", {}).json()
    mallory = api_as(team.mallory)
    for path in (
        f"/api/v1/compactions/{record['id']}/",
        f"/api/v1/sessions/{busy.pk}/compactions/",
        f"/api/v1/checkpoints/{handoff['checkpoint']}/",
        f"/api/v1/handoffs/{handoff['id']}/download/?format=txt",
    ):
        assert mallory.get(path).status_code == 404, path
    assert mallory.post(f"/api/v1/compactions/{record['id']}/revert/").status_code == 404
    assert api_as(team.carol).post(f"/api/v1/compactions/{record['id']}/revert/").status_code == 403
    assert mallory.post(f"/api/v1/sessions/{busy.pk}/handoff/", {}).status_code == 404


def test_bad_compaction_requests(busy, api_as, team):
    bob = api_as(team.bob)
    bad_level = compact(bob, busy, level="explode")
    assert (bad_level.status_code, bad_level.json()["code"]) == (400, "invalid_choice")
    assert bob.post(f"/api/v1/sessions/{busy.pk}/compactions/", "[]").json()["code"] == "invalid_body"
    assert bob.get("/api/v1/compactions/999999/").status_code == 404
    Compaction.objects.create(session=busy, project_id=busy.project_id, level="compact")  # one already queued
    busy_again = compact(bob, busy)
    assert (busy_again.status_code, busy_again.json()["code"]) == (409, "compaction_in_progress")
    assert Compaction.objects.filter(session=busy).count() == 1


def test_appends_past_the_threshold_compact_automatically_once(session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000)
    append(session, agent_rounds(24))
    records = list(Compaction.objects.filter(session=session))
    assert len(records) >= 1 and records[0].trigger == "auto"
    assert any(r.status == "succeeded" for r in records)
    count = len(records)
    append(session, [{"role": "assistant", "content": "ok"}])  # a tiny append: no new compaction
    assert Compaction.objects.filter(session=session).count() == count
    stored_totals_match(session)


def test_auto_compaction_respects_the_switch(session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    assert not Compaction.objects.filter(session=session).exists()
    assert usage.session_status(session)["will_compact"] is False


def test_three_failures_pause_auto_compaction_until_a_manual_success(busy, monkeypatch):
    from compaction.errors import EngineError

    rows = rows_of(busy)

    def broken(*args, **kwargs):
        raise EngineError("the summarizer is broken", permanent=True, code="broken")

    monkeypatch.setattr(planning, "plan_run", broken)
    for _ in range(3):
        record = compaction_runs.compaction_request(session=busy, level="compact", user=None, trigger="auto")
        compaction_runs.compaction_run(record.pk)
        record.refresh_from_db()
        assert record.status == "failed" and "broken" in record.error
    assert rows_of(busy) == rows
    busy.refresh_from_db()
    status = usage.session_status(busy)
    assert busy.auto_paused and status["will_compact"] is False
    assert any("paused" in w for w in status["warnings"]) and any("broken" in w for w in status["warnings"])
    monkeypatch.undo()
    record = compaction_runs.compaction_request(session=busy, level="compact", user=None)
    assert compaction_runs.compaction_run(record.pk) == "succeeded"
    busy.refresh_from_db()
    assert not busy.auto_paused and busy.compaction_failures == 0


def test_claim_is_taken_once_and_a_stale_run_is_reclaimed(busy, settings):
    record = Compaction.objects.create(session=busy, project_id=busy.project_id, level="compact")
    assert compaction_records.claim(record.pk) is True
    assert compaction_records.claim(record.pk) is False  # running and fresh: nobody else takes it
    old = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    Compaction.objects.filter(pk=record.pk).update(started_at=old)
    assert compaction_records.claim(record.pk) is True
    record.refresh_from_db()
    assert record.attempts == 2


def test_automatic_compaction_escalates_with_the_level(session_of):
    """A session past the summarize threshold whose tool outputs are too small to prune: the
    reversible step can't make room, so the same run checkpoints the older turns."""
    session = session_of(model="claude-sonnet-4-5", auto_compact=False)
    append(session, agent_rounds(40, output_lines=2))
    used = usage.session_status(session)["used"]
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=int(used / 0.9), auto_compact=None)
    session.refresh_from_db()
    append(session, [{"role": "assistant", "content": "Working on it."}])
    record = Compaction.objects.get(session=session)
    assert (record.trigger, record.level, record.status) == ("auto", "summarize", "succeeded"), record.error
    assert {i["strategy"] for i in record.items} >= {"summarize", "checkpoint"}
    assert Checkpoint.objects.filter(session=session, compaction=record).exists()
    status = usage.session_status(session)
    assert status["usage_percent"] < 50 and status["compacted"]
    stored_totals_match(session)


def test_a_session_still_past_the_handoff_threshold_gets_a_handoff_document(session_of):
    """The newest turn alone fills the window: nothing older can make room, so after compacting the
    worker writes the handoff document the agent can continue from (the session stays open)."""
    session = session_of(model="claude-sonnet-4-5", context_window=4_000)
    huge = "Please review this log:\n" + "\n".join(f"line {i}: value {i * 7}" for i in range(900))
    append(session, [*agent_rounds(2, output_lines=10), {"role": "user", "content": huge}])
    record = Compaction.objects.filter(session=session).order_by("id").first()
    assert (record.trigger, record.level, record.status) == ("auto", "handoff", "succeeded")
    document = session.handoffs.get()
    assert record.items[-1]["handoff"] == document.pk
    assert document.checkpoint.reason == "context_overflow" and "CURRENT TASK" in document.text
    session.refresh_from_db()
    assert session.status == "active"
    assert usage.session_status(session)["level"] == "handoff"


def test_no_kept_message_points_at_a_summarized_one(session_of, team):
    """A duplicate reference in the kept tail to a message the summary replaces would leave the
    model with neither copy: such references are not made."""
    import re

    session = session_of(model="claude-sonnet-4-5", context_window=60_000, auto_compact=False)
    messages = agent_rounds(12, output_lines=60)
    paragraph = " ".join(f"The plan is to refactor module {i} carefully and keep the API stable." for i in range(12))
    texts = [m for m in messages if m["role"] == "assistant" and isinstance(m["content"], str)]
    texts[0]["content"] = texts[-2]["content"] = paragraph  # the same long text early and in the tail
    append(session, messages)
    team.project.policy.protect_tool_tokens = 0
    team.project.policy.keep_recent_messages = 6  # the second copy is among the kept messages
    team.project.policy.save()
    record = compaction_runs.compaction_request(session=session, level="summarize", user=None)
    assert compaction_runs.compaction_run(record.pk) == "succeeded"
    summarized = set(Message.objects.filter(session=session, state="summarized").values_list("seq", flat=True))
    assert summarized
    text = json.dumps(model_context.session_context(session)["messages"])
    referenced = {int(n) for n in re.findall(r"same (?:message|text|tool output) as seq (\d+)", text)}
    assert not referenced & summarized
    assert paragraph in text  # the tail's copy is kept whole


def test_recovery_leaves_retries_alone_and_gives_up_after_many_attempts(busy, settings):
    settings.CTX_REQUEUE_AFTER_SECONDS = 120
    old = timezone.now() - timedelta(minutes=10)
    record = Compaction.objects.create(session=busy, project_id=busy.project_id, level="compact")
    # Queued long ago, but released for a retry a moment ago: within its backoff, not forgotten.
    Compaction.objects.filter(pk=record.pk).update(created_at=old, started_at=timezone.now(), attempts=2)
    assert tasks.requeue_stale_compactions() == 0
    record.refresh_from_db()
    assert record.status == "queued"
    # A worker that keeps dying: failed after MAX_ATTEMPTS, not re-sent forever.
    Compaction.objects.filter(pk=record.pk).update(
        status="running", started_at=old, attempts=compaction_records.MAX_ATTEMPTS
    )
    assert tasks.requeue_stale_compactions() == 0
    record.refresh_from_db()
    assert record.status == "failed" and "gave up after" in record.error
