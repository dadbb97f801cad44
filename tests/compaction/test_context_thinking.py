"""A compacted request stays valid with extended thinking on: whatever prefix of an agent's tool loop a
compaction summarized, the turn the request continues starts with a thought, as the API requires
(the fake's rules, ``tests/fakes/anthropic_rules.py``), and no thought is changed or moved."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.context import summary_message, thinking_enabled, thinking_turn_kept, to_anthropic_messages
from tests.fakes.anthropic_rules import check_thinking, open_turn_start
from tests.fakes.scripted_model import text, thinking, tool_use
from tests.hypothesis_budget import ENGINE

THINKING = {"type": "enabled", "budget_tokens": 2048}


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """An agent's history as a model and its client make it: user prompts, each answered by a tool
    loop (a step: a thought or not, some text or not, one to three calls; then their results, with
    text after them or not) that ends in a text reply or is still running."""
    messages: list[dict[str, Any]] = []
    prompts = draw(st.integers(1, 3))
    for p in range(prompts):
        messages.append({"role": "user", "content": f"Prompt {p}: do the next part."})
        steps = draw(st.integers(0, 5))
        for s in range(steps):
            key = f"{p}-{s}"
            blocks = [thinking(f"Thought {key}")] if draw(st.booleans()) else []
            blocks += [text(f"Step {key}.")] if draw(st.booleans()) else []
            calls = [
                tool_use("Bash", {"command": f"seq {c}"}, key=f"{key}-{c}") for c in range(draw(st.integers(1, 3)))
            ]
            messages.append({"role": "assistant", "content": blocks + calls})
            results: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": c["id"], "content": f"output of {c['id']}"} for c in calls
            ]
            results += [text("<system-reminder>noted</system-reminder>")] if draw(st.booleans()) else []
            messages.append({"role": "user", "content": results})
        if p < prompts - 1 or draw(st.integers(0, 3)) == 0:  # the last loop is mostly still running
            blocks = [thinking(f"Done {p}")] if draw(st.booleans()) else []
            messages.append({"role": "assistant", "content": [*blocks, text(f"Part {p} done.")]})
    return messages


def compacted(messages: list[dict[str, Any]], cut: int) -> list[dict[str, Any]]:
    """What a session's context holds once a compaction summarized the first ``cut`` messages."""
    kept = messages[cut:]
    return [summary_message("Earlier: the agent ran commands."), *kept] if cut else kept


def results(key: str, output: str) -> dict[str, Any]:
    """The user message answering the call ``tool_use(…, key=key)``."""
    call = tool_use("Bash", {}, key=key)["id"]
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": output}]}


def thoughts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for m in messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "thinking"]


@settings(ENGINE)
@given(conversations(), st.data())
def test_any_compaction_of_a_tool_loop_leaves_a_request_valid_with_thinking_on(messages, data):
    # The client's own request is valid: its open turn starts with a thought (else it is not a case).
    start = open_turn_start(messages)
    steps = [i for i in range(start, len(messages)) if messages[i]["role"] == "assistant"] if start is not None else []
    first = steps[0] if steps else None
    if first is not None and messages[first]["content"][0]["type"] != "thinking":
        messages[first]["content"].insert(0, thinking("The turn's first thought."))
    check_thinking({"thinking": THINKING, "messages": messages})
    loop = max(i for i, m in enumerate(messages) if isinstance(m["content"], str))  # the last prompt's loop
    cut = data.draw(st.one_of(st.integers(0, len(messages) - 1), st.integers(loop, len(messages) - 1)), label="cut")

    sent = thinking_turn_kept(to_anthropic_messages(compacted(messages, cut)))

    check_thinking({"thinking": THINKING, "messages": sent})  # raises what the API would refuse
    assert thoughts(sent) == [t for t in thoughts(messages[cut:]) if t in thoughts(sent)]  # unchanged, in order
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is not None and last >= cut and messages[last]["content"][0]["type"] == "thinking":
        assert thoughts([messages[last]]) == thoughts([m for m in sent if m["role"] == "assistant"][-1:])


def test_a_loop_cut_after_its_first_thought_starts_at_the_newest_step_that_thinks():
    history = [
        {"role": "user", "content": "Count."},
        {"role": "assistant", "content": [thinking("Plan."), tool_use("Bash", {"command": "seq 3"}, key="a")]},
        results("a", "1 2 3"),
        {"role": "assistant", "content": [tool_use("Bash", {"command": "seq 4"}, key="b")]},
        results("b", "1 2 3 4"),
        {"role": "assistant", "content": [thinking("Again."), tool_use("Bash", {"command": "seq 5"}, key="c")]},
        results("c", "1 2 3 4 5"),
    ]  # fmt: skip
    sent = thinking_turn_kept(to_anthropic_messages(compacted(history, 3)))
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[1]["content"][0]["text"].startswith("[tool call Bash")  # the step without a thought, as text
    assert sent[2]["content"][0]["text"].startswith("[tool result for")
    assert sent[3:] == history[5:]  # the turn goes on from the newest thought, as the agent sent it
    check_thinking({"thinking": THINKING, "messages": sent})


def test_with_no_thought_left_in_the_loop_the_request_starts_a_new_turn():
    history = [
        {"role": "user", "content": "Count."},
        {"role": "assistant", "content": [thinking("Plan."), tool_use("Bash", {"command": "seq 3"}, key="a")]},
        results("a", "1 2 3"),
        {"role": "assistant", "content": [tool_use("Bash", {"command": "seq 4"}, key="b")]},
        results("b", "1 2 3 4"),
    ]  # fmt: skip
    sent = thinking_turn_kept(to_anthropic_messages(compacted(history, 3)))
    assert all(b["type"] == "text" for m in sent for b in m["content"])
    assert open_turn_start(sent) is None
    check_thinking({"thinking": THINKING, "messages": sent})


def test_a_request_without_thinking_or_an_open_turn_is_left_as_it_is():
    assert not thinking_enabled({"thinking": {"type": "disabled"}}) and thinking_enabled({"thinking": THINKING})
    done = [{"role": "user", "content": [text("hi")]}, {"role": "assistant", "content": [text("Hello.")]},
            {"role": "user", "content": [text("Bye.")]}]  # fmt: skip
    assert thinking_turn_kept(done) is done
