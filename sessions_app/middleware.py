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


DATABASE_RETRY_AFTER_SECONDS = 5


class DatabaseUnavailableMiddleware:
    """While the database is down or restarting, answer 503 with ``Retry-After`` — never a 500. The
    transaction of the failed request was rolled back, so a batch is stored whole or not at all and
    a retry with the same client ids is safe."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from django.db import InterfaceError, OperationalError

        try:
            return self.get_response(request)
        except (OperationalError, InterfaceError) as exc:
            return self._unavailable(request, exc)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from django.db import InterfaceError, OperationalError

        if isinstance(exception, OperationalError | InterfaceError):
            return self._unavailable(request, exception)
        return None

    def _unavailable(self, request: HttpRequest, exc: Exception) -> HttpResponse:
        import logging

        # The broken connection is dropped at the end of the request (Django's close_old_connections,
        # with CONN_HEALTH_CHECKS); the next request connects afresh.
        logging.getLogger(__name__).warning("database unavailable: %s", type(exc).__name__)
        detail = "The database is unavailable for a moment; retry shortly."
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"detail": detail, "code": "database_unavailable"}, status=503)
        else:
            response = HttpResponse(f"<!doctype html><title>Unavailable</title><p>{detail}</p>", status=503)
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        return response
