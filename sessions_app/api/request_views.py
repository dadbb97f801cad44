"""Provider requests, one row per proxied exchange or recorded response, newest first, with what each
used by kind of token, its cost and latency: a session's, and a project's over its last days. Pages
of JSON, or (``?format=csv``) every row as a CSV download streamed as it is read. And a session's
sums, with what compaction saved them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.csv_stream import csv_download
from sessions_app.api.pagination import PageNumberPagination
from sessions_app.api.params import int_param
from sessions_app.api.schema import error_response
from sessions_app.api.spend_views import DEFAULT_DAYS, FORMATS, MAX_DAYS, SAVED_FIELDS, money
from sessions_app.api.views import _paginate
from sessions_app.errors import InvalidInput
from sessions_app.models import AgentSession, ApiKey, Compaction, ProviderRequest
from sessions_app.selectors import access
from sessions_app.selectors.spend import TOKEN_FIELDS, project_requests, session_requests, session_spend

CSV_CHUNK = 2000  # rows read per query while a CSV streams


class ProviderRequestOut(serializers.ModelSerializer):
    compacted: serializers.PrimaryKeyRelatedField[Compaction] = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="The compaction whose context ctxweb sent in place of the agent's history"
    )
    cost_usd = serializers.DecimalField(
        max_digits=20, decimal_places=10, read_only=True, allow_null=True, help_text="null: the model has no price"
    )
    cache_hit_ratio = serializers.FloatField(
        read_only=True, allow_null=True, help_text="cache reads ÷ everything the model read; null when it read nothing"
    )

    class Meta:
        model = ProviderRequest
        fields = [
            "id",
            "created_at",
            "model",
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
            "service_tier",
            "cost_usd",
            "ttfb_ms",
            "duration_ms",
            "status",
            "compacted",
            "cache_hit_ratio",
            "source",
            "estimated",
        ]


class ProjectRequestOut(ProviderRequestOut):
    session: serializers.PrimaryKeyRelatedField[AgentSession] = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="The session the request was recorded in"
    )
    user: serializers.PrimaryKeyRelatedField[Any] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="Who made it: the user of its ctxweb key or sign-in"
    )
    api_key: serializers.PrimaryKeyRelatedField[ApiKey] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="The ctxweb API key that sent it; null: none"
    )

    class Meta(ProviderRequestOut.Meta):
        fields = ["session", "user", "api_key", *ProviderRequestOut.Meta.fields]


FORMAT_PARAM = OpenApiParameter(
    "format", str, enum=list(FORMATS), description="csv: every row as an attachment, the JSON rows' fields as columns"
)


def _csv_response(name: str) -> OpenApiResponse:
    return OpenApiResponse(str, description=f"Every {name} request, newest first, as CSV: the JSON rows' fields")


def _format(request: Request) -> str:
    fmt = request.query_params.get("format") or "json"
    if fmt not in FORMATS:
        raise InvalidInput("format is json or csv.", code="invalid_format")
    return fmt


def _rows(rows: QuerySet[ProviderRequest], out: serializers.ModelSerializer[Any]) -> Iterator[dict[str, Any]]:
    # Each row exactly as the JSON pages answer it; read a chunk at a time (a server-side cursor on
    # PostgreSQL), so a long history never sits in memory whole.
    for row in rows.iterator(chunk_size=CSV_CHUNK):
        yield out.to_representation(row)


class SessionRequestsApi(APIView):
    pagination_class = PageNumberPagination  # GET answers pages (``_paginate``); this documents them

    @extend_schema(
        parameters=[FORMAT_PARAM],
        responses={
            (200, "application/json"): ProviderRequestOut(many=True),
            (200, "text/csv"): _csv_response("of the session's"),
        },
    )
    def get(self, request: AuthenticatedRequest, session_id: str) -> HttpResponseBase:
        session = access.session_get_for(request.user, session_id)
        rows = session_requests(session)
        if _format(request) == "csv":
            out = ProviderRequestOut()
            return csv_download(f"requests-session-{session.pk}.csv", out.Meta.fields, _rows(rows, out))
        return _paginate(self, request, rows, ProviderRequestOut)


class ProjectRequestsApi(APIView):
    pagination_class = PageNumberPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("days", int, description=f"how many days back, today included: 1 to {MAX_DAYS} (30)"),
            FORMAT_PARAM,
        ],
        responses={
            (200, "application/json"): ProjectRequestOut(many=True),
            (200, "text/csv"): _csv_response("of the period's"),
        },
    )
    def get(self, request: AuthenticatedRequest, project_id: int) -> HttpResponseBase:
        project = access.project_get_for(request.user, project_id)
        days = int_param(request, "days", default=DEFAULT_DAYS, low=1, high=MAX_DAYS)
        fmt = _format(request)
        rows = project_requests(project=project, days=days)
        if fmt == "csv":
            out = ProjectRequestOut()
            name = f"requests-project-{project.pk}-last-{days}-days.csv"
            return csv_download(name, out.Meta.fields, _rows(rows, out))
        return _paginate(self, request, rows, ProjectRequestOut)


SESSION_SPEND_SCHEMA = inline_serializer(
    "SessionSpend",
    {
        "session": serializers.IntegerField(),
        "sub_agents": serializers.BooleanField(help_text="the sums include the sub-agents' sessions"),
        "requests": serializers.IntegerField(),
        **{name: serializers.IntegerField() for name in TOKEN_FIELDS},
        "cost_usd": serializers.DecimalField(
            max_digits=20, decimal_places=10, help_text="US dollars over the requests whose model has a price"
        ),
        "unpriced_requests": serializers.IntegerField(help_text="requests whose model has no price (cost unknown)"),
        **SAVED_FIELDS,
    },
)


class SessionSpendApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("sub_agents", bool, description="true: include the sessions this session's agent started")
        ],
        responses={200: SESSION_SPEND_SCHEMA, 400: error_response("400"), 404: error_response("404")},
    )
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        """The session's provider requests summed: tokens by kind, cost and what compaction saved them;
        its sub-agents' too on request."""
        session = access.session_get_for(request.user, session_id)
        raw = request.query_params.get("sub_agents", "false").lower()
        if raw not in ("true", "false", "1", "0"):
            raise InvalidInput("sub_agents is true or false.", code="invalid_sub_agents")
        with_sub_agents = raw in ("true", "1")
        spend = session_spend(session, with_sub_agents=with_sub_agents)
        return Response(
            {
                "session": session.pk,
                "sub_agents": with_sub_agents,
                "requests": spend.requests,
                **{name: getattr(spend, name) for name in TOKEN_FIELDS},
                "cost_usd": money(spend.cost_usd),
                "unpriced_requests": spend.unpriced,
                "saved_tokens": spend.saved_tokens,
                "saved_usd": money(spend.saved_usd),
            }
        )
