"""The dashboard's small chart: tokens ingested and saved by compaction per day, as paired bars in
SVG geometry a template draws (no JavaScript). Pure functions over the dashboard's days."""

from __future__ import annotations

from dataclasses import dataclass

from sessions_app.selectors.dashboard import Day
from sessions_app.web.charts import axis_ticks, nice_ceiling, short_tokens

WIDTH, HEIGHT = 360, 170
LEFT, RIGHT, TOP, BOTTOM = 38, 18, 8, 22
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


@dataclass(frozen=True)
class Bar:
    day: Day
    x: float
    width: float
    ingested_y: float
    ingested_h: float
    saved_x: float
    saved_y: float
    saved_h: float
    label: str  # the day, shown under some bars
    show_label: bool


@dataclass(frozen=True)
class AxisTick:
    y: float
    label: str


@dataclass(frozen=True)
class DailyChart:
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_bottom: int
    bars: list[Bar]
    ticks: list[AxisTick]
    description: str
    total_ingested: int
    total_saved: int


def daily_chart(days: list[Day]) -> DailyChart:
    top = nice_ceiling(max([1] + [max(d.ingested, d.saved) for d in days]))
    slot = PLOT_W / max(len(days), 1)
    bar = max(slot * 0.38, 1.0)
    every = max(1, round(len(days) / 4))  # about four dates under the bars

    def y_of(tokens: int) -> float:
        return TOP + PLOT_H * (1 - min(tokens, top) / top)

    bars = []
    for n, day in enumerate(days):
        x = LEFT + slot * n + (slot - 2 * bar) / 2
        bars.append(
            Bar(
                day=day,
                x=x,
                width=bar,
                ingested_y=y_of(day.ingested),
                ingested_h=TOP + PLOT_H - y_of(day.ingested),
                saved_x=x + bar,
                saved_y=y_of(day.saved),
                saved_h=TOP + PLOT_H - y_of(day.saved),
                label=day.day.strftime("%b %-d"),
                show_label=(len(days) - 1 - n) % every == 0,
            )
        )
    ingested = sum(d.ingested for d in days)
    saved = sum(d.saved for d in days)
    busiest = max(days, key=lambda d: d.ingested, default=None)
    description = f"Over {len(days)} days: {ingested:,} tokens ingested, {saved:,} saved by compaction."
    if busiest is not None and busiest.ingested:
        description += f" Busiest day {busiest.day:%Y-%m-%d} with {busiest.ingested:,} tokens."
    return DailyChart(
        width=WIDTH,
        height=HEIGHT,
        plot_left=LEFT,
        plot_right=LEFT + PLOT_W,
        plot_bottom=TOP + PLOT_H,
        bars=bars,
        ticks=[AxisTick(y_of(v), short_tokens(v)) for v in axis_ticks(top)],
        description=description,
        total_ingested=ingested,
        total_saved=saved,
    )
