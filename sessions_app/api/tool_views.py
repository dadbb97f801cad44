"""Tokens by tool in a session: each tool's calls, what its calls and results take in the context,
and what compaction took back of them (``selectors.tools``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.selectors import access
from sessions_app.selectors.tools import session_tools

_SUMS: dict[str, serializers.Field] = {
    "calls": serializers.IntegerField(help_text="tool_use blocks"),
    "results": serializers.IntegerField(help_text="tool_result blocks"),
    "call_tokens": serializers.IntegerField(help_text="context tokens of its calls, as received"),
    "result_tokens": serializers.IntegerField(help_text="context tokens of its results, as received"),
    "tokens": serializers.IntegerField(help_text="call_tokens + result_tokens"),
    "taken_back": serializers.IntegerField(
        help_text="of tokens, what compaction removed from the context (summarized or pruned)"
    ),
    "in_context": serializers.IntegerField(help_text="tokens − taken_back: what the context holds now"),
}


TOOLS_SCHEMA = inline_serializer(
    "SessionTools",
    {
        "session": serializers.IntegerField(),
        "model": serializers.CharField(),
        "token_source": serializers.CharField(help_text="always estimate: offline counts, calibrated as STATUS's"),
        "tools": inline_serializer(
            "ToolTokens",
            many=True,
            fields={
                "tool": serializers.CharField(help_text="the tool's name; “(unknown)” for results of calls not stored"),
                **_SUMS,
            },
        ),
        "total": inline_serializer("ToolTokensTotal", fields=_SUMS),
    },
)


class SessionToolsApi(APIView):
    @extend_schema(responses=TOOLS_SCHEMA)
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        found = session_tools(session)
        return Response(
            {
                "session": found.session_id,
                "model": found.model,
                "token_source": "estimate",
                "tools": [t.as_dict() for t in found.tools],
                "total": {k: v for k, v in found.total.as_dict().items() if k != "tool"},
            }
        )
