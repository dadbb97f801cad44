"""A project's budgets: its members read them with this period's spend; its admins (who manage its
webhooks and policy) add, change and delete them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import tasks
from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.parsers import JSONParser
from sessions_app.api.webhook_views import _valid
from sessions_app.errors import InvalidInput
from sessions_app.models import BudgetPeriod, Role
from sessions_app.selectors import access
from sessions_app.selectors.budgets import BudgetState, budget_state, project_budgets
from sessions_app.services import budgets

SCOPES = ("project", "key")


class BudgetKeyOut(serializers.Serializer):
    id = serializers.IntegerField()
    prefix = serializers.CharField()
    name = serializers.CharField()


class BudgetOut(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField()
    scope = serializers.ChoiceField(choices=SCOPES, help_text="project: the whole project's spend; key: one key's")
    key = BudgetKeyOut(allow_null=True, help_text="scope=key: the API key, by its prefix and name (never the key)")
    period = serializers.ChoiceField(choices=BudgetPeriod.choices)
    limit_usd = serializers.CharField(help_text="US dollars, two decimals")
    refuse = serializers.BooleanField(help_text="the proxy answers 429 once this period's spend reaches the limit")
    period_start = serializers.DateField(help_text="the first day (UTC) of the current period")
    resets_at = serializers.DateTimeField(help_text="when the next period starts (UTC midnight)")
    spent_usd = serializers.CharField(help_text="US dollars spent in the current period (priced requests)")
    percent = serializers.FloatField(help_text="spent_usd ÷ limit_usd × 100, one decimal")
    warned = serializers.BooleanField(help_text="80 % was reached (and announced) this period")
    exceeded = serializers.BooleanField(help_text="100 % was reached (and announced) this period")
    name = serializers.CharField(help_text='which budget, e.g. "daily budget of $1.00 for key ctx_ab12…"')
    created_at = serializers.DateTimeField()


class DollarsField(serializers.DecimalField):
    """An amount in ASCII digits: Python reads "１" or "৪" (a Bengali 4, which looks like an 8) as
    numbers, so a limit could differ from what its admin saw."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid")
        return super().to_internal_value(data)


class BudgetIn(serializers.Serializer):
    scope = serializers.ChoiceField(choices=SCOPES, required=False, help_text="default: key when key is given")
    key = serializers.IntegerField(required=False, allow_null=True, help_text="an API key id of a project member")
    period = serializers.ChoiceField(choices=BudgetPeriod.choices, required=False, default=BudgetPeriod.DAY)
    limit_usd = DollarsField(max_digits=12, decimal_places=2, help_text="US dollars, above 0")
    refuse = serializers.BooleanField(required=False, default=False)


class BudgetPatchIn(serializers.Serializer):
    limit_usd = DollarsField(max_digits=12, decimal_places=2, required=False)
    refuse = serializers.BooleanField(required=False)


def budget_out(state: BudgetState) -> dict[str, Any]:
    budget = state.budget
    payload = budgets.budget_payload(state)
    return {
        "id": budget.pk,
        "project": budget.project_id,
        **{name: payload[name] for name in ("scope", "key", "period", "limit_usd", "refuse", "name")},
        **{name: payload[name] for name in ("period_start", "resets_at", "spent_usd", "percent")},
        "warned": budget.warned_period == state.period_start,
        "exceeded": budget.exceeded_period == state.period_start,
        "created_at": budget.created_at.isoformat(),
    }


def _scoped_key(data: dict[str, Any]) -> int | None:
    key, scope = data.get("key"), data.get("scope") or ("key" if data.get("key") is not None else "project")
    if scope == "key" and key is None:
        raise InvalidInput("scope key needs key: the API key's id.", code="invalid_key", field="key")
    if scope == "project" and key is not None:
        raise InvalidInput("scope project takes no key.", code="invalid_key", field="key")
    return key


class ProjectBudgetsApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(responses=BudgetOut(many=True), description="The project's budgets with this period's spend.")
    def get(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id)
        return Response([budget_out(state) for state in project_budgets(project.pk)])

    @extend_schema(request=BudgetIn, responses={201: BudgetOut}, description="Project admins: add a budget.")
    def post(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id, min_role=Role.ADMIN)
        data = _valid(BudgetIn, request.data)
        budget, announced = budgets.budget_create(
            project=project,
            key=_scoped_key(data),
            period=data["period"],
            limit_usd=data["limit_usd"],
            refuse=data["refuse"],
        )
        if announced:
            tasks.webhooks_send()
        return Response(budget_out(budget_state(budget)), status=status.HTTP_201_CREATED)


class BudgetDetailApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(responses=BudgetOut)
    def get(self, request: AuthenticatedRequest, project_id: int, budget_id: str) -> Response:
        return Response(budget_out(budget_state(access.budget_get_for(request.user, project_id, budget_id))))

    @extend_schema(request=BudgetPatchIn, responses=BudgetOut, description="Project admins: its limit or refusal.")
    def patch(self, request: AuthenticatedRequest, project_id: int, budget_id: str) -> Response:
        budget = access.budget_get_for(request.user, project_id, budget_id, min_role=Role.ADMIN)
        changes = _valid(BudgetPatchIn, request.data)
        budget, announced = budgets.budget_update(budget=budget, **changes)
        if announced:
            tasks.webhooks_send()
        return Response(budget_out(budget_state(budget)))

    @extend_schema(responses={204: None}, description="Project admins: delete the budget.")
    def delete(self, request: AuthenticatedRequest, project_id: int, budget_id: str) -> Response:
        budgets.budget_delete(budget=access.budget_get_for(request.user, project_id, budget_id, min_role=Role.ADMIN))
        return Response(status=status.HTTP_204_NO_CONTENT)
