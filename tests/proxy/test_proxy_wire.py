"""What transparent compaction sends to OpenAI's Chat Completions and what it takes from its refusals
(``services.proxy.wire``): any context a session holds becomes messages the API takes, after the
caller's system prompt, with the caller's other fields kept; a refusal as too long is believed only
in one of its whole shapes, its figures read only from a whole message that names them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.services.proxy.wire import WINDOW_BOUNDS, Context, TooLong, chat_request, openai_too_long
from tests.compaction.test_context import message as stored_message
from tests.hypothesis_budget import ENGINE


def assert_chat_valid(messages: list[dict[str, Any]]) -> None:
    """The rules OpenAI's API holds a request's messages to: each ``tool`` message answers a call of
    the assistant message before it (tool messages between), and each call is answered before anything
    else is said; an assistant message says something or calls a tool."""
    open_calls: list[str] = []
    for n, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            assert message["tool_call_id"] in open_calls, (n, message)
            open_calls.remove(message["tool_call_id"])
            continue
        assert not open_calls, (n, open_calls)  # unanswered calls before this message
        assert role in ("system", "developer", "user", "assistant"), (n, message)
        if role == "assistant":
            assert message.get("content") is not None or message.get("tool_calls"), (n, message)
            open_calls = [c["id"] for c in message.get("tool_calls") or []]
            assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for c in message.get("tool_calls", []))
    assert not open_calls


CALLER = {
    "model": "gpt-4o",
    "stream": True,
    "stream_options": {"include_usage": True},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "temperature": 0.3,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
        {"role": "user", "content": "the caller's own history, replaced"},
    ],
}


@settings(ENGINE)
@given(st.lists(stored_message, min_size=1, max_size=12), st.booleans())
def test_any_context_becomes_a_request_the_api_takes_after_the_callers_system_prompt(messages, summarized):
    if summarized:
        messages = [{"role": "user", "content": "<context_summary>\nwhat was done\n</context_summary>"}, *messages]
    sent = chat_request(Context(messages, summarized=summarized), CALLER)
    assert {k: v for k, v in sent.items() if k != "messages"} == {k: v for k, v in CALLER.items() if k != "messages"}
    assert sent["messages"][:2] == CALLER["messages"][:2]  # the caller's system prompt, as it came, first
    assert_chat_valid(sent["messages"])
    said = json.dumps(sent["messages"][2:])
    for text in (b["text"] for m in messages if isinstance(m["content"], list) for b in m["content"] if b.get("text")):
        assert json.dumps(text)[1:-1] in said  # nothing the context holds is dropped


def test_calls_and_results_go_as_openai_has_them():
    messages = [
        {"role": "user", "content": "Read a.py"},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading."},
                                          {"type": "tool_use", "id": "call_1", "name": "read", "input": {"p": 1}}]},
        {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "x = 1"}]},
        {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": "orphan"}]},
    ]  # fmt: skip
    sent = chat_request(Context(messages, summarized=False), {"model": "gpt-4o", "messages": []})["messages"]
    assert sent[:3] == [
        {"role": "user", "content": "Read a.py"},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "x = 1"},
    ]  # fmt: skip
    assert sent[3]["role"] == "user" and "orphan" in sent[3]["content"]  # a result whose call is gone: text


def refusal(message: str, *, code: str | None = None, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": "messages", "code": code}}).encode()


def figures(maximum: int, tokens: int) -> str:
    return (
        f"This model's maximum context length is {maximum} tokens. However, your messages resulted in {tokens} "
        "tokens. Please reduce the length of the messages."
    )


@settings(ENGINE)
@given(st.integers(1, 10**12 - 1), st.integers(1, 10**12 - 1), st.sampled_from([None, "context_length_exceeded"]))
def test_a_whole_refusal_names_the_window_and_the_size(maximum, tokens, code):
    found = openai_too_long(refusal(figures(maximum, tokens), code=code))
    if WINDOW_BOUNDS[0] <= maximum <= WINDOW_BOUNDS[1]:
        assert found == TooLong(tokens, maximum)
    else:  # a window no model has: not a figure to teach
        assert found is None


@settings(ENGINE)
@given(st.text(min_size=1), st.text())
def test_a_message_that_merely_holds_the_words_is_not_a_refusal(before, after):
    for said in (figures(3000, 5000), "Your input exceeds the context window of this model."):
        assert openai_too_long(refusal(before + said + after)) is None
        # The code is the API's own word: with it the refusal is believed, but no figure is read from it.
        assert openai_too_long(refusal(before + said + after, code="context_length_exceeded")) == TooLong(None, None)


def test_only_an_invalid_request_error_is_a_refusal():
    assert openai_too_long(refusal("Your input exceeds the context window of this model.")) == TooLong(None, None)
    assert openai_too_long(refusal("x", code="context_length_exceeded")) == TooLong(None, None)
    assert openai_too_long(refusal(figures(3000, 5000), kind="server_error")) is None
    for body in (b"", b"[]", b'{"error": "context_length_exceeded"}', b'{"type": "error", "error": {}}'):
        assert openai_too_long(body) is None


def test_every_wording_of_the_chat_api_names_its_figures():
    functions = (
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens "
        "(including 120 in the functions). Please reduce the length of the messages or functions."
    )
    completion = (
        "This model's maximum context length is 128000 tokens. However, you requested 130000 tokens (125000 in "
        "the messages, 5000 in the completion). Please reduce the length of the messages or completion."
    )
    assert openai_too_long(refusal(functions)) == TooLong(9000, 8192)
    assert openai_too_long(refusal(completion)) == TooLong(125000, 128000)  # the messages' share: ctxweb's count
