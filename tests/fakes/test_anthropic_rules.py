"""The fake refuses what the real API refuses of extended thinking and context management, clears older
thoughts as the thinking edit does, and refuses a request over the window it is given."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from . import fixtures as _fixtures
from .anthropic_rules import signature_for
from .scripted_model import text, thinking, tool_use

fake_anthropic = _fixtures.fake_anthropic

MODEL = "claude-haiku-4-5"
ON = {"type": "enabled", "budget_tokens": 1024}


def loop(*, first_thinks: bool = True, later_thinks: bool = False) -> list[dict[str, Any]]:
    """A prompt, then two steps of a tool loop, still running (the last message holds results)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Count to three."}]
    for n, thinks in enumerate([first_thinks, later_thinks]):
        call = tool_use("Bash", {"command": f"seq {n}"}, key=str(n))
        history.append({"role": "assistant", "content": [thinking(f"Step {n}.")] * thinks + [call]})
        history.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "1"}]}
        )
    return history


def ask(server: Any, messages: Any, **extra: Any) -> anthropic.types.Message:
    with anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0) as c:
        return c.messages.create(model=MODEL, max_tokens=2048, messages=messages, extra_body=extra)


def refusal(server: Any, messages: list[dict[str, Any]], **extra: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(server, messages, **extra)
    body = info.value.body
    assert isinstance(body, dict)
    return str(body["error"]["message"])


def test_a_tool_loop_goes_on_from_its_first_thought_and_later_steps_need_none(fake_anthropic):
    assert ask(fake_anthropic, loop(), thinking=ON).content  # the loop's later step came without a thought
    said = refusal(fake_anthropic, loop(first_thinks=False, later_thinks=True), thinking=ON)
    assert "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`" in said
    assert ask(fake_anthropic, loop(first_thinks=False)).content  # no thinking, no such rule
    finished = [*loop(first_thinks=False), {"role": "assistant", "content": [text("Done.")]},
                {"role": "user", "content": "Now count to four."}]  # fmt: skip
    assert ask(fake_anthropic, finished, thinking=ON).content  # a new turn: the old one's thoughts are optional


def test_a_thought_must_come_back_as_it_was_signed(fake_anthropic):
    history = loop()
    history[1]["content"][0] = {**history[1]["content"][0], "thinking": "Edited."}
    assert "Invalid `signature` in `thinking` block" in refusal(fake_anthropic, history, thinking=ON)
    assert signature_for("Step 0.") == thinking("Step 0.")["signature"]
    ending = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [thinking("Hm.")]},
              {"role": "user", "content": "go on"}]  # fmt: skip
    assert "cannot be `thinking`" in refusal(fake_anthropic, ending, thinking=ON)
    prefill = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [thinking("Hm."), text("So")]}]
    assert "When thinking is disabled" in refusal(fake_anthropic, prefill)


@pytest.mark.parametrize(
    ("management", "thinks", "said"),
    [
        ({"edits": [{"type": "clear_thinking_20251015"}]}, False, "requires `thinking` to be enabled"),
        ({"edits": [{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}]}, True, "first"),
        (
            {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 0}}]},
            True,
            "keep",
        ),
        ({"edits": [{"type": "forget_everything"}]}, True, "does not match any of the expected tags"),
        ({"edits": "all"}, True, "valid list"),
    ],
)
def test_context_management_is_checked_as_the_api_checks_it(fake_anthropic, management, thinks, said):
    extra = {"context_management": management, **({"thinking": ON} if thinks else {})}
    assert said in refusal(fake_anthropic, loop(), **extra)


def test_the_thinking_edit_clears_older_turns_thoughts_before_the_model_reads_them(fake_anthropic):
    history = [
        *loop(),
        {"role": "assistant", "content": [thinking("Counted."), text("1 2 3")]},
        *loop()[0:1],
        *loop()[1:],
    ]  # a second prompt and its loop, still running
    keep_one = {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}]}
    answer = ask(fake_anthropic, history, thinking=ON, context_management=keep_one)
    seen = fake_anthropic.edited[-1]["messages"]
    assert [b["type"] for b in seen[1]["content"]] == ["tool_use"]  # the first turn's thought, cleared
    assert seen[-4:] == history[-4:]  # the running turn's, kept
    applied = answer.model_dump()["context_management"]["applied_edits"]
    assert applied[0]["type"] == "clear_thinking_20251015" and applied[0]["cleared_thinking_turns"] == 1
    ask(fake_anthropic, history, thinking=ON, context_management={"edits": [{"type": "clear_thinking_20251015",
                                                                             "keep": "all"}]})  # fmt: skip
    assert len(fake_anthropic.edited) == 1  # keeping all clears nothing


def test_a_request_over_the_window_is_refused_as_too_long_and_takes_no_queued_reply(fake_anthropic):
    fake_anthropic.set_context_window(10)
    fake_anthropic.queue_reply("kept for later")
    said = refusal(fake_anthropic, loop(), thinking=ON)
    assert said.startswith("prompt is too long: ") and said.endswith(" tokens > 10 maximum")
    fake_anthropic.set_context_window(None)
    assert ask(fake_anthropic, loop(), thinking=ON).content[0].text == "kept for later"
