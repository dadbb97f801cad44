"""Which of a proxied request's headers carry what: the caller's ctxweb key (its own header, or the
API key itself when that is a ctxweb key), the caller's own key for the upstream API, and what is
passed on upstream (not ctxweb's own headers, nor a ctxweb key, nor the hop-by-hop ones); and which
of the upstream's answer headers reach the caller (``relayed``)."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpRequest

from sessions_app.services import keys

# Not passed on upstream (RFC 9110 §7.6.1), nor what the client sets itself.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
               "transfer-encoding", "upgrade", "host", "content-length"}  # fmt: skip
_NOT_FORWARDED = HOP_BY_HOP | {"cookie", "accept-encoding"}
KEY_HEADER, PROJECT_HEADER, SESSION_HEADER = "ctxweb-api-key", "ctxweb-project", "ctxweb-session"
# The headers agents send their own session id in, with their every request: OpenCode's ``ses_…`` and
# Codex's thread id. Passed on, and read as an agent's session id (services.proxy.identity.conversation_key).
AGENT_SESSION_HEADERS = ("x-session-id", "session-id")


def agent_session_header(request: HttpRequest) -> str | None:
    return next((given for h in AGENT_SESSION_HEADERS if (given := request.headers.get(h, "").strip())), None)


def ctxweb_key(request: HttpRequest) -> str:
    """The caller's ctxweb key: the ``ctxweb-api-key`` header, else the API key the SDK sends when it
    is a ctxweb key (an agent that can set no header of its own: ``ANTHROPIC_API_KEY=ctx_…``)."""
    given = request.headers.get(KEY_HEADER, "").strip()
    return given or next((c for c in _credentials(request) if c.startswith(keys.API_KEY_PREFIX)), "")


def _credentials(request: HttpRequest) -> list[str]:
    return [c for c in (_credential(request.headers.get(h, "")) for h in ("x-api-key", "authorization")) if c]


def _credential(value: str) -> str:
    """A credential header's secret: its last word (``Authorization: Bearer …`` in any case or spacing)."""
    words = value.split()
    return words[-1] if words else ""


def carries_a_key(request: HttpRequest) -> bool:
    """Whether the request brings an Anthropic credential of its own (not a ctxweb key)."""
    return any(not c.startswith(keys.API_KEY_PREFIX) for c in _credentials(request))


def forwarded(request: HttpRequest) -> dict[str, str]:
    headers = {
        name: value
        for name, value in request.headers.items()
        if name.lower() not in _NOT_FORWARDED
        and not name.lower().startswith("ctxweb-")
        # A ctxweb key given as the API key stays here.
        and not (name.lower() in ("x-api-key", "authorization") and _credential(value).startswith(keys.API_KEY_PREFIX))
    }
    headers["accept-encoding"] = "identity"  # the stream is read on its way through
    return headers


# The answer goes out on ctxweb's origin: only what an API client reads is relayed (request ids, rate
# limits, when to retry), never what a browser would take as ctxweb's own (cookies, CSP, frame options).
_RELAYED = {"request-id", "x-request-id", "retry-after", "retry-after-ms", "x-should-retry",
            "openai-processing-ms", "openai-version"}  # fmt: skip
_RELAYED_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")
_RELAYED_TYPES = ("application/json", "text/event-stream")
PLAIN = "text/plain; charset=utf-8"  # a body of any other type goes out as text, never as a page


def relayed(headers: Iterable[tuple[str, str]], *, streamed: bool) -> list[tuple[str, str]]:
    """The upstream's answer headers the caller gets, its content type among them (JSON and event
    streams as they came, anything else as plain text). A streamed body goes out as it came, so its
    ``content-encoding`` with it; a whole one goes out as read, decoded."""
    kept, content_type = [], PLAIN
    for name, value in headers:
        lower = name.lower()
        if lower == "content-type":
            if value.split(";")[0].strip().lower() in _RELAYED_TYPES:
                content_type = value
        elif lower in _RELAYED or lower.startswith(_RELAYED_PREFIXES) or (streamed and lower == "content-encoding"):
            kept.append((name, value))
    return [("content-type", content_type), *kept]
