"""A session's provider requests: one row per proxied exchange, newest first, with what it used by
kind of token, its cost and latency; and their sums, with what compaction saved them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.pagination import PageNumberPagination
from sessions_app.api.spend_views import SAVED_FIELDS, money
from sessions_app.api.views import _paginate
from sessions_app.models import Compaction, ProviderRequest
from sessions_app.selectors import access
from sessions_app.selectors.spend import TOKEN_FIELDS, session_requests, session_spend


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


SESSION_SPEND_SCHEMA = inline_serializer(
    "SessionSpend",
    {
        "session": serializers.IntegerField(),
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
    @extend_schema(responses=SESSION_SPEND_SCHEMA)
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        spend = session_spend(session)
        return Response(
            {
                "session": session.pk,
                "requests": spend.requests,
                **{name: getattr(spend, name) for name in TOKEN_FIELDS},
                "cost_usd": money(spend.cost_usd),
                "unpriced_requests": spend.unpriced,
                "saved_tokens": spend.saved_tokens,
                "saved_usd": money(spend.saved_usd),
            }
        )
