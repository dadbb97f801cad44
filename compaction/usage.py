"""The context-window breakdown of a session and what it means for the user."""

from __future__ import annotations

from collections.abc import Callable

from .policy import Policy, level_for
from .types import Level, Thresholds, Usage

RECOMMENDATIONS: dict[Level, str] = {
    Level.OK: "Plenty of room. Nothing to do.",
    Level.REMIND: "Context at {pct:.0f}%. Still room; no need to hurry, but keep replies and tool output lean.",
    # Compact, summarize and handoff read as a warning, a critical and an emergency message (docs/COMPACTION.md).
    Level.COMPACT: (
        "Context at {pct:.0f}%. Consider compaction: old tool output and repeats can be folded away, reversibly."
    ),
    Level.SUMMARIZE: "Context at {pct:.0f}%. Summarization recommended: older turns become a checkpoint.",
    Level.HANDOFF: "Context limit reached ({pct:.0f}%). Create a handoff document and continue in a fresh session.",
}


def compute_usage(
    *,
    model: str,
    context_window: int,
    system_prompt: int,
    tool_definitions: int,
    messages: int,
    summary: int,
    policy: Policy,
) -> Usage:
    thresholds: Thresholds = policy.for_window(context_window).thresholds  # those set in tokens, of this window
    used = system_prompt + tool_definitions + messages + summary
    fraction = used / context_window if context_window > 0 else 1.0
    return Usage(
        model=model,
        context_window=context_window,
        system_prompt=system_prompt,
        tool_definitions=tool_definitions,
        messages=messages,
        summary=summary,
        reserved_output=int(context_window * policy.output_reserve),
        level=level_for(fraction, thresholds),
        thresholds=thresholds,
    )


def recommendation(usage: Usage, *, just_compacted: bool = False) -> str:
    """One sentence for the agent; it names a compaction that finished since the newest message."""
    text = RECOMMENDATIONS[usage.level].format(pct=usage.usage_percent)
    if just_compacted:
        return f"Compacted since your last message (the context you send next is smaller). {text}"
    return text


def usage_warnings(usage: Usage, *, compacted: bool = False) -> list[str]:
    warnings: list[str] = []
    if usage.free < 0:
        warnings.append(
            f"The context no longer leaves the {usage.reserved_output:,} tokens reserved for the reply "
            f"({-usage.free:,} over)."
        )
    if usage.level == Level.REMIND:
        warnings.append(
            f"Context at {usage.usage_percent:.0f}%, past the reminder threshold "
            f"({usage.thresholds.remind:.0%}); "
            + (
                f"older turns are already compacted, and the next compaction starts at {usage.thresholds.compact:.0%}."
                if compacted
                else "nothing is compacted yet."
            )
        )
    if usage.used > usage.context_window:
        warnings.append("The context is larger than the model's window: a request would be refused.")
    return warnings


def glyph_bar(fraction: float, *, width: int = 10) -> str:
    """One glyph per tenth of the window (with ``width`` 10): full ⛁, free ⛶."""
    filled = max(0, min(width, round(fraction * width)))
    return " ".join(["⛁"] * filled + ["⛶"] * (width - filled))


def render_bar(usage: Usage, *, width: int = 10, paint: Callable[[str], str] = str) -> str:
    """What ``ctx status`` prints (README, "The CLI"): one glyph per tenth, then the breakdown.
    ``paint`` dresses the level's name (the CLI colours it on a terminal)."""
    bar = glyph_bar(usage.fraction, width=width)
    window = usage.context_window

    def fmt(n: int) -> str:
        return f"{n / 1000:.1f}k" if abs(n) >= 1000 else str(n)

    def pct(n: int) -> str:
        return f"{n / window * 100:.1f}%" if window else "-"

    rows = [
        f"{bar}  {usage.model} · {fmt(usage.used)}/{fmt(window)} tokens "
        f"({usage.usage_percent:.0f}%) · {paint(usage.level.value)}",
        "",
        f"  ⛁ System prompt:    {fmt(usage.system_prompt)} tokens ({pct(usage.system_prompt)})",
        f"  ⛁ Tool definitions: {fmt(usage.tool_definitions)} tokens ({pct(usage.tool_definitions)})",
        f"  ⛁ Messages:         {fmt(usage.messages)} tokens ({pct(usage.messages)})",
        f"  ⛁ Summary:          {fmt(usage.summary)} tokens ({pct(usage.summary)})",
        f"  ⛝ Reserved output:  {fmt(usage.reserved_output)} tokens ({pct(usage.reserved_output)})",
        f"  ⛶ Free space:       {fmt(usage.free)} tokens ({pct(usage.free)})",
    ]
    return "\n".join(rows)
