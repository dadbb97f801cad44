"""A project's spend: what its provider requests used and cost over the last N days, per day, owner,
API key or model, as JSON or (``?format=csv``) the same rows as a CSV download."""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.csv_stream import csv_cell, csv_writer
from sessions_app.api.params import int_param
from sessions_app.errors import InvalidInput
from sessions_app.selectors import access
from sessions_app.selectors.spend import GROUP_FIELDS, SPEND_GROUPS, SUM_FIELDS, ProjectSpend, project_spend

MAX_DAYS = 366
DEFAULT_DAYS = 30
FORMATS = ("json", "csv")


# What compaction saved (``selectors.savings``; docs/PROXY.md, "What compaction saved").
SAVED_FIELDS: dict[str, serializers.Field] = {
    "saved_tokens": serializers.IntegerField(
        help_text="input tokens compaction kept out of the requests: for each request, the tokens_before − "
        "tokens_after of its session's compactions in force (succeeded, not reverted) when it was sent"
    ),
    "saved_usd": serializers.DecimalField(
        max_digits=20,
        decimal_places=10,
        help_text="saved_tokens at each request's model's uncached input price (models without a price add 0)",
    ),
}


def _sums(name: str) -> dict[str, serializers.Field]:
    return {
        "requests": serializers.IntegerField(),
        "input_tokens": serializers.IntegerField(help_text="uncached input"),
        "cache_creation_input_tokens": serializers.IntegerField(help_text="input written to the cache"),
        "cache_read_input_tokens": serializers.IntegerField(help_text="input read from the cache"),
        "output_tokens": serializers.IntegerField(),
        "cost_usd": serializers.DecimalField(
            max_digits=20,
            decimal_places=10,
            allow_null=True,
            help_text=f"US dollars over the {name}'s priced requests; null when none of them has a price",
        ),
        "unpriced_requests": serializers.IntegerField(help_text="requests whose model has no price (cost unknown)"),
        **SAVED_FIELDS,
    }


SPEND_SCHEMA = inline_serializer(
    "ProjectSpend",
    {
        "project": serializers.IntegerField(),
        "by": serializers.ChoiceField(choices=SPEND_GROUPS),
        "days": serializers.IntegerField(),
        "since": serializers.DateField(help_text="the first day counted (the server's time zone)"),
        "until": serializers.DateField(help_text="the last day counted: today"),
        "rows": inline_serializer(
            "SpendRow",
            {
                "day": serializers.DateField(required=False, help_text="by=day"),
                "owner": serializers.IntegerField(required=False, allow_null=True, help_text="by=owner: user id"),
                "owner_name": serializers.CharField(required=False, help_text="by=owner"),
                "key": serializers.IntegerField(required=False, allow_null=True, help_text="by=key: API key id"),
                "key_prefix": serializers.CharField(required=False, help_text="by=key"),
                "key_name": serializers.CharField(required=False, help_text="by=key"),
                "key_owner": serializers.CharField(required=False, help_text="by=key: the key's user"),
                "model": serializers.CharField(required=False, help_text="by=model"),
                **_sums("group"),
            },
            many=True,
        ),
        "total": inline_serializer("SpendTotal", _sums("period")),
    },
)


class ProjectSpendApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("days", int, description=f"how many days back, today included: 1 to {MAX_DAYS} (30)"),
            OpenApiParameter("by", str, enum=list(SPEND_GROUPS), description="one row per … (day)"),
            OpenApiParameter("format", str, enum=list(FORMATS), description="csv: the rows as an attachment"),
        ],
        responses={
            (200, "application/json"): SPEND_SCHEMA,
            (200, "text/csv"): OpenApiResponse(str, description="The rows as CSV: the JSON rows' fields as columns"),
        },
    )
    def get(self, request: AuthenticatedRequest, project_id: int) -> HttpResponse:
        project = access.project_get_for(request.user, project_id)
        days = int_param(request, "days", default=DEFAULT_DAYS, low=1, high=MAX_DAYS)
        by = request.query_params.get("by") or "day"
        if by not in SPEND_GROUPS:
            raise InvalidInput(f"by is one of {', '.join(SPEND_GROUPS)}.", code="invalid_by")
        fmt = request.query_params.get("format") or "json"
        if fmt not in FORMATS:
            raise InvalidInput("format is json or csv.", code="invalid_format")
        spend = project_spend(project=project, days=days, by=by)
        if fmt == "csv":
            response = HttpResponse(spend_csv(spend), content_type="text/csv; charset=utf-8")
            name = f"spend-{project.pk}-by-{by}-{spend.since.isoformat()}-{spend.until.isoformat()}.csv"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
            return response
        return Response(spend_payload(spend, project_id=project.pk, days=days))


def spend_payload(spend: ProjectSpend, *, project_id: int, days: int) -> dict[str, Any]:
    return {
        "project": project_id,
        "by": spend.by,
        "days": days,
        "since": spend.since.isoformat(),
        "until": spend.until.isoformat(),
        "rows": [_json(row.as_dict()) for row in spend.rows],
        "total": _json({name: getattr(spend.total, name) for name in SUM_FIELDS}),
    }


def _json(row: dict[str, Any]) -> dict[str, Any]:
    cost = row["cost_usd"]
    # A string with the stored precision, as ``GET /sessions/{id}/requests/`` answers each request's.
    return {**row, "cost_usd": None if cost is None else f"{cost:.10f}", "saved_usd": money(row["saved_usd"])}


def money(amount: Decimal) -> str:
    """Dollars as the API answers them: a string with the stored precision."""
    return f"{amount:.10f}"


def spend_csv(spend: ProjectSpend) -> str:
    out = io.StringIO()
    writer = csv_writer(out)
    columns = (*GROUP_FIELDS[spend.by], *SUM_FIELDS)
    writer.writerow(columns)
    for row in spend.rows:
        values = _json(row.as_dict())
        writer.writerow([csv_cell(values[name]) for name in columns])
    return out.getvalue()
