"""Refuse oversize (or unreadable, chunked) API bodies before anything reads them; answer 503, not
500, while the database is down."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class ApiBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/proxy/"):
            return self._proxy_limit(request) or self.get_response(request)
        if request.path.startswith("/api/"):
            if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower() and not request.META.get(
                "CONTENT_LENGTH"
            ):
                # Django reads a body by its Content-Length: without one it would see an empty body.
                return JsonResponse(
                    {
                        "detail": "Send the body with a Content-Length header; chunked request bodies are not read.",
                        "code": "length_required",
                    },
                    status=411,
                )
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

    @staticmethod
    def _proxy_limit(request: HttpRequest) -> HttpResponse | None:
        """The proxy's limit, refused in the words of the API the caller speaks."""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length <= settings.CTX_PROXY_MAX_BODY_BYTES:
            return None
        from sessions_app.api.proxy.dialects import anthropic_error, openai_error

        message = f"ctxweb: the request is {length:,} bytes; the limit is {settings.CTX_PROXY_MAX_BODY_BYTES:,}."
        refuse = openai_error if request.path.startswith("/proxy/openai/") else anthropic_error
        return refuse(413, "request_too_large", message)


DATABASE_RETRY_AFTER_SECONDS = 5
# PostgreSQL error classes that mean "the server is not there right now", not "the query is wrong":
# connection exceptions (08…), shutting down or starting up (57P01–57P03), out of connections (53300).
OUTAGE_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300")


def is_outage(exc: Exception) -> bool:
    """A database error a retry in a moment can fix; a bug (a missing table, a timeout) is not one."""
    from django.db import InterfaceError, OperationalError

    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate:
        return sqlstate.startswith(OUTAGE_SQLSTATES)
    text = str(exc).lower()
    # psycopg without a server answer (refused, closed, lost); SQLite busy.
    return (cause is not None and "psycopg" in type(cause).__module__) or "database is locked" in text


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
            if not is_outage(exc):
                raise
            return self._unavailable(request, exc)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_outage(exception):
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
