"""The session pages and their forms: success, errors next to the field, viewers refused (403),
outsiders 404; live updates; escaping."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from sessions_app.models import Compaction, HandoffDocument, Message
from sessions_app.selectors import usage
from sessions_app.services import compaction_runs
from tests.sessions_app.compaction_helpers import agent_rounds, append, rows_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_user(client):
    def login(persona) -> Client:
        client.force_login(persona.user)
        return client

    return login


@pytest.fixture
def busy(session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False, name="Busy one")
    append(session, agent_rounds(24))
    return session


def url(name: str, *args) -> str:
    return reverse(f"web:{name}", args=args)


def test_pages_need_a_sign_in(client, busy):
    for path in (url("projects"), url("project", busy.project_id), url("session", busy.pk)):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_session_page_shows_the_breakdown_with_status_numbers(as_user, team, busy):
    status = usage.session_status(busy)
    page = as_user(team.carol).get(url("session", busy.pk)).content.decode()
    assert f'aria-valuenow="{status["usage_percent"]}"' in page and f'data-level="{status["level"]}"' in page
    for key in ("system_prompt", "tool_definitions", "messages", "summary", "reserved_output", "free"):
        assert f"<strong>{status[key]}</strong> tokens" in page, key
    assert "estimated" in page and status["recommendation"] in page
    assert f"#{busy.last_seq}" in page  # the timeline reaches the newest message


def test_viewers_see_no_write_controls_and_are_refused(as_user, team, busy):
    viewer = as_user(team.carol)
    page = viewer.get(url("session", busy.pk)).content.decode()
    assert 'id="compaction-form"' not in page and 'id="handoff-form"' not in page
    record = compaction_runs.compaction_request(session=busy, level="compact", user=None)
    compaction_runs.compaction_run(record.pk)
    assert "Revert…" not in viewer.get(url("session", busy.pk)).content.decode()
    for path, data in (
        (url("compaction-preview", busy.pk), {"level": "compact"}),
        (url("compaction-run", busy.pk), {"level": "compact"}),
        (url("handoff-create", busy.pk), {}),
        (url("compaction-revert", record.pk), {}),
    ):
        assert viewer.post(path, data).status_code == 403, path
    assert Compaction.objects.filter(session=busy).count() == 1


def test_outsiders_get_404_everywhere(as_user, team, busy):
    record = compaction_runs.compaction_request(session=busy, level="compact", user=None)
    compaction_runs.compaction_run(record.pk)
    message = Message.objects.filter(session=busy, state="compacted").first()
    outsider = as_user(team.mallory)
    for path in (
        url("project", busy.project_id),
        url("session", busy.pk),
        url("session-live", busy.pk),
        url("session-timeline", busy.pk),
        url("compaction-revert", record.pk),
        url("message-original", message.pk),
    ):
        assert outsider.get(path).status_code == 404, path
    for path in (url("compaction-run", busy.pk), url("handoff-create", busy.pk), url("compaction-revert", record.pk)):
        assert outsider.post(path, {"level": "compact"}).status_code == 404, path
    assert outsider.get(url("projects") + f"?go={busy.project_id}").status_code == 404


def test_dry_run_previews_and_writes_nothing(as_user, team, busy):
    rows = rows_of(busy)
    member = as_user(team.bob)
    response = member.post(url("compaction-preview", busy.pk), {"level": "compact"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Dry run: compact" in body and "tool_output" in body and "Nothing was written" in body
    assert rows_of(busy) == rows and not Compaction.objects.exists()
    # Without htmx the whole page comes back with the preview in it.
    full = member.post(url("compaction-preview", busy.pk), {"level": "summarize"}).content.decode()
    assert "<html" in full and "Dry run: summarize" in full


def test_bad_compaction_input_is_shown_next_to_the_field(as_user, team, busy):
    response = as_user(team.bob).post(url("compaction-run", busy.pk), {"level": "explode"})
    assert response.status_code == 400
    body = response.content.decode()
    assert 'class="error field-error"' in body and "Select a valid choice" in body
    assert not Compaction.objects.exists()


def test_run_then_revert_through_the_confirm_step(as_user, team, busy):
    rows = rows_of(busy)
    member = as_user(team.bob)
    response = member.post(url("compaction-run", busy.pk), {"level": "compact", "instructions": ""})
    assert response.status_code == 302 and response["Location"].endswith("#compactions")
    record = Compaction.objects.get(session=busy)
    assert record.status == "succeeded" and record.requested_by == team.bob.user
    page = member.get(url("session", busy.pk)).content.decode()
    assert "queued; this page follows it live" in page and "Revert…" in page and "state-compacted" in page
    confirm = member.get(url("compaction-revert", record.pk))
    assert confirm.status_code == 200 and "byte for byte" in confirm.content.decode()
    done = member.post(url("compaction-revert", record.pk), follow=True)
    assert "reverted" in done.content.decode()
    assert rows_of(busy) == rows
    again = member.get(url("compaction-revert", record.pk)).content.decode()
    assert "Only a succeeded compaction can be reverted" in again and "<button" not in again.split("<main")[1]


def test_a_second_run_while_one_is_queued_is_refused_with_a_message(as_user, team, busy):
    Compaction.objects.create(session=busy, project_id=busy.project_id, level="compact")
    page = as_user(team.bob).post(url("compaction-run", busy.pk), {"level": "compact"}, follow=True)
    assert "already queued or running" in page.content.decode()
    assert Compaction.objects.filter(session=busy).count() == 1


def test_original_of_a_compacted_message(as_user, team, busy):
    before = {m.seq: m.content for m in Message.objects.filter(session=busy)}
    record = compaction_runs.compaction_request(session=busy, level="compact", user=None)
    compaction_runs.compaction_run(record.pk)
    message = Message.objects.filter(session=busy, state="compacted").first()
    body = as_user(team.carol).get(url("message-original", message.pk)).content.decode()
    original = before[message.seq][0]["content"] if isinstance(before[message.seq], list) else before[message.seq]
    first_line = str(original).splitlines()[0]
    assert first_line in body


def test_handoff_form_writes_a_document_and_can_continue(as_user, team, busy):
    member = as_user(team.bob)
    response = member.post(url("handoff-create", busy.pk), {})
    assert response.status_code == 302 and response["Location"].endswith("#handoffs")
    document = HandoffDocument.objects.get(session=busy)
    page = member.get(url("session", busy.pk)).content.decode()
    assert reverse("api:handoff-download", args=[document.pk]) + "?format=md" in page
    response = member.post(url("handoff-create", busy.pk), {"continue_session": "on"})
    fresh = HandoffDocument.objects.filter(session=busy).latest("id").continuation
    assert response["Location"] == url("session", fresh.pk)
    busy.refresh_from_db()
    assert busy.status == "handed_off"
    closed = member.get(url("session", busy.pk)).content.decode()
    assert 'id="compaction-form"' not in closed and f'href="{url("session", fresh.pk)}"' in closed


def test_live_panel_answers_204_until_something_changes(as_user, team, busy):
    viewer = as_user(team.carol)
    first = viewer.get(url("session-live", busy.pk))
    assert first.status_code == 200 and first["HX-Trigger"] == "session-changed"
    version = first.content.decode().split("?v=", 1)[1].split('"', 1)[0]
    assert viewer.get(url("session-live", busy.pk), {"v": version}).status_code == 204
    append(busy, [{"role": "assistant", "content": "one more"}])
    changed = viewer.get(url("session-live", busy.pk), {"v": version})
    assert changed.status_code == 200 and changed["HX-Trigger"] == "session-changed"
    timeline = viewer.get(url("session-timeline", busy.pk)).content.decode()
    assert "one more" in timeline


def test_message_content_is_always_escaped(as_user, team, session_of):
    session = session_of(name="<b>evil</b>")
    attack = '<script>alert("x")</script><img src=x onerror="alert(1)">'
    append(
        session,
        [
            {"role": "user", "content": attack},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": attack},
                    {"type": "tool_use", "id": "t1", "name": "<svg onload=alert(2)>", "input": {"q": attack}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": attack}]},
        ],
    )
    for path in (url("session", session.pk), url("session-timeline", session.pk), url("project", session.project_id)):
        body = as_user(team.carol).get(path).content.decode()
        assert "<script>alert" not in body and "<img src=x" not in body and "<svg onload" not in body
        assert "<b>evil</b>" not in body
    body = as_user(team.carol).get(url("session", session.pk)).content.decode()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body


def test_sessions_list_filters_and_paginates(as_user, team, session_of, busy):
    quiet = session_of(name="Quiet", model="gpt-4o")
    append(quiet, [{"role": "user", "content": "hi"}])
    viewer = as_user(team.carol)
    level = usage.session_status(busy)["level"]
    assert level != "ok"

    def names(query: str) -> str:
        return viewer.get(url("project", team.project.pk) + query).content.decode()

    assert "Busy one" in names(f"?level={level}") and "Quiet" not in names(f"?level={level}")
    assert "Quiet" in names("?level=ok") and "Busy one" not in names("?level=ok")
    assert "Quiet" in names("?model=gpt") and "Busy one" not in names("?model=gpt")
    assert "Busy one" in names("?q=busy") and "Quiet" not in names("?q=busy")
    assert "No sessions match" in names("?status=archived")
    for i in range(26):
        session_of(name=f"filler {i}")
    page = names("?q=filler")
    assert "Page 1 of 2" in page and "q=filler&amp;page=2" in page
    assert "Page 2 of 2" in names("?q=filler&page=2")


def test_project_switcher_goes_to_a_project(as_user, team):
    response = as_user(team.bob).get(url("projects") + f"?go={team.project.pk}")
    assert response.status_code == 302 and response["Location"] == url("project", team.project.pk)


def test_forms_need_the_csrf_token(team, busy):
    client = Client(enforce_csrf_checks=True)
    client.force_login(team.bob.user)
    assert client.post(url("compaction-run", busy.pk), {"level": "compact"}).status_code == 403
    assert not Compaction.objects.exists()


def test_live_panel_notices_an_exact_count(as_user, team, busy):
    viewer = as_user(team.carol)
    version = viewer.get(url("session-live", busy.pk)).content.decode().split("?v=", 1)[1].split('"', 1)[0]
    type(busy).objects.filter(pk=busy.pk).update(exact_tokens=12_345, exact_upto_seq=busy.last_seq)
    changed = viewer.get(url("session-live", busy.pk), {"v": version})
    assert changed.status_code == 200 and "exact count" in changed.content.decode()


def test_the_live_panel_costs_the_same_queries_however_long_the_history(as_user, team, busy):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    viewer = as_user(team.carol)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert viewer.get(url("session-live", busy.pk)).status_code == 200
        return len(captured)

    record = compaction_runs.compaction_request(session=busy, level="compact", user=None)
    compaction_runs.compaction_run(record.pk)
    queries()  # the first fills what the panel caches (whether the project has budgets)
    few = queries()
    for _ in range(8):
        Compaction.objects.create(session=busy, project_id=busy.project_id, level="compact", status="skipped")
    # Succeeded and still in their window: each one's revert button (or reason) is decided.
    Compaction.objects.filter(session=busy, status="skipped").update(
        status="succeeded", revertible_until=timezone.now() + timedelta(hours=1)
    )
    assert queries() == few
