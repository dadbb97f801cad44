"""Every API error is ``{"detail": str, "code": str}`` with a 4xx status."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from compaction.messages import MessageError
from sessions_app.errors import ServiceError
from sessions_app.services.redaction import public_text


def first_error(detail: Any, path: str = "") -> tuple[str, str]:
    """Flatten DRF's nested validation errors to the first one, with where it is."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            where = key if key != "non_field_errors" else ""
            return first_error(value, f"{path}.{where}" if path and where else (where or path))
    if isinstance(detail, list) and detail:
        return first_error(detail[0], path)
    code = getattr(detail, "code", "invalid")
    text = str(detail)
    return (f"{path}: {text}" if path else text), code


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The error's body, its detail without a secret the request held (a value quoted back)."""
    response = _error_response(exc, context)
    if response is not None and isinstance(response.data, dict) and isinstance(response.data.get("detail"), str):
        response.data["detail"] = public_text(response.data["detail"])
    return response


def _error_response(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ServiceError):
        body: dict[str, Any] = {"detail": exc.detail, "code": exc.code}
        if exc.field:
            body["field"] = exc.field
        body.update({k: v for k, v in exc.extra.items() if k not in body})
        return Response(body, status=exc.status)
    if isinstance(exc, MessageError):
        return Response({"detail": exc.detail, "code": exc.code}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": str(exc), "code": "body_too_large"}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, SuspiciousOperation):
        return Response({"detail": str(exc), "code": "bad_request"}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail, code = first_error(exc.detail)
        response.data = {"detail": detail, "code": code if code != "invalid" else "invalid"}
    elif isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else "error"
        response.data = {"detail": str(exc.detail), "code": code}
    return response


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: a URL under /api/ that matches no route (say a path parameter holding a ``/``)
    answers the API's JSON error too; other paths get Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)
