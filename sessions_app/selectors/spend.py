"""What provider requests used and cost: a session's rows of ``ProviderRequest``, newest first
(``session_requests``), and their sums (``session_spend``); a project's rows over its last days
(``project_requests``) and their sums per day, owner, API key or model (``project_spend``, from the
rollup ``DailySpend``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import Cast, NullIf
from django.utils import timezone

from sessions_app.models import AgentSession, ApiKey, DailySpend, Project, ProviderRequest, cost_from_units
from sessions_app.selectors.savings import NONE, Savings, savings_by, savings_priced

TOKEN_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def session_requests(session: AgentSession) -> QuerySet[ProviderRequest]:
    """The session's requests, newest first, each with its ``cache_hit_ratio``: the part of what the
    model read that came from the cache (None when it read nothing)."""
    return _newest_first(ProviderRequest.objects.filter(session=session))


def project_requests(*, project: Project, days: int, now: datetime | None = None) -> QuerySet[ProviderRequest]:
    """The project's requests of the last ``days`` UTC days (today included; the days
    ``project_spend`` sums), newest first, each with its ``cache_hit_ratio``."""
    start, end = _period(days, now)[2:]
    rows = ProviderRequest.objects.filter(project=project, created_at__gte=start, created_at__lt=end)
    return _newest_first(rows)


def _newest_first(rows: QuerySet[ProviderRequest]) -> QuerySet[ProviderRequest]:
    read = F("input_tokens") + F("cache_creation_input_tokens") + F("cache_read_input_tokens")
    ratio = Cast("cache_read_input_tokens", FloatField()) / Cast(NullIf(read, 0), FloatField())
    return rows.annotate(cache_hit_ratio=ratio).order_by("-created_at", "-pk")


def _period(days: int, now: datetime | None) -> tuple[date, date, datetime, datetime]:
    """The last ``days`` UTC days up to today (the rollup's days, and budgets'): the first and last
    day, and the instants they span."""
    until = (now or timezone.now()).astimezone(UTC).date()
    since = until - timedelta(days=days - 1)
    start = datetime.combine(since, time.min, tzinfo=UTC)
    end = datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC)
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

# The rollup's field each grouping reads, and how a group appears in JSON and CSV: the group's own
# fields first (an owner's and a key's names looked up after the sums), then the sums.
_ROLLUP_GROUP = {"day": "day", "owner": "user_id", "key": "api_key_id", "model": "model"}
ROLLUP_SUMS = ("requests", "unpriced_requests", *TOKEN_FIELDS, "cost_units", "saved_tokens")
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
    """What the project's provider requests of the last ``days`` UTC days (today included) used and
    cost, one row per ``by`` group: per day (every day, oldest first, days without a request at 0),
    per owner (the user whose key or sign-in made the request), per API key or per model (these three
    by cost, the highest first), with what compaction saved each group. One aggregate query over the
    rollup (``DailySpend``: at most ``days`` × people × keys × models rows, however many requests),
    then one for the names of the owners or keys found."""
    since, until = _period(days, now)[:2]
    group = _ROLLUP_GROUP[by]
    sums = (
        DailySpend.objects.filter(project=project, day__gte=since, day__lte=until)
        .values_list(group, "model")
        .annotate(*(Sum(name) for name in ROLLUP_SUMS))
        .order_by()
    )
    figures: dict[Any, list[int]] = {}
    saved: list[tuple[tuple[Any, ...], str, int]] = []
    names = _names(by, {row[0] for row in sums})
    for value, model, *row in sums:
        key = _as_date(value).isoformat() if by == "day" else (model if by == "model" else value)
        if by in ("owner", "key") and value not in names:
            key = 0  # a user or key deleted since: "none", as its requests' rows say (SET_NULL)
        totals = figures.setdefault(key, [0] * len(ROLLUP_SUMS))
        for n, amount in enumerate(row):
            totals[n] += int(amount or 0)
        saved.append(((key,), model, int(row[-1] or 0)))
    priced = savings_priced(saved)
    # A bucket emptied (its session deleted) is no group.
    found = [_row(by, key, sums, names, priced.get((key,), NONE)) for key, sums in figures.items() if sums[0]]
    if by == "day":
        seen = {row.group["day"]: row for row in found}
        found = [seen.get(day.isoformat()) or _empty(day) for day in _days(since, until)]
    else:
        found.sort(key=lambda r: (r.cost_usd is None, -(r.cost_usd or 0), -r.requests, r.label))
    return ProjectSpend(by=by, since=since, until=until, rows=found, total=_total(found))


def _names(by: str, ids: set[Any]) -> dict[Any, tuple[str, ...]]:
    """The few owners' or keys' names, after the aggregate; 0 (none) has none."""
    wanted = [pk for pk in ids if pk]
    if by == "owner":
        users = get_user_model().objects.filter(pk__in=wanted).values_list("pk", "username")
        return {0: ("",), **{pk: (name,) for pk, name in users}}
    if by == "key":
        keys = ApiKey.objects.filter(pk__in=wanted).values_list("pk", "prefix", "name", "user__username")
        return {0: ("", "", ""), **{pk: tuple(rest) for pk, *rest in keys}}
    return {}


def _days(since: date, until: date) -> list[date]:
    return [since + timedelta(days=n) for n in range((until - since).days + 1)]


def _row(by: str, key: Any, totals: list[int], names: dict[Any, tuple[str, ...]], saved: Savings) -> SpendRow:
    if by in ("owner", "key"):
        group = dict(zip(GROUP_FIELDS[by], (key or None, *names[key]), strict=True))
    else:
        group = {GROUP_FIELDS[by][0]: key}
    sums = dict(zip(ROLLUP_SUMS, totals, strict=True))
    return SpendRow(
        group=group,
        label=_label(by, group),
        requests=sums["requests"],
        unpriced_requests=sums["unpriced_requests"],
        cost_usd=None if sums["requests"] == sums["unpriced_requests"] else cost_from_units(sums["cost_units"]),
        **{name: sums[name] for name in TOKEN_FIELDS},
        saved_tokens=saved.tokens,
        saved_usd=saved.usd,
    )


def _as_date(value: date | str) -> date:
    # A DateField answers a date; raw SQLite values can be the ISO text instead.
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
