"""What a recorded transcript (an import, the hook's uploads) says its responses used: one
``ProviderRequest`` row per response that reports ``usage`` (``source="transcript"``: tokens by kind,
model, cost at the model's prices; no status or timings, a transcript records none).

The response whose message ends the session gives the session's exact count
(``transcript_exact_record``): what its model read, ``input + cache write + cache read``, Claude
Code's own figure for its context. It is worked out from what is stored after each store, never
from the order pieces of a file arrived in, so any chunking ends as the import does.

A row's key is derived from the session the conversation was first stored in and the response's id,
so a file read again, in whatever chunks, writes each response once; a later line of the same
response (its final usage) updates the row."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Sum

from compaction.messages import parse_created_at
from compaction.tokens import DEFAULT_FRAMING
from compaction.transcripts import ResponseUsage
from sessions_app.models import AgentSession, Compaction, Message, MessageState, ProviderRequest, RequestSource
from sessions_app.selectors.prices import price_of
from sessions_app.selectors.savings import saved_at
from sessions_app.services import counting, exact_usage, spend_rollup
from sessions_app.services.provider_usage import Used, anthropic_used, codex_used
from sessions_app.services.webhook_events import session_level_record

TOKEN_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
# What a transcript can't show of a request its model read: Claude Code's system prompt and tool
# definitions (15–25k tokens; more with MCP servers' tools). A figure may exceed the estimate by this.
HARNESS_UNSEEN = 100_000
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
    already as the responses report them are left alone (one query reads them all). The rollup moves
    by each row's difference (``spend_rollup``), under the session's lock."""
    wanted = {response_key(keyed_by.pk, r.response_id): r for r in responses}
    if not wanted:
        return
    compared = ("session_id", "model", *TOKEN_FIELDS, "service_tier")
    with transaction.atomic():
        AgentSession.objects.select_for_update().filter(pk=session.pk).values_list("pk").first()
        stored = {
            row["key"]: row
            for row in ProviderRequest.objects.filter(key__in=list(wanted)).values(
                "key", "session_id", "service_tier", *spend_rollup.ROW_FIELDS
            )
        }
        deltas = spend_rollup.Deltas()
        for key, response in wanted.items():
            used = transcript_used(response)
            model = (used.model or session.model)[:200]
            tokens = used.tokens
            figures = (session.pk, model, tokens.input, tokens.cache_write, tokens.cache_read, tokens.output)
            old = stored.get(key)
            if old is not None and tuple(old[name] for name in compared) == (*figures, used.service_tier):
                continue
            created_at = _when(response.created_at) or keyed_by.created_at
            row, _ = ProviderRequest.objects.update_or_create(
                key=key,
                defaults={
                    "session": session,
                    "project_id": session.project_id,
                    "user_id": session.owner_id,
                    "created_at": created_at,
                    "model": model,
                    "input_tokens": tokens.input,
                    "cache_creation_input_tokens": tokens.cache_write,
                    "cache_read_input_tokens": tokens.cache_read,
                    "output_tokens": tokens.output,
                    "service_tier": used.service_tier,
                    "cost_usd": price_of(model, tokens, at=created_at),
                    "status": None,
                    "source": RequestSource.TRANSCRIPT,
                    "saved_tokens": saved_at(session.pk, created_at, None),
                },
            )
            if old is not None:
                deltas.add_row(old, -1)
            deltas.add_row(spend_rollup.row_figures(row))
        deltas.apply()


def _when(stamp: str | None) -> datetime | None:
    """The response's time; a stamp without an offset is UTC, as its messages' (``ingest``)."""
    when = parse_created_at(stamp) if stamp else None
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


def transcript_exact_record(*, session: AgentSession, keyed_by: AgentSession) -> None:
    """The session's exact count from the response whose assistant message ends it, when the
    transcript reports that response's usage (``keyed_by`` as in ``transcript_requests_record``).
    ``read`` only: the figure Claude Code reports as its context (its status line's), without the
    reply it wrote. The figure doesn't teach the model's calibration whole (the session lacks the
    harness's prompt and tools, which the model read): its growth since the first response does.
    When no response ends the session, a warning an earlier upload's figure left is cleared: an
    import of the file would have none."""
    session.refresh_from_db(fields=["last_seq", "exact_tokens", "exact_upto_seq", "count_warning", *_STATE])
    replies = transcript_harness_record(session=session, keyed_by=keyed_by, fresh=True)
    last = (
        Message.objects.filter(session=session, seq=session.last_seq, state=MessageState.ACTIVE, role="assistant")
        .values_list("client_id", "tokens")
        .first()
    )
    read, reported = 0, False
    if last is not None and last[0]:
        row = (
            ProviderRequest.objects.filter(key=_key_of(keyed_by, last[0]), session=session)
            .values_list(*TOKEN_FIELDS[:3])
            .first()
        )
        read, reported = (sum(row) if row is not None else 0), row is not None
    if last is None or not read:
        if session.count_warning.startswith(exact_usage.TRANSCRIPT_WARNING):
            AgentSession.objects.filter(pk=session.pk).update(count_warning="")
        if reported:
            _stale_exact_drop(session)
        return
    if session.exact_upto_seq == session.last_seq and session.exact_tokens == read:
        return  # most uploads: the figure already holds
    raw = sum(getattr(session, f) for f in _TOTALS) - last[1] + DEFAULT_FRAMING.request
    believed = exact_usage.exact_usage_record(
        session=session,
        read=read,
        wrote=0,
        upto_seq=session.last_seq,
        raw_request=raw,
        source="transcript",
        unseen=HARNESS_UNSEEN,
        teach=False,
    )
    if not believed:
        _stale_exact_drop(session)
    elif replies:
        _growth_observe(session, replies[0], read)


def _stale_exact_drop(session: AgentSession) -> None:
    """The reply ending the session reports a figure that gives no count (0, or not believed): one an
    earlier line of the same reply gave no longer holds (an import of the file would have none)."""
    if session.exact_upto_seq != session.last_seq:
        return
    if AgentSession.objects.filter(pk=session.pk, exact_upto_seq=session.last_seq).update(exact_upto_seq=None):
        session.exact_upto_seq = None
        session_level_record(session)


def transcript_harness_record(
    *, session: AgentSession, keyed_by: AgentSession, fresh: bool = False
) -> list[tuple[int, int]]:
    """What the session's first counted response read, and ctxweb's raw estimate of what it held then
    (its prompt, tools and every message before that reply, whatever became of them since): the
    difference, when plausible, is the harness (``selectors.usage.harness_tokens``). From what is
    stored, so any chunking of a file ends as its import does; the stores call it before each
    compaction the transcript records too (which measures the context with it), after the rows.
    Returns the first counted replies, (seq, read). ``fresh``: the caller has just read the session."""
    if not fresh:
        session.refresh_from_db(fields=["last_seq", *_STATE])
    replies = _counted_replies(session, keyed_by, limit=5)
    first = replies[0] if replies else None
    figures: tuple[int | None, int | None] = (None, None)
    if first is not None:
        before = Message.objects.filter(session=session, seq__lt=first[0]).aggregate(tokens=Sum("tokens"))["tokens"]
        held = session.system_tokens + session.tool_tokens + (before or 0) + DEFAULT_FRAMING.request
        # A figure no harness explains (a compaction agent's, which read a session the file doesn't
        # hold; a hostile one) is no harness: the count's own check says so where it matters.
        if counting.plausible_count(exact=first[1], raw_estimate=held, unseen=HARNESS_UNSEEN):
            figures = (first[1], held)
    if figures != (session.harness_read_tokens, session.harness_raw_tokens):
        AgentSession.objects.filter(pk=session.pk).update(harness_read_tokens=figures[0], harness_raw_tokens=figures[1])
        session.harness_read_tokens, session.harness_raw_tokens = figures
        session_level_record(session)
    return replies


def _growth_observe(session: AgentSession, first: tuple[int, int], read: int) -> None:
    """What the session grew by between its first counted response and its last, as the model counted
    it (the difference of what each read) and as ctxweb estimates it (the messages in between), teaches
    the model's calibration: the harness's prompt and tools, read by both and held by neither message,
    drop out. Only in a session nothing compacted (the first response read another context)."""
    if first[0] >= session.last_seq or Compaction.objects.filter(session=session).exists():
        return
    grew = Message.objects.filter(session=session, seq__gte=first[0], seq__lt=session.last_seq).aggregate(
        tokens=Sum("tokens")
    )["tokens"]
    if grew and read > first[1]:
        exact_usage.calibration_observe(model=session.model, exact=read - first[1], raw_estimate=grew)


def _key_of(keyed_by: AgentSession, client_id: str) -> uuid.UUID:
    return response_key(keyed_by.pk, client_id.split("#", 1)[0])  # ``<id>#2``: a late line of the same response


def _counted_replies(session: AgentSession, keyed_by: AgentSession, *, limit: int) -> list[tuple[int, int]]:
    """(seq, what its model read) of the session's first assistant messages (of ``limit``, in any
    state) whose responses the transcript reports usage of."""
    replies = list(
        Message.objects.filter(session=session, role="assistant")
        .exclude(client_id=None)
        .order_by("seq")
        .values_list("seq", "client_id")[:limit]
    )
    keys = {_key_of(keyed_by, cid): seq for seq, cid in replies if cid}
    rows = ProviderRequest.objects.filter(key__in=list(keys), session=session).values_list("key", *TOKEN_FIELDS[:3])
    found = sorted((keys[key], sum(figures)) for key, *figures in rows)
    return [(seq, read) for seq, read in found if read]


_TOTALS = ("system_tokens", "tool_tokens", "message_tokens", "summary_tokens")
_STATE = (*_TOTALS, "model", "level", "usage_percent", "harness_read_tokens", "harness_raw_tokens")
