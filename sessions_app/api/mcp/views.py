"""``/mcp/``: ctxweb's MCP server over streamable HTTP (stateless, JSON answers), for an agent with a
ctxweb API key (``Authorization: Bearer …``); ``ctxweb-session`` names its session (else the one its
key last used through the proxy). GET and DELETE (an SSE stream, a session to end) are not served."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed

from sessions_app.api.auth import ApiKeyAuthentication
from sessions_app.api.mcp.bridge import answer, scope_of
from sessions_app.api.mcp.tools import SERVER


def _refused(status: int, message: str, code: int = -32001) -> JsonResponse:
    return JsonResponse({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, status=status)


@csrf_exempt
def mcp(request: HttpRequest) -> HttpResponse:
    try:  # the API's own check of ``Authorization: Bearer <key>`` (it reads only the request's headers)
        user_and_key = ApiKeyAuthentication().authenticate(request)  # type: ignore[arg-type]
    except AuthenticationFailed:
        user_and_key = None
    if user_and_key is None:
        refused = _refused(401, "A ctxweb API key is needed: Authorization: Bearer <key>.")
        refused["WWW-Authenticate"] = 'Bearer realm="mcp"'
        return refused
    if request.method != "POST":
        not_served = HttpResponse(status=405)
        not_served["Allow"] = "POST"
        return not_served
    user, key = user_and_key
    caller = {"user": user, "key": key, "session": request.headers.get("ctxweb-session") or None}
    status, headers, body = async_to_sync(answer)(SERVER, scope_of(request, caller), request.body)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() != b"content-length":
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response
