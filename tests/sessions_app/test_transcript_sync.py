"""``POST /api/v1/sessions/transcript/``: a transcript uploaded as it grows ends up as its import does.
Offsets (repeat ignored, gap refused with the offset to resend from), held-back responses, a lost
copy, sub-agents, the model, access."""

from __future__ import annotations

import pytest

from compaction.transcripts import read_transcript
from sessions_app.models import AgentSession, Message, SessionStatus, TranscriptChunk
from sessions_app.services import importing, projects
from tests.claude_code_lines import SESSION, agent_session, text

pytestmark = pytest.mark.django_db

URL = "/api/v1/sessions/transcript/"


@pytest.fixture
def bob(team, api_as):
    return api_as(team.bob)


def upload(client, team, lines: str, offset: int, **extra):
    body = {"project": str(team.project.pk), "external_id": SESSION, "offset": offset, "lines": lines, **extra}
    return client.post(URL, body)


def send_all(client, team, data: str, cuts: list[int], *, final: bool = True) -> dict:
    """Upload ``data`` in pieces ending at ``cuts`` (byte positions at line ends); the last is final."""
    raw = data.encode()
    start = 0
    answer: dict = {}
    for i, end in enumerate([*cuts, len(raw)]):
        response = upload(client, team, raw[start:end].decode(), start, final=final and i == len(cuts))
        assert response.status_code == 200, response.content
        answer = response.json()
        start = end
    return answer


def line_ends(data: str) -> list[int]:
    raw = data.encode()
    return [i + 1 for i, b in enumerate(raw) if b == 0x0A][:-1]


def stored(session_id: int) -> list[tuple]:
    return list(
        Message.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list("seq", "role", "content", "tokens", "client_id", "metadata", "created_at")
    )


def imported(team, data: str, name: str = SESSION) -> importing.ImportResult:
    """A one-shot import of the same text into another project."""

    project = projects.project_create(user=team.alice.user, name="Reference")
    return importing.session_import(
        user=team.alice.user, project=project, transcript=read_transcript(data, "claude-code"), name=name
    )


def test_line_by_line_equals_an_import(bob, team):
    data = agent_session(3).text()
    answer = send_all(bob, team, data, line_ends(data))
    session = AgentSession.objects.get(pk=answer["session"])
    assert (session.external_id, session.model, answer["held_back"]) == (SESSION, "claude-opus-4-5", 0)
    reference = imported(team, data).session
    assert stored(session.pk) == stored(reference.pk)
    assert (session.name, session.message_tokens) == (reference.name, reference.message_tokens)
    assert answer["offset"] == len(data.encode()) and answer["status"]["messages"] > 0
    # a split response is one message: 3 turns × (prompt, response, result, answer)
    assert session.message_count == 12


def test_an_open_response_is_held_back_until_a_line_closes_it_or_final(bob, team):
    t = agent_session(1)
    data = t.text()
    first = upload(bob, team, data, 0).json()
    assert first["held_back"] == 1  # the closing answer may still grow
    roles = list(Message.objects.filter(session_id=first["session"]).values_list("role", flat=True))
    assert roles == ["user", "assistant", "user"]
    flushed = upload(bob, team, "", len(data.encode()), final=True).json()
    assert (flushed["messages"], flushed["held_back"], flushed["received"]) == (1, 0, 0)
    again = upload(bob, team, "", len(data.encode()), final=True).json()
    assert again["messages"] == 0


def test_a_repeat_is_ignored_and_a_gap_answers_the_offset_to_resend_from(bob, team):
    data = agent_session(2).text()
    raw = data.encode()
    half = line_ends(data)[4]
    assert upload(bob, team, raw[:half].decode(), 0).status_code == 200
    count = Message.objects.count()
    repeat = upload(bob, team, raw[:half].decode(), 0)
    assert repeat.status_code == 200 and repeat.json()["received"] == 0 and repeat.json()["messages"] == 0
    assert Message.objects.count() == count
    gap = upload(bob, team, raw[half + 10 :].decode(), half + 10)
    assert gap.status_code == 409
    assert gap.json()["code"] == "transcript_offset" and gap.json()["expected_offset"] == half
    # an overlapping upload (a hook that lost its state) only adds what is new
    overlap = upload(bob, team, data, 0, final=True)
    assert overlap.status_code == 200 and overlap.json()["received"] == len(raw) - half


def test_a_partial_line_is_refused_and_a_rewritten_transcript_too(bob, team):
    data = agent_session(1).text()
    response = upload(bob, team, data[:-5], 0)
    assert (response.status_code, response.json()["code"]) == (400, "partial_line")
    assert not AgentSession.objects.exists()
    assert upload(bob, team, data, 0).status_code == 200
    changed = upload(bob, team, data.replace("Step 1", "Step X"), 0)
    assert (changed.status_code, changed.json()["code"]) == (409, "transcript_changed")


def test_a_lost_copy_asks_for_the_whole_file_and_the_resend_stores_nothing_twice(bob, team):
    data = agent_session(3).text()
    raw = data.encode()
    cut = line_ends(data)[6]
    first = upload(bob, team, raw[:cut].decode(), 0).json()
    before = stored(first["session"])
    # A session synced before the server kept the text in the database, or one the pruner archived.
    TranscriptChunk.objects.filter(session_id=first["session"]).delete()
    lost = upload(bob, team, raw[cut:].decode(), cut)
    assert (lost.status_code, lost.json()["expected_offset"]) == (409, 0)
    # Sent again in two pieces: the first doesn't even reach what the server had, so nothing is read.
    part = upload(bob, team, raw[: line_ends(data)[1]].decode(), 0).json()
    assert part["complete"] is False and part["messages"] == 0
    rest = upload(bob, team, raw[part["offset"] :].decode(), part["offset"], final=True).json()
    assert rest["complete"] is True and stored(first["session"])[: len(before)] == before
    assert stored(first["session"]) == stored(imported(team, data).session.pk)


def test_sub_agents_get_sessions_of_their_own_named_as_an_import_names_them(bob, team):
    data = agent_session(2, sub_agent=True).text()
    answer = send_all(bob, team, data, line_ends(data)[::3], final=True)
    assert len(answer["sidechains"]) == 1
    side = AgentSession.objects.get(pk=answer["sidechains"][0])
    main = AgentSession.objects.get(pk=answer["session"])
    assert side.external_id == f"{SESSION}:sidechain-1" and side.name == f"{main.name} · sub-agent 1"
    assert [m.role for m in side.messages.order_by("seq")] == ["user", "assistant"]
    reference = imported(team, data, name=main.name)
    assert stored(main.pk) == stored(reference.session.pk)
    assert stored(side.pk) == stored(reference.sidechains[0].pk)
    assert reference.sidechains[0].name == side.name


def test_the_session_follows_the_transcripts_model_unless_set_by_hand(bob, team):
    t = agent_session(1)
    data = t.text()
    answer = upload(bob, team, data, 0, final=True).json()
    assert AgentSession.objects.get(pk=answer["session"]).model == "claude-opus-4-5"
    t.model = "claude-sonnet-4-5"
    t.prompt("next")
    t.response("msg_2", text("done"))
    more = t.text()[len(data) :]
    assert upload(bob, team, more, len(data.encode()), final=True).status_code == 200
    assert AgentSession.objects.get(pk=answer["session"]).model == "claude-sonnet-4-5"  # the latest, as import takes
    AgentSession.objects.filter(pk=answer["session"]).update(model="claude-haiku-4-5")  # by hand
    t.model = "claude-opus-4-5"
    t.prompt("again")
    t.response("msg_3", text("done again"))
    assert (
        upload(bob, team, t.text()[len(data) + len(more) :], len((data + more).encode()), final=True).status_code == 200
    )
    assert AgentSession.objects.get(pk=answer["session"]).model == "claude-haiku-4-5"


def test_the_name_and_an_existing_session_are_used(bob, team, session_of):
    existing = session_of(name="made by hand", external_id=SESSION, context_window=50_000)
    data = agent_session(1).text()
    answer = upload(bob, team, data, 0, final=True, name="ignored for an existing session").json()
    assert answer["session"] == existing.pk and answer["created"] is False
    existing.refresh_from_db()
    assert existing.name == "made by hand" and existing.message_count == 4
    assert answer["status"]["context_window"] == 50_000


def test_a_closed_session_refuses_new_messages(bob, team):
    data = agent_session(1).text()
    first = upload(bob, team, data, 0).json()
    AgentSession.objects.filter(pk=first["session"]).update(status=SessionStatus.HANDED_OFF)
    response = upload(bob, team, "", len(data.encode()), final=True)
    assert (response.status_code, response.json()["code"]) == (409, "session_closed")


@pytest.mark.parametrize(
    ("persona", "status", "code"), [("carol", 403, "permission_denied"), ("mallory", 404, "not_found")]
)
def test_viewers_and_outsiders_cannot_upload(api_as, team, persona, status, code):
    response = upload(api_as(getattr(team, persona)), team, agent_session(1).text(), 0)
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert not AgentSession.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"offset": -1}, "min_value"),
        ({"format": "openai"}, "invalid_choice"),
        ({"external_id": ""}, "blank"),
        ({"lines": "not json\n"}, None),  # a line that isn't JSON is skipped, as import skips it
    ],
)
def test_bad_input_is_a_400_and_unparsable_lines_are_skipped(bob, team, body, code):
    response = upload(bob, team, **{"lines": "", "offset": 0, **body})
    if code is None:
        assert response.status_code == 200 and response.json()["messages"] == 0
    else:
        assert (response.status_code, response.json()["code"]) == (400, code)
