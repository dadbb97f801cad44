"""A project's compaction policy over REST: read by any member, edited by its admins, validated as in
Django admin and on the settings page (``services.projects.policy_update``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import tasks
from sessions_app.api import policy_serializers as ps
from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.errors import first_error
from sessions_app.api.parsers import JSONParser
from sessions_app.errors import InvalidInput
from sessions_app.models import Role
from sessions_app.selectors import access, usage
from sessions_app.services import projects


class ProjectPolicyApi(APIView):
    parser_classes = [JSONParser]  # typed values: a form's strings are never a policy's numbers

    @extend_schema(responses=ps.PolicyOut, description="The project's compaction policy (any member).")
    def get(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id)
        return Response(ps.PolicyOut(usage.project_policy(project)).data)

    @extend_schema(
        request=ps.PolicyPatchIn,
        responses=ps.PolicyOut,
        description="Project admins: change any of the policy's settings, or apply a preset (`preset`; the "
        "other fields given go on top of it). Checked as a whole before anything is written, with the "
        "validation of Django admin and the settings page; a 400 names every field at fault in `errors`. "
        "Afterwards the project's active sessions that the new numbers put over a threshold get a "
        "compaction queued. `preset` in the answer is the preset the numbers equal, else `custom`.",
        examples=[
            OpenApiExample("Lower the thresholds", value={"compact": 0.6, "target_after": 0.4}, request_only=True),
            OpenApiExample(
                "Compact at 90k tokens on a larger window (null clears it)",
                value={"compact_tokens": 90_000},
                request_only=True,
            ),
            OpenApiExample(
                "Apply a preset, change one setting", value={"preset": "kai", "summary_budget": 800}, request_only=True
            ),
        ],
    )
    def patch(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id, min_role=Role.ADMIN)
        changes = _policy_changes(request)
        preset_name = changes.pop("preset", None)
        policy = projects.policy_update(policy=usage.project_policy(project), changes=changes, preset_name=preset_name)
        tasks.after_policy_change(project)
        return Response(ps.PolicyOut(policy).data)


def _policy_changes(request: Request) -> dict[str, Any]:
    """The body's settings, each of its type; unknown fields and wrong types answer 400 with every
    field at fault."""
    if not isinstance(request.data, dict):
        raise InvalidInput("The body is a JSON object.", code="invalid_body")
    serializer = ps.PolicyPatchIn(data=request.data)
    if not serializer.is_valid():
        detail, code = first_error(serializer.errors)
        errors = {name: _texts(problems) for name, problems in serializer.errors.items()}
        raise InvalidInput(detail, code=code, field=next(iter(errors)), errors=errors)
    return dict(serializer.validated_data)


def _texts(detail: Any, where: str = "") -> list[str]:
    """DRF's nested errors of one field as messages (a list item's under its index)."""
    if isinstance(detail, dict):
        return [text for key, value in detail.items() for text in _texts(value, f"item {key}: ")]
    if isinstance(detail, list):
        return [text for value in detail for text in _texts(value, where)]
    return [where + str(detail)]
