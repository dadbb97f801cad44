"""STATUS: how full a session's context window is and what its project's policy makes of it.

One definition for both ends: ``sessions_app`` builds it, ``ctxclient.Status`` is this type.
Standard library only and Python 3.8 syntax at run time, because ctxclient (which imports it) runs on
any ``python3`` from 3.8 on.
"""

from __future__ import annotations

from typing import Literal, Optional, TypedDict

# The values of compaction.types.Level, in its order (tests/compaction/test_status_type.py holds them equal).
LevelName = Literal["ok", "remind", "compact", "summarize", "handoff"]
TokenSource = Literal["exact", "estimate"]


class ThresholdFractions(TypedDict):
    """Fractions of the context window at which each level starts (``compaction.types.Thresholds``)."""

    remind: float
    compact: float
    summarize: float
    handoff: float


class ThresholdTokens(TypedDict):
    """The same thresholds in tokens of the session's window: the least ``used`` at each level."""

    remind: int
    compact: int
    summarize: int
    handoff: int


class Status(TypedDict):
    # The model name the agent reported: it picks the window and the calibration factor.
    model: str
    # Tokens the model takes in all: the session's override, else its model's profile, else 128,000.
    context_window: int
    # The parts below add up to `used`, so a client can see what fills the window.
    system_prompt: int
    # Tool definitions cost tokens on every request even when no tool is called.
    tool_definitions: int
    # The active messages, wire framing included: the part compaction shrinks.
    messages: int
    # The current checkpoint's summary, which stands in for the turns it replaced.
    summary: int
    # Held back for the model's reply, so a request that fits still leaves room to answer.
    reserved_output: int
    # system_prompt + tool_definitions + messages + summary.
    used: int
    # context_window - used - reserved_output; negative once the reply no longer fits.
    free: int
    # used / context_window × 100, two decimals: the figure the usage bars and the hook show.
    usage_percent: float
    # Where usage_percent falls among the thresholds: what the agent should do next.
    level: LevelName
    # The project's policy as it acts on this window, so a client can tell how far the next level is.
    thresholds: ThresholdFractions
    # The same four in tokens of this window (a policy may set them in tokens; these are the effective ones).
    threshold_tokens: ThresholdTokens
    # An append now queues an automatic compaction (auto on, not paused, level compact or above).
    will_compact: bool
    # Some history is condensed (a summary or a succeeded compaction, ever), so the messages are not all verbatim.
    compacted: bool
    # A compaction succeeded since the newest message arrived: the context to send next changed.
    compacted_in_this_step: bool
    # The session still takes messages, so its work can go on in a fresh linked session (a handoff with continue).
    can_continue: bool
    # The session this one was handed off to (it then takes no messages), or null.
    continued_in: Optional[int]  # noqa: UP045 (ctxclient's Python 3.8 reads this module)
    # One sentence for the agent saying what to do at this level.
    recommendation: str
    # "exact": Anthropic counted this very request; "estimate": the calibrated offline count.
    token_source: TokenSource
    # The exact count was served from ctxweb's exact-count cache (the same request was counted before);
    # always false for an estimate.
    cached: bool
    # When the figures were counted (ISO 8601, UTC): the exact count's time when token_source is
    # "exact", else when the estimate's totals last changed (a message stored, a compaction applied).
    counted_at: str
    # The relative error the count is expected to stay within: 0 for an exact count (the provider's
    # count endpoint, a response's usage, either from the cache); for an estimate, the calibrated
    # estimate's measured spread (docs/TOKEN_COUNTING.md).
    expected_error: float
    # What a person should act on: an unknown model, failures, paused auto-compaction, skipped lines.
    warnings: list[str]
    # Whether ctxweb compacts on its own: the session's choice, else its project's policy.
    auto_compact: bool
    # Automatic compaction stopped after failures in a row, until a manual one succeeds.
    auto_paused: bool
    # Every message stored, compacted and archived ones too: the session's whole history.
    message_count: int
    # The messages a model sees now, after compaction.
    active_messages: int
    # The newest message's seq: where a client resumes reading or appending.
    last_seq: int
    # What offline estimates are multiplied by for this model (exact ÷ estimate, learned).
    calibration_factor: float
