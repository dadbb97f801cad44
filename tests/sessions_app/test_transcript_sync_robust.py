"""Transcript sync never wedges: what can't be stored is skipped, counted as ``rejected`` and recorded
(STATUS warnings, admin), the offset moves on and the rest is stored; a response cut off by a final
upload takes its late blocks, in place or, once compacted, as a message of its own."""

from __future__ import annotations

import pytest

from sessions_app.models import AgentSession, IngestRejection, Message, MessageState
from sessions_app.selectors import model_context
from sessions_app.services import transcript_sync
from tests.sessions_app.test_transcript_sync import upload as upload_as
from tests.transcript_stream import Writer, text_block, tool_block

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(team, api_as):
    return api_as(team.bob)


def upload(client, team, lines: str, offset: int, **extra):
    return upload_as(client, team, lines, offset, external_id="cc-robust", **extra)


def test_an_unreadable_line_is_rejected_recorded_and_the_rest_is_stored(bob, team):
    w = Writer("cc-robust")
    w.prompt("first")
    w.raw("{this is not json")
    w.prompt("second")
    answer = upload(bob, team, w.text(), 0, final=True)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["rejected"], body["messages"], body["offset"]) == (1, 2, len(w.text().encode()))
    rejection = IngestRejection.objects.get(session_id=body["session"])
    assert (rejection.source, rejection.position, rejection.code) == ("transcript", "line 2", "unreadable")
    assert any("could not be stored" in w for w in body["status"]["warnings"])
    # an upload after it is taken as usual, and the rejection is not counted twice
    more = Writer("cc-robust")
    more.n = 10
    more.prompt("third")
    next_answer = upload(bob, team, more.text(), body["offset"], final=True).json()
    assert (next_answer["messages"], next_answer["rejected"]) == (1, 0)
    assert AgentSession.objects.get(pk=body["session"]).rejected_count == 1


def with_a_call_posted_by_hand(bob, team) -> tuple[Writer, dict, int]:
    """A synced session to which someone posted a tool call ``toolu_x`` by hand; the transcript so far."""
    w = Writer("cc-robust")
    w.prompt("go")
    first = upload(bob, team, w.text(), 0, final=True).json()
    hand = {"role": "assistant", "content": [tool_block("toolu_x", "by hand")]}
    assert bob.post(f"/api/v1/sessions/{first['session']}/messages/", hand).status_code == 201
    return w, first, len(w.text().encode())


def test_a_message_the_session_refuses_is_skipped_and_the_rest_stored(bob, team, api_as):
    """Someone posted a tool call with the same id by hand: the transcript's call is refused (recorded),
    and everything after it is stored."""
    w, first, start = with_a_call_posted_by_hand(bob, team)
    w.block("msg_1", tool_block("toolu_x", "from the transcript"))
    w.result("toolu_x", "output")
    w.block("msg_2", text_block("done"))
    answer = upload(bob, team, w.text()[start:], start, final=True).json()
    assert answer["rejected"] == 1 and answer["messages"] == 2
    contents = [m.content for m in Message.objects.filter(session_id=first["session"]).order_by("seq")]
    assert contents[-2][0]["tool_use_id"] == "toolu_x" and contents[-1] == [text_block("done")]
    assert IngestRejection.objects.get(session_id=first["session"]).code == "duplicate_tool_use_id"
    context = bob.get(f"/api/v1/sessions/{first['session']}/context/")
    assert context.status_code == 200


def test_late_blocks_of_a_response_cut_off_by_a_final_upload_are_added_to_it(bob, team):
    w = Writer("cc-robust")
    w.prompt("go")
    w.block("msg_1", tool_block("toolu_a", "a"))
    w.result("toolu_a", "A")
    cut = len(w.text().encode())
    first = upload(bob, team, w.text(), 0, final=True).json()  # Stop fired while msg_1 was being written
    w.block("msg_1", tool_block("toolu_b", "b"))
    w.result("toolu_b", "B")
    answer = upload(bob, team, w.text()[cut:], cut, final=True)
    assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.content
    rows = list(Message.objects.filter(session_id=first["session"]).order_by("seq"))
    assert [r.role for r in rows] == ["user", "assistant", "user", "user"]
    assert [b["id"] for b in rows[1].content] == ["toolu_a", "toolu_b"]
    session = AgentSession.objects.get(pk=first["session"])
    assert session.message_tokens == sum(r.tokens for r in rows)  # the totals follow the grown message
    messages = model_context.session_context(session)["messages"]
    assert [b["id"] for b in messages[1]["content"]] == ["toolu_a", "toolu_b"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["toolu_a", "toolu_b"]


def test_late_blocks_of_a_compacted_response_follow_as_a_message_of_their_own(bob, team):
    w = Writer("cc-robust")
    w.prompt("go")
    w.block("msg_1", tool_block("toolu_a", "a"))
    w.result("toolu_a", "A")
    cut = len(w.text().encode())
    first = upload(bob, team, w.text(), 0, final=True).json()
    # a compaction changed the stored response meanwhile
    Message.objects.filter(session_id=first["session"], client_id="msg_1").update(state=MessageState.COMPACTED)
    w.block("msg_1", tool_block("toolu_b", "b"))
    w.result("toolu_b", "B")
    answer = upload(bob, team, w.text()[cut:], cut, final=True).json()
    assert (answer["messages"], answer["rejected"]) == (2, 0)
    rows = list(Message.objects.filter(session_id=first["session"]).order_by("seq"))
    assert [r.client_id for r in rows[3:]] == ["msg_1+1", rows[4].client_id]
    assert rows[3].content == [tool_block("toolu_b", "b")] and rows[3].metadata["continues"] == "msg_1"
    session = AgentSession.objects.get(pk=first["session"])
    messages = model_context.session_context(session)["messages"]
    calls = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert calls == results == ["toolu_a", "toolu_b"]


def test_the_rejections_show_in_admin(bob, team, client, django_user_model):
    w = Writer("cc-robust")
    w.raw('"just a string"')
    w.prompt("after it")
    body = upload(bob, team, w.text(), 0, final=True).json()
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "root-pass-123")
    client.force_login(admin)
    page = client.get(f"/admin/sessions_app/agentsession/{body['session']}/change/")
    assert page.status_code == 200 and b"a JSON value that is not an object" in page.content
    listing = client.get("/admin/sessions_app/ingestrejection/")
    assert listing.status_code == 200 and b"line 1" in listing.content


def test_results_of_a_refused_call_are_kept_as_text(bob, team):
    w, first, start = with_a_call_posted_by_hand(bob, team)
    w.block("msg_1", tool_block("toolu_x", "x"))  # refused: the session has toolu_x
    w.block("msg_1", tool_block("toolu_y", "y"))
    w.event(
        "user",
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x", "content": "X"},
                {"type": "tool_result", "tool_use_id": "toolu_y", "content": "Y"},
            ],
        },
    )
    answer = upload(bob, team, w.text()[start:], start, final=True).json()
    assert (answer["rejected"], answer["messages"]) == (1, 1)
    last = Message.objects.filter(session_id=first["session"]).order_by("-seq").first()
    assert last.content[0]["type"] == "tool_result" and last.content[0]["tool_use_id"] == "toolu_x"
    assert last.content[1]["type"] == "text" and last.content[1]["text"].startswith("[tool result for toolu_y]")


def test_sub_agent_sessions_are_ordered_by_number_whatever_their_keys_hold():
    # Keys are read back from the session's metadata, which admin can edit: "²" passes isdigit, not int.
    state = {"sessions": {"sidechain-10": 9, "x-²": 7, "sidechain-2": 5, "sidechain-": 3}}
    assert transcript_sync._sidechain_ids(state) == [7, 3, 5, 9]
