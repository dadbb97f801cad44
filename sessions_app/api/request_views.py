"""A session's provider requests: one row per proxied exchange, newest first, with what it used by
kind of token, its cost and latency."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.pagination import PageNumberPagination
from sessions_app.api.schema import error_response
from sessions_app.api.views import _paginate
from sessions_app.errors import InvalidInput
from sessions_app.models import Compaction, ProviderRequest
from sessions_app.selectors import access
from sessions_app.selectors.spend import session_requests, session_spend


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
        ]


class SessionRequestsApi(APIView):
    pagination_class = PageNumberPagination  # GET answers pages (``_paginate``); this documents them

    @extend_schema(responses=ProviderRequestOut(many=True))
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        return _paginate(self, request, session_requests(session), ProviderRequestOut)


class SessionSpendOut(serializers.Serializer):
    requests = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=20, decimal_places=10, help_text="over the priced requests")
    unpriced = serializers.IntegerField(help_text="requests whose model has no price: tokens counted, cost not")
    sub_agents = serializers.BooleanField(help_text="the sums include the sub-agents' sessions")


class SessionSpendApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("sub_agents", bool, description="true: include the sessions this session's agent started")
        ],
        responses={200: SessionSpendOut, 400: error_response("400"), 404: error_response("404")},
    )
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        """The session's provider requests summed: tokens by kind and cost, its sub-agents' too on request."""
        session = access.session_get_for(request.user, session_id)
        raw = request.query_params.get("sub_agents", "false").lower()
        if raw not in ("true", "false", "1", "0"):
            raise InvalidInput("sub_agents is true or false.", code="invalid_sub_agents")
        with_sub_agents = raw in ("true", "1")
        spend = session_spend(session, with_sub_agents=with_sub_agents)
        return Response(SessionSpendOut({**asdict(spend), "sub_agents": with_sub_agents}).data)
