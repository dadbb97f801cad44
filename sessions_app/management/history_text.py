"""``ctx status --history``: the session chart as text, for a terminal."""

from __future__ import annotations

import math

from sessions_app.selectors.history import SessionHistory

LEVEL_MARK = {"compact": "c", "summarize": "s", "handoff": "H", "remind": "r"}


def render_history(history: SessionHistory, *, width: int = 64, height: int = 10) -> str:
    """Columns are runs of messages (the highest value of each run, so no peak is hidden); rows are
    tenths of the y axis, which ends at the window or at the peak when the session ran over it.
    Under the plot, a letter marks where each compaction (c, s) and handoff (H) happened."""
    points = history.points
    if not points:
        return "No message yet."
    window = history.context_window
    top = max(window, max(p.used for p in points), 1)
    columns = min(width, len(points))
    per_column = math.ceil(len(points) / columns)
    runs = [points[i : i + per_column] for i in range(0, len(points), per_column)]
    heights = [max(p.used for p in run) for run in runs]
    column_of = {p.seq: n for n, run in enumerate(runs) for p in run}
    rules = {name: tokens for name, tokens in history.threshold_tokens().items()}
    rows = []
    for r in range(height, 0, -1):
        floor, ceiling = top * (r - 1) / height, top * r / height
        cells = "".join("█" if h > floor + (ceiling - floor) / 2 else " " for h in heights)
        labels = [name for name, tokens in rules.items() if floor < tokens <= ceiling]
        if floor < window <= ceiling:
            labels.insert(0, "window")
        rows.append(f"{_short(round(ceiling)):>6} │{cells}│ {' '.join(labels)}".rstrip())
    marks = [" "] * len(runs)
    for event in history.events:
        n = column_of.get(event.after_seq, 0)
        marks[n] = LEVEL_MARK.get(event.level, "*") if event.kind == "compaction" else "H"
    rows.append(f"{'':>6} └{'─' * len(runs)}┘")
    rows.append(f"{'':>6}  {''.join(marks)}".rstrip())
    span = f"messages {points[0].seq}–{points[-1].seq}" + (f", {per_column} per column" if per_column > 1 else "")
    lines = [f"Context used over {len(points)} messages ({span}); window {window:,} tokens.", *rows, ""]
    for event in history.events:
        if event.kind == "compaction":
            lines.append(
                f"after message {event.after_seq}: {event.level} ({event.trigger}) "
                f"{event.before:,} → {event.after:,} tokens (compaction {event.compaction_id})"
            )
        else:
            lines.append(f"after message {event.after_seq}: handoff document {event.handoff_id}")
    lines.append(f"Now {history.now:,} tokens; context sent to the model over the session: {history.context_sent:,}.")
    return "\n".join(lines)


def _short(tokens: int) -> str:
    return f"{tokens / 1000:.0f}k" if tokens >= 10_000 else str(tokens)
