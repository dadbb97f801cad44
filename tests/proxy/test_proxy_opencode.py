"""The requests the real OpenCode CLI sent (``tests/fixtures/clients/opencode_<version>/``, recorded by
``python -m tests.clients.opencode``), replayed through the proxy's identity and recording without
npm: its conversation is one key and one session, however its requests are recorded and whatever it
changes from one request to the next (the cache markers, the date in its system prompt); its title
request is a session of its own, linked to the conversation's (``sidechain_of``)."""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.api.proxy.dialects import ANTHROPIC
from sessions_app.models import AgentSession, IngestRejection, Message
from sessions_app.selectors import usage
from sessions_app.services import proxy
from sessions_app.services.proxy import SIDECHAIN_OF
from sessions_app.services.proxy.identity import agent_conversation, conversation_key
from sessions_app.services.proxy.messages import client_id, identity
from tests.clients.opencode import CONTENT, FIXTURES, SESSION_PLACEHOLDER, VERSION, load_fixtures
from tests.fakes.anthropic_server import default_count_tokens
from tests.fakes.scripted_model import SIDE_REPLY, ScriptedModel, text
from tests.fakes.scripted_opencode import coding_task, is_opencode_main
from tests.hypothesis_budget import DATABASE, ENGINE

REQUESTS = load_fixtures()
MAIN = [r for r in REQUESTS if is_opencode_main(r["body"])]
SIDES = [r for r in REQUESTS if not is_opencode_main(r["body"])]
CACHE = {"type": "ephemeral"}


def key_of(request: dict[str, Any], agent_session: str | None = SESSION_PLACEHOLDER) -> str:
    kept = ANTHROPIC.recorded(request["body"])
    assert kept is not None
    return conversation_key(kept, None, agent_session if agent_session else None)


def test_the_fixtures_are_a_real_run_of_the_pinned_cli_with_a_title_on_the_side():
    assert FIXTURES.name == f"opencode_{VERSION}" and len(MAIN) == len(coding_task("", content="")) + 1 >= 10
    assert all(r["headers"]["user-agent"].startswith(f"opencode/{VERSION} ") for r in REQUESTS)
    assert {r["headers"]["x-session-id"] for r in REQUESTS} == {SESSION_PLACEHOLDER}
    assert [r["body"].get("tools", []) for r in SIDES] == [[]]  # no tools: a side request
    assert SIDES[0]["body"]["messages"][0]["content"][0]["text"].startswith("Generate a title for this conversation")


def test_opencode_sends_what_its_identity_has_to_survive():
    # What proxy_identity reads of OpenCode; a new pinned version that changes it shows here.
    bodies = [r["body"] for r in MAIN]
    assert all("metadata" not in b for b in bodies)  # no session id in the body: it is in x-session-id
    assert all(re.search(r"^ +Today's date: ", b["system"][-1]["text"], re.MULTILINE) for b in bodies)
    # the cache markers sit on the newest two messages (and the system prompt), and move with them
    for b in bodies[1:]:
        marked = [i for i, m in enumerate(b["messages"]) if any("cache_control" in blk for blk in m["content"])]
        assert marked == [len(b["messages"]) - 2, len(b["messages"]) - 1]
    results = [blk for m in bodies[-1]["messages"] for blk in m["content"] if blk["type"] == "tool_result"]
    assert any(r.get("is_error") for r in results)
    assert max(len(json.dumps(r["content"])) for r in results) > 20_000
    assert any(len([b for b in m["content"] if b["type"] == "tool_use"]) > 1 for m in bodies[-1]["messages"])


def agent_of(request: dict[str, Any]) -> tuple[str, str] | None:
    return agent_conversation(request["body"], None, request["headers"]["x-session-id"])


def test_its_conversation_is_one_key_and_each_request_holds_the_one_before_it():
    keys = {key_of(r) for r in MAIN}
    assert len(keys) == 1 and keys.pop().startswith(f"{SESSION_PLACEHOLDER}#")
    # OpenCode's session id is the agent's: its conversation one prompt, its title another
    assert len({agent_of(r) for r in MAIN}) == 1
    assert agent_of(MAIN[0])[0] == agent_of(SIDES[0])[0] == SESSION_PLACEHOLDER
    assert agent_of(MAIN[0]) != agent_of(SIDES[0])
    # each request's history, by the client ids the proxy stores, begins with the one before it
    ids = [[client_id(i, m) for i, m in enumerate(r["body"]["messages"])] for r in MAIN]
    for before, after in itertools.pairwise(ids):
        assert after[: len(before)] == before and len(after) == len(before) + 2
    # without its session id (an older OpenCode), the start of the conversation names it: one key too
    assert len({key_of(r, None) for r in MAIN}) == 1


def in_another_form(body: dict[str, Any], day: int, marks: list[bool]) -> dict[str, Any]:
    """The request as OpenCode might have sent it on another day, its cache markers elsewhere."""
    body = copy.deepcopy(body)
    for block in body["system"]:
        block["text"] = re.sub(r"Today's date: [^\n]*", f"Today's date: Sat Feb {day:02d} 2030", block["text"])
    for message, marked in zip(body["messages"], marks, strict=False):
        for block in message["content"]:
            block.pop("cache_control", None)
        if marked:
            message["content"][-1]["cache_control"] = CACHE
    return body


@ENGINE
@given(day=st.integers(1, 28), marks=st.lists(st.booleans(), max_size=30))
def test_its_conversation_keeps_its_key_and_its_messages_their_ids_past_midnight_and_its_markers(day, marks):
    for request in MAIN:
        other = {**request, "body": in_another_form(request["body"], day, marks)}
        assert key_of(other) == key_of(request) and agent_of(other) == agent_of(request)
        assert [identity(m["content"]) for m in other["body"]["messages"]] == [
            identity(m["content"]) for m in request["body"]["messages"]
        ]


# ----------------------------------------------------------------------------- recorded through the proxy


def answers() -> list[dict[str, Any]]:
    """What the scripted upstream answered each request of the run, with the usage it counted."""
    model = ScriptedModel(coding_task("/work/project", content=CONTENT), is_main=is_opencode_main)
    replies = []
    for at, request in enumerate(REQUESTS):
        turn = model(request["body"])
        content = [dict(b) for b in turn["content"]]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        replies.append({"id": f"msg_{at}", "type": "message", "role": "assistant", "content": content,
                        "stop_reason": stop, "usage": {"input_tokens": default_count_tokens(request["body"]),
                                                       "output_tokens": 9}})  # fmt: skip
    return replies


def record(team: Any, request: dict[str, Any], answer: dict[str, Any], agent_session: str) -> None:
    """One exchange recorded as the proxy's view and recorder do, with ``agent_session`` in x-session-id."""
    kept = ANTHROPIC.recorded(request["body"])
    assert kept is not None
    key, agent = conversation_key(kept, None, agent_session), agent_conversation(kept, None, agent_session)
    session = proxy.proxy_session_for(user=team.bob.user, project=team.project, key=key, body=kept, agent=agent)
    proxy.proxy_record_exchange(
        session_id=session.pk,
        after_seq=len(kept["messages"]),
        pending=kept,
        message=answer,
        complete=True,
        key=session.external_id,
    )


def assert_one_conversation_and_its_title(team: Any, agent_session: str) -> None:
    sessions = list(AgentSession.objects.filter(project=team.project, external_id__startswith=agent_session))
    conversations = [s for s in sessions if SIDECHAIN_OF not in s.metadata]
    assert len(conversations) == 1, [(s.external_id, s.metadata) for s in sessions]
    session = conversations[0]
    assert session.external_id == agent_session and session.parent_id is None
    sides = [s for s in sessions if s is not session]
    assert [(s.metadata[SIDECHAIN_OF], s.spawned_by_id, s.parent_id) for s in sides] == [(session.pk, session.pk, None)]
    assert sides[0].external_id.startswith(f"{agent_session}#")
    last = MAIN[-1]["body"]["messages"]
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert [(r, identity(c)) for r, c in stored] == [(m["role"], identity(m["content"])) for m in last] + [
        ("assistant", identity([text(ScriptedModel([]).final)]))
    ]
    assert session.name.startswith("\"Write the line 'hello from ctxweb'")
    status = usage.session_status(session)
    assert status["token_source"] == "exact" and status["warnings"] == []
    assert status["used"] == default_count_tokens(MAIN[-1]["body"]) + 9
    assert not IngestRejection.objects.filter(session__in=sessions).exists()
    side_messages = Message.objects.filter(session=sides[0]).order_by("seq").values_list("content", flat=True)
    assert identity(list(side_messages)[-1]) == identity([text(SIDE_REPLY)])


@pytest.mark.django_db
@settings(DATABASE)
@given(title_at=st.integers(0, len(MAIN)), run=st.integers(0, 10**9))
def test_a_run_recorded_exchange_by_exchange_is_one_session_and_its_title_a_side_of_it(team, title_at, run):
    # The title request comes alongside the conversation's first request: recorded before it, or after
    # any number of the conversation's exchanges.
    agent_session = f"ses_{run:026d}"  # the examples of a property share the database
    replies = dict(zip((id(r) for r in REQUESTS), answers(), strict=True))
    order = [r for r in MAIN]
    for side in SIDES:
        order.insert(title_at, side)
    for request in order:
        record(team, request, replies[id(request)], agent_session)
    assert_one_conversation_and_its_title(team, agent_session)


@pytest.mark.django_db
def test_two_runs_of_the_same_task_on_the_same_day_are_two_conversations(team):
    # Their requests are alike but for OpenCode's session id (a scripted model answers both alike):
    # named by their start alone, the second run would be taken for a resend of the first.
    replies = answers()
    for agent_session in ("ses_first", "ses_second"):
        for request, answer in zip(REQUESTS, replies, strict=True):
            record(team, request, answer, agent_session)
    for agent_session in ("ses_first", "ses_second"):
        assert_one_conversation_and_its_title(team, agent_session)


def session_for(team: Any, request: dict[str, Any], agent_session: str) -> AgentSession:
    kept = ANTHROPIC.recorded(request["body"])
    assert kept is not None
    key, agent = conversation_key(kept, None, agent_session), agent_conversation(kept, None, agent_session)
    return proxy.proxy_session_for(user=team.bob.user, project=team.project, key=key, body=kept, agent=agent)


@pytest.mark.django_db
def test_a_title_made_while_its_conversation_was_made_is_linked_all_the_same(team, monkeypatch):
    # Two web workers at once: the title's request looked for the conversation's session before it was
    # made, and the conversation's looked for side sessions before the title's was. The later linked them.
    conversation = session_for(team, MAIN[0], "ses_race")
    monkeypatch.setattr(proxy.sessions, "_agent_conversation", lambda project, key, body, agent: (key, None))
    title = session_for(team, SIDES[0], "ses_race")
    title.refresh_from_db()
    assert title.metadata[SIDECHAIN_OF] == conversation.pk and title.external_id.startswith("ses_race#")
    assert title.spawned_by_id == conversation.pk


def test_the_session_header_and_claude_codes_user_id_come_before_opencodes_session_id():
    body = MAIN[0]["body"]
    assert conversation_key(body, "run-42", "ses_1") == "run-42" and agent_conversation(body, "run-42", "ses_1") is None
    with_user_id = {**body, "metadata": {"user_id": '{"session_id": "cc-sess"}'}}
    assert conversation_key(with_user_id, None, "ses_1").startswith("cc-sess#")
    assert agent_conversation(with_user_id, None, "ses_1")[0] == "cc-sess"
    assert conversation_key(body, None, "  ") == conversation_key(body, None, None) != ""
    assert agent_conversation(body, None, "  ") is None
