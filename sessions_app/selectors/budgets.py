"""Budgets as read: the UTC period a moment falls in, what a budget's scope spent in it, the budgets
that cover a request (its project's and its key's), the refusal the proxy answers past a refusing
budget's limit, and the warnings STATUS carries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal

from django.core.cache import cache
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from sessions_app.models import AgentSession, Budget, BudgetPeriod, DailySpend, Project, cost_from_units

WARN_AT = Decimal("0.8")  # the share of the limit that is announced as ``budget.warning``
# How long a process may go on believing a project has no budget after another process added one
# (with Redis, shared and cleared at once; the embedded mode's cache is per process).
HAS_BUDGETS_SECONDS = 60
# Set on a Project read with whether it has a budget (``session_rows``, ``access``: an EXISTS beside
# the row): the hot paths ask ``project_has_budgets`` of the project they hold, with no cache round trip.
BUDGETED = "has_budgets_read"


def period_start(period: str, at: datetime) -> date:
    """The first day of the UTC day or month ``at`` falls in."""
    day = at.astimezone(UTC).date()
    return day if period == BudgetPeriod.DAY else day.replace(day=1)


def next_start(period: str, start: date) -> date:
    """The first day of the period after the one starting on ``start``."""
    if period == BudgetPeriod.DAY:
        return date.fromordinal(start.toordinal() + 1)
    return date(start.year + 1, 1, 1) if start.month == 12 else date(start.year, start.month + 1, 1)


def as_moment(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def project_has_budgets(project: Project | int) -> bool:
    """Whether the project has any budget: as its row said when it was read with it (``BUDGETED``),
    else from the cache (an EXISTS query when it isn't there): what keeps the recording, STATUS and
    the proxy free of budget queries in a project without any."""
    read = getattr(project, BUDGETED, None)
    if read is not None:
        return bool(read)
    project_id = project_pk(project)
    key = _has_key(project_id)
    found = cache.get(key)
    if found is None:
        found = Budget.objects.filter(project_id=project_id).exists()
        cache.set(key, found, HAS_BUDGETS_SECONDS)
    return bool(found)


def forget_project_budgets(project_id: int) -> None:
    """After a budget of the project was added or deleted: the next ``project_has_budgets`` asks again."""
    cache.delete(_has_key(project_id))


def project_pk(project: Project | int) -> int:
    return project if isinstance(project, int) else project.pk


def session_project(session: AgentSession) -> Project | int:
    """The session's project when it was read with the session (its ``BUDGETED`` flag may be set),
    else its id: asking the session's project would read it."""
    return session.project if AgentSession.project.is_cached(session) else session.project_id


def _has_key(project_id: int) -> str:
    return f"ctx-has-budgets:{project_id}"


def covering(project_id: int, api_key_id: int | None) -> QuerySet[Budget]:
    """The budgets a request of ``api_key_id`` in the project counts against: the project's own and
    that key's. One query over ``(project, api_key)``."""
    scope = Q(api_key__isnull=True) | Q(api_key_id=api_key_id) if api_key_id is not None else Q(api_key__isnull=True)
    return Budget.objects.filter(scope, project_id=project_id).select_related("api_key", "project")


def budget_spent(budget: Budget, start: date) -> Decimal:
    """What the budget's scope spent from ``start`` to the end of its period (requests without a price
    count as nothing). One aggregate over the rollup's buckets of the period (``DailySpend``: UTC days,
    at most 31 of them per person, key and model)."""
    buckets = DailySpend.objects.filter(
        project_id=budget.project_id, day__gte=start, day__lt=next_start(budget.period, start)
    )
    if budget.api_key_id is not None:
        buckets = buckets.filter(api_key_id=budget.api_key_id)
    return cost_from_units(buckets.aggregate(spent=Sum("cost_units"))["spent"] or 0)


@dataclass(frozen=True)
class BudgetState:
    budget: Budget
    period_start: date
    resets_at: datetime
    spent_usd: Decimal

    @property
    def percent(self) -> float:
        return float((self.spent_usd / self.budget.limit_usd * 100).quantize(Decimal("0.1"), ROUND_HALF_UP))

    @property
    def label(self) -> str:
        return budget_label(self.budget)


def budget_state(budget: Budget, *, now: datetime | None = None) -> BudgetState:
    start = period_start(budget.period, now or timezone.now())
    return BudgetState(budget, start, as_moment(next_start(budget.period, start)), budget_spent(budget, start))


def project_budgets(project_id: int, *, now: datetime | None = None) -> list[BudgetState]:
    """The project's budgets with this period's figures: one query, then one aggregate per budget."""
    found = Budget.objects.filter(project_id=project_id).select_related("api_key", "project")
    return [budget_state(budget, now=now) for budget in found]


def scope_label(budget: Budget) -> str:
    if budget.api_key is None:
        return f"project {budget.project.name}"
    name = f" ({budget.api_key.name})" if budget.api_key.name else ""
    return f"key {budget.api_key.prefix}…{name}"


def budget_label(budget: Budget) -> str:
    """E.g. "daily budget of $1.00 for key ctx_ab12…": which budget, as a person reads it."""
    every = "daily" if budget.period == BudgetPeriod.DAY else "monthly"
    return f"{every} budget of ${budget.limit_usd:,.2f} for {scope_label(budget)}"


def _flagged(field: str, now: datetime) -> Q:
    """Budgets whose ``field`` holds the period ``now`` falls in, whichever their period."""
    return Q(period=BudgetPeriod.DAY, **{field: period_start(BudgetPeriod.DAY, now)}) | Q(
        period=BudgetPeriod.MONTH, **{field: period_start(BudgetPeriod.MONTH, now)}
    )


def refusing_budget(
    project: Project | int, api_key_id: int | None, *, now: datetime | None = None
) -> BudgetState | None:
    """A refusing budget covering the request that reached its limit this period, with its figures;
    None (the common case: none when the project has no budget, else one indexed query, no sum)."""
    if not project_has_budgets(project):
        return None
    now = now or timezone.now()
    budget = covering(project_pk(project), api_key_id).filter(_flagged("exceeded_period", now), refuse=True).first()
    return None if budget is None else budget_state(budget, now=now)


def session_budget_warnings(session: AgentSession, *, now: datetime | None = None) -> list[str]:
    """STATUS's words for the budgets over 80 % this period that cover the session: its project's, and
        that of the key of its newest request. No query in a project without budgets, one when none is
    over 80 % (the flags the recorders claim)."""
    if not project_has_budgets(session_project(session)):
        return []
    now = now or timezone.now()
    flagged = list(
        Budget.objects.filter(
            _flagged("warned_period", now) | _flagged("exceeded_period", now), project=session.project_id
        )
        .select_related("api_key", "project")
        .order_by("pk")
    )
    if any(budget.api_key_id for budget in flagged):
        newest = session.requests.order_by("-created_at").values_list("api_key_id", flat=True).first()
        flagged = [budget for budget in flagged if budget.api_key_id in (None, newest)]
    warnings = []
    for budget in flagged:
        state = budget_state(budget, now=now)
        if state.spent_usd < state.budget.limit_usd * WARN_AT:
            continue  # flagged under a higher limit since raised: nothing to say
        reached = "reached" if state.spent_usd >= budget.limit_usd else "is at 80 % of"
        warnings.append(
            f"Spend {reached} the {state.label}: ${state.spent_usd:,.2f} of ${budget.limit_usd:,.2f} "
            f"({state.percent:g} %) since {state.period_start.isoformat()}; it resets at "
            f"{state.resets_at:%Y-%m-%d %H:%M} UTC."
        )
    return warnings
