"""Search everything the user's sessions ever held (``selectors.search``): ``GET /api/v1/search/``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.params import int_param
from sessions_app.selectors.search import KINDS, MAX_PAGE, MAX_QUERY, STATES, Hit, Scope, hit_path, search

PAGE = 20

_HIT_FIELDS: dict[str, serializers.Field] = {
    "kind": serializers.ChoiceField(
        choices=list(KINDS),
        help_text="message: a message as it is now; original: what a compaction replaced (kept for revert); "
        "checkpoint; handoff",
    ),
    "session": serializers.IntegerField(),
    "session_name": serializers.CharField(),
    "project": serializers.IntegerField(),
    "message": serializers.IntegerField(allow_null=True, help_text="the message's id; null for a document"),
    "seq": serializers.IntegerField(allow_null=True, help_text="the message's seq; a checkpoint's version"),
    "state": serializers.CharField(help_text="the message's state now; empty for a document"),
    "role": serializers.CharField(),
    "snippet": serializers.CharField(help_text="HTML: the text around the match, escaped, matches in <mark>"),
    "rank": serializers.FloatField(help_text="higher is better (PostgreSQL: ts_rank; SQLite: occurrences)"),
    "created_at": serializers.DateTimeField(),
    "ref": serializers.CharField(help_text="what an agent recalls it by (MCP recall): m<seq>, c<version>, h<id>"),
    "url": serializers.CharField(help_text="the page that shows it, the match highlighted"),
}
SEARCH_SCHEMA = inline_serializer(
    "SearchResults",
    {
        "next": serializers.CharField(allow_null=True),
        "previous": serializers.CharField(allow_null=True),
        "results": inline_serializer("SearchHit", _HIT_FIELDS, many=True),
    },
)


def hit_as_dict(hit: Hit, url: str) -> dict[str, Any]:
    return {
        "kind": hit.kind,
        "session": hit.session_id,
        "session_name": hit.session_name,
        "project": hit.project_id,
        "message": hit.message_id,
        "seq": hit.seq,
        "state": hit.state,
        "role": hit.role,
        "snippet": hit.snippet,
        "rank": hit.rank,
        "created_at": hit.created_at,
        "ref": hit.ref,
        "url": url,
    }


class SearchApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, required=True, description=f'words, "a phrase", or, -word; ≤ {MAX_QUERY}'),
            OpenApiParameter("project", int, description="one project of yours"),
            OpenApiParameter("session", str, description="one session: its id or external id"),
            OpenApiParameter("role", str, description="messages of this role only (no documents)"),
            OpenApiParameter("state", str, enum=list(STATES), description="messages in this state only"),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int, description=f"at most {MAX_PAGE}; {PAGE} by default"),
        ],
        responses=SEARCH_SCHEMA,
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        params = request.query_params
        page = int_param(request, "page", default=1, low=1, high=10_000)
        size = int_param(request, "page_size", default=PAGE, low=1, high=MAX_PAGE)
        query = params.get("q", "")
        scope = Scope(
            user=request.user,
            project=params.get("project"),
            session=params.get("session"),
            role=params.get("role") or None,
            state=params.get("state") or None,
        )
        found = search(scope, query, offset=(page - 1) * size, limit=size + 1)
        return Response(
            {
                "next": _page_link(request, page + 1) if len(found) > size else None,
                "previous": _page_link(request, page - 1) if page > 1 else None,
                "results": [hit_as_dict(hit, hit_path(hit, query)) for hit in found[:size]],
            }
        )


def _page_link(request: Request, page: int) -> str:
    query = request.query_params.copy()
    query["page"] = str(page)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
