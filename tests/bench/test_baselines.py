"""The two summary placements modelled in bench/baselines.py (OpenCode's and Claude Code's)."""

from __future__ import annotations

from bench.baselines import (
    CLAUDE_CODE_SUMMARY_HEAD,
    OPENCODE_CONTINUE,
    OPENCODE_MARKER,
    claude_code_compact,
    opencode_compact,
)


def sized(message):
    """A test's tokenizer: a message costs as many tokens as its text has characters."""
    return len(message["content"])


def turn(n, size):
    return [
        {"role": "user", "content": f"u{n}".ljust(size, ".")},
        {"role": "assistant", "content": f"a{n}".ljust(size, ".")},
    ]


def test_claude_code_keeps_the_summary_alone():
    context = claude_code_compact("Objective: ship it")
    assert len(context) == 1 and context[0]["role"] == "user"
    assert context[0]["content"].startswith(CLAUDE_CODE_SUMMARY_HEAD + "Objective: ship it")


def test_opencode_keeps_the_newest_whole_turns_that_fit_its_tail_budget():
    history = turn(1, 900) + turn(2, 500) + turn(3, 400)  # the budget is 2,000 at this window
    context = opencode_compact(history, "the summary", usable=4_000, count=sized)
    assert context[0] == {"role": "user", "content": OPENCODE_MARKER}
    assert context[1] == {"role": "assistant", "content": "the summary"}
    assert context[2:-1] == history[2:]  # turns 3 and 2 (1,800); turn 1 does not fit, nor its answer
    assert context[-1] == {"role": "user", "content": OPENCODE_CONTINUE}


def test_opencode_cuts_the_oldest_kept_turn_at_an_assistant_message():
    history = turn(1, 900) + turn(2, 1_200) + turn(3, 400)
    context = opencode_compact(history, "s", usable=4_000, count=sized)
    assert context[2:-1] == history[3:]  # turn 3 whole, then turn 2 from its answer on


def test_opencode_summarizes_everything_when_everything_fits():
    history = turn(1, 10) + turn(2, 10)
    context = opencode_compact(history, "s", usable=100_000, count=sized)
    assert [m["content"] for m in context] == [OPENCODE_MARKER, "s", OPENCODE_CONTINUE]
