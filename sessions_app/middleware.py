"""Refuse oversize API bodies before anything reads them."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class ApiBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            limit = settings.CTX_MAX_IMPORT_BYTES if request.path.endswith("/import/") else settings.CTX_MAX_BODY_BYTES
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > limit:
                return JsonResponse(
                    {"detail": f"The body is {length:,} bytes; the limit is {limit:,}.", "code": "body_too_large"},
                    status=413,
                )
        return self.get_response(request)
