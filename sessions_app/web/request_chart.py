"""The session page's request chart: what each provider request read (its context: input, cache
writes and cache reads, the cache reads marked apart) and what it cost, as two bar charts over the
same requests, oldest on the left. SVG geometry a template draws; pure functions over the rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from sessions_app.models import ProviderRequest
from sessions_app.web.charts import axis_ticks, nice_ceiling, short_tokens
from sessions_app.web.spend_panel import usd

WIDTH, PANEL_HEIGHT = 720, 150
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 10, 24
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, PANEL_HEIGHT - TOP - BOTTOM
CHART_REQUESTS = 120  # the newest this many; the table and the API page through all of them


@dataclass(frozen=True)
class RequestBar:
    number: int  # the request's place in the session, the oldest 1
    request_id: int
    x: float
    width: float
    context: int  # input + cache writes + cache reads
    cached: int  # cache reads
    context_y: float
    context_h: float
    cached_y: float
    cached_h: float
    cost: Decimal | None
    cost_y: float
    cost_h: float
    title: str


@dataclass(frozen=True)
class ChartTick:
    pos: float
    label: str


@dataclass(frozen=True)
class RequestChart:
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_bottom: int
    bars: list[RequestBar]
    context_ticks: list[ChartTick]
    cost_ticks: list[ChartTick]
    x_ticks: list[ChartTick]
    shown: int
    total: int
    context_description: str
    cost_description: str


def context_of(row: ProviderRequest) -> int:
    return row.input_tokens + row.cache_creation_input_tokens + row.cache_read_input_tokens


def request_chart(newest: Sequence[ProviderRequest], *, total: int) -> RequestChart | None:
    """The chart of ``newest`` (newest first, as ``session_requests`` reads them) out of ``total``."""
    rows = list(reversed(newest))
    if not rows:
        return None
    first_number = total - len(rows) + 1
    context_top = nice_ceiling(max(context_of(r) for r in rows))
    priced = [r.cost_usd for r in rows if r.cost_usd is not None]
    cost_top = _nice_dollars(max(priced, default=Decimal(0)))
    slot = PLOT_W / len(rows)
    width = max(min(slot * 0.7, 24.0), 0.6)

    def y_of(value: float, top: float) -> float:
        return TOP + PLOT_H * (1 - min(value, top) / top)

    bars = []
    for n, row in enumerate(rows):
        context, cached = context_of(row), row.cache_read_input_tokens
        cost_y = y_of(float(row.cost_usd), cost_top) if row.cost_usd is not None else TOP + PLOT_H
        bars.append(
            RequestBar(
                number=first_number + n,
                request_id=row.pk,
                x=LEFT + slot * n + (slot - width) / 2,
                width=width,
                context=context,
                cached=cached,
                context_y=y_of(context, context_top),
                context_h=TOP + PLOT_H - y_of(context, context_top),
                cached_y=y_of(cached, context_top),
                cached_h=TOP + PLOT_H - y_of(cached, context_top),
                cost=row.cost_usd,
                cost_y=cost_y,
                cost_h=TOP + PLOT_H - cost_y,
                title=_bar_title(first_number + n, row),
            )
        )
    return RequestChart(
        width=WIDTH,
        height=PANEL_HEIGHT,
        plot_left=LEFT,
        plot_right=LEFT + PLOT_W,
        plot_bottom=TOP + PLOT_H,
        bars=bars,
        context_ticks=[ChartTick(y_of(v, context_top), short_tokens(v)) for v in axis_ticks(context_top)],
        cost_ticks=[ChartTick(y_of(v, cost_top), usd(Decimal(str(v)))) for v in (0, cost_top / 2, cost_top)],
        x_ticks=_x_ticks(bars),
        shown=len(rows),
        total=total,
        context_description=_context_description(bars),
        cost_description=_cost_description(bars),
    )


def _nice_dollars(value: Decimal) -> float:
    """The smallest round amount (1, 2, 2.5, 5 × 10^k dollars) at or above ``value``; $0.01 for nothing."""
    if value <= 0:
        return 0.01
    magnitude = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * magnitude >= value:
            return float(factor * magnitude)
    return float(10 * magnitude)  # unreachable: factor 10 always qualifies


def _x_ticks(bars: list[RequestBar]) -> list[ChartTick]:
    chosen = sorted({round(k * (len(bars) - 1) / 4) for k in range(5)})
    return [ChartTick(bars[i].x + bars[i].width / 2, str(bars[i].number)) for i in chosen]


def _bar_title(number: int, row: ProviderRequest) -> str:
    cost = usd(row.cost_usd) if row.cost_usd is not None else "no price"
    return (
        f"Request {number} at {row.created_at:%Y-%m-%d %H:%M:%S}, {row.model or 'no model'}: "
        f"{context_of(row):,} tokens of context ({row.cache_read_input_tokens:,} from the cache), "
        f"{row.output_tokens:,} out, {cost}"
    )


def _context_description(bars: list[RequestBar]) -> str:
    peak = max(bars, key=lambda b: b.context)
    read = sum(b.context for b in bars)
    cached = sum(b.cached for b in bars)
    share = f"{cached / read:.0%}" if read else "none"
    return (
        f"Context sent with each of {len(bars)} requests (requests {bars[0].number} to {bars[-1].number}): "
        f"peak {peak.context:,} tokens at request {peak.number}, last {bars[-1].context:,}; "
        f"{share} of it read from the cache."
    )


def _cost_description(bars: list[RequestBar]) -> str:
    priced = [b for b in bars if b.cost is not None]
    unpriced = len(bars) - len(priced)
    if not priced:
        return f"Cost of each of {len(bars)} requests: no price is known for their models."
    dearest = max(priced, key=lambda b: b.cost or 0)
    total = sum((b.cost or Decimal(0) for b in priced), Decimal(0))
    text = (
        f"Cost of each of {len(bars)} requests: {usd(total)} in all, the most {usd(dearest.cost)} "
        f"at request {dearest.number}."
    )
    return text + (f" {unpriced} without a price (no bar)." if unpriced else "")
