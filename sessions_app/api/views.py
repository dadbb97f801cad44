"""REST API: parse, check access, call one service or selector, shape the answer."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from compaction import model_catalog, model_package
from compaction.messages import normalize_batch
from sessions_app import metrics, steps
from sessions_app.api import serializers as s
from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.message_rows import message_rows
from sessions_app.api.pagination import PageNumberPagination
from sessions_app.api.params import int_param
from sessions_app.api.schema import error_response
from sessions_app.errors import InvalidInput, TooLarge
from sessions_app.models import Role, SessionStatus
from sessions_app.selectors import access, model_context, prices, sub_agents, usage
from sessions_app.services import agent_sessions, counting, importing, projects

STATUS_SCHEMA = s.status_schema()


def _paginate(view: APIView, request: Request, queryset: Any, serializer_cls: type, **context: Any) -> Response:
    paginator = PageNumberPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    data = serializer_cls(page, many=True, context={"request": request, **context}).data
    return paginator.get_paginated_response(data)


class ProjectListCreateApi(APIView):
    pagination_class = PageNumberPagination  # GET answers pages (``_paginate``); this documents them

    @extend_schema(responses=s.ProjectOut(many=True))
    def get(self, request: AuthenticatedRequest) -> Response:
        mine = access.project_list_for(request.user)
        roles = access.roles_of(request.user)
        return _paginate(self, request, mine, s.ProjectOut, roles=roles)

    @extend_schema(request=s.ProjectIn, responses={201: s.ProjectOut})
    def post(self, request: AuthenticatedRequest) -> Response:
        data = _valid(s.ProjectIn, request.data)
        project = projects.project_create(user=request.user, **data)
        return Response(s.ProjectOut(project, context={"roles": {project.pk: Role.ADMIN}}).data, status=201)


class ProjectDetailApi(APIView):
    @extend_schema(responses=s.ProjectOut)
    def get(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id)
        role = access.role_in(request.user, project.pk)
        return Response(s.ProjectOut(project, context={"roles": {project.pk: role}}).data)


class SessionListCreateApi(APIView):
    pagination_class = PageNumberPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("project", int, description="Only this project's sessions"),
            OpenApiParameter("status", str, enum=["active", "handed_off", "archived"]),
            OpenApiParameter("q", str, description="Search name, external id and model"),
            OpenApiParameter("model", str, description="Only sessions whose model contains this"),
            OpenApiParameter("owner", int, description="Only this user's sessions (a user id)"),
            OpenApiParameter("key", int, description="Only sessions with a provider request made with this API key id"),
            OpenApiParameter(
                "spawned_by", int, description="Only the sub-agents' sessions this session's agent started"
            ),
        ],
        responses=s.SessionListOut(many=True),
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        params = request.query_params
        project = params.get("project") or None
        if project is not None and access.as_pk(project) is None:
            raise InvalidInput("project is a project id (a whole number).", code="invalid_project")
        status_filter = params.get("status") or None
        if status_filter is not None and status_filter not in SessionStatus.values:
            raise InvalidInput(f"status is one of {', '.join(SessionStatus.values)}.", code="invalid_status")
        qs = access.session_list_for(
            request.user,
            project=project,
            status=status_filter,
            q=params.get("q"),
            model=params.get("model") or None,
            owner=int_param(request, "owner", default=None, low=1),
            key=int_param(request, "key", default=None, low=1),
        )
        spawner = int_param(request, "spawned_by", default=None, low=1)
        if spawner is not None:
            qs = qs.filter(spawned_by_id=spawner)
        return _paginate(self, request, sub_agents.with_sub_agent_links(qs), s.SessionListOut)

    @extend_schema(
        request=s.SessionIn,
        responses={201: s.SessionOut, 404: error_response("404"), 409: error_response("409")},
        examples=[
            OpenApiExample(
                "A session",
                value={"project": 1, "name": "fix the flaky test", "model": "claude-sonnet-4-5", "external_id": "abc"},
                request_only=True,
            )
        ],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = _valid(s.SessionIn, request.data)
        project = access.project_get_for(request.user, data.pop("project"), min_role=Role.MEMBER)
        parent_id = data.pop("parent")
        parent = None
        if parent_id is not None:
            parent = access.session_get_for(request.user, parent_id)
            if parent.project_id != project.pk:
                raise InvalidInput("The parent session belongs to another project.", code="invalid_parent")
        session = agent_sessions.session_create(user=request.user, project=project, parent=parent, **data)
        return Response(s.SessionOut(session).data, status=201)


class SessionImportApi(APIView):
    @extend_schema(
        request={"multipart/form-data": s.SessionImportIn},
        responses={
            201: inline_serializer(
                "ImportResult",
                {
                    "session": serializers.IntegerField(),
                    "messages": serializers.IntegerField(),
                    "status": STATUS_SCHEMA,
                    "project": serializers.IntegerField(),
                    "skipped": serializers.DictField(child=serializers.IntegerField()),
                    "sidechains": serializers.ListField(child=serializers.IntegerField()),
                },
            ),
            404: error_response("404"),
            409: error_response("409"),
        },
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = _valid(s.SessionImportIn, request.data)
        project = access.project_find_for(request.user, data["project"], min_role=Role.MEMBER)
        upload = data["file"]
        if upload.size > settings.CTX_MAX_IMPORT_BYTES:  # a chunked upload had no Content-Length to refuse early
            raise TooLarge(f"The file is {upload.size:,} bytes; the limit is {settings.CTX_MAX_IMPORT_BYTES:,}.")
        transcript = importing.transcript_parse(upload.read(), data["format"])
        result = steps.transcript_import(
            user=request.user,
            project=project,
            transcript=transcript,
            name=data["name"] or upload.name.rsplit("/", 1)[-1].rsplit(".", 1)[0],
            model=data["model"],
            context_window=data["context_window"],
            auto_compact=data["auto_compact"],
            episode=data["episode"],
        )
        return Response(importing.import_summary(result), status=201)


class SessionDetailApi(APIView):
    @extend_schema(responses=s.SessionOut)
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        return Response(s.SessionOut(access.session_get_for(request.user, session_id)).data)

    @extend_schema(request=s.SessionPatchIn, responses=s.SessionOut)
    def patch(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id, min_role=Role.MEMBER)
        data = _valid(s.SessionPatchIn, request.data, partial=True)
        if "context_window" in data:
            data["context_window_override"] = data.pop("context_window")
        session = agent_sessions.session_update(session=session, **data)
        return Response(s.SessionOut(session).data)

    @extend_schema(responses={204: None})
    def delete(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id, min_role=Role.ADMIN)
        agent_sessions.session_delete(session=session)
        return Response(status=204)


class MessageListCreateApi(APIView):
    MAX_LIMIT = 1000

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, enum=["active", "all", "compacted", "summarized", "archived"]),
            OpenApiParameter("after_seq", int, description="Only messages after this seq (the cursor)"),
            OpenApiParameter("limit", int, description="At most this many (default 100, max 1000)"),
        ],
        responses=inline_serializer(
            "MessagePage",
            {
                "results": s.MessageOut(many=True),
                "next": serializers.URLField(allow_null=True),
                "count": serializers.IntegerField(allow_null=True, help_text="Null when paging with after_seq"),
            },
        ),
    )
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        state = request.query_params.get("state", "active")
        if state not in ("active", "all", "compacted", "summarized", "archived"):
            raise InvalidInput("state is one of active, all, compacted, summarized, archived.", code="invalid_state")
        after = int_param(request, "after_seq", default=None, low=0)
        limit = int_param(request, "limit", default=100, low=1, high=self.MAX_LIMIT)
        qs = model_context.message_list(session, state=state, after_seq=after)
        rows = list(qs[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        calibration = usage.model_info(session.model).calibration
        next_url = None
        if more:
            base = reverse("api:session-messages", args=[session.pk], request=request)
            next_url = f"{base}?state={state}&after_seq={rows[-1].seq}&limit={limit}"
        return Response(
            {
                "results": message_rows(rows, calibration=calibration),
                "next": next_url,
                "count": qs.count() if after is None else None,
            }
        )

    @extend_schema(
        request=s.MessageIn(many=True),
        responses={
            201: inline_serializer(
                "AppendResult",
                {
                    "session": serializers.IntegerField(help_text="The session the messages were stored in"),
                    "messages": s.AppendedMessageOut(many=True),
                    "status": STATUS_SCHEMA,
                },
            ),
            409: error_response("409"),
        },
        description="Body: one message or a list of up to CTX_MAX_BATCH (default 1,000). All or nothing. A session "
        "handed off into a fresh one answers 409 `session_closed` with `continued_in`, the session to append to.",
        examples=[
            # drf-spectacular shows it inside the list the body is documented as
            OpenApiExample(
                "A message",
                value={
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Reading it."},
                        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "setup.cfg"}},
                    ],
                    "client_id": "m-2",
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id, min_role=Role.MEMBER)
        messages = normalize_batch(request.data, max_messages=settings.CTX_MAX_BATCH)
        result = steps.messages_append(session=session, messages=messages)
        calibration = usage.model_info(result.session.model).calibration
        answered = message_rows(result.messages, calibration=calibration, mismatched=result.mismatched)
        return Response(
            {
                "session": result.session.pk,
                "messages": answered,
                "status": usage.session_status(result.session),
            },
            status=status.HTTP_201_CREATED,
        )


class SessionStatusApi(APIView):
    @extend_schema(responses=STATUS_SCHEMA)
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        started = time.monotonic()
        status = usage.session_status(access.session_get_for(request.user, session_id))
        metrics.status_served(seconds=time.monotonic() - started)
        return Response(status)


class SessionContextApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["anthropic", "openai"])],
        responses=inline_serializer(
            "Context",
            {
                "model": serializers.CharField(),
                "system": serializers.CharField(required=False),
                "tools": serializers.ListField(child=serializers.DictField(), required=False),
                "messages": serializers.ListField(child=serializers.DictField()),
                "status": STATUS_SCHEMA,
            },
        ),
    )
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        fmt = request.query_params.get("format", "anthropic")
        if fmt not in ("anthropic", "openai"):
            raise InvalidInput("format is anthropic or openai.", code="invalid_format")
        session = access.session_get_for(request.user, session_id)
        return Response(model_context.session_context(session, fmt=fmt))


class ModelListApi(APIView):
    @extend_schema(responses=s.ModelListOut)
    def get(self, request: AuthenticatedRequest) -> Response:
        return Response(
            {
                "results": prices.model_list(),
                "fallback_context_window": model_catalog.FALLBACK_CONTEXT_WINDOW,
                "data_package": f"genai-prices {model_package.package_version()}",
            }
        )


class CountTokensApi(APIView):
    @extend_schema(
        request=s.CountTokensIn,
        responses=s.CountTokensOut,
        examples=[
            OpenApiExample(
                "Anthropic's count_tokens body",
                value={
                    "model": "claude-sonnet-4-5",
                    "system": "You are terse.",
                    "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
                    "messages": [{"role": "user", "content": "Hello"}],
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        result = counting.count_request_tokens(request.data)
        return Response({"input_tokens": result.input_tokens, "source": result.source, "cached": result.cached})


def _valid(serializer_cls: type[serializers.Serializer], data: Any, *, partial: bool = False) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput("The body is a JSON object.", code="invalid_body")
    serializer = serializer_cls(data=data, partial=partial)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
