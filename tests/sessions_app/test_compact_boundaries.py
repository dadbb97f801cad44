"""Claude Code's own compactions in a recorded transcript (``services.boundaries``): a ``compact_boundary``
line and the ``isCompactSummary`` line after it. Everything before the summary is stored summarized,
the summary becomes the checkpoint (Claude's text verbatim in ``narrative``), revert gives back every
message as it was, and usage at the end is what Claude had in context, not the whole file.

The sync path (any chunking equals the import) is covered with the other chunkings in
``test_transcript_stream_property.py``; a file with boundaries of every kind has its own property
test there."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from compaction.checkpoint import render_summary_text, validate_fields
from compaction.context import SUMMARY_OPEN
from compaction.tokens import DEFAULT_FRAMING, calibrate
from compaction.transcripts import read_transcript
from sessions_app.models import (
    CONTEXT_STATES,
    AgentSession,
    Checkpoint,
    Compaction,
    Message,
    MessageBackup,
    MessageState,
)
from sessions_app.selectors import model_context
from sessions_app.selectors.usage import model_info, session_status
from sessions_app.services import importing, projects, transcript_sync
from tests.transcript_stream import Writer, text_block, tool_block

pytestmark = pytest.mark.django_db

API = "/api/v1"
FIRST_SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context.\n\n"
    "Summary:\n1. Primary Request: fix the flaky test in tests/test_io.py.\n2. Done: the retry loop."
)
SECOND_SUMMARY = "Summary:\n1. Flaky test fixed (earlier).\n2. Changelog updated.\n3. Next: release notes."


def two_boundaries(session: str = "cc-b") -> Writer:
    """A session Claude Code compacted twice; tool calls on both sides of each boundary."""
    w = Writer(session)
    w.prompt("Fix the flaky test in tests/test_io.py")
    w.block("msg_1", text_block("Looking at it."))
    w.block("msg_1", tool_block("toolu_1", "pytest tests/test_io.py"))
    w.result("toolu_1", "FAILED tests/test_io.py::test_read - TimeoutError\n" * 40)
    w.block("msg_2", text_block("Added a retry loop; it passes now."))
    w.boundary(FIRST_SUMMARY)
    w.prompt("Now update the changelog")
    w.block("msg_3", tool_block("toolu_3", "cat CHANGELOG.md"))
    w.result("toolu_3", "## 1.2.0\n- things\n" * 30)
    w.block("msg_4", text_block("Changelog updated."))
    w.boundary(SECOND_SUMMARY)
    w.prompt("Write the release notes")
    w.block("msg_5", text_block("Release notes written."))
    return w


def one_boundary(session: str = "cc-b") -> Writer:
    w = Writer(session)
    w.prompt("Fix the flaky test in tests/test_io.py")
    w.block("msg_1", tool_block("toolu_1", "pytest tests/test_io.py"))
    w.result("toolu_1", "FAILED tests/test_io.py::test_read - TimeoutError\n" * 40)
    w.block("msg_2", text_block("Added a retry loop; it passes now."))
    w.boundary(FIRST_SUMMARY)
    w.prompt("Now update the changelog")
    w.block("msg_3", text_block("Changelog updated."))
    return w


def import_text(team: Any, data: str | bytes, *, project: Any = None, name: str = "s") -> AgentSession:
    result = importing.session_import(
        user=team.alice.user,
        project=project or team.project,
        transcript=read_transcript(data, "claude-code"),
        name=name,
    )
    result.session.refresh_from_db()
    return result.session


def import_over_rest(api: Any, team: Any, data: bytes) -> dict[str, Any]:
    upload = SimpleUploadedFile("t.jsonl", data, content_type="application/x-ndjson")
    response = api.upload(
        f"{API}/sessions/import/", {"file": upload, "format": "claude-code", "project": team.project.pk}
    )
    assert response.status_code == 201, response.content
    return response.json()


def states(session: AgentSession) -> list[tuple[int, str]]:
    return list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "state"))


def in_context(session: AgentSession, text: str) -> bool:
    """Whether ``text`` is somewhere in what the model would read now."""
    request = json.dumps(model_context.session_context(session)["messages"], ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False)[1:-1] in request


def summary_seq(session: AgentSession, client_id: str) -> int:
    return Message.objects.get(session=session, client_id=client_id).seq


def assert_totals_are_the_rows(session: AgentSession) -> None:
    session.refresh_from_db()
    active = Message.objects.filter(session=session, state__in=CONTEXT_STATES)
    assert session.message_tokens == sum(active.values_list("tokens", flat=True))
    assert session.active_message_count == active.count()
    current = model_context.current_checkpoint(session)
    assert session.summary_tokens == (current.tokens if current else 0)


def reads_back(api: Any, staff: Any, session: AgentSession) -> None:
    """Everything that shows a session answers, with the summarized messages and the checkpoint in it."""
    s = f"{API}/sessions/{session.pk}"
    for fmt in ("anthropic", "openai"):
        response = api.get(f"{s}/context/?format={fmt}")
        assert response.status_code == 200, response.content
    every = api.get(f"{s}/messages/?state=all&page_size=500")
    assert every.status_code == 200
    assert api.get(f"{s}/status/").status_code == 200
    assert api.get(f"{s}/compactions/").status_code == 200
    assert api.get(f"{s}/checkpoints/").status_code == 200
    for checkpoint in Checkpoint.objects.filter(session=session):
        assert api.get(f"{API}/checkpoints/{checkpoint.pk}/").status_code == 200
    member, admin = staff
    page = member.get(f"/sessions/{session.pk}/")
    assert page.status_code == 200
    current = model_context.current_checkpoint(session)
    if current is not None:  # the page shows Claude's summary with the checkpoint
        assert current.data["narrative"].splitlines()[0] in page.content.decode()
    for path in (
        f"/admin/sessions_app/message/?session__id__exact={session.pk}",
        f"/admin/sessions_app/compaction/?session__id__exact={session.pk}",
        "/admin/sessions_app/checkpoint/",
        "/admin/sessions_app/messagebackup/",
    ):
        assert admin.get(path).status_code == 200, path
    for record in Compaction.objects.filter(session=session):
        assert admin.get(f"/admin/sessions_app/compaction/{record.pk}/change/").status_code == 200
    for checkpoint in Checkpoint.objects.filter(session=session):
        assert admin.get(f"/admin/sessions_app/checkpoint/{checkpoint.pk}/change/").status_code == 200


@pytest.fixture
def staff(team):
    """Bob's browser (the session page: a project member's) and a superuser's (Django admin)."""
    member, admin = Client(), Client()
    member.force_login(team.bob.user)
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123"))
    return member, admin


# ----------------------------------------------------------------------------- one boundary


def test_what_came_before_a_boundary_is_summarized_and_the_summary_is_the_checkpoint(team, api_as):
    body = import_over_rest(api_as(team.bob), team, one_boundary().text().encode())
    session = AgentSession.objects.get(pk=body["session"])
    upto = summary_seq(session, "cc-b-u6")  # the summary line's uuid
    assert upto == 5  # prompt, response, result, response, then the summary
    assert states(session) == [(seq, "summarized" if seq <= upto else "active") for seq in range(1, 8)]

    (record,) = Compaction.objects.filter(session=session)
    assert (record.level, record.status, record.trigger, record.upto_seq) == ("summarize", "succeeded", "transcript", 5)
    assert record.tokens_after < record.tokens_before and record.revertible_until is not None
    assert "trigger: auto" in record.notes[0]
    backups = MessageBackup.objects.filter(compaction=record)
    assert sorted(backups.values_list("message__seq", "state")) == [(seq, "active") for seq in range(1, 6)]
    assert [i["seq"] for i in record.items] == [1, 2, 3, 4, 5, None]

    (checkpoint,) = Checkpoint.objects.filter(session=session)
    data = checkpoint.data
    assert (checkpoint.version, checkpoint.reason, checkpoint.upto_seq, checkpoint.compaction) == (
        1,
        "compaction",
        5,
        record,
    )
    assert validate_fields(data)["narrative"] == FIRST_SUMMARY == data["narrative"]
    assert data["objective"] == "Fix the flaky test in tests/test_io.py"  # the first request, verbatim
    # The facts of what it covers are kept for later summaries, not shown: the model saw Claude's text.
    assert data["facts"]["first_request"]
    assert data["summary_text"] == render_summary_text({**data, "facts": None})
    assert data["compaction_info"]["messages_compacted"] == 4  # the summary is the checkpoint, not covered by it
    assert data["source"] == {"kind": "compact_boundary", "trigger": "auto", "pre_tokens": 1004}

    # The context: the summary as <context_summary>, then what followed; nothing from before.
    context = model_context.session_context(session)
    first = context["messages"][0]["content"][0]["text"]
    assert first.startswith(SUMMARY_OPEN) and FIRST_SUMMARY in first
    assert not in_context(session, "TimeoutError") and in_context(session, "retry loop")
    assert context["messages"][-1]["role"] == "assistant"
    # Counted once: as the summary; the summary message left the messages' total.
    status = body["status"]
    assert status["summary"] == calibrate(checkpoint.tokens, model_info(session.model).calibration) > 0
    assert_totals_are_the_rows(session)
    assert session.active_message_count == 2


def test_revert_gives_back_the_transcript_as_if_nothing_was_compacted(team, api_as, staff):
    api = api_as(team.bob)
    data = one_boundary().text().encode()
    session = AgentSession.objects.get(pk=import_over_rest(api, team, data)["session"])
    before = list(Message.objects.filter(session=session).order_by("seq").values_list("content", "tokens"))
    reads_back(api, staff, session)
    record = Compaction.objects.get(session=session)

    response = api.post(f"{API}/compactions/{record.pk}/revert/")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "reverted"
    assert {state for _, state in states(session)} == {"active"}
    assert list(Message.objects.filter(session=session).order_by("seq").values_list("content", "tokens")) == before
    assert Checkpoint.objects.get(session=session).reverted
    assert_totals_are_the_rows(session)
    # The same file without its marker (the summary an ordinary message) gives the same context.
    unmarked = b"".join(line for line in data.splitlines(keepends=True) if b'"compact_boundary"' not in line)
    plain = import_text(team, unmarked, project=projects.project_create(user=team.alice.user, name="Plain"))
    assert not Compaction.objects.filter(session=plain).exists()
    # The plain import counts by its last reply's usage; the reverted session by estimate (what that
    # reply read was the compacted context): compare the estimates.
    assert AgentSession.objects.filter(pk=plain.pk).update(exact_upto_seq=None) == 1
    plain.refresh_from_db()
    ours, theirs = (model_context.session_context(s) for s in (session, plain))
    assert ours["messages"] == theirs["messages"]
    assert ours["status"]["used"] == theirs["status"]["used"]
    reads_back(api, staff, session)


# ----------------------------------------------------------------------------- several boundaries


def test_each_boundary_summarizes_all_before_it_and_its_checkpoint_supersedes_the_last(team, api_as, staff):
    api = api_as(team.bob)
    session = AgentSession.objects.get(pk=import_over_rest(api, team, two_boundaries().text().encode())["session"])
    first, second = Compaction.objects.filter(session=session).order_by("id")
    assert (first.upto_seq, second.upto_seq) == (5, 10)
    assert states(session) == [(seq, "summarized" if seq <= 10 else "active") for seq in range(1, 13)]
    assert (
        list(Message.objects.filter(session=session, seq__lte=5).values_list("compaction", flat=True)) == [first.pk] * 5
    )
    assert set(Message.objects.filter(session=session, seq__range=(6, 10)).values_list("compaction", flat=True)) == {
        second.pk
    }
    v1, v2 = Checkpoint.objects.filter(session=session).order_by("version")
    assert (v1.version, v2.version) == (1, 2)
    assert v2.data["objective"] == v1.data["objective"] == "Fix the flaky test in tests/test_io.py"
    assert v2.data["narrative"] == SECOND_SUMMARY
    assert v2.data["stats"] == {"total_compactions": 2, "total_messages": 8}
    assert in_context(session, SECOND_SUMMARY) and not in_context(session, FIRST_SUMMARY)
    assert_totals_are_the_rows(session)
    reads_back(api, staff, session)

    assert api.post(f"{API}/compactions/{first.pk}/revert/").json()["code"] == "not_newest"
    assert api.post(f"{API}/compactions/{second.pk}/revert/").status_code == 200
    assert states(session) == [(seq, "summarized" if seq <= 5 else "active") for seq in range(1, 13)]
    assert in_context(session, FIRST_SUMMARY) and in_context(session, SECOND_SUMMARY)  # now a message
    assert model_context.current_checkpoint(session) == v1
    assert_totals_are_the_rows(session)
    assert api.post(f"{API}/compactions/{first.pk}/revert/").status_code == 200
    assert {state for _, state in states(session)} == {"active"}
    assert_totals_are_the_rows(session)
    reads_back(api, staff, session)


def test_a_boundary_in_a_sub_agent_compacts_that_sub_agents_session_only(team):
    w = Writer("cc-side")
    w.prompt("Start")
    w.block("msg_1", text_block("Delegating."))
    w.prompt("Sub-task: look around", side=True)
    w.block("msg_s1", text_block("Looked around a lot."), side=True)
    w.boundary("Sub-agent summary: looked around.", side=True)
    w.block("msg_s2", text_block("Going on."), side=True)
    w.block("msg_2", text_block("Back in main."))
    result = importing.session_import(
        user=team.alice.user, project=team.project, transcript=read_transcript(w.text(), "claude-code")
    )
    (side,) = result.sidechains
    assert not Compaction.objects.filter(session=result.session).exists()
    assert {state for _, state in states(result.session)} == {"active"}
    assert states(side) == [(1, "summarized"), (2, "summarized"), (3, "summarized"), (4, "active")]
    assert Checkpoint.objects.get(session=side).data["narrative"] == "Sub-agent summary: looked around."


# ----------------------------------------------------------------------------- what a file may hold


def _response_cut_by_a_boundary(w: Writer) -> None:
    w.block("msg_9", tool_block("toolu_9", "ls"))
    w.boundary("Summary in the middle of a response")
    w.result("toolu_9", "out")
    w.block("msg_9", text_block("after"))


ODD = {
    # case: (what the file holds after one exchange, compactions it makes)
    "boundary_without_summary": (lambda w: w.boundary(None), 0),
    "boundary_then_a_prompt": (lambda w: (w.boundary(None), w.prompt("go on")), 0),
    "summary_without_boundary": (lambda w: w.boundary("A summary nobody marked", marker=False), 0),
    "two_boundaries_in_a_row": (lambda w: (w.boundary(None), w.boundary("After two markers")), 1),
    "summary_in_text_blocks": (lambda w: w.boundary([text_block("In"), text_block("blocks")]), 1),
    "summary_as_an_image": (
        lambda w: w.boundary(
            [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]
        ),
        0,
    ),
    "summary_empty": (lambda w: w.boundary("   "), 0),
    "summary_null": (
        lambda w: (w.boundary(None), w.event("user", {"role": "user", "content": None}, isCompactSummary=True)),
        0,
    ),
    "summary_a_number": (lambda w: w.boundary(42), 1),
    "summary_not_a_message": (lambda w: (w.boundary(None), w.event("user", None, isCompactSummary=True)), 0),
    "summary_a_tool_result": (
        lambda w: w.boundary([{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]),
        1,
    ),
    "response_cut_by_a_boundary": (_response_cut_by_a_boundary, 1),
}


@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_boundaries_never_fail_and_read_back(team, api_as, staff, case):
    write, expected = ODD[case]
    w = Writer("cc-odd")
    w.prompt("Start")
    w.block("msg_1", text_block("Working."))
    write(w)
    w.prompt("The last request")
    api = api_as(team.bob)
    session = AgentSession.objects.get(pk=import_over_rest(api, team, w.text().encode())["session"])
    records = list(Compaction.objects.filter(session=session))
    assert len(records) == expected
    assert_totals_are_the_rows(session)
    reads_back(api, staff, session)
    for record in records:
        assert api.post(f"{API}/compactions/{record.pk}/revert/").status_code == 200
    assert {state for _, state in states(session)} == {"active"}
    reads_back(api, staff, session)


def test_a_file_whose_first_line_is_a_boundary_keeps_its_summary_as_a_message(team):
    w = Writer("cc-first")
    w.boundary("Summary of a session this file continues")
    w.prompt("Go on")
    session = import_text(team, w.text())
    assert not Compaction.objects.filter(session=session).exists()
    assert in_context(session, "Summary of a session this file continues")  # what the model read


def test_syncing_an_imported_file_applies_its_boundaries_once(team):
    data = two_boundaries().text()
    session = import_text(team, data)
    before = (states(session), session_status(session)["used"])
    result = transcript_sync.transcript_sync(
        user=team.alice.user, project=team.project, external_id="cc-b", offset=0, lines=data, final=True
    )
    assert result.session.pk == session.pk and result.created == 0
    assert Compaction.objects.filter(session=session).count() == 2
    assert (states(session), session_status(session)["used"]) == before


def test_an_import_under_the_thresholds_after_its_boundary_is_not_compacted_again(team, api_as):
    w = Writer("cc-big")
    w.prompt("Find the slow query")
    w.block("msg_1", tool_block("toolu_1", "cat slow.log"))
    w.result(
        "toolu_1", "".join(f"2025-06-01 10:00:{i % 60:02d} SELECT * FROM orders WHERE id = {i};\n" for i in range(600))
    )
    w.block("msg_2", text_block("The orders query lacks an index."))
    w.boundary(FIRST_SUMMARY)
    w.prompt("Add the index")
    w.block("msg_3", text_block("Index added."))
    data = w.text().encode()
    unmarked = b"".join(line for line in data.splitlines(keepends=True) if b'"compact_boundary"' not in line)
    api = api_as(team.bob)

    def imported(content: bytes, project: Any) -> AgentSession:
        upload = SimpleUploadedFile("t.jsonl", content, content_type="application/x-ndjson")
        fields = {"file": upload, "format": "claude-code", "project": project.pk, "context_window": 16_000}
        response = api.upload(f"{API}/sessions/import/", fields)
        assert response.status_code == 201, response.content
        return AgentSession.objects.get(pk=response.json()["session"])

    # Without the marker the whole file counts, and the policy compacts it at once (the control)...
    plain = imported(unmarked, team.project)
    assert Compaction.objects.filter(session=plain, trigger="auto").exists()
    # ...with it, usage is what Claude had after compacting: under the thresholds, left as it is.
    other = projects.project_create(user=team.alice.user, name="Beta")
    projects.membership_set(project=other, user=team.bob.user, role="member")
    session = imported(data, other)
    assert list(Compaction.objects.filter(session=session).values_list("trigger", flat=True)) == ["transcript"]
    assert session_status(session)["level"] == "ok"


# ----------------------------------------------------------------------------- real transcripts


def claude_context_at_the_end(path) -> int:
    """The context the model saw at its last request (the last response's usage)."""
    figure = 0
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if (
            event.get("type") != "assistant"
            or event.get("isSidechain")
            or event["message"].get("model") == "<synthetic>"
        ):
            continue
        usage = event["message"].get("usage") or {}
        seen = sum(
            usage.get(k) or 0 for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        figure = seen or figure
    return figure


@pytest.mark.data
@pytest.mark.parametrize("name", ["spotter_8463c716.jsonl", "spotter_ae4a77f8.jsonl"])
def test_a_compacted_claude_code_session_imports_at_what_claude_had_in_context(shared_data, team, name):
    path = shared_data / "claude_code" / name
    out = io.StringIO()
    call_command("ctx", "import", str(path), "--format", "claude-code", "--project", "Alpha", "--json", stdout=out)
    result = json.loads(out.getvalue())
    session = AgentSession.objects.get(pk=result["session"])
    status = result["status"]
    (record,) = Compaction.objects.filter(session=session)  # one boundary in each file; auto-compaction stays off
    assert record.trigger == "transcript"
    # Nothing before the boundary is in the context; Claude's summary is, as the checkpoint.
    assert not Message.objects.filter(session=session, seq__lte=record.upto_seq, state__in=CONTEXT_STATES).exists()
    assert not Message.objects.filter(session=session, seq__gt=record.upto_seq).exclude(state="active").exists()
    summary = Message.objects.get(session=session, seq=record.upto_seq)
    assert summary.metadata["is_compact_summary"] is True and summary.state == MessageState.SUMMARIZED
    context = model_context.session_context(session)
    assert context["messages"][0]["content"][0]["text"].startswith(SUMMARY_OPEN)
    assert summary.content.strip() in context["messages"][0]["content"][0]["text"]
    # Usage: what the context holds now, against the whole file counted as if nothing was compacted.
    every = sum(Message.objects.filter(session=session).values_list("tokens", flat=True))
    factor = model_info(session.model).calibration
    whole_file = calibrate(every + DEFAULT_FRAMING.request, factor)
    assert status["used"] < whole_file * 0.7
    assert status["level"] == "ok" and status["usage_percent"] < 60
    # Claude's own figure holds the system prompt and tools (about 26,000 tokens) the file lacks.
    claude = claude_context_at_the_end(path)
    ratio = status["used"] / claude
    print(f"{name}: used {status['used']:,} vs Claude's {claude:,} (ratio {ratio:.2f}); whole file {whole_file:,}")
    assert 0.5 <= ratio <= 1.0
    assert math.isclose(
        status["used"], sum(status[p] for p in ("system_prompt", "tool_definitions", "messages", "summary"))
    )
