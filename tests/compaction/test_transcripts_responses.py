"""OpenAI's Responses API read into a session's messages (``compaction.transcripts.responses``): what
a client sends back of a response reads as the message the response was read as, for any items;
a request's leading instructions are the system prompt; calls pair with their outputs."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from compaction.messages import normalize_message
from compaction.transcripts.responses import request_as_anthropic, response_as_message, usage_as_anthropic

TEXT = st.text(min_size=0, max_size=30)
IDS = st.uuids().map(lambda u: u.hex[:12])  # ids a provider gives: unique


@st.composite
def model_items(draw: Any) -> list[dict[str, Any]]:
    """A response's output: reasoning, calls of both kinds, text, an item of a kind not known yet."""
    items: list[dict[str, Any]] = []
    for kind in draw(st.lists(st.sampled_from(["reasoning", "function", "custom", "message", "other"]), max_size=5)):
        n = draw(IDS)
        if kind == "reasoning":
            summary = [{"type": "summary_text", "text": draw(TEXT)}]
            items.append({"type": "reasoning", "id": f"rs_{n}", "summary": summary, "encrypted_content": draw(TEXT)})
        elif kind == "function":
            args = json.dumps({"cmd": draw(TEXT)})
            items.append(
                {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "exec", "arguments": args}
            )
        elif kind == "custom":
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{n}",
                    "call_id": f"call_{n}",
                    "name": "apply_patch",
                    "input": draw(TEXT),
                }
            )
        elif kind == "message":
            parts = [{"type": "output_text", "text": draw(TEXT), "annotations": []}]
            items.append({"type": "message", "id": f"msg_{n}", "role": "assistant", "content": parts})
        else:
            items.append({"type": "web_search_call", "id": f"ws_{n}", "action": {"query": draw(TEXT)}})
    return items


def sent_back(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as a client sends it back: a status, null fields, its own annotations (Codex's)."""
    return {
        **item,
        "status": "completed",
        "content": item.get("content"),
        "internal_chat_message_metadata_passthrough": {"turn_id": "t"},
    }


def outputs_for(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
    return [{"type": kinds[i["type"]], "call_id": i["call_id"], "output": "ok"} for i in items if i["type"] in kinds]


@given(st.lists(model_items(), min_size=1, max_size=4), st.booleans())
def test_a_response_sent_back_reads_as_the_message_it_was_read_as(responses, streamed_usage):
    """Turn after turn, the next request's history = the last one's messages + the reply as recorded."""
    history: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    ]
    recorded = request_as_anthropic({"model": "gpt-5", "input": history})["messages"]
    for output in responses:
        if not output:
            continue
        usage = {
            "input_tokens": 100,
            "output_tokens": 7,
            "input_tokens_details": {"cached_tokens": 40 if streamed_usage else 0},
        }
        reply = response_as_message({"id": "resp_1", "status": "completed", "output": output, "usage": usage})
        assert reply is not None
        recorded = [*recorded, {"role": "assistant", "content": reply["content"]}]
        history = [*history, *(sent_back(i) for i in output)]
        answers = outputs_for(output)
        said = answers or [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "more"}]}]
        history = [*history, *said]
        read = request_as_anthropic({"model": "gpt-5", "input": history})["messages"]
        assert read[: len(recorded)] == recorded
        recorded = read
    for message in recorded:  # every message is one a session holds (a NUL in text is made U+FFFD there)
        stored = normalize_message(message).content
        assert json.dumps(stored) == json.dumps(message["content"]).replace("\\u0000", "\\ufffd")


def test_instructions_and_leading_developer_messages_are_the_system_prompt():
    body = {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
            {"role": "user", "content": "hi"},
            {"type": "message", "role": "developer", "content": "Mode changed."},
        ],
        "tools": [
            {"type": "function", "name": "exec", "description": "Run", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
            {"type": "web_search"},
        ],
    }
    read = request_as_anthropic(body)
    assert read["system"] == "Be brief.\n\nYou are Codex."
    assert [m["role"] for m in read["messages"]] == ["user", "system"]
    assert read["messages"][0]["content"] == "hi"
    assert [t["name"] for t in read["tools"]] == ["exec", "apply_patch", "web_search"]
    assert read["tools"][0]["input_schema"] == {"type": "object"}


def test_a_string_input_is_one_user_message_and_no_input_is_nothing_to_record():
    assert request_as_anthropic({"model": "gpt-5", "input": "hello"})["messages"] == [
        {"role": "user", "content": "hello"}
    ]
    assert request_as_anthropic({"model": "gpt-5", "previous_response_id": "resp_1"}) is None


def test_calls_pair_with_their_outputs_and_a_custom_call_keeps_its_text():
    body = {
        "input": [
            {"role": "user", "content": "patch it"},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call", "call_id": "c2", "name": "exec", "arguments": "{not json"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "x"}]},
        ]
    }
    _, call, outputs = request_as_anthropic(body)["messages"]
    assert call["role"] == "assistant" and outputs["role"] == "tool"
    assert call["content"][0] == {
        "type": "tool_use",
        "id": "c1",
        "name": "apply_patch",
        "input": {"input": "*** Begin Patch"},
        "openai_type": "custom_tool_call",
    }
    assert call["content"][1]["input"] == {"_raw": "{not json"}
    assert [b["tool_use_id"] for b in outputs["content"]] == ["c1", "c2"]
    assert outputs["content"][1]["content"] == [{"type": "text", "text": "x"}]


def test_usage_counts_the_cached_part_apart_as_anthropic_does():
    usage = usage_as_anthropic(
        {"input_tokens": 1000, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 600}}
    )
    assert usage == {"input_tokens": 400, "output_tokens": 5, "cache_read_input_tokens": 600}
    assert usage_as_anthropic({"input_tokens": 10, "output_tokens": 1}) == {"input_tokens": 10, "output_tokens": 1}
