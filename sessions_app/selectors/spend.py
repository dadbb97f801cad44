"""What provider requests used and cost: a session's rows of ``ProviderRequest``, newest first
(``session_requests``), and their sums (``session_spend``); a project's rows over its last days
(``project_requests``) and their sums per day, owner, API key or model (``project_spend``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import Cast, NullIf, TruncDate
from django.utils import timezone

from sessions_app.models import AgentSession, Project, ProviderRequest
from sessions_app.selectors.savings import NONE, Savings, savings_by

TOKEN_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def session_requests(session: AgentSession) -> QuerySet[ProviderRequest]:
    """The session's requests, newest first, each with its ``cache_hit_ratio``: the part of what the
    model read that came from the cache (None when it read nothing)."""
    return _newest_first(ProviderRequest.objects.filter(session=session))


def project_requests(*, project: Project, days: int, now: datetime | None = None) -> QuerySet[ProviderRequest]:
    """The project's requests of the last ``days`` local days (today included; the days
    ``project_spend`` sums), newest first, each with its ``cache_hit_ratio``."""
    start, end = _period(days, now)[2:]
    rows = ProviderRequest.objects.filter(project=project, created_at__gte=start, created_at__lt=end)
    return _newest_first(rows)


def _newest_first(rows: QuerySet[ProviderRequest]) -> QuerySet[ProviderRequest]:
    read = F("input_tokens") + F("cache_creation_input_tokens") + F("cache_read_input_tokens")
    ratio = Cast("cache_read_input_tokens", FloatField()) / Cast(NullIf(read, 0), FloatField())
    return rows.annotate(cache_hit_ratio=ratio).order_by("-created_at", "-pk")


def _period(days: int, now: datetime | None) -> tuple[date, date, datetime, datetime]:
    """The last ``days`` local days up to today: the first and last day, and the instants they span."""
    until = timezone.localdate(now or timezone.now())
    since = until - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(since, time.min))
    end = timezone.make_aware(datetime.combine(until + timedelta(days=1), time.min))
    return since, until, start, end


@dataclass(frozen=True)
class Spend:
    requests: int
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    cost_usd: Decimal  # over the requests whose model has a price
    unpriced: int  # requests whose model has no price: their tokens are counted, not their cost
    saved_tokens: int = 0  # input tokens compaction kept out of the requests (``selectors.savings``)
    saved_usd: Decimal = Decimal(0)  # those at the requests' models' input prices


def session_spend(session: AgentSession, *, with_sub_agents: bool = False) -> Spend:
    """The sums over the session's requests: tokens by kind and cost, and what compaction saved them;
    ``with_sub_agents``: its sub-agents' sessions' requests too (``spawned_by``). Two queries."""
    mine = Q(session=session)
    if with_sub_agents:
        # The sessions as a subquery: an OR across the join would read every request, not the index.
        sessions = AgentSession.objects.filter(Q(pk=session.pk) | Q(spawned_by=session)).values("pk")
        mine = Q(session_id__in=sessions)
    requests = ProviderRequest.objects.filter(mine)
    saved = savings_by(requests).get((), NONE)
    totals = requests.aggregate(
        requests=Count("pk"),
        unpriced=Count("pk", filter=Q(cost_usd__isnull=True)),
        cost_usd=Sum("cost_usd"),
        **{name: Sum(name) for name in TOKEN_FIELDS},
    )
    return Spend(
        requests=totals["requests"],
        unpriced=totals["unpriced"],
        cost_usd=Decimal(totals["cost_usd"] or 0),
        **{name: int(totals[name] or 0) for name in TOKEN_FIELDS},
        saved_tokens=saved.tokens,
        saved_usd=saved.usd,
    )


# ----------------------------------------------------------------------------- a project's spend

SPEND_GROUPS = ("day", "owner", "key", "model")

# What each grouping reads from a row (a join to the user or key for their names) and how a group
# appears in JSON and CSV: the group's own fields first, then the sums.
_GROUP_VALUES: dict[str, tuple[str, ...]] = {
    "day": ("day",),
    "owner": ("user_id", "user__username"),
    "key": ("api_key_id", "api_key__prefix", "api_key__name", "api_key__user__username"),
    "model": ("model",),
}
GROUP_FIELDS: dict[str, tuple[str, ...]] = {
    "day": ("day",),
    "owner": ("owner", "owner_name"),
    "key": ("key", "key_prefix", "key_name", "key_owner"),
    "model": ("model",),
}
SUM_FIELDS = ("requests", *TOKEN_FIELDS, "cost_usd", "unpriced_requests", "saved_tokens", "saved_usd")


@dataclass(frozen=True)
class SpendRow:
    group: dict[str, Any]  # the group's fields (GROUP_FIELDS[by]): a day, a user, a key or a model
    label: str  # the group as a person reads it
    requests: int
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    cost_usd: Decimal | None  # over the priced requests; None when none of the group's has a price
    unpriced_requests: int  # requests whose model has no price: their tokens count, their cost is unknown
    saved_tokens: int = 0  # input tokens compaction kept out of the group's requests (``selectors.savings``)
    saved_usd: Decimal = Decimal(0)  # those at the requests' models' input prices

    def as_dict(self) -> dict[str, Any]:
        return {**self.group, **{name: getattr(self, name) for name in SUM_FIELDS}}


@dataclass(frozen=True)
class ProjectSpend:
    by: str
    since: date  # the first local day counted
    until: date  # the last (today)
    rows: list[SpendRow]
    total: SpendRow


def project_spend(*, project: Project, days: int, by: str, now: datetime | None = None) -> ProjectSpend:
    """What the project's provider requests of the last ``days`` local days (today included) used
    and cost, one row per ``by`` group: per day (every day, oldest first, days without a request at
    0), per owner (the user whose key or sign-in made the request), per API key or per model (these
    three by cost, the highest first), with what compaction saved each group. Two aggregate queries over
    the ``(project, created_at)`` index: the sums, and the savings (``selectors.savings``)."""
    since, until, start, end = _period(days, now)
    rows = ProviderRequest.objects.filter(project=project, created_at__gte=start, created_at__lt=end)
    if by == "day":
        rows = rows.annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
    sums = (
        rows.values(*_GROUP_VALUES[by])
        .annotate(
            requests=Count("pk"),
            unpriced_requests=Count("pk", filter=Q(cost_usd__isnull=True)),
            cost_usd=Sum("cost_usd"),
            **{name: Sum(name) for name in TOKEN_FIELDS},
        )
        .order_by()
    )
    saved = savings_by(rows, _GROUP_VALUES[by])
    found = [_row(by, values, saved.get(tuple(values[n] for n in _GROUP_VALUES[by]), NONE)) for values in sums]
    if by == "day":
        seen = {row.group["day"]: row for row in found}
        found = [seen.get(day.isoformat()) or _empty(day) for day in _days(since, until)]
    else:
        found.sort(key=lambda r: (r.cost_usd is None, -(r.cost_usd or 0), -r.requests, r.label))
    return ProjectSpend(by=by, since=since, until=until, rows=found, total=_total(found))


def _days(since: date, until: date) -> list[date]:
    return [since + timedelta(days=n) for n in range((until - since).days + 1)]


def _row(by: str, values: dict[str, Any], saved: Savings) -> SpendRow:
    group = dict(zip(GROUP_FIELDS[by], (values[name] for name in _GROUP_VALUES[by]), strict=True))
    if by == "day":
        group["day"] = _as_date(group["day"]).isoformat()
    for name in ("owner_name", "key_prefix", "key_name", "key_owner"):
        if name in group:
            group[name] = group[name] or ""
    cost = values["cost_usd"]
    return SpendRow(
        group=group,
        label=_label(by, group),
        requests=values["requests"],
        unpriced_requests=values["unpriced_requests"],
        cost_usd=None if cost is None else Decimal(cost),
        **{name: int(values[name] or 0) for name in TOKEN_FIELDS},
        saved_tokens=saved.tokens,
        saved_usd=saved.usd,
    )


def _as_date(value: date | str) -> date:
    # TruncDate answers a date; on SQLite it can answer the ISO text instead.
    return value if isinstance(value, date) else date.fromisoformat(value)


def _label(by: str, group: dict[str, Any]) -> str:
    if by == "owner":
        return group["owner_name"] or "(no user)"
    if by == "key":
        if group["key"] is None:
            return "(no key)"
        name = f" {group['key_name']}" if group["key_name"] else ""
        return f"{group['key_prefix']}…{name}"
    if by == "model":
        return group["model"] or "(no model)"
    return str(group["day"])


def _empty(day: date) -> SpendRow:
    return SpendRow({"day": day.isoformat()}, day.isoformat(), 0, 0, 0, 0, 0, Decimal(0), 0)


def _total(rows: list[SpendRow]) -> SpendRow:
    costs = [row.cost_usd for row in rows if row.cost_usd is not None]
    requests = sum(row.requests for row in rows)
    unpriced = sum(row.unpriced_requests for row in rows)
    return SpendRow(
        group={},
        label="Total",
        requests=requests,
        unpriced_requests=unpriced,
        # Unknown only when every request is unpriced: no request at all costs $0.
        cost_usd=None if requests and requests == unpriced else sum(costs, Decimal(0)),
        **{name: sum(getattr(row, name) for row in rows) for name in (*TOKEN_FIELDS, "saved_tokens")},
        saved_usd=sum((row.saved_usd for row in rows), Decimal(0)),
    )
