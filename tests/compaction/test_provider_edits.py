"""``compaction.provider_edits``: which tool results a provider's ``clear_tool_uses`` edit cleared,
worked out from how many it says it cleared. Checked against the fake API's own clearing (which
knows which it cleared) over generated tool-using histories."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.provider_edits import CLEARED_INPUT_KEY, CLEARED_RESULT, tool_uses_cleared
from tests.fakes.anthropic_server import CLEARED_TOOL_RESULT, clear_tool_uses, default_count_tokens
from tests.hypothesis_budget import ENGINE

TOOLS = ["Read", "Bash", "Grep"]


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    """A user's ask, then turns of tool calls (one or two at once) and their results, some as text."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Go through the repository."}]
    for turn in range(draw(st.integers(0, 8))):
        calls = [
            {"type": "tool_use", "id": f"toolu_{turn}_{i}", "name": draw(st.sampled_from(TOOLS)), "input": {"n": turn}}
            for i in range(draw(st.integers(1, 2)))
        ]
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"Turn {turn}."}, *calls]})
        results = [
            {
                "type": "tool_result",
                "tool_use_id": c["id"],
                "content": draw(st.sampled_from(["x" * 400, [{"type": "text", "text": "y" * 300}]])),
            }
            for c in calls
        ]
        history.append({"role": "user", "content": results})
    return history


def cleared_ids(messages: list[tuple[int, Any]]) -> list[str]:
    return [
        b["tool_use_id"]
        for _, content in messages
        if isinstance(content, list)
        for b in content
        if isinstance(b, dict)
        and b.get("type") == "tool_result"
        and b.get("content") in (CLEARED_RESULT, CLEARED_TOOL_RESULT)
    ]


@settings(ENGINE)
@given(history=histories(), keep=st.integers(0, 4), excluded=st.sets(st.sampled_from(TOOLS), max_size=2))
def test_the_results_cleared_are_the_ones_the_provider_cleared(history, keep, excluded):
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 1},
            "keep": {"type": "tool_uses", "value": keep}, "exclude_tools": sorted(excluded)}  # fmt: skip
    body = {"messages": history, "context_management": {"edits": [edit]}}
    seen, applied = clear_tool_uses(body, default_count_tokens)
    stored = list(enumerate(history, start=1))
    count = applied["cleared_tool_uses"] if applied else 0
    changes = tool_uses_cleared(stored, count=count, excluded=excluded)
    after = [(seq, changes.get(seq, content)) for seq, content in stored]
    assert cleared_ids(after) == cleared_ids(list(enumerate(seen["messages"], start=1)))
    # Nothing but the cleared results changed, and clearing again changes nothing.
    assert all(m["role"] == "user" for seq, m in enumerate(history, start=1) if seq in changes)
    assert tool_uses_cleared(after, count=count, excluded=excluded) == {}


def test_inputs_are_cleared_only_when_asked_and_excluded_tools_never():
    history = [
        (1, [{"type": "tool_use", "id": "a", "name": "Read", "input": {"path": "x"}}]),
        (2, [{"type": "tool_result", "tool_use_id": "a", "content": "text"}]),
        (3, [{"type": "tool_use", "id": "b", "name": "Bash", "input": {"cmd": "ls"}}]),
        (4, [{"type": "tool_result", "tool_use_id": "b", "content": "files"}]),
    ]
    only_results = tool_uses_cleared(history, count=5)
    assert set(only_results) == {2, 4}
    with_inputs = tool_uses_cleared(history, count=1, excluded={"Read"}, inputs_too=True)
    assert with_inputs == {
        3: [{"type": "tool_use", "id": "b", "name": "Bash", "input": {CLEARED_INPUT_KEY: True}}],
        4: [{"type": "tool_result", "tool_use_id": "b", "content": CLEARED_RESULT}],
    }
    assert tool_uses_cleared(history, count=0) == {} and tool_uses_cleared([(1, "plain text")], count=3) == {}
