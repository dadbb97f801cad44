"""Compactions an agent made itself, as its transcript records them: Claude Code writes a
``compact_boundary`` line, then its summary as a user line flagged ``isCompactSummary``. From that
point the model saw only the summary and what followed, so a recorded transcript (an import, the
hook's uploads) is stored the same way:

- every message of that conversation before the summary, and the summary message itself, leave the
  context (``summarized``), tied to one succeeded ``summarize`` compaction with trigger
  ``transcript`` and a backup of each, so a revert restores them exactly as they were;
- the summary becomes the session's checkpoint: ``narrative`` holds Claude's text verbatim,
  ``objective`` the first request a person typed (or the previous checkpoint's), and the context
  shows it as the ``<context_summary>`` message before what followed. It is counted once, as the
  summary; the summary message stays stored (``state=all``) with its text.

A boundary takes effect only with its summary: the next message of its conversation must be a user
message flagged ``is_compact_summary`` that holds text. A boundary without one changes nothing, and a
summary without a boundary is an ordinary message (what the model read). Both paths apply a
boundary once its summary message is stored, so any chunking of the file ends the same.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from compaction.checkpoint import merge_checkpoint, render_summary_text
from compaction.facts import checkpoint_facts, person_messages
from compaction.messages import NormalizedMessage
from compaction.reversible import message_text
from compaction.summarize import summary_tokens_of
from compaction.tokens import calibrate
from compaction.transcripts import Conversation
from compaction.types import Level
from sessions_app.engine import offline_tokenizer
from sessions_app.models import (
    BULK_UPDATE_BATCH,
    CONTEXT_STATES,
    AgentSession,
    Checkpoint,
    Compaction,
    CompactionStatus,
    Message,
    MessageBackup,
    MessageState,
)
from sessions_app.selectors import model_context, usage
from sessions_app.services import ingest, planning, redaction, spend_rollup

TRIGGER = "transcript"
PROVIDER = "provider"  # a compaction the model's provider made (the proxy records it)
OBJECTIVE_CHARS = 2_000  # the first request is copied verbatim up to this; a pasted file is not an objective


# The checkpoint of a provider's compaction whose summary only that provider can read (OpenAI's
# ``compaction`` item: ``encrypted_content``, no text).
OPAQUE_NARRATIVE = (
    "(The model's provider compacted the conversation here: its summary is encrypted, readable by that "
    "provider only. The messages it stands for are kept: revert this compaction to put them back.)"
)


def opaque_compaction(content: Any) -> bool:
    """Content holding a provider's compaction item with no readable summary."""
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "compaction" and not isinstance(b.get("content"), str) for b in content
    )


@dataclass(frozen=True)
class Boundary:
    """A compaction the transcript records: its summary message and what the marker said."""

    summary: NormalizedMessage
    narrative: str  # its text
    trigger: str | None = None  # Claude Code's: auto or manual
    pre_tokens: int | None = None  # Claude's own count of the context it compacted
    provider: bool = False  # the summary is a provider's opaque compaction item, in the model's message


def boundaries_of(conversation: Conversation, messages: list[NormalizedMessage | None]) -> dict[int, Boundary]:
    """The boundaries of ``conversation`` that take effect, by the index of their summary message
    (``messages``: the conversation's messages as validated, None where one can't be stored)."""
    found = {}
    for index in conversation.segment_starts:
        message = messages[index] if index < len(messages) else None
        if message is not None and message.role == "assistant" and opaque_compaction(message.content):
            found[index] = Boundary(message, OPAQUE_NARRATIVE, provider=True)
            continue
        if message is None or message.role != "user" or message.metadata.get("is_compact_summary") is not True:
            continue
        narrative = message_text(message.content).strip()
        if not narrative:
            continue
        facts = conversation.boundary_facts.get(index, {})
        found[index] = Boundary(message, narrative, facts.get("trigger"), facts.get("pre_tokens"))
    return found


def boundary_apply(*, session: AgentSession, boundary: Boundary) -> Compaction | None:
    """Take every context message up to the boundary's stored summary message out of the context,
    behind a checkpoint holding its text. None, changing nothing, when the summary message is not
    stored as it came or is no longer in the context (its boundary was applied before: a file
    imported, then synced). A provider's opaque compaction item is applied as the proxy applies it
    (``provider_compaction_apply``): the messages before the one holding it leave the context."""
    # Compared with what is stored, which is redacted; a checkpoint's text is stored too.
    boundary = replace(
        boundary,
        summary=redaction.message_redact(session.project, boundary.summary),
        narrative=redaction.value_redact(session.project, boundary.narrative).value,
    )
    if boundary.provider:
        with transaction.atomic():
            locked = ingest.lock_open_session(session)
            said = Message.objects.filter(session=locked, role="assistant", state__in=CONTEXT_STATES)
            summary = boundary.summary
            row = (said.filter(client_id=summary.client_id) if summary.client_id else said.order_by("-seq")).first()
            if row is None or row.content != summary.content:
                return None
            return provider_compaction_apply(session=locked, reply_seq=row.seq, narrative=boundary.narrative)
    with transaction.atomic():
        locked = ingest.lock_open_session(session)
        row = _stored_summary(locked, boundary.summary)
        if row is None:
            return None
        rows = _context_rows(locked, upto_seq=row.seq)
        source = {"kind": "compact_boundary", "trigger": boundary.trigger, "pre_tokens": boundary.pre_tokens}
        # The last row is the summary message: the checkpoint, not what it covers.
        return _summarized(
            locked,
            rows,
            rows[:-1],
            boundary.narrative,
            source,
            trigger=TRIGGER,
            at=row.created_at,
            note=_note(boundary),
        )


def provider_compaction_apply(*, session: AgentSession, reply_seq: int, narrative: str) -> Compaction | None:
    """A compaction the model's provider made (Anthropic's server-side compaction: a ``compaction``
    block at the start of the reply stored at ``reply_seq``): from that reply on, the model reads the
    block's summary instead of what came before, so those messages leave the context behind a
    checkpoint holding it, as for a boundary in a transcript. None when nothing came before."""
    with transaction.atomic():
        locked = ingest.lock_open_session(session)
        rows = _context_rows(locked, upto_seq=reply_seq - 1)
        if not rows:
            return None
        note = (
            "Made by the model's provider (server-side compaction): its summary is the checkpoint; the "
            "messages before the reply that carried it are summarized."
        )
        source = {"kind": "provider_compaction", "reply_seq": reply_seq}
        narrative = redaction.value_redact(locked.project, narrative).value
        return _summarized(locked, rows, rows, narrative, source, trigger=PROVIDER, at=timezone.now(), note=note)


def _context_rows(session: AgentSession, *, upto_seq: int) -> list[Message]:
    return list(
        Message.objects.select_for_update()
        .filter(session=session, state__in=CONTEXT_STATES, seq__lte=upto_seq)
        .order_by("seq")
    )


def _summarized(
    locked: AgentSession,
    rows: list[Message],
    covered: list[Message],
    narrative: str,
    source: dict[str, Any],
    *,
    trigger: str,
    at: datetime,
    note: str,
) -> Compaction:
    """``rows`` leave the context (summarized, backed up for a revert) behind a checkpoint whose text
    is ``narrative``, under one succeeded summarize compaction (inside the caller's transaction, with
    the session's row locked)."""
    info = usage.model_info(locked.model)
    policy = usage.policy_for(locked)
    before = usage.session_usage(locked, policy=policy).used
    previous = model_context.current_checkpoint(locked)
    facts_budget = policy.facts_tokens(max(1, int(usage.session_window(locked, info) / info.calibration)))
    data = _checkpoint_data(
        previous, covered, narrative, source, compacted_at=at.isoformat(), facts_budget=facts_budget
    )
    summary_tokens = summary_tokens_of(data["summary_text"], offline_tokenizer())
    now = timezone.now()
    upto = rows[-1].seq
    record = Compaction.objects.create(
        session=locked,
        project_id=locked.project_id,
        level=Level.SUMMARIZE.value,
        status=CompactionStatus.SUCCEEDED,
        trigger=trigger,
        upto_seq=upto,
        tokens_before=before,
        notes=[note],
        items=[
            *(_item("summarize", r.seq, calibrate(r.tokens, info.calibration), 0) for r in rows),
            _item("checkpoint", None, 0, calibrate(summary_tokens, info.calibration)),
        ],
        started_at=now,
        finished_at=now,
        revertible_until=now + timedelta(hours=policy.revert_hours),
    )
    MessageBackup.objects.bulk_create(MessageBackup.of(record, r) for r in rows)
    for r in rows:
        r.state, r.compaction = MessageState.SUMMARIZED, record
    Message.objects.bulk_update(rows, ["state", "compaction"], batch_size=BULK_UPDATE_BATCH)
    Checkpoint.objects.create(
        session=locked,
        version=model_context.next_checkpoint_version(locked),
        data=data,
        reason="compaction",
        compaction=record,
        upto_seq=upto,
        tokens=summary_tokens,
        lossy=True,
    )
    locked.message_tokens -= sum(r.tokens for r in rows)
    locked.active_message_count -= len(rows)
    locked.summary_tokens = summary_tokens
    locked.exact_upto_seq = None  # an exact count described the context before
    locked.save(
        update_fields=["message_tokens", "active_message_count", "summary_tokens", "exact_upto_seq", "updated_at"]
    )
    record.tokens_after = usage.session_usage(locked, policy=policy).used
    record.save(update_fields=["tokens_after"])
    spend_rollup.session_savings_refresh(locked.pk)  # in force for requests stamped after it
    return record


def _stored_summary(session: AgentSession, summary: NormalizedMessage) -> Message | None:
    """The stored row of the summary message, when it is stored as it came and still in the context."""
    rows = Message.objects.select_for_update().filter(session=session)
    # Without a client id, the summary was stored (if at all) by the append just before.
    row = (rows.filter(client_id=summary.client_id) if summary.client_id else rows.order_by("-seq")).first()
    if (
        row is None
        or row.state not in CONTEXT_STATES
        or row.role != "user"
        or row.metadata.get("is_compact_summary") is not True
        or row.content != summary.content
    ):
        return None
    return row


def _checkpoint_data(
    previous: Checkpoint | None,
    covered: list[Message],
    narrative: str,
    source: dict[str, Any],
    *,
    compacted_at: str,
    facts_budget: int,
) -> dict[str, Any]:
    """Claude's summary supersedes the previous checkpoint (it was written from a context that held
    it); the objective carries over, else it is the first request a person typed. The facts of what
    it covers are recorded for ctxweb's own later summaries (the first request stays the first) but
    not shown: the model saw Claude's summary alone, and usage stays what Claude had."""
    objective = (previous.data.get("objective") if previous is not None else None) or _first_request(covered)
    if not objective:
        objective = next((line.strip() for line in narrative.splitlines() if line.strip()), "(not recorded)")
    stamps = sorted(r.created_at.isoformat() for r in covered)
    data = merge_checkpoint(
        previous.data if previous is not None else None,
        {"objective": _cut(objective, OBJECTIVE_CHARS), "narrative": narrative},
        messages_compacted=len(covered),
        oldest=stamps[0] if stamps else None,
        newest=stamps[-1] if stamps else None,
        compacted_at=compacted_at,
        facts=checkpoint_facts(
            previous.data if previous is not None else None,
            [planning.engine_message(r) for r in covered],
            offline_tokenizer(),
            facts_budget,
        ),
    )
    data["source"] = source
    data["summary_text"] = render_summary_text({**data, "facts": None})
    return data


def _first_request(rows: list[Message]) -> str:
    """The first words a person typed: not a line the agent injected (``is_meta``), no earlier
    summary, and none of what the harness puts around the user's words (``compaction.injected``)."""
    said = person_messages([planning.engine_message(r) for r in rows])
    return said[0] if said else ""


def _item(strategy: str, seq: int | None, before: int, after: int) -> dict[str, Any]:
    return {"strategy": strategy, "seq": seq, "tokens_before": before, "tokens_after": after}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _note(boundary: Boundary) -> str:
    said = [f"trigger: {boundary.trigger}"] if boundary.trigger else []
    if boundary.pre_tokens is not None:
        said.append(f"{boundary.pre_tokens:,} tokens before, by its count")
    return (
        "Recorded in the transcript: the agent compacted its own context here"
        + (f" ({'; '.join(said)})" if said else "")
        + ". Its summary is the checkpoint; the messages before it are summarized."
    )
