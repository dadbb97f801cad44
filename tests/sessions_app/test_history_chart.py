"""The session chart's geometry over generated histories (no database): everything inside the plot,
one marker per event, labels that don't print over each other, a table that keeps every event."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.management.history_text import render_history
from sessions_app.selectors.history import HistoryEvent, HistoryPoint, SessionHistory
from sessions_app.web import charts
from tests.hypothesis_budget import ENGINE, LARGE

AT = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def histories(draw) -> SessionHistory:
    window = draw(st.integers(min_value=1, max_value=2_000_000))
    used = draw(st.lists(st.integers(min_value=0, max_value=3 * window), min_size=0, max_size=3000))
    # (long lists are drawn on purpose: past 2 × the plot's width the line is thinned)
    points = [HistoryPoint(seq=i + 1, role="user", at=AT, used=u) for i, u in enumerate(used)]
    events = []
    for seq in sorted(draw(st.lists(st.integers(min_value=0, max_value=len(points)), max_size=6))):
        before = draw(st.integers(min_value=0, max_value=3 * window))
        kind = draw(st.sampled_from(["compaction", "handoff"]))
        after = draw(st.integers(min_value=0, max_value=before)) if kind == "compaction" else before
        events.append(HistoryEvent(kind, seq, AT, "compact" if kind == "compaction" else "handoff", before, after, 1))
    low = draw(st.floats(min_value=0.05, max_value=1.0))
    return SessionHistory(
        session_id=1,
        model="m",
        context_window=window,
        reserved_output=draw(st.integers(min_value=0, max_value=window)),
        thresholds={"remind": low * 0.6, "compact": low * 0.7, "summarize": low * 0.85, "handoff": low * 0.95},
        base=0,
        now=used[-1] if used else 0,
        points=points,
        events=events,
        context_sent=0,
    )


@settings(ENGINE)
@given(history=histories())
def test_chart_geometry_holds_for_any_history(history):
    chart = charts.session_chart(history)
    if not history.points:
        assert chart is None
        return
    assert chart is not None
    numbers = [float(n) for n in chart.line.replace("M", " ").replace("L", " ").replace(",", " ").split()]
    xs, ys = numbers[0::2], numbers[1::2]
    assert all(chart.plot_left <= x <= chart.plot_right for x in xs)
    assert all(chart.plot_top <= y <= chart.plot_bottom for y in ys)
    assert xs == sorted(xs)  # the line never goes back in time
    assert len(xs) <= max(2 * charts.PLOT_W, len(history.points) + len(history.events)) * 2
    # However thinned, the line still reaches the highest and the lowest message.
    top = charts.nice_ceiling(max(history.context_window, chart.peak))
    seqs = {p.seq for p in history.points}
    vertices = [p.used for p in history.points]
    vertices += [e.after for e in history.events if e.kind == "compaction" and e.after_seq in seqs]
    highest = charts.TOP + charts.PLOT_H * (1 - min(max(vertices), top) / top)
    lowest = charts.TOP + charts.PLOT_H * (1 - min(min(vertices), top) / top)
    assert abs(min(ys) - highest) < 0.06
    assert max(ys) >= lowest - 0.06
    drops = [e for e in history.events if e.kind == "compaction"]
    assert len(chart.markers) == len(drops) and len(chart.handoffs) == len(history.events) - len(drops)
    labels = sorted(r.label_y for r in chart.rules)
    assert all(b - a >= 11 - 1e-9 for a, b in itertools.pairwise(labels))
    assert {r.name for r in chart.rules} == {"window", "remind", "compact", "summarize", "handoff"}
    assert all(chart.plot_top <= r.y <= chart.plot_bottom for r in chart.rules)
    # The table: the first and the last message, every message an event follows, evenly thinned.
    seqs = [r.seq for r in chart.rows]
    assert seqs[0] == history.points[0].seq and seqs[-1] == history.points[-1].seq
    assert {e.after_seq for e in history.events if e.after_seq} <= set(seqs)
    assert len(chart.rows) <= charts.TABLE_ROWS + len(history.events) + 1
    assert chart.rows_step == 1 or len(history.points) > charts.TABLE_ROWS
    text = render_history(history)
    assert text.count("after message") == len(history.events)


@given(st.integers(min_value=1, max_value=10**12))
def test_the_axis_ends_on_a_round_figure_at_or_above_the_value(value):
    top = charts.nice_ceiling(value)
    assert value <= top <= 2 * value
    assert charts.axis_ticks(top)[-1] == top


@given(
    seed=st.integers(min_value=0, max_value=2**32), size=st.integers(min_value=2 * charts.PLOT_W + 1, max_value=6000)
)
@settings(LARGE)
def test_a_long_session_is_thinned_to_the_same_picture(seed, size):
    rng = random.Random(seed)
    used = [rng.randrange(0, 300_000) for _ in range(size)]
    history = SessionHistory(
        session_id=1,
        model="m",
        context_window=200_000,
        reserved_output=20_000,
        thresholds={"remind": 0.6, "compact": 0.7, "summarize": 0.85, "handoff": 0.95},
        base=0,
        now=used[-1],
        points=[HistoryPoint(seq=i + 1, role="user", at=AT, used=u) for i, u in enumerate(used)],
        events=[],
        context_sent=0,
    )
    chart = charts.session_chart(history)
    assert chart is not None
    vertices = chart.line[1:].split(" L")
    assert len(vertices) <= 4 * (charts.PLOT_W + 1) < size * 4
    ys = [float(v.split(",")[1]) for v in vertices]
    top = charts.nice_ceiling(max(used))
    assert abs(min(ys) - (charts.TOP + charts.PLOT_H * (1 - max(used) / top))) < 0.06
    assert abs(max(ys) - (charts.TOP + charts.PLOT_H * (1 - min(used) / top))) < 0.06
    assert vertices[0].startswith(f"{charts.LEFT:.1f},") and vertices[-1].startswith(
        f"{charts.LEFT + charts.PLOT_W:.1f},"
    )
    assert len(chart.rows) <= charts.TABLE_ROWS + 1
