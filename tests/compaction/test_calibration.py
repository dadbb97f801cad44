"""The offline estimate measured against Claude's own counts in real Claude Code transcripts."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.calibration import Features, Sample, fit_factor, growth_steps, leave_one_out, message_features
from compaction.model_catalog import CLAUDE_CALIBRATION, spec_for
from compaction.tokens import DEFAULT_FRAMING, Framing, OfflineTokenizer, calibrate
from compaction.transcripts import Conversation, UsagePoint, read_transcript

tokenizer = OfflineTokenizer()

text = st.text(max_size=60)
block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.builds(lambda t: {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": t}}, text),
    st.builds(lambda t: {"type": "tool_result", "tool_use_id": "toolu_1", "content": t}, text),
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "x"}, text),
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": st.one_of(text, st.lists(block, max_size=4))}
)


@given(message)
def test_features_estimate_is_what_the_tokenizer_counts(msg):
    # The fit works on features; it is only worth something if they add up to the real count.
    assert message_features(msg).estimate(DEFAULT_FRAMING) == tokenizer.count_message(msg["role"], msg["content"])


def test_growth_steps_skip_compaction_boundaries_and_shrinking_context():
    messages = [{"role": "user", "content": f"message number {i}"} for i in range(6)]
    conversation = Conversation(
        key="k",
        title="t",
        model="claude-opus-4-5",
        system_prompt="",
        tools=[],
        messages=messages,
        usage_points=[
            UsagePoint(1, 1000, 5, None),
            UsagePoint(3, 1100, 5, None),
            UsagePoint(4, 900, 5, None),
            UsagePoint(6, 1300, 5, None),
        ],
        segment_starts=[5],
    )
    steps = growth_steps(conversation)
    # 1→3 grows by 100 and counts; 3→4 shrinks (a rewind); 4→6 crosses the boundary at 5.
    assert [s.actual for s in steps] == [100]
    assert steps[0].features.messages == 2


def test_factor_makes_the_total_exact_and_leave_one_out_uses_the_others():
    a = Sample("a", Features(content=100, messages=2), actual=150)
    b = Sample("b", Features(content=300, messages=2), actual=330)
    framing = Framing(message=0, block=0)
    assert fit_factor([a, b], framing) == pytest.approx(480 / 400)
    (held_a, err_a), (_, err_b) = leave_one_out([a, b], framing)
    assert held_a is a
    assert err_a == pytest.approx(100 * (330 / 300) / 150 - 1)
    assert err_b == pytest.approx(300 * (150 / 100) / 330 - 1)


def test_claude_models_ship_the_measured_factor():
    assert spec_for("claude-sonnet-4-5-20250929").calibration == CLAUDE_CALIBRATION
    assert spec_for("gpt-4o").calibration == 1.0
    assert 1.0 < CLAUDE_CALIBRATION < 2.0


def _samples(folder: Path) -> list[Sample]:
    samples = []
    for path in sorted((folder / "claude_code").glob("*.jsonl")):
        transcript = read_transcript(path.read_bytes(), "claude-code")
        steps = [s for c in transcript.conversations for s in growth_steps(c)]
        if steps:
            samples.append(Sample.of(path.name, steps))
    return samples


def _measured(folder: Path) -> tuple[int, int]:
    """Estimated vs recorded growth through the production path: OfflineTokenizer, then calibrate()."""
    estimated = actual = 0
    for path in sorted((folder / "claude_code").glob("*.jsonl")):
        for conversation in read_transcript(path.read_bytes(), "claude-code").conversations:
            counts = [tokenizer.count_message(m["role"], m["content"]) for m in conversation.messages]
            for step_start, step in _step_ranges(conversation):
                estimated += calibrate(sum(counts[step_start[0] : step_start[1]]), CLAUDE_CALIBRATION)
                actual += step
    return estimated, actual


def _step_ranges(conversation: Conversation):
    points = sorted(conversation.usage_points, key=lambda p: p.message_index)
    for before, after in itertools.pairwise(points):
        grew = after.context_tokens - before.context_tokens
        crosses = any(before.message_index < b <= after.message_index for b in conversation.segment_starts)
        if after.message_index > before.message_index and grew > 0 and not crosses:
            yield (before.message_index, after.message_index), grew


@pytest.mark.data
def test_total_growth_is_within_five_percent_of_claudes_counts(shared_data):
    estimated, actual = _measured(shared_data)
    assert actual > 100_000, "the shared transcripts should hold plenty of recorded growth"
    assert abs(estimated / actual - 1) < 0.05, f"estimate {estimated:,} vs recorded {actual:,}"


@pytest.mark.data
def test_estimate_holds_on_transcripts_left_out_of_the_fit(shared_data):
    # Fit the factor without each file in turn: the total over held-out files stays within 10 %,
    # and so does the typical single file.
    samples = _samples(shared_data)
    held_out = leave_one_out(samples, DEFAULT_FRAMING)
    total = sum((1 + err) * s.actual for s, err in held_out) / sum(s.actual for s in samples) - 1
    assert abs(total) < 0.10
    errors = sorted(abs(err) for _, err in held_out)
    assert errors[len(errors) // 2] < 0.10
