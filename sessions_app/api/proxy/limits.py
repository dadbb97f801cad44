"""What one proxied exchange may cost to record (``CTX_PROXY_RECORD_MAX_BYTES``): the proxy forwards
any body the upstream takes and passes on any answer it sends, but records a request only up to the
limit (a larger one is noted on its session, unparsed), holds a whole answer only up to it (a larger
one is relayed as it comes and recorded as a note), and keeps a stream's content up to it (the rest
is relayed, and the recorded reply says where it stops)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse

from sessions_app.api.proxy import body as proxy_body
from sessions_app.api.proxy.dialects import Dialect, error_type
from sessions_app.api.proxy.headers import SESSION_HEADER, agent_session_header
from sessions_app.errors import ServiceError
from sessions_app.models import Project
from sessions_app.services.proxy import identity as proxy_identity
from sessions_app.services.proxy import oversized as proxy_oversized

log = logging.getLogger("sessions_app.api.proxy.views")  # the proxy's one log

Reply = tuple[dict[str, Any] | None, bool]


def parsed(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past what Python reads
        return None  # the upstream answers it (400), as it would without ctxweb


def held(chunks: Iterator[bytes]) -> tuple[bytes, bool]:
    """An answer's body as far as the limit (a chunk more), and whether that is all of it."""
    limit = settings.CTX_PROXY_RECORD_MAX_BYTES
    pieces: list[bytes] = []
    size = 0
    for chunk in chunks:
        pieces.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(pieces), False
    return b"".join(pieces), True


def too_large_reply() -> Reply:
    """What is recorded of a whole answer too large to hold: a note in the reply's place."""
    limit = settings.CTX_PROXY_RECORD_MAX_BYTES
    note = f"[ctxweb: the model's answer was over CTX_PROXY_RECORD_MAX_BYTES ({limit:,} bytes) and is not recorded]"
    return {"role": "assistant", "content": [{"type": "text", "text": note}]}, True


def truncated(reply: dict[str, Any]) -> dict[str, Any]:
    """A streamed reply whose content was kept only up to the limit, ending with a note saying so."""
    limit = settings.CTX_PROXY_RECORD_MAX_BYTES
    note = f"[ctxweb: the rest of this answer, past {limit:,} bytes of stream, is not recorded]"
    return {**reply, "content": [*(reply.get("content") or []), {"type": "text", "text": note}]}


def note_oversized(
    request: HttpRequest, user: Any, raw: bytes, dialect: Dialect, project: Callable[[], Project]
) -> tuple[int | None, HttpResponse | None]:
    """A request too large to record, noted on its conversation's session (found from the few fields
    that name it, read without parsing the body): the session, or a refusal when the request has no
    project to go to. (None, None) when nothing names the conversation, or ctxweb can't note it now:
    the request goes upstream all the same."""
    head = proxy_body.head_of(raw)
    kept = dialect.recorded(head) if head is not None else None
    header = request.headers.get(SESSION_HEADER, "").strip() or None
    agent_header = agent_session_header(request)
    if kept is None and header is None:
        log.info("proxy: a request of %s bytes forwarded unrecorded (nothing names its conversation)", len(raw))
        return None, None
    try:
        session = proxy_oversized.proxy_oversized_note(
            user=user,
            project=project(),
            key=proxy_identity.conversation_key(kept or {}, header, agent_header),
            head=kept or {},
            agent=proxy_identity.agent_conversation(kept or {}, header, agent_header),
            size=len(raw),
            limit=settings.CTX_PROXY_RECORD_MAX_BYTES,
        )
    except ServiceError as exc:  # no project to record in, or no right to: the caller is told
        return None, dialect.refuse(exc.status, error_type(exc.status), exc.detail)
    except DatabaseError as exc:
        log.warning("proxy: an oversized request was not noted: %s", type(exc).__name__)
        return None, None
    except Exception:  # ctxweb's own fault never stands between an agent and its model
        log.exception("proxy: an oversized request was not noted")
        return None, None
    return session.pk, None
