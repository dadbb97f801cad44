"""What a recorded transcript (an import, the hook's uploads) says its responses used: one
``ProviderRequest`` row per response that reports ``usage`` (``source="transcript"``: tokens by kind,
model, cost at the model's prices; no status or timings, a transcript records none). (The newest
response's figure as the session's exact count is not taken yet: docs/INGEST.md says why.)

A row's key is derived from the session the conversation was first stored in and the response's id,
so a file read again, in whatever chunks, writes each response once; a later line of the same
response (its final usage) updates the row."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.utils.dateparse import parse_datetime

from compaction.transcripts import ResponseUsage
from sessions_app.models import AgentSession, ProviderRequest, RequestSource
from sessions_app.selectors.prices import price_of
from sessions_app.services.provider_usage import Used, anthropic_used, codex_used

TOKEN_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
_KEYS = uuid.UUID("5b0c4f0e-8a51-4d39-9a4e-1f6f0c3a7e21")  # the namespace of transcript rows' keys


def response_key(session_id: int, response_id: str) -> uuid.UUID:
    return uuid.uuid5(_KEYS, f"{session_id}:{response_id}")


def transcript_used(response: ResponseUsage) -> Used:
    if response.api == "codex":
        return codex_used(response.usage, response.model)
    return anthropic_used({"usage": response.usage, "model": response.model})


def transcript_requests_record(
    *, session: AgentSession, keyed_by: AgentSession, responses: Iterable[ResponseUsage]
) -> None:
    """A row in ``session`` for each of ``responses``, written or brought up to date; ``keyed_by``: the
    session the conversation was first stored in (a handed-off one's messages go on in another). Rows
    already as the responses report them are left alone (one query reads them all)."""
    wanted = {response_key(keyed_by.pk, r.response_id): r for r in responses}
    fields = ("key", "session_id", "model", *TOKEN_FIELDS, "service_tier")
    stored = {row[0]: row[1:] for row in ProviderRequest.objects.filter(key__in=list(wanted)).values_list(*fields)}
    for key, response in wanted.items():
        used = transcript_used(response)
        model = (used.model or session.model)[:200]
        tokens = used.tokens
        figures = (session.pk, model, tokens.input, tokens.cache_write, tokens.cache_read, tokens.output)
        if stored.get(key) == (*figures, used.service_tier):
            continue
        ProviderRequest.objects.update_or_create(
            key=key,
            defaults={
                "session": session,
                "project_id": session.project_id,
                "user_id": session.owner_id,
                "created_at": _when(response.created_at) or keyed_by.created_at,
                "model": model,
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


def _when(stamp: str | None) -> datetime | None:
    return parse_datetime(stamp) if stamp else None
