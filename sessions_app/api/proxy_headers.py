"""Which of a proxied request's headers carry what: the caller's ctxweb key (its own header, or the
API key itself when that is a ctxweb key), the caller's own key for the upstream API, and what is
passed on upstream (not ctxweb's own headers, nor a ctxweb key, nor the hop-by-hop ones)."""

from __future__ import annotations

from django.http import HttpRequest

from sessions_app.services import keys

# Not passed on in either direction (RFC 9110 §7.6.1), nor ctxweb's own, nor what the server
# sets itself.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
               "transfer-encoding", "upgrade", "host", "content-length"}  # fmt: skip
_NOT_FORWARDED = HOP_BY_HOP | {"cookie", "accept-encoding"}
KEY_HEADER, PROJECT_HEADER, SESSION_HEADER = "ctxweb-api-key", "ctxweb-project", "ctxweb-session"


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
