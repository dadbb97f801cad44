"""A tool call's id is indexed (ToolUse.tool_use_id, 255 characters): every way a message can carry
one — an Anthropic block, OpenAI's ``tool_calls`` and ``tool_call_id`` — is held to that size, so an
over-long id is a 400, not a database error."""

from __future__ import annotations

import pytest

from compaction.messages import TOOL_ID_MAX, MessageError, normalize_message


def _carriers(tool_id: str) -> list[dict]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": tool_id, "type": "function", "function": {"name": "Read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": tool_id, "content": "ok"},
    ]


@pytest.mark.parametrize("index", range(4))
def test_an_id_of_the_column_size_is_kept(index):
    message = normalize_message(_carriers("i" * TOOL_ID_MAX)[index])
    assert (message.tool_use_ids + message.tool_result_ids) == ["i" * TOOL_ID_MAX]


@pytest.mark.parametrize("index", range(4))
def test_a_longer_id_is_refused_whichever_way_it_comes(index):
    with pytest.raises(MessageError) as refused:
        normalize_message(_carriers("i" * (TOOL_ID_MAX + 1))[index])
    assert refused.value.code == "invalid_content" and str(TOOL_ID_MAX) in refused.value.detail
