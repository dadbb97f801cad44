"""Storing recorded transcripts (files other programs wrote: an import, the Claude Code hook's
uploads). Nobody can fix such a file, so nothing in it may stop the rest from being stored:

- what the readers can clean they clean (``compaction.jsonvalues``: lone surrogates and NUL become
  U+FFFD, absurd nesting becomes text, unusable timestamps are dropped), and count;
- a message that still can't be stored is skipped and recorded (``IngestRejection``, the session's
  STATUS warnings, Django admin), and the ones after it are stored;
- a tool result whose call was skipped becomes text, as an import turns orphaned results into text;
- a compaction the agent made itself (Claude Code's compact boundary and its summary) is applied
  where the transcript records it (``services.boundaries``): what came before leaves the context,
  the summary becomes the checkpoint;
- a response that grew after it was stored (its lines kept arriving after an upload marked final)
  gets its new blocks appended to it (``message_extend``), so its context reads as if it had
  arrived whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from compaction import jsonvalues
from compaction.messages import MessageError, NormalizedMessage, normalize_message
from compaction.transcripts import Conversation
from sessions_app import engine
from sessions_app.errors import InvalidInput
from sessions_app.models import AgentSession, IngestRejection, Message, MessageState, ToolUse
from sessions_app.services import agent_sessions, boundaries, ingest, redaction

NAME_MAX, MODEL_MAX, EXTERNAL_ID_MAX = (agent_sessions.SESSION_TEXT_LIMITS[f] for f in ("name", "model", "external_id"))


@dataclass
class Stored:
    created: int = 0
    rejected: int = 0


# ----------------------------------------------------------------------------- reading a conversation


@dataclass
class Candidate:
    """A reader's message, validated: ``message`` is None when it can't be stored (``problem`` says why)."""

    message: NormalizedMessage | None
    position: str
    problem: tuple[str, str] | None = None


def candidates(conversation: Conversation, skipped: Counter[str] | None = None) -> list[Candidate]:
    """The conversation's messages, one candidate each, in order. A tool_result whose call isn't in
    this conversation becomes text rather than failing (counted as ``orphan_tool_result``)."""
    skipped = skipped if skipped is not None else Counter()
    calls: set[str] = set()
    out = []
    for i, raw in enumerate(conversation.messages):
        position = f"message {i + 1}" + (f" ({raw['client_id']})" if raw.get("client_id") else "")
        try:
            msg = normalize_message(raw, index=i)
        except MessageError as exc:
            skipped["invalid_message"] += 1
            out.append(Candidate(None, position, (exc.code, exc.detail)))
            continue
        msg.content = _orphans_as_text(msg.content, calls, skipped)
        if msg.role == "tool" and not msg.tool_result_ids:
            msg.role = "user"
        calls.update(msg.tool_use_ids)
        out.append(Candidate(msg, position))
    return out


def _orphans_as_text(content: Any, calls: set[str], skipped: Counter[str] | None = None) -> Any:
    if not isinstance(content, list):
        return content
    blocks = []
    for block in content:
        if block.get("type") == "tool_result" and block.get("tool_use_id") not in calls:
            if skipped is not None:
                skipped["orphan_tool_result"] += 1
            inner = block.get("content", "")
            if isinstance(inner, list):
                inner = "\n".join(p.get("text", "") for p in inner if isinstance(p, dict))
            block = {"type": "text", "text": f"[tool result for {block.get('tool_use_id')}]\n{inner}"}
        blocks.append(block)
    return blocks


def model_name(value: Any) -> str | None:
    """A model name a transcript gives, if it can be a session's model (else the caller's default)."""
    if not isinstance(value, str) or not value.strip() or len(value) > MODEL_MAX:
        return None
    return jsonvalues.clean_text(value)


# ----------------------------------------------------------------------------- storing


def conversation_append(
    *,
    session: AgentSession,
    conversation: Conversation,
    candidates: Sequence[Candidate],
    start: int,
    source: str,
    advance: Callable[[int], None] | None = None,
    before_boundary: Callable[[], object] | None = None,
) -> Stored:
    """Store ``candidates[start:]`` (the conversation's, from ``candidates(conversation)``) in order.
    Where the transcript records a compaction, the messages up to its summary are stored, then the
    compaction is applied (``before_boundary`` called first), then the rest follows: so a file read
    in any number of pieces ends as when read whole."""
    stored = Stored()
    found = boundaries.boundaries_of(conversation, [c.message for c in candidates])
    position = start
    for index in sorted(i for i in found if i >= start):
        part = append(session=session, candidates=candidates[position : index + 1], source=source, advance=advance)
        stored.created, stored.rejected = stored.created + part.created, stored.rejected + part.rejected
        if before_boundary is not None:
            before_boundary()
        boundaries.boundary_apply(session=session, boundary=found[index])
        position = index + 1
    part = append(session=session, candidates=candidates[position:], source=source, advance=advance)
    stored.created, stored.rejected = stored.created + part.created, stored.rejected + part.rejected
    return stored


def append(
    *,
    session: AgentSession,
    candidates: Sequence[Candidate],
    source: str,
    advance: Callable[[int], None] | None = None,
) -> Stored:
    """Store the candidates in order, in batches; what can't be stored is recorded and skipped.
    ``advance(n)``: told after each batch how many candidates it handled (a progress bar's)."""
    stored = Stored()
    batch = settings.CTX_MAX_BATCH
    for start in range(0, len(candidates), batch):
        chunk = candidates[start : start + batch]
        for bad in (c for c in chunk if c.message is None):
            rejection_record(session=session, source=source, position=bad.position, problem=bad.problem)
            stored.rejected += 1
        good = [(c, c.message) for c in chunk if c.message is not None]
        if good:
            try:
                stored.created += ingest.message_append(session=session, messages=[m for _, m in good]).created
            except InvalidInput:  # one of them can't be stored: store the others one at a time
                for one, message in good:
                    _append_one(session, one, message, source, stored)
        if advance is not None:
            advance(len(chunk))
    return stored


def _append_one(
    session: AgentSession, candidate: Candidate, message: NormalizedMessage, source: str, stored: Stored
) -> None:
    """Store one candidate's message on its own; one that can't be stored is recorded and skipped."""
    try:
        stored.created += ingest.message_append(session=session, messages=[message]).created
        return
    except InvalidInput as exc:
        problem = (exc.code, exc.detail)
    if problem[0] == "unknown_tool_use_id":  # its call was skipped: keep the result as text
        known = set(
            ToolUse.objects.filter(session=session, tool_use_id__in=message.tool_result_ids).values_list(
                "tool_use_id", flat=True
            )
        )
        message.content = _orphans_as_text(message.content, known)
        try:
            stored.created += ingest.message_append(session=session, messages=[message]).created
            return
        except InvalidInput as exc:
            problem = (exc.code, exc.detail)
    rejection_record(session=session, source=source, position=candidate.position, problem=problem)
    stored.rejected += 1


def rejection_record(
    *, session: AgentSession, source: str, position: str, problem: tuple[str, str] | None
) -> IngestRejection:
    """Keep what was skipped and why, for admins and the session's warnings."""
    code, detail = problem or ("invalid", "could not be stored")
    # An error may quote what it could not store: redacted before it is cut to fit.
    position = agent_sessions.fit(redaction.value_redact(session.project, position).value, 200)
    detail = agent_sessions.fit(redaction.value_redact(session.project, detail).value, 500)
    rejection = IngestRejection.objects.create(
        session=session, source=source, position=position, code=code[:50], detail=detail
    )
    AgentSession.objects.filter(pk=session.pk).update(
        rejected_count=F("rejected_count") + 1, rejected_reason=agent_sessions.fit(f"{position}: {detail}", 500)
    )
    return rejection


def message_extend(*, session: AgentSession, client_id: str, message: NormalizedMessage) -> Message | None:
    """Give a stored assistant message the longer content its response grew to: the stored blocks
    stay, the new ones follow them, so the context reads as if the response had arrived whole.

    Returns None, changing nothing, when the stored message can't take them as they came: it is
    gone, compacted, summarized or archived, or no longer starts with those blocks. The caller then
    stores the new blocks as a message of their own (a valid request either way)."""
    message = redaction.message_redact(session.project, message)  # compared with, and stored as, the redacted copy
    tokens = engine.offline_tokenizer().count_message(message.role, message.content)
    with transaction.atomic():
        locked = ingest.lock_open_session(session)
        row = Message.objects.select_for_update().filter(session=locked, client_id=client_id).first()
        if (
            row is None
            or row.role != message.role
            or row.state != MessageState.ACTIVE
            or row.compaction_id is not None
            or not isinstance(row.content, list)
            or not isinstance(message.content, list)
            or message.content[: len(row.content)] != row.content
        ):
            return None
        added = NormalizedMessage(role=message.role, content=message.content[len(row.content) :])
        ingest.check_tool_ids(locked, [added])
        ingest.stored_message_rewrite(locked, row, message, tokens)
        uses = [ToolUse(session=locked, tool_use_id=tid, seq=row.seq) for tid in added.tool_use_ids]
        if uses:
            ToolUse.objects.bulk_create(uses)
    return row
