"""The MCP SDK's streamable-HTTP transport, served from a WSGI view: each POST is one stateless
exchange answered with JSON (no SSE stream, no session kept between requests), run through the SDK's
ASGI session manager in an event loop of its own (``asgiref``'s ``async_to_sync``). The tools' ORM
work goes back to the request's thread (``sync_to_async``, thread-sensitive), where Django's
connection handling is as for any view."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
from django.http import HttpRequest
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


def scope_of(request: HttpRequest, caller: dict[str, Any]) -> dict[str, Any]:
    """The ASGI scope of a Django request; ``caller`` (who asks, with what key) reaches the tools."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()],
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host().split(":")[0], int(request.get_port() or 80)),
        "state": {},
        "ctxweb.caller": caller,
    }


async def answer(server: Server, scope: dict[str, Any], body: bytes) -> Answer:
    """The status, headers and body the SDK answers one request with. A session manager runs once,
    so each request has its own (it is cheap: stateless, it keeps nothing)."""
    manager = StreamableHTTPSessionManager(server, json_response=True, stateless=True)
    received = False
    done = anyio.Event()
    status, headers, chunks = 500, [], []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        try:
            await manager.handle_request(scope, receive, send)
        finally:
            done.set()
    return status, headers, b"".join(chunks)
