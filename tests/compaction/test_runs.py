"""One run (compaction.runs.plan_run) over generated sessions and policies: the protected recent
messages are never touched, a run reaches the target unless only untouchable messages are left, and
the reversible strategies run only where the policy (or a person's compact request) asks for them."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.extractive import ExtractiveSummarizer
from compaction.facts import facts_update
from compaction.policy import PRESETS, Policy
from compaction.runs import plan_run
from compaction.summarize import split_tail
from compaction.tokens import OfflineTokenizer
from compaction.types import Level, Msg
from tests.compaction.test_summarize import sessions, summary_size
from tests.hypothesis_budget import ENGINE

TOK = OfflineTokenizer()
NOW = "2026-11-23T00:00:00+00:00"


def with_text(messages: list[Msg]) -> list[Msg]:
    """Generated sessions declare sizes; give each text of about that size, so plans can shrink it."""
    out = []
    for m in messages:
        filler = f"message {m.seq}: " + " ".join(f"word{i % 50}" for i in range(m.tokens))
        if isinstance(m.content, str):
            content: str | list = filler
        else:
            content = [{**b, "content": filler} if b.get("type") == "tool_result" else b for b in m.content]
        out.append(Msg(m.seq, m.role, content, TOK.count_message(m.role, content)))
    return out


@settings(ENGINE)
@given(
    sessions(),
    st.sampled_from(list(PRESETS)),
    st.sampled_from([Level.COMPACT, Level.SUMMARIZE, Level.HANDOFF]),
    st.integers(0, 6),
    st.booleans(),
    st.sampled_from([0.3, 0.5]),
)
def test_property_a_run_keeps_its_promises(generated, preset_name, level, keep, manual, target):
    messages = with_text(generated)
    policy = replace(PRESETS[preset_name], keep_recent_messages=keep, target_after=target, protect_tool_tokens=0)
    total = sum(m.tokens for m in messages)
    window = max(400, int(total / 0.9))  # the session is at about 90 % of its window
    run = plan_run(
        messages,
        policy,
        level=level,
        manual=manual,
        context_window=window,
        fixed_tokens=0,
        summary_tokens=0,
        tokenizer=TOK,
        summarizer=ExtractiveSummarizer(TOK),
        now=NOW,
    )
    changed = {c.seq for c in run.changes}
    gone = set(run.summary.summarized_seqs) if run.summary else set()
    # Protected from every strategy, unless the protected messages alone overflow the window
    protected = messages[len(messages) - min(policy.protected_count([m.role for m in messages]), len(messages)) :]
    # (with the calls their results answer and the last user message, which a tail always keeps)
    needed = messages[split_tail(messages, policy, context_window=window, minimal=True) :]
    # What the window holds beside the checkpoint: the user's words and the other facts it carries
    # go before the protected messages do, and only there (compaction/room.py). The checkpoint is
    # at most all the messages' facts and the summarizer's part (the plan's estimate).
    checkpoint = policy.summary_tokens(window) + summary_size({"facts": facts_update(None, messages)})
    if run.summary is None or sum(m.tokens for m in needed) <= (1 - policy.output_reserve) * window - checkpoint:
        assert not {m.seq for m in protected} & (changed | gone)
    # Reversible strategies only where asked for: the policy's, or a person's compact.
    if (manual and level != Level.COMPACT) or (not manual and not policy.reversible_first):
        assert not changed
    if manual and level == Level.COMPACT:
        assert run.summary is None
    # A summary keeps the newest messages: everything it replaces is older than everything it keeps.
    if gone:
        kept = [m.seq for m in messages if m.seq not in gone]
        assert not kept or max(gone) < min(kept)
    # The target is reached, or what is left is only what no run may take away.
    if run.summary is not None and not manual:
        after = run.summary.summary_tokens + sum(
            next((c.tokens_after for c in run.changes if c.seq == m.seq), m.tokens)
            for m in messages
            if m.seq not in gone
        )
        first_kept = min(m.seq for m in messages if m.seq not in gone)
        assert after <= target * window or first_kept >= needed[0].seq


def test_a_summary_replaces_the_oldest_messages_when_pruning_is_not_enough():
    """Plain conversation (nothing to prune) at 90 %: the oldest messages go, the newest stay."""
    messages = with_text([Msg(i, "user" if i % 2 else "assistant", "x", 200) for i in range(1, 41)])
    policy = Policy(keep_recent_messages=2)
    run = plan_run(
        messages,
        policy,
        level=Level.SUMMARIZE,
        manual=False,
        context_window=int(sum(m.tokens for m in messages) / 0.9),
        fixed_tokens=0,
        summary_tokens=0,
        tokenizer=TOK,
        summarizer=ExtractiveSummarizer(TOK),
        now=NOW,
    )
    assert run.summary is not None and run.summary.summarized_seqs[0] == 1
