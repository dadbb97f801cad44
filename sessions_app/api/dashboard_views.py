"""A project at a glance: the numbers of the dashboard above its sessions."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.params import int_param
from sessions_app.selectors import access
from sessions_app.selectors.dashboard import COMPACTION_LEVELS, LEVELS, OUTCOMES, dashboard_payload, project_dashboard

_COUNTS = inline_serializer("OutcomeCounts", {o: serializers.IntegerField() for o in OUTCOMES})

DASHBOARD_SCHEMA = inline_serializer(
    "ProjectDashboard",
    {
        "since": serializers.DateField(),
        "levels": inline_serializer("LevelCounts", {level: serializers.IntegerField() for level in LEVELS}),
        "closest": inline_serializer(
            "ClosestSession",
            {
                "session": serializers.IntegerField(),
                "name": serializers.CharField(),
                "used": serializers.IntegerField(),
                "context_window": serializers.IntegerField(),
                "usage_percent": serializers.FloatField(),
                "level": serializers.CharField(),
            },
            many=True,
        ),
        "days": inline_serializer(
            "DashboardDay",
            {
                "day": serializers.DateField(),
                "ingested": serializers.IntegerField(),
                "saved": serializers.IntegerField(),
            },
            many=True,
        ),
        "compactions": inline_serializer("CompactionsByLevel", {lv: _COUNTS for lv in COMPACTION_LEVELS}),
        "trouble": inline_serializer(
            "TroubledSession",
            {
                "session": serializers.IntegerField(),
                "name": serializers.CharField(),
                "paused": serializers.BooleanField(),
                "level": serializers.CharField(),
                "error": serializers.CharField(),
                "at": serializers.DateTimeField(allow_null=True),
            },
            many=True,
        ),
        "cost": inline_serializer(
            "DashboardSpend",
            {
                "dollars": serializers.DecimalField(
                    max_digits=20, decimal_places=2, help_text="the priced requests' cost over the dashboard's days"
                ),
                "requests": serializers.IntegerField(help_text="provider requests over those days"),
                "unpriced_requests": serializers.IntegerField(help_text="of them, of a model without a price"),
                "saved_usd": serializers.DecimalField(
                    max_digits=20, decimal_places=2, help_text="what compaction kept out of them"
                ),
                "unpriced_models": serializers.ListField(child=serializers.CharField()),
                "since": serializers.DateField(help_text="the first UTC day counted"),
            },
        ),
    },
)


class ProjectDashboardApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("days", int, description="how many days back, 1 to 90 (default 14)")],
        responses=DASHBOARD_SCHEMA,
    )
    def get(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id)
        days = int_param(request, "days", default=14, low=1, high=90)
        return Response(dashboard_payload(project_dashboard(project=project, days=days)))
