"""A session's context over its life (the data of the session page's chart)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.selectors import access
from sessions_app.selectors.history import history_payload, session_history

_LEVELS = ["remind", "compact", "summarize", "handoff"]

HISTORY_SCHEMA = inline_serializer(
    "SessionHistory",
    {
        "session": serializers.IntegerField(),
        "model": serializers.CharField(),
        "context_window": serializers.IntegerField(),
        "reserved_output": serializers.IntegerField(),
        "thresholds": inline_serializer("HistoryThresholds", {k: serializers.FloatField() for k in _LEVELS}),
        "threshold_tokens": inline_serializer(
            "HistoryThresholdTokens", {k: serializers.IntegerField() for k in _LEVELS}
        ),
        "base": serializers.IntegerField(help_text="system prompt and tool definitions, calibrated"),
        "now": serializers.IntegerField(help_text="where the line ends: after the last message and what followed it"),
        "context_sent": serializers.IntegerField(
            help_text="input tokens the model calls carried: per assistant message, the context before it"
        ),
        "points": inline_serializer(
            "HistoryPoint",
            {
                "seq": serializers.IntegerField(),
                "role": serializers.CharField(),
                "at": serializers.DateTimeField(),
                "used": serializers.IntegerField(help_text="tokens a request would carry right after this message"),
            },
            many=True,
        ),
        "events": inline_serializer(
            "HistoryEvent",
            {
                "kind": serializers.ChoiceField(choices=["compaction", "handoff"]),
                "after_seq": serializers.IntegerField(),
                "at": serializers.DateTimeField(),
                "level": serializers.CharField(),
                "before": serializers.IntegerField(),
                "after": serializers.IntegerField(),
                "compaction": serializers.IntegerField(allow_null=True),
                "handoff": serializers.IntegerField(allow_null=True),
                "trigger": serializers.CharField(),
            },
            many=True,
        ),
    },
)


class SessionHistoryApi(APIView):
    @extend_schema(responses=HISTORY_SCHEMA)
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        return Response(history_payload(session_history(session)))
