"""A conversation's identity survives what real clients do to its form from one request to the next
(Claude Code does all of it): the cache marker moved to the newest message, a text sent as a string
once and as blocks next time, ``system`` messages added mid-conversation, the billing line at the
top of the system prompt, its session id inside a JSON ``metadata.user_id``. Each conversation,
replayed request by request in any mix of those forms, is ONE session holding the conversation, and
STATUS reads back."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts import read_transcript
from sessions_app.api.proxy.dialects import ANTHROPIC
from sessions_app.models import AgentSession, Message
from sessions_app.selectors import usage
from sessions_app.services import proxy
from sessions_app.services.proxy.identity import agent_conversation, compacting, conversation_key, session_name
from sessions_app.services.proxy.messages import identity
from tests.fakes.anthropic_server import default_count_tokens
from tests.hypothesis_budget import DATABASE
from tests.redacted import as_stored
from tests.shared_data import SHARED_DATA

REMINDER = "<system-reminder>\nAs you answer the user's questions, you can use this context.\n</system-reminder>"
CACHE = {"type": "ephemeral"}

# ----------------------------------------------------------------------------- conversations

words = st.text(alphabet="abcdefghij klmn\n", min_size=1, max_size=30).filter(lambda t: t.strip())


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """user, assistant (text, or a tool call whose result comes back and is answered), … in turns."""
    messages: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(1, 4))):
        asked = f"turn {turn}: {draw(words)}"
        messages.append({"role": "user", "content": asked})
        if draw(st.booleans()):
            call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "Bash", "input": {"command": draw(words)}}
            messages.append({"role": "assistant", "content": [{"type": "text", "text": draw(words)}, call]})
            result = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": draw(words)}
            messages.append({"role": "user", "content": [result]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": draw(words)}]})
    return messages


def exchanges(messages: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Each request (the history up to an assistant message) and its answer, with its usage."""
    return [
        (
            messages[:at],
            {
                "id": f"msg_{at}",
                "type": "message",
                "role": "assistant",
                "content": message["content"],
                "stop_reason": "end_turn",
                # What the fake API counts of the request: a figure ctxweb believes (a far one is flagged).
                "usage": {"input_tokens": default_count_tokens({"messages": messages[:at]}), "output_tokens": 7},
            },
        )
        for at, message in enumerate(messages)
        if message["role"] == "assistant" and at > 0
    ]


# ----------------------------------------------------------------------------- the forms a client gives it


def as_blocks(content: Any, pick: random.Random) -> list[dict[str, Any]]:
    """A string as one text block or as several, split where it has whitespace."""
    if not isinstance(content, str):
        return [dict(b) for b in content]
    cuts = [i for i, ch in enumerate(content) if ch.isspace()]
    at = pick.choice(cuts) if cuts and pick.random() < 0.5 else None
    parts = [content] if at is None else [content[:at], content[at:]]
    return [{"type": "text", "text": part} for part in parts]


def in_some_form(history: list[dict[str, Any]], pick: random.Random, session_id: str) -> dict[str, Any]:
    """The request as Claude Code might send it: each text as a string or as blocks, the cache marker on
    the newest message (and on the system prompt and tools), a system message somewhere, the billing
    line with a suffix of the moment, the session id inside a JSON user_id."""
    messages = []
    for message in history:
        content = message["content"]
        if pick.random() < 0.5:
            content = as_blocks(content, pick)
        elif isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
            content = content[0]["text"]
        messages.append({"role": message["role"], "content": content})
    newest = messages[-1]
    newest["content"] = as_blocks(newest["content"], pick)
    newest["content"][-1] = {**newest["content"][-1], "cache_control": CACHE}
    if pick.random() < 0.5:
        at = pick.randrange(len(messages) + 1)
        messages.insert(at, {"role": "system", "content": f"The date is now day {pick.randrange(9)}."})
    system = [
        {
            "type": "text",
            "text": f"x-anthropic-billing-header: cc_version=2.1.328.{pick.randrange(999)}; cc_entrypoint=cli",
        },
        {"type": "text", "text": "You are Claude Code.", **({"cache_control": CACHE} if pick.random() < 0.5 else {})},
    ]
    user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session_id})
    tools = [
        {
            "name": "Bash",
            "input_schema": {"type": "object"},
            **({"cache_control": CACHE} if pick.random() < 0.5 else {}),
        }
    ]
    return {
        "model": "claude-sonnet-4-5",
        "system": system,
        "tools": tools,
        "metadata": {"user_id": user_id},
        "messages": messages,
    }


def replay(team: Any, messages: list[dict[str, Any]], pick: random.Random) -> str:
    """The conversation sent request by request through the proxy's recording; its session id."""
    session_id = str(uuid.uuid4())  # the examples of a property share the database
    for history, answer in exchanges(messages):
        kept = ANTHROPIC.recorded(in_some_form(history, pick, session_id))
        assert kept is not None
        key, agent = conversation_key(kept, None), agent_conversation(kept, None)
        session = proxy.proxy_session_for(user=team.bob.user, project=team.project, key=key, body=kept, agent=agent)
        proxy.proxy_record_exchange(
            session_id=session.pk,
            after_seq=len(kept["messages"]),
            pending=kept,
            message=answer,
            complete=True,
            key=session.external_id,
        )
    return session_id


def assert_one_session_holding(team: Any, session_id: str, messages: list[dict[str, Any]]) -> AgentSession:
    sessions = list(AgentSession.objects.filter(project=team.project, external_id__startswith=session_id))
    assert len(sessions) == 1, [(s.external_id, s.parent_id) for s in sessions]
    session = sessions[0]
    assert session.external_id == session_id  # Claude Code's session id, as its hook names it
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert [(role, identity(content)) for role, content in stored] == [
        (m["role"], identity(as_stored(team.project, m["content"]))) for m in messages
    ]
    status = usage.session_status(session)
    assert status["message_count"] == len(messages) and status["token_source"] == "exact"
    return session


@pytest.mark.django_db
@settings(DATABASE)
@given(messages=conversations(), seed=st.randoms(use_true_random=False))
def test_a_conversation_in_any_mix_of_forms_is_one_session_holding_it(team, messages, seed):
    messages[0]["content"] = [{"type": "text", "text": REMINDER}, {"type": "text", "text": messages[0]["content"]}]
    session_id = replay(team, messages, seed)
    session = assert_one_session_holding(team, session_id, messages)
    assert session.name == " ".join(messages[0]["content"][1]["text"].split())  # the user's words


CLAUDE_CODE = sorted((SHARED_DATA / "claude_code").glob("*.jsonl")) or [SHARED_DATA / "shared-data-missing.jsonl"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", CLAUDE_CODE, ids=lambda p: p.stem)
def test_a_real_conversation_in_any_mix_of_forms_is_one_session_holding_it(shared_data, team, path: Path):
    conversation = read_transcript(path.read_bytes(), "claude-code").main
    if conversation is None or not conversation.messages:
        pytest.skip(f"{path.name} holds no main conversation")
    messages = [{"role": m["role"], "content": m["content"]} for m in conversation.messages[:80]]
    # A compaction agent's file ("acompact") ends with Claude Code asking to summarize: not recorded.
    asks = [at for at, m in enumerate(messages) if m["role"] == "user" and compacting({"messages": messages[: at + 1]})]
    messages = messages[: asks[0]] if asks else messages
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    if not exchanges(messages):
        pytest.skip(f"{path.name} holds no answered request")
    session_id = replay(team, messages, random.Random(path.name))
    assert_one_session_holding(team, session_id, messages)


# ----------------------------------------------------------------------------- names and keys


@pytest.mark.parametrize(
    ("first", "name"),
    [
        ("fix the login bug", "fix the login bug"),
        ([{"type": "text", "text": REMINDER}, {"type": "text", "text": "add a test\nfor it"}], "add a test for it"),
        ("<command-name>/clear</command-name>\n<command-message>clear</command-message>", "proxy conversation"),
        (
            "Caveat: The messages below were generated by the user while running local commands. DO NOT",
            "proxy conversation",
        ),
        ("x" * 300, "x" * 79 + "…"),
    ],
)
def test_a_session_is_named_from_the_first_thing_the_user_asked(first, name):
    body = {"messages": [{"role": "user", "content": first}]}
    if name == "proxy conversation":
        assert session_name(body) == name
        body["messages"].append({"role": "user", "content": "then this"})
        name = "then this"
    assert session_name(body) == name


def test_claude_codes_json_user_id_gives_its_session_id_and_the_billing_line_is_no_part_of_the_key():
    def body(suffix: str) -> dict[str, Any]:
        user_id = json.dumps({"device_id": "abc", "account_uuid": "u", "session_id": "5c03-sess"})
        system = f"x-anthropic-billing-header: cc_version=2.1.328.{suffix}; cc_entrypoint=cli\nYou are Claude Code."
        return {"system": system, "metadata": {"user_id": user_id}, "messages": []}

    key = conversation_key(body("a1"), None)
    assert key.startswith("5c03-sess#") and key == conversation_key(body("ff9"), None)
    other = {**body("a1"), "system": "You summarize conversations."}
    assert conversation_key(other, None) != key  # a side request keeps a session of its own
