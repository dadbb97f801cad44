"""The proxy's base URLs (``/proxy/anthropic/``, ``/proxy/openai/``) and whatever else is asked under
them. Clients probe their base URL before the first request (Claude Code sends ``HEAD`` to it at
every start): the base answers 200 with what the proxy forwards and where its docs are; a path the
proxy does not forward answers the dialect's own 404 (or 405), so an SDK raises its usual error.
Nothing here reads a key or touches a session."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from sessions_app.api.proxy.dialects import ANTHROPIC, OPENAI, Dialect

_DIALECTS = {"anthropic": ANTHROPIC, "openai": OPENAI}
_FORWARDED = {
    "anthropic": ["POST /v1/messages", "POST /v1/messages/count_tokens"],
    "openai": ["POST /v1/chat/completions", "POST /v1/responses", "POST /v1/responses/compact"],
}
DOCS = "docs/PROXY.md"


@csrf_exempt
def base(request: HttpRequest, dialect: str) -> HttpResponse:
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        response = _DIALECTS[dialect].refuse(
            405, "invalid_request_error", f"ctxweb: {request.method} is not forwarded here."
        )
        response["Allow"] = "GET, HEAD, OPTIONS"
        return response
    prefix = request.build_absolute_uri(f"/proxy/{dialect}")
    return JsonResponse(
        {"proxy": dialect, "base_url": prefix, "forwards": _FORWARDED[dialect], "docs": DOCS},
        headers={"Allow": "GET, HEAD, OPTIONS"},
    )


@csrf_exempt
def not_forwarded(request: HttpRequest, dialect: str, rest: str) -> HttpResponse:
    refuse: Dialect = _DIALECTS[dialect]
    forwards = ", ".join(_FORWARDED[dialect])
    return refuse.refuse(
        404, "not_found_error", f"ctxweb: /{rest} is not forwarded by the {dialect} proxy (it forwards {forwards})."
    )
