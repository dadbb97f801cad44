"""What the OpenAI proxy records of a Chat Completions request (``chat_request_as_anthropic``) and of
an answer (``completion_as_message``). The property the proxy's recording rests on: an agent resends
its history with every request, so reading any shorter history of a conversation must give the
first messages of reading the whole one — checked over every conversation of the shared OpenAI
transcripts (tau-bench, SWE-agent) and generated tool-using ones."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.messages import normalize_message
from compaction.transcripts.openai import chat_request_as_anthropic, completion_as_message
from tests.hypothesis_budget import ENGINE


def conversations(shared: Any) -> list[list[dict[str, Any]]]:
    found = []
    for path in sorted((shared / "openai").iterdir()):
        if path.suffix == ".json":
            found += [episode["traj"] for episode in json.loads(path.read_text()) if isinstance(episode, dict)]
        elif path.suffix == ".traj":
            found.append(json.loads(path.read_text())["history"])
    return [c for c in found if isinstance(c, list) and c]


def test_every_shorter_history_of_a_shared_conversation_reads_as_a_prefix(shared_data):
    found = conversations(shared_data)
    assert len(found) >= 2
    for messages in found:
        whole = chat_request_as_anthropic({"model": "gpt-4o", "messages": messages})
        assert whole is not None and whole["messages"]
        for message in whole["messages"]:
            normalize_message(message)  # a session can hold every one
        for cut in range(1, len(messages)):
            part = chat_request_as_anthropic({"model": "gpt-4o", "messages": messages[:cut]})
            assert part is not None
            assert part["messages"] == whole["messages"][: len(part["messages"])], cut
            assert part["system"] == whole["system"] or not part["messages"]


@st.composite
def tool_conversations(draw: Any) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Go."}]
    for turn in range(draw(st.integers(0, 5))):
        calls = []
        for i in range(draw(st.integers(0, 2))):
            name, arguments = (
                draw(st.sampled_from(["read", "run"])),
                draw(st.sampled_from(['{"p": 1}', "{}", "not json"])),
            )
            calls.append(
                {"id": f"call_{turn}_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            )
        said: dict[str, Any] = {"role": "assistant", "content": draw(st.sampled_from([None, "", "Working."]))}
        if calls:
            said["tool_calls"] = calls
        history.append(said)
        history += [{"role": "tool", "tool_call_id": c["id"], "content": draw(st.text(max_size=20))} for c in calls]
        if draw(st.booleans()):
            history.append({"role": "user", "content": [{"type": "text", "text": "and?"}]})
    return history


@settings(ENGINE)
@given(messages=tool_conversations(), data=st.data())
def test_every_shorter_history_of_a_generated_conversation_reads_as_a_prefix(messages, data):
    whole = chat_request_as_anthropic({"messages": messages})
    assert whole is not None and whole["system"] == "You help."
    cut = data.draw(st.integers(1, len(messages)))
    part = chat_request_as_anthropic({"messages": messages[:cut]})
    assert part is not None and part["messages"] == whole["messages"][: len(part["messages"])]


def test_an_answer_reads_as_the_message_it_holds():
    call = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"p": "a"}'}}
    said = {"role": "assistant", "content": "Reading.", "tool_calls": [call]}
    completion = {
        "id": "chatcmpl-1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": said}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
    }
    assert completion_as_message(completion) == {
        "id": "chatcmpl-1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {"p": "a"}},
        ],
        "stop_reason": "tool_calls",
        "usage": {"input_tokens": 120, "output_tokens": 9},
    }
    for nothing in (None, {}, {"choices": []}, {"choices": ["x"]}, {"choices": [{"message": "x"}]}, []):
        assert completion_as_message(nothing) is None
    assert chat_request_as_anthropic({"messages": "not a list"}) is None


@pytest.mark.parametrize("user", ["agent-7", "", None, 5])
def test_the_requests_user_does_not_name_the_conversation(user):
    """OpenAI's ``user`` is the end user, who holds many conversations."""
    body = chat_request_as_anthropic({"messages": [{"role": "user", "content": "hi"}], "user": user})
    assert body is not None and "metadata" not in body
