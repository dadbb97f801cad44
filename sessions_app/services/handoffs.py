"""Handoff: a checkpoint of the whole session (reason ``context_overflow``) rendered as a document a
fresh session starts from; with ``continue``, that fresh session is created and the old one closed."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compaction.checkpoint import merge_checkpoint, render_summary_text
from compaction.context import summary_message
from compaction.errors import EngineError
from compaction.facts import checkpoint_facts
from compaction.handoff import Handoff, HandoffContext, continuation_prompt, render_handoff
from compaction.messages import NormalizedMessage, normalize_message
from compaction.policy import SUMMARIZER_TOKENS
from compaction.summarize import ExtractiveSummarizer, split_tail
from compaction.tokens import calibrate
from sessions_app import engine, metrics
from sessions_app.engine import offline_summarizer
from sessions_app.errors import Conflict
from sessions_app.models import (
    CONTEXT_STATES,
    AgentSession,
    Checkpoint,
    Compaction,
    CompactionStatus,
    HandoffDocument,
    Message,
    SessionStatus,
)
from sessions_app.selectors import model_context, usage
from sessions_app.services import agent_sessions, ingest, spend_rollup, webhook_events
from sessions_app.services.compaction_records import compaction_fail, lock_running
from sessions_app.services.planning import Outcome, Snapshot, snapshot
from sessions_app.services.summarizers import summarizer_choice

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

log = logging.getLogger(__name__)

RECENT_FOR_CONTEXT = 4


def _summarize_all(snap: Snapshot, *, allow_fallback: bool) -> tuple[dict[str, Any], str]:
    """A checkpoint of everything in the context, merged with the current one. With ``allow_fallback``
    an API failure falls back to the offline summarizer (a person is waiting for the document)."""
    policy = snap.engine_policy
    previous = snap.previous_checkpoint.data if snap.previous_checkpoint else None
    summarizer = summarizer_choice(snap.session.project, snap.policy).summarizer
    budget = min(policy.summary_budget, SUMMARIZER_TOKENS)  # the summarizer's part of the document
    try:
        fields = summarizer.summarize(snap.messages, previous=previous, budget=budget)
        used = getattr(summarizer, "name", type(summarizer).__name__)
    except EngineError as exc:
        metrics.summarizer_error(permanent=exc.permanent)
        if not allow_fallback or isinstance(summarizer, ExtractiveSummarizer):
            raise
        log.warning("handoff summary fell back to the offline summarizer: %s", exc)
        fallback = offline_summarizer(snap.policy)
        fields = fallback.summarize(snap.messages, previous=previous, budget=budget)
        used = f"{fallback.name} (fallback: {exc})"
    stamps = [m.created_at for m in snap.messages if m.created_at]
    merged = merge_checkpoint(
        previous,
        fields,
        messages_compacted=len(snap.messages),
        oldest=min(stamps) if stamps else None,
        newest=max(stamps) if stamps else None,
        compacted_at=timezone.now().isoformat(),
        facts=checkpoint_facts(
            previous, snap.messages, engine.offline_tokenizer(), policy.facts_tokens(snap.raw_window)
        ),
    )
    return merged, used


def _context(session: AgentSession, checkpoint: Checkpoint, usage_percent: float, snap: Snapshot) -> HandoffContext:
    recent = []
    for m in snap.messages[-RECENT_FOR_CONTEXT:]:
        text = (
            m.content
            if isinstance(m.content, str)
            else " ".join(str(b.get("text", "")) for b in m.content if isinstance(b, dict) and b.get("type") == "text")
        )
        if text.strip():
            recent.append(f"{m.role}: {text.strip()[:400]}")
    return HandoffContext(
        project=session.project.name,
        session_id=session.pk,
        session_name=session.name or f"session {session.pk}",
        model=session.model,
        checkpoint_id=checkpoint.pk,
        checkpoint_version=checkpoint.version,
        created_at=timezone.now().isoformat(),
        base_url=settings.CTX_PUBLIC_URL,
        usage_percent=usage_percent,
        recent_messages=tuple(recent),
    )


def _store(
    *,
    session: AgentSession,
    snap: Snapshot,
    merged: dict[str, Any],
    summarizer: str,
    compaction: Compaction | None,
    user: User | None,
) -> tuple[HandoffDocument, Handoff]:
    summary_text = render_summary_text(merged)
    checkpoint = Checkpoint.objects.create(
        session=session,
        version=model_context.next_checkpoint_version(session),
        data={**merged, "summary_text": summary_text, "summarizer": summarizer},
        reason="context_overflow",
        compaction=compaction,
        upto_seq=snap.upto_seq,
        tokens=engine.offline_tokenizer().count_message("user", summary_message(summary_text)["content"]),
    )
    current = usage.session_usage(session)
    rendered = render_handoff(checkpoint.data, _context(session, checkpoint, current.usage_percent, snap))
    document = HandoffDocument.objects.create(
        session=session,
        checkpoint=checkpoint,
        text=rendered.text,
        markdown=rendered.markdown,
        data=rendered.data,
        created_by=user if user is not None and user.is_authenticated else None,
    )
    return document, rendered


def handoff_create(*, session: AgentSession, user: User | None, continue_: bool = False) -> HandoffDocument:
    """Write the handoff document now (REST, CLI, page). The summary call happens outside any
    transaction; the checkpoint, document and continuation are written in one."""
    if session.status != SessionStatus.ACTIVE:
        raise Conflict(f"Session {session.pk} is {session.status.replace('_', ' ')}.", code="session_closed")
    snap = snapshot(session)
    merged, used = _summarize_all(snap, allow_fallback=True)
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().get(pk=session.pk)
        if continue_ and locked.status != SessionStatus.ACTIVE:
            raise Conflict(f"Session {locked.pk} was handed off meanwhile.", code="session_closed")
        document, rendered = _store(
            session=locked, snap=snap, merged=merged, summarizer=used, compaction=None, user=user
        )
        if continue_:
            document.continuation = _continue(locked, rendered, user, carried=_carried(locked, snap))
            document.save(update_fields=["continuation"])
        webhook_events.handoff_written(locked, document)
    return document


def _continuation_name(session: AgentSession) -> str:
    """The session's name and " (continued)": a name that already fills its column is shortened, with
    an ellipsis, so the suffix still fits."""
    suffix = " (continued)"
    room = agent_sessions.SESSION_TEXT_LIMITS["name"] - len(suffix)
    return agent_sessions.fit(session.name or f"session {session.pk}", room) + suffix


def _continue(
    session: AgentSession, rendered: Handoff, user: User | None, *, carried: list[NormalizedMessage]
) -> AgentSession:
    """The fresh session: same model, system prompt and tools; the handoff is its first message, the
    ``carried`` messages (verbatim, with their client ids: a retry stores nothing twice) follow."""
    fresh = agent_sessions.session_create(
        user=user or session.owner,
        project=session.project,
        name=_continuation_name(session),
        model=session.model,
        system_prompt=session.system_prompt,
        tools=session.tools,
        context_window=session.context_window_override,
        auto_compact=session.auto_compact,
        parent=session,
        metadata={"continues": session.pk},
    )
    ingest.message_append(
        session=fresh,
        messages=[normalize_message({"role": "user", "content": continuation_prompt(rendered)}), *carried],
    )
    session.status = SessionStatus.HANDED_OFF
    session.save(update_fields=["status", "updated_at"])
    return fresh


def handoff_auto_document(record: Compaction) -> HandoffDocument:
    """After an automatic compaction that left the session above the handoff threshold: the document
    the agent can continue from (the session stays open). The compaction record lists it among its
    items; a run that changed no message but wrote the document counts as succeeded."""
    session = AgentSession.objects.select_related("project", "project__policy").get(pk=record.session_id)
    snap = snapshot(session)
    merged, used = _summarize_all(snap, allow_fallback=True)
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().get(pk=session.pk)
        current = Compaction.objects.select_for_update().get(pk=record.pk)
        document, _ = _store(session=locked, snap=snap, merged=merged, summarizer=used, compaction=current, user=None)
        current.items = [*current.items, _handoff_item(document)]
        if current.status == CompactionStatus.SKIPPED:
            current.status, current.error = CompactionStatus.SUCCEEDED, ""
        current.save(update_fields=["items", "status", "error"])
        spend_rollup.session_savings_refresh(locked.pk)
        webhook_events.handoff_written(locked, document)
    return document


def _handoff_item(document: HandoffDocument) -> dict[str, Any]:
    return {"strategy": "handoff", "seq": None, "tokens_before": 0, "tokens_after": 0, "handoff": document.pk}


class _TooLarge(Exception):
    """The continuation would start over its own target: nothing is written."""


def handoff_from_compaction(
    record: Compaction, snap: Snapshot, outcome: Outcome, *, continue_: bool = False, allow_fallback: bool = False
) -> str:
    """The worker's handoff level: a document for the session, changing no message. The session
    stays open — the agent (or a person) decides when to continue from it — unless ``continue_``
    (the policy's ``auto_continue``): then the session is closed and a fresh linked one starts from
    the document, followed by the protected newest messages (a tool call waiting for its result
    among them) and whatever arrived while the summary was written. "too-large" (nothing written):
    that fresh session would start at its compact threshold (and be compacted, or continued, again).
    ``allow_fallback``: the model kept failing, the offline summarizer stands in."""
    try:
        merged, used = _summarize_all(snap, allow_fallback=allow_fallback)
    except EngineError as exc:
        if not exc.permanent:
            raise
        compaction_fail(record.pk, str(exc))
        return "failed"
    now = timezone.now()
    try:
        with transaction.atomic():
            session, current = lock_running(record)  # LostClaim, SessionClosed: the caller's
            document, rendered = _store(
                session=session, snap=snap, merged=merged, summarizer=used, compaction=current, user=None
            )
            if continue_:
                carried = _carried(session, snap)
                _fits_or_raise(snap, rendered, carried)
                document.continuation = _continue(session, rendered, None, carried=carried)
                document.save(update_fields=["continuation"])
            current.status = CompactionStatus.SUCCEEDED
            current.upto_seq = snap.upto_seq
            current.tokens_before = current.tokens_after = outcome.tokens_before
            current.items = [_handoff_item(document)]
            current.finished_at = now
            current.revertible_until = None  # nothing changed, nothing to revert
            current.save()
            spend_rollup.session_savings_refresh(session.pk)
            webhook_events.handoff_written(session, document)
            webhook_events.compaction_succeeded(session, current)
            session.compaction_failures = 0
            session.save(update_fields=["compaction_failures", "updated_at"])
    except _TooLarge:
        return "too-large"
    return "succeeded"


def _carried(session: AgentSession, snap: Snapshot) -> list[NormalizedMessage]:
    """What the fresh session takes verbatim after the handoff: the protected newest messages (and
    the calls their results answer), and every message stored after the snapshot was taken."""
    policy = snap.engine_policy
    start = split_tail(snap.messages, policy, context_window=snap.raw_window, minimal=True)
    first = snap.messages[start].seq if start < len(snap.messages) else snap.upto_seq + 1
    rows = Message.objects.filter(session=session, seq__gte=first, state__in=CONTEXT_STATES).order_by("seq")
    return [
        normalize_message({"role": row.role, "content": row.content, "client_id": row.client_id or None})
        for row in rows
    ]


def _fits_or_raise(snap: Snapshot, rendered: Handoff, carried: list[NormalizedMessage]) -> None:
    tokenizer = engine.offline_tokenizer()
    raw = snap.fixed_tokens + tokenizer.count_message("user", continuation_prompt(rendered))
    raw += sum(tokenizer.count_message(m.role, m.content) for m in carried)
    if calibrate(raw, snap.factor) >= snap.policy.compact * snap.window:
        raise _TooLarge
