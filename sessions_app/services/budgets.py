"""A project's budgets, managed by its admins (REST, Django admin), and what recording spend sets off:
after a provider's request is stored, every budget covering it (the project's, its key's) whose 80 %
or 100 % this period has been crossed announces it once (``budget.warning``, ``budget.exceeded``).
Each announcement is claimed by a conditional UPDATE of the budget's period flag, so concurrent
recorders announce it once; a refusing budget's ``exceeded_period`` is what the proxy then reads."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from sessions_app.errors import InvalidInput
from sessions_app.models import ApiKey, Budget, BudgetPeriod, Membership, Project, WebhookEvent
from sessions_app.selectors.budgets import (
    WARN_AT,
    BudgetState,
    budget_state,
    covering,
    forget_project_budgets,
    period_start,
    project_has_budgets,
    project_pk,
)
from sessions_app.services.webhook_events import webhook_event_record

MAX_BUDGETS_PER_PROJECT = 50
MAX_LIMIT_USD = Decimal("9999999999.99")


def budget_create(
    *, project: Project, period: str, limit_usd: Any, refuse: bool = False, key: int | None = None
) -> tuple[Budget, bool]:
    """A budget of ``project`` (``key``: an API key id, for that key's spend in it; None: the whole
    project's). The budget and whether its creation announced something (it may start past 80 %)."""
    limit = limit_check(limit_usd)
    if period not in BudgetPeriod.values:
        raise InvalidInput("period is day or month.", code="invalid_period", field="period")
    api_key = budget_key_check(project, key)
    if Budget.objects.filter(project=project).count() >= MAX_BUDGETS_PER_PROJECT:
        raise InvalidInput(f"A project has at most {MAX_BUDGETS_PER_PROJECT} budgets.", code="too_many_budgets")
    try:
        with transaction.atomic():
            budget = Budget.objects.create(
                project=project, api_key=api_key, period=period, limit_usd=limit, refuse=bool(refuse)
            )
    except IntegrityError:
        raise _duplicate(period, api_key) from None
    forget_project_budgets(project.pk)
    return budget, budget_announce(budget)


def budget_update(*, budget: Budget, **changes: Any) -> tuple[Budget, bool]:
    """``changes``: ``limit_usd`` and/or ``refuse``. A new limit takes back the period's flags it no
    longer reaches (the proxy stops refusing, a later crossing is announced again), then announces
    what it reaches now."""
    fields = []
    if "limit_usd" in changes:
        budget.limit_usd = limit_check(changes["limit_usd"])
        fields.append("limit_usd")
    if "refuse" in changes:
        budget.refuse = bool(changes["refuse"])
        fields.append("refuse")
    if not fields:
        return budget, False
    budget.save(update_fields=fields)
    return budget, budget_changed(budget=budget)


def budget_changed(*, budget: Budget) -> bool:
    """After a budget was saved (here, or in Django admin): the period's flags its limit no longer
    reaches are taken back, what it reaches now is announced; whether a delivery was recorded."""
    forget_project_budgets(budget.project_id)
    state = budget_state(budget)
    taken_back: dict[str, None] = {}
    if state.spent_usd < budget.limit_usd:
        taken_back["exceeded_period"] = None
    if state.spent_usd < budget.limit_usd * WARN_AT:
        taken_back["warned_period"] = None
    if taken_back:
        Budget.objects.filter(pk=budget.pk).update(**taken_back)
        for field, value in taken_back.items():
            setattr(budget, field, value)
    return budget_announce(budget)


def budget_delete(*, budget: Budget) -> None:
    project_id = budget.project_id
    budget.delete()
    forget_project_budgets(project_id)


def budgets_check(*, project: Project | int, api_key_id: int | None, now: datetime | None = None) -> bool:
    """What a request of ``api_key_id`` just stored in the project sets off: each covering budget's
    crossing of 80 % or 100 % this period, announced once. No query in a project without budgets (a
    cached flag); else one, and a sum per covering budget not yet past its limit. True when a delivery was recorded."""
    if not project_has_budgets(project):
        return False
    now = now or timezone.now()
    announced = False
    for budget in covering(project_pk(project), api_key_id):
        announced = budget_announce(budget, now=now) or announced
    return announced


def budget_announce(budget: Budget, *, now: datetime | None = None) -> bool:
    """The budget's crossings this period not announced yet, announced (each claimed first)."""
    now = now or timezone.now()
    start = period_start(budget.period, now)
    if budget.exceeded_period == start:
        return False  # both said already: no sum needed
    state = budget_state(budget, now=now)
    announced = False
    with transaction.atomic():
        if state.spent_usd >= budget.limit_usd * WARN_AT and _claim(budget, "warned_period", start):
            announced = _announce(state, WebhookEvent.BUDGET_WARNING) or announced
        if state.spent_usd >= budget.limit_usd and _claim(budget, "exceeded_period", start):
            announced = _announce(state, WebhookEvent.BUDGET_EXCEEDED) or announced
    return announced


def budget_payload(state: BudgetState) -> dict[str, Any]:
    """What a webhook is told of a budget, and what the API lists: the key by its prefix and name."""
    budget = state.budget
    key = budget.api_key
    return {
        "budget": budget.pk,
        "scope": "project" if key is None else "key",
        "key": None if key is None else {"id": key.pk, "prefix": key.prefix, "name": key.name},
        "period": budget.period,
        "period_start": state.period_start.isoformat(),
        "resets_at": state.resets_at.isoformat(),
        "limit_usd": f"{budget.limit_usd:.2f}",
        "spent_usd": f"{state.spent_usd:.10f}",
        "percent": state.percent,
        "refuse": budget.refuse,
        "name": state.label,
    }


def limit_check(value: Any) -> Decimal:
    try:
        limit = Decimal(str(value))
    except (InvalidOperation, ValueError):
        limit = Decimal("NaN")
    # Only ASCII digits: Decimal reads "１" and "৪" (a Bengali 4) as numbers an admin would misread.
    foreign = isinstance(value, str) and not value.isascii()
    if not limit.is_finite() or limit <= 0 or limit > MAX_LIMIT_USD or isinstance(value, bool) or foreign:
        raise InvalidInput("limit_usd is an amount of US dollars above 0.", code="invalid_limit_usd", field="limit_usd")
    rounded = limit.quantize(Decimal("0.01"))
    if rounded != limit or rounded <= 0:
        raise InvalidInput("limit_usd has at most 2 decimals (cents).", code="invalid_limit_usd", field="limit_usd")
    return rounded


def budget_key_check(project: Project, key: int | None) -> ApiKey | None:
    """The API key ``key`` names, when it is one of a member of the project; else a 400 (never telling
    whether another project's key exists)."""
    if key is None:
        return None
    found = ApiKey.objects.filter(pk=key).select_related("user").first() if isinstance(key, int) else None
    if found is None or not Membership.objects.filter(project=project, user_id=found.user_id).exists():
        raise InvalidInput("key is not an API key of a member of this project.", code="invalid_key", field="key")
    return found


def _duplicate(period: str, api_key: ApiKey | None) -> InvalidInput:
    scope = "the project" if api_key is None else f"key {api_key.prefix}…"
    return InvalidInput(
        f"{scope} has a {period} budget already; change that one.", code="duplicate_budget", field="period"
    )


def _claim(budget: Budget, field: str, start: date) -> bool:
    """Whether this caller is the one to announce ``field``'s crossing in the period starting ``start``."""
    unclaimed = Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": start})
    claimed = Budget.objects.filter(unclaimed, pk=budget.pk).update(**{field: start}) == 1
    if claimed:
        setattr(budget, field, start)
    return claimed


def _announce(state: BudgetState, event: str) -> bool:
    return bool(
        webhook_event_record(project=state.budget.project_id, event=event, session=None, data=budget_payload(state))
    )
