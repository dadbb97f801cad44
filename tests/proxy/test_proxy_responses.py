"""OpenAI's Responses API through the proxy (``/proxy/openai/v1/responses``), with the official
``openai`` SDK: the caller gets the upstream's bytes; a tool-using conversation is one session whose
messages are what its last request reads as (``compaction.transcripts.responses``) plus the reply;
the answer's usage is the exact count; a stream read in any pieces gives the same message."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts.responses import request_as_anthropic
from sessions_app.api.proxy.stream import ResponseAccumulator
from sessions_app.models import AgentSession
from sessions_app.selectors import usage
from tests.proxy.raw_upstream import CALLER_KEY, Raw

MODEL = "gpt-5.5"
TOOLS = [
    {"type": "function", "name": "exec_command", "description": "Run", "parameters": {"type": "object"}},
    {"type": "custom", "name": "apply_patch", "description": "Patch", "format": {"type": "text"}},
    {"type": "web_search"},
]


def response(n: int, output: list[dict[str, Any]], *, input_tokens: int = 900, cached: int = 0) -> dict[str, Any]:
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": 12,
             "output_tokens_details": {"reasoning_tokens": 5}, "total_tokens": input_tokens + 12}  # fmt: skip
    return {"id": f"resp_{n}", "object": "response", "created_at": 1, "status": "completed", "model": MODEL,
            "output": output, "usage": usage}  # fmt: skip


def events(done: dict[str, Any]) -> list[dict[str, Any]]:
    """The events the API streams for a response: created, each item added, its pieces, done; completed."""
    start = {**done, "status": "in_progress", "output": [], "usage": None}
    out: list[dict[str, Any]] = [{"type": "response.created", "response": start}]
    for i, item in enumerate(done["output"]):
        kind = item["type"]
        empty = {
            **item,
            **({"content": []} if kind == "message" else {}),
            **({"arguments": ""} if kind == "function_call" else {}),
        }
        out.append({"type": "response.output_item.added", "output_index": i, "item": empty})
        if kind == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append({"type": "response.content_part.added", "output_index": i, "content_index": 0, "part": part})
            for k in range(0, len(text), 5):
                out.append(
                    {
                        "type": "response.output_text.delta",
                        "output_index": i,
                        "content_index": 0,
                        "delta": text[k : k + 5],
                    }
                )
        if kind == "function_call":
            out.append(
                {"type": "response.function_call_arguments.delta", "output_index": i, "delta": item["arguments"]}
            )
        out.append({"type": "response.output_item.done", "output_index": i, "item": item})
    out.append({"type": "response.completed", "response": done})
    return [{**e, "sequence_number": n} for n, e in enumerate(out)]


def sse(done: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events(done)]


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look first."}],
    "encrypted_content": "gAAAA-opaque",
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "exec_command",
    "arguments": '{"cmd":"ls"}',
    "status": "completed",
}
PATCH = {
    "type": "custom_tool_call",
    "id": "ctc_2",
    "call_id": "call_2",
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** End Patch",
    "status": "completed",
}
SAID = {
    "type": "message",
    "id": "msg_3",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Listed and patched.", "annotations": []}],
}


@pytest.fixture
def raw(settings: Any) -> Any:
    with Raw() as upstream:
        settings.CTX_PROXY_OPENAI_URL = upstream.base_url
        yield upstream


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_a_codex_like_conversation_is_one_session_with_exact_usage(proxy_openai_sdk, team, raw, stream):
    client: openai.OpenAI = proxy_openai_sdk(
        {"ctxweb-api-key": team.bob.key, "session-id": "thread-1"}, api_key=CALLER_KEY
    )
    answers = [response(1, [REASONING, CALL, PATCH]), response(2, [SAID], input_tokens=1500, cached=1000)]
    for answer in answers:
        if stream:
            raw.sse(sse(answer))
        else:
            raw.json(answer)
    history: list[Any] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List, then patch."}]},
    ]
    for n, answer in enumerate(answers):
        body = {
            "model": MODEL,
            "input": history,
            "tools": TOOLS,
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        if stream:
            with client.responses.stream(**body) as events_seen:
                got = events_seen.get_final_response().model_dump(exclude_none=True)
        else:
            got = client.responses.create(**body).model_dump(exclude_none=True)
        assert got["id"] == answer["id"] and len(got["output"]) == len(answer["output"])
        assert raw.requests[n]["body"]["input"] == history  # the caller's request went as it came
        history = [*history, *({**i, "content": i.get("content")} for i in answer["output"])]  # as Codex sends it back
        if n == 0:
            history += [{"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"}]  # fmt: skip
    session = stored_session(team)
    expected = request_as_anthropic({"model": MODEL, "input": history, "tools": TOOLS})
    assert [(m.role, m.content) for m in session.messages.order_by("seq")] == [
        (m["role"], m["content"]) for m in expected["messages"]
    ]
    assert session.external_id == "thread-1" and session.system_prompt == "You are Codex."
    assert [t["name"] for t in session.tools] == ["exec_command", "apply_patch", "web_search"]
    status = usage.session_status(session)
    assert status["token_source"] == "exact" and status["warnings"] == []
    assert status["used"] == 1500 + 12  # the last exchange's input (cached included) and its reply


def stored_session(team: Any) -> AgentSession:
    sessions = list(AgentSession.objects.filter(project=team.project))
    assert len(sessions) == 1
    return sessions[0]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), max_size=12))
def test_a_stream_read_in_any_pieces_gives_the_message_read_whole(cuts):
    done = response(7, [REASONING, CALL, PATCH, SAID])
    data = b"".join(sse(done))
    whole = ResponseAccumulator()
    whole.feed(data)
    pieces, at = ResponseAccumulator(), 0
    for cut in sorted({min(c * 7, len(data)) for c in cuts}):
        pieces.feed(data[at:cut])
        at = cut
    pieces.feed(data[at:])
    assert whole.complete and pieces.complete and whole.error is None
    assert pieces.message == whole.message
    assert whole.message["content"][0]["type"] == "reasoning" and whole.message["usage"]["input_tokens"] == 900


def test_a_stream_cut_short_keeps_the_items_that_arrived_and_the_text_so_far():
    done = response(8, [CALL, SAID])
    cut = [e for e in events(done) if e["type"] != "response.completed"][:-2]  # SAID's last delta and done are lost
    seen = ResponseAccumulator()
    seen.feed(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in cut))
    assert not seen.complete
    call, said = seen.message["content"]
    assert call["type"] == "tool_use" and call["input"] == {"cmd": "ls"}
    assert said["type"] == "text" and "Listed and patched.".startswith(said["text"]) and said["text"]


@pytest.mark.django_db(transaction=True)
def test_a_request_continuing_a_stored_response_is_recorded_after_the_history_it_stands_on(
    proxy_openai_sdk, team, raw, settings
):
    settings.CTX_PROXY_RECORDERS = 0  # each exchange recorded before the next request is read
    client: openai.OpenAI = proxy_openai_sdk({"ctxweb-api-key": team.bob.key}, api_key=CALLER_KEY)
    raw.json(response(1, [REASONING, CALL]))
    raw.json(response(2, [SAID]))
    raw.json(response(3, [SAID]))
    first = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List it."}]}]
    client.responses.create(model=MODEL, input=first, tools=TOOLS, store=True)
    output = [{"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}]
    client.responses.create(model=MODEL, input=output, tools=TOOLS, previous_response_id="resp_1")
    assert raw.requests[1]["body"]["input"] == output  # the provider holds the rest: it went as it came
    session = stored_session(team)
    expected = request_as_anthropic({"model": MODEL, "input": [*first, REASONING, CALL, *output, SAID]})
    assert [(m.role, m.content) for m in session.messages.order_by("seq")] == [
        (m["role"], m["content"]) for m in expected["messages"]
    ]
    # A response ctxweb never saw: the new input is all it can record, as a conversation of its own.
    client.responses.create(model=MODEL, input="And now?", previous_response_id="resp_unknown")
    assert AgentSession.objects.filter(project=team.project).count() == 2
