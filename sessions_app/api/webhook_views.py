"""A project's webhooks (project admins): list, create, change, delete, send a test, read the log."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import tasks
from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.pagination import PageNumberPagination
from sessions_app.api.parsers import JSONParser
from sessions_app.errors import InvalidInput
from sessions_app.models import Role, Webhook, WebhookAttempt, WebhookDelivery, WebhookEvent, WebhookFormat
from sessions_app.selectors import access
from sessions_app.services import webhooks


class WebhookOut(serializers.ModelSerializer):
    class Meta:
        model = Webhook
        fields = ["id", "project", "name", "url", "secret", "events", "format", "enabled", "created_at"]


class WebhookIn(serializers.Serializer):
    url = serializers.CharField(max_length=2000)
    events = serializers.ListField(child=serializers.ChoiceField(choices=WebhookEvent.choices), allow_empty=False)
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    format = serializers.ChoiceField(choices=WebhookFormat.choices, required=False, default=WebhookFormat.JSON)
    enabled = serializers.BooleanField(required=False, default=True)


class WebhookPatchIn(serializers.Serializer):
    url = serializers.CharField(max_length=2000, required=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=WebhookEvent.choices), allow_empty=False, required=False
    )
    name = serializers.CharField(max_length=100, required=False, allow_blank=True)
    format = serializers.ChoiceField(choices=WebhookFormat.choices, required=False)
    enabled = serializers.BooleanField(required=False)
    rotate_secret = serializers.BooleanField(required=False, default=False, help_text="a new secret")


class AttemptOut(serializers.ModelSerializer):
    class Meta:
        model = WebhookAttempt
        fields = ["at", "status_code", "error", "duration_ms"]


class DeliveryOut(serializers.ModelSerializer):
    log = AttemptOut(many=True, read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event",
            "status",
            "attempts",
            "last_status_code",
            "last_error",
            "next_attempt_at",
            "created_at",
            "delivered_at",
            "payload",
            "log",
        ]


def _valid(serializer_cls: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """The validated body; a 400 ``invalid_<field>`` naming the first field at fault."""
    if not isinstance(data, dict):
        raise InvalidInput("The body is a JSON object.", code="invalid_body")
    serializer = serializer_cls(data=data)
    if not serializer.is_valid():
        field = str(next(iter(serializer.errors)))
        raise InvalidInput(f"{field}: {_first(serializer.errors[field])}", code=f"invalid_{field}", field=field)
    return dict(serializer.validated_data)


def _first(problems: Any) -> str:
    while isinstance(problems, list | dict) and problems:
        problems = next(iter(problems.values())) if isinstance(problems, dict) else problems[0]
    return str(problems)


class ProjectWebhooksApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(responses=WebhookOut(many=True), description="Project admins: the project's webhooks.")
    def get(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id, min_role=Role.ADMIN)
        return Response(WebhookOut(Webhook.objects.filter(project=project), many=True).data)

    @extend_schema(request=WebhookIn, responses={201: WebhookOut}, description="Project admins: add a webhook.")
    def post(self, request: AuthenticatedRequest, project_id: int) -> Response:
        project = access.project_get_for(request.user, project_id, min_role=Role.ADMIN)
        data = _valid(WebhookIn, request.data)
        hook = webhooks.webhook_create(project=project, user=request.user, **data)
        return Response(WebhookOut(hook).data, status=status.HTTP_201_CREATED)


class WebhookDetailApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(responses=WebhookOut)
    def get(self, request: AuthenticatedRequest, webhook_id: str) -> Response:
        return Response(WebhookOut(access.webhook_get_for(request.user, webhook_id)).data)

    @extend_schema(request=WebhookPatchIn, responses=WebhookOut)
    def patch(self, request: AuthenticatedRequest, webhook_id: str) -> Response:
        hook = access.webhook_get_for(request.user, webhook_id)
        changes = _valid(WebhookPatchIn, request.data)
        changes = {k: v for k, v in changes.items() if k in request.data or k == "rotate_secret"}
        return Response(WebhookOut(webhooks.webhook_update(webhook=hook, **changes)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: AuthenticatedRequest, webhook_id: str) -> Response:
        webhooks.webhook_delete(webhook=access.webhook_get_for(request.user, webhook_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookTestApi(APIView):
    @extend_schema(request=None, responses={202: DeliveryOut}, description="Send a `test` event to this webhook.")
    def post(self, request: AuthenticatedRequest, webhook_id: str) -> Response:
        hook = access.webhook_get_for(request.user, webhook_id)
        delivery = webhooks.webhook_test(webhook=hook, user=request.user)
        tasks.webhooks_send()
        return Response(DeliveryOut(delivery).data, status=status.HTTP_202_ACCEPTED)


class WebhookDeliveriesApi(APIView):
    pagination_class = PageNumberPagination

    @extend_schema(responses=DeliveryOut(many=True), description="The delivery log, newest first, with every attempt.")
    def get(self, request: Request, webhook_id: str) -> Response:
        hook = access.webhook_get_for(request.user, webhook_id)  # type: ignore[arg-type]
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(hook.deliveries.prefetch_related("log"), request, view=self)
        return paginator.get_paginated_response(DeliveryOut(page, many=True).data)
