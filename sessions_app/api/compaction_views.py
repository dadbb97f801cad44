"""REST for the compaction lifecycle: compactions (+ dry run, revert), checkpoints, handoffs."""

from __future__ import annotations

import json

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import steps, tasks
from sessions_app.api import serializers as s
from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.pagination import PageNumberPagination
from sessions_app.api.views import _paginate, _valid
from sessions_app.errors import InvalidInput
from sessions_app.models import Role
from sessions_app.selectors import access
from sessions_app.services import compaction_runs, planning, reverting


class SessionCompactionsApi(APIView):
    pagination_class = PageNumberPagination  # GET answers pages (``_paginate``); this documents them

    @extend_schema(responses=s.CompactionOut(many=True))
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        return _paginate(self, request, session.compactions.all(), s.CompactionOut)

    @extend_schema(
        request=s.CompactionIn,
        responses={
            202: OpenApiResponse(s.CompactionOut, description="Queued (and, without a worker, already run)"),
            200: OpenApiResponse(s.CompactionPreviewOut, description="The dry run's preview; nothing written"),
        },
    )
    def post(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id, min_role=Role.MEMBER)
        data = _valid(s.CompactionIn, request.data)
        if data["dry_run"]:
            return Response(planning.preview(session, data["level"], instructions=data["instructions"]))
        record = compaction_runs.compaction_request(
            session=session, level=data["level"], user=request.user, instructions=data["instructions"]
        )
        tasks.compaction_send(record.pk)
        record.refresh_from_db()  # in embedded mode the task has already run
        return Response(s.CompactionOut(record).data, status=202)


class CompactionDetailApi(APIView):
    @extend_schema(responses=s.CompactionOut)
    def get(self, request: AuthenticatedRequest, compaction_id: str) -> Response:
        return Response(s.CompactionOut(access.compaction_get_for(request.user, compaction_id)).data)


class CompactionRevertApi(APIView):
    @extend_schema(request=None, responses=s.CompactionOut)
    def post(self, request: AuthenticatedRequest, compaction_id: str) -> Response:
        record = access.compaction_get_for(request.user, compaction_id, min_role=Role.MEMBER)
        reverted = reverting.compaction_revert(compaction=record)
        tasks.webhooks_send()
        return Response(s.CompactionOut(reverted).data)


class SessionCheckpointsApi(APIView):
    pagination_class = PageNumberPagination

    @extend_schema(responses=s.CheckpointOut(many=True))
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        return _paginate(self, request, session.checkpoints.order_by("-version"), s.CheckpointOut)


class CheckpointDetailApi(APIView):
    @extend_schema(responses=s.CheckpointOut)
    def get(self, request: AuthenticatedRequest, checkpoint_id: str) -> Response:
        return Response(s.CheckpointOut(access.checkpoint_get_for(request.user, checkpoint_id)).data)


class SessionHandoffApi(APIView):
    pagination_class = PageNumberPagination

    @extend_schema(responses=s.HandoffOut(many=True))
    def get(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id)
        return _paginate(self, request, session.handoffs.all(), s.HandoffOut)

    @extend_schema(request=s.HandoffIn, responses={201: s.HandoffOut})
    def post(self, request: AuthenticatedRequest, session_id: str) -> Response:
        session = access.session_get_for(request.user, session_id, min_role=Role.MEMBER)
        data = _valid(s.HandoffIn, request.data or {})
        document = steps.handoff_create(session=session, user=request.user, continue_=data["continue"])
        return Response(s.HandoffOut(document).data, status=201)


class HandoffDetailApi(APIView):
    @extend_schema(responses=s.HandoffOut)
    def get(self, request: AuthenticatedRequest, handoff_id: str) -> Response:
        return Response(s.HandoffOut(access.handoff_get_for(request.user, handoff_id)).data)


DOWNLOAD_TYPES = {"txt": "text/plain; charset=utf-8", "md": "text/markdown; charset=utf-8", "json": "application/json"}


class HandoffDownloadApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(DOWNLOAD_TYPES))],
        responses={
            (200, "text/plain"): OpenApiResponse(str, description="An attachment: txt (default), md or json"),
            (200, "text/markdown"): str,
            (200, "application/json"): OpenApiTypes.OBJECT,
        },
    )
    def get(self, request: AuthenticatedRequest, handoff_id: str) -> HttpResponse:
        document = access.handoff_get_for(request.user, handoff_id)
        fmt = request.query_params.get("format", "txt")
        if fmt not in DOWNLOAD_TYPES:
            raise InvalidInput("format is one of txt, md, json.", code="invalid_format")
        body = {"txt": document.text, "md": document.markdown, "json": json.dumps(document.data, indent=2)}[fmt]
        response = HttpResponse(body, content_type=DOWNLOAD_TYPES[fmt])
        response["Content-Disposition"] = f'attachment; filename="handoff-{document.session_id}-{document.pk}.{fmt}"'
        return response
