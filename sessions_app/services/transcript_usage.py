"""What a recorded transcript (an import, the hook's uploads) says its responses used: one
``ProviderRequest`` row per response that reports ``usage`` (``source="transcript"``: tokens by kind,
model, cost at the model's prices; no status or timings, a transcript records none), and the newest
response's figure as the session's exact count.

A row's key is derived from the session the conversation was first stored in and the response's id,
so a file read again, in whatever chunks, writes each response once; a later line of the same
response (its final usage) updates the row."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.utils.dateparse import parse_datetime

from compaction.tokens import DEFAULT_FRAMING
from compaction.transcripts import Conversation, ResponseUsage
from sessions_app.models import AgentSession, Message, ProviderRequest, RequestSource
from sessions_app.selectors.prices import price_of
from sessions_app.services import exact_usage
from sessions_app.services.provider_usage import Used, anthropic_used, codex_used

_KEYS = uuid.UUID("5b0c4f0e-8a51-4d39-9a4e-1f6f0c3a7e21")  # the namespace of transcript rows' keys


def response_key(session_id: int, response_id: str) -> uuid.UUID:
    return uuid.uuid5(_KEYS, f"{session_id}:{response_id}")


def transcript_used(response: ResponseUsage) -> Used:
    if response.api == "codex":
        return codex_used(response.usage, response.model)
    return anthropic_used({"usage": response.usage, "model": response.model})


def transcript_requests_record(
    *, session: AgentSession, keyed_by: AgentSession, responses: Iterable[ResponseUsage]
) -> int:
    """A row in ``session`` for each of ``responses``, written or brought up to date; ``keyed_by``: the
    session the conversation was first stored in (a handed-off one's messages go on in another)."""
    written = 0
    for response in responses:
        used = transcript_used(response)
        model = used.model or session.model
        ProviderRequest.objects.update_or_create(
            key=response_key(keyed_by.pk, response.response_id),
            defaults={
                "session": session,
                "project_id": session.project_id,
                "user_id": session.owner_id,
                "created_at": _when(response.created_at) or keyed_by.created_at,
                "model": model[:200],
                "input_tokens": used.tokens.input,
                "cache_creation_input_tokens": used.tokens.cache_write,
                "cache_read_input_tokens": used.tokens.cache_read,
                "output_tokens": used.tokens.output,
                "service_tier": used.service_tier,
                "cost_usd": price_of(model, used.tokens),
                "status": None,
                "source": RequestSource.TRANSCRIPT,
            },
        )
        written += 1
    return written


def transcript_exact_record(*, session: AgentSession, conversation: Conversation) -> None:
    """The newest response's input and cache tokens (what its model read, Claude Code's own figure
    for the context) as the session's exact count, while that response ends the session. The figure
    holds what the transcript lacks (the agent's system prompt and tools): STATUS shows it under
    ``messages``, ``used`` is the figure."""
    newest = next(reversed(conversation.responses.values()), None)
    if newest is None:
        return
    tokens = transcript_used(newest).tokens
    read = tokens.input + tokens.cache_write + tokens.cache_read
    session.refresh_from_db()
    row = Message.objects.filter(session=session, client_id=newest.response_id).values("seq", "tokens").first()
    if not read or row is None or row["seq"] != session.last_seq:
        return
    # ctxweb's estimate of the request the response answered: everything before it.
    before = session.system_tokens + session.tool_tokens + session.message_tokens - row["tokens"]
    exact_usage.exact_usage_record(
        session=session,
        read=read,
        wrote=0,
        upto_seq=row["seq"],
        raw_request=before + DEFAULT_FRAMING.request,
        source=RequestSource.TRANSCRIPT,
    )


def _when(stamp: str | None) -> datetime | None:
    return parse_datetime(stamp) if stamp else None
