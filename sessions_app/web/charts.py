"""The session chart: context used over the session's life, drawn server-side as SVG geometry that a
template renders (readable without JavaScript). Pure functions over a ``SessionHistory``.

The x axis is the message number (one step per stored message, so a burst of tool calls gets the
room it takes in the context, not the seconds it took); the y axis is tokens, up to the window or
the highest point when a session ran over it. A compaction is a vertical drop right after the last
message stored when it finished; a handoff is a dashed vertical line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from sessions_app.selectors.history import HistoryEvent, SessionHistory

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 52, 96, 14, 30
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
# Past this many messages the table behind the chart lists every k-th one (the API has them all);
# the line keeps every point's picture (``_thinned``).
TABLE_ROWS = 500


@dataclass(frozen=True)
class Rule:
    name: str  # "window", "remind", …
    tokens: int
    y: float
    label: str
    label_y: float = 0.0  # moved apart from its neighbours' so close thresholds stay readable


@dataclass(frozen=True)
class Tick:
    pos: float
    label: str


@dataclass(frozen=True)
class Marker:
    event: HistoryEvent
    x: float
    y_before: float
    y_after: float
    label_y: float
    title: str


@dataclass(frozen=True)
class TableRow:
    seq: int
    role: str
    used: int
    percent: float
    event: str  # what happened right after this message ("" for nothing)


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    plot_width: int
    plot_bottom: int
    line: str  # SVG path data
    area: str
    rules: list[Rule]
    reserve_top: float  # the band of the output reserve, just under the window line
    reserve_height: float
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    markers: list[Marker]
    handoffs: list[Marker]
    title: str
    description: str
    rows: list[TableRow]
    rows_step: int  # 1 unless the table is thinned out
    last_used: int
    peak: int


def session_chart(history: SessionHistory) -> Chart | None:
    """None for a session without messages: there is no line to draw yet."""
    points = history.points
    if not points:
        return None
    window = history.context_window
    thresholds = history.threshold_tokens()
    peak = max(max(p.used for p in points), max((e.before for e in history.events), default=0))
    top = nice_ceiling(max(window, peak))
    last = len(points) - 1
    index = {p.seq: i for i, p in enumerate(points)}

    def x_of(seq: int) -> float:
        if seq <= 0:
            return LEFT
        position = index.get(seq, last)
        return LEFT + (PLOT_W * position / last if last else PLOT_W / 2)

    def y_of(tokens: int) -> float:
        return TOP + PLOT_H * (1 - min(max(tokens, 0), top) / top)

    drops: dict[int, list[HistoryEvent]] = {}
    for event in history.events:
        if event.kind == "compaction":
            drops.setdefault(event.after_seq, []).append(event)
    coords: list[tuple[float, float]] = []
    for point in points:
        x = x_of(point.seq)
        coords.append((x, y_of(point.used)))
        coords += [(x, y_of(event.after)) for event in drops.get(point.seq, [])]
    coords = _thinned(coords)
    line = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    area = f"{line} L{coords[-1][0]:.1f},{TOP + PLOT_H} L{coords[0][0]:.1f},{TOP + PLOT_H} Z"

    markers, handoffs = [], []
    for n, event in enumerate(history.events):
        x = x_of(event.after_seq)
        if event.kind == "compaction":
            # Labels alternate above the drop so two close compactions don't print over each other.
            label_y = max(y_of(event.before) - 6 - 11 * (n % 2), TOP + 9)
            title = (
                f"Compaction {event.compaction_id} ({event.level}, {event.trigger}) after message "
                f"{event.after_seq}: {event.before:,} → {event.after:,} tokens"
            )
            markers.append(Marker(event, x, y_of(event.before), y_of(event.after), label_y, title))
        else:
            title = f"Handoff document {event.handoff_id} written after message {event.after_seq}"
            handoffs.append(Marker(event, x, TOP, TOP + PLOT_H, TOP + 9, title))

    rules = [Rule("window", window, y_of(window), f"window {short_tokens(window)}")]
    rules += [
        Rule(name, tokens, y_of(tokens), f"{name} {round(100 * tokens / window)}%")
        for name, tokens in thresholds.items()
        if window
    ]
    reserve_top = y_of(window)
    reserve_height = y_of(max(window - history.reserved_output, 0)) - reserve_top
    compactions = [e for e in history.events if e.kind == "compaction"]
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        plot_left=LEFT,
        plot_right=LEFT + PLOT_W,
        plot_top=TOP,
        plot_width=PLOT_W,
        plot_bottom=TOP + PLOT_H,
        line=line,
        area=area,
        rules=_spread_labels(rules),
        reserve_top=reserve_top,
        reserve_height=reserve_height,
        y_ticks=[Tick(y_of(v), short_tokens(v)) for v in axis_ticks(top)],
        x_ticks=_x_ticks(points[0].seq, points[-1].seq, x_of, [p.seq for p in points]),
        markers=markers,
        handoffs=handoffs,
        title=f"Context used over {len(points)} messages",
        description=_describe(history, peak, compactions),
        rows=_rows(history),
        rows_step=max(1, math.ceil(len(points) / TABLE_ROWS)),
        last_used=history.now,
        peak=peak,
    )


def _thinned(coords: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """At most four vertices per pixel column (its first, lowest, highest and last), in their order:
    the same picture as every vertex, so a session of thousands of messages stays a small page."""
    if len(coords) <= 2 * PLOT_W:
        return coords
    kept: list[tuple[float, float]] = []
    column: list[tuple[float, float]] = []
    for point in coords:
        if column and int(point[0]) != int(column[0][0]):
            kept += _extremes(column)
            column = []
        column.append(point)
    return kept + _extremes(column)


def _extremes(column: list[tuple[float, float]]) -> list[tuple[float, float]]:
    picks = {
        0,
        len(column) - 1,
        column.index(min(column, key=lambda p: p[1])),
        column.index(max(column, key=lambda p: p[1])),
    }
    return [column[i] for i in sorted(picks)]


def _spread_labels(rules: list[Rule], gap: float = 11.0) -> list[Rule]:
    """Each label at least ``gap`` below the one above it, top to bottom."""
    placed: list[Rule] = []
    previous = -math.inf
    for rule in sorted(rules, key=lambda r: r.y):
        label_y = max(rule.y, previous + gap)
        placed.append(replace(rule, label_y=label_y))
        previous = label_y
    return placed


def _describe(history: SessionHistory, peak: int, compactions: list[HistoryEvent]) -> str:
    points = history.points
    window = history.context_window
    parts = [
        f"From {points[0].used:,} tokens at message {points[0].seq} to {history.now:,} after message "
        f"{points[-1].seq}, of a {window:,}-token window; the peak was {peak:,} tokens."
    ]
    if compactions:
        levels = ", ".join(f"{e.level} after message {e.after_seq} ({e.before:,} → {e.after:,})" for e in compactions)
        parts.append(f"{len(compactions)} compaction{'s' if len(compactions) != 1 else ''}: {levels}.")
    else:
        parts.append("No compaction so far.")
    handoffs = [e for e in history.events if e.kind == "handoff"]
    if handoffs:
        parts.append(f"Handoff written after message {handoffs[-1].after_seq}.")
    return " ".join(parts)


def _rows(history: SessionHistory) -> list[TableRow]:
    step = max(1, math.ceil(len(history.points) / TABLE_ROWS))
    after: dict[int, list[str]] = {}
    for event in history.events:
        text = (
            f"{event.level} compaction: {event.before:,} → {event.after:,}"
            if event.kind == "compaction"
            else "handoff written"
        )
        after.setdefault(event.after_seq, []).append(text)
    window = history.context_window or 1
    last = len(history.points) - 1
    return [
        TableRow(p.seq, p.role, p.used, round(100 * p.used / window, 1), "; ".join(after.get(p.seq, [])))
        for i, p in enumerate(history.points)
        if i % step == 0 or i == last or p.seq in after
    ]


def nice_ceiling(value: int) -> int:
    """The smallest round figure (1, 1.2, 1.5, 2, … × 10^k) at or above ``value``: the y axis ends on
    it, close enough above the window that the line has the room."""
    if value <= 0:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    for factor in (1, 1.2, 1.6, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if factor * magnitude >= value:
            return int(factor * magnitude)
    return 10 * magnitude  # unreachable: factor 10 always qualifies


def axis_ticks(top: int) -> list[int]:
    step = top / 4 if top >= 4 else 1
    return sorted({round(step * k) for k in range(5) if step * k <= top})


def _x_ticks(first: int, last: int, x_of: Callable[[int], float], seqs: list[int]) -> list[Tick]:
    if first == last:
        return [Tick(x_of(first), str(first))]
    chosen = {seqs[round(k * (len(seqs) - 1) / 4)] for k in range(5)}
    return [Tick(x_of(seq), str(seq)) for seq in sorted(chosen)]


def short_tokens(tokens: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1000)):
        if tokens >= size:
            value = tokens / size
            return f"{round(value)}{unit}" if value >= 100 else f"{value:.3g}{unit}"
    return str(tokens)
