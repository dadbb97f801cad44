"""Import a recorded transcript (Claude Code JSONL, OpenAI chat JSON, Anthropic Messages JSON) as
sessions: the main conversation as one, each sub-agent (sidechain) conversation as its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from django.db import transaction

from compaction import jsonvalues
from compaction.transcripts import Conversation, Transcript, TranscriptError, read_transcript
from sessions_app.errors import InvalidInput
from sessions_app.models import SIDECHAIN_OF, AgentSession, Project
from sessions_app.selectors.usage import session_status
from sessions_app.services import agent_sessions, recorded, transcript_usage
from sessions_app.services.progress import Progress, ticker

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

DEFAULT_MODEL = "claude-sonnet-4-5"  # when the transcript names no model


@dataclass
class ImportResult:
    session: AgentSession
    messages: int
    skipped: dict[str, int]
    sidechains: list[AgentSession] = field(default_factory=list)
    rejected: int = 0  # messages that could not be stored (each an IngestRejection of its session)
    cleaned: dict[str, int] = field(default_factory=dict)  # what was made storable, by kind

    @property
    def appended_to(self) -> list[int]:
        """The sessions the import stored messages in, for the caller's ``tasks.followup_send``."""
        return [s.pk for s in (self.session, *self.sidechains) if s.message_count]


def transcript_parse(data: bytes | str, fmt: str) -> Transcript:
    try:
        return read_transcript(data, fmt)
    except TranscriptError as exc:
        raise InvalidInput(str(exc), code="invalid_transcript") from None


def _pick(transcript: Transcript, episode: int | None) -> Conversation:
    main = [c for c in transcript.conversations if not c.sidechain]
    if not main:
        raise InvalidInput("The file holds no conversation to import.", code="empty_transcript")
    if episode is None:
        return main[0]
    if not 0 <= episode < len(main):
        raise InvalidInput(
            f"Episode {episode} doesn't exist; this file holds {len(main)} (0–{len(main) - 1}).", code="invalid_episode"
        )
    return main[episode]


def _store(
    *,
    user: User,
    project: Project,
    conversation: Conversation,
    name: str,
    model: str | None,
    context_window: int | None,
    auto_compact: bool | None,
    external_id: str,
    messages: list[recorded.Candidate],
    metadata: dict[str, Any],
    advance: Callable[[int], None],
) -> tuple[AgentSession, recorded.Stored]:
    session = agent_sessions.session_create(
        user=user,
        project=project,
        name=agent_sessions.fit(name, recorded.NAME_MAX, project=project),
        model=model or recorded.model_name(conversation.model) or DEFAULT_MODEL,
        system_prompt=jsonvalues.clean_text(conversation.system_prompt or ""),
        tools=conversation.tools or [],
        external_id=agent_sessions.fit(external_id, recorded.EXTERNAL_ID_MAX),
        context_window=context_window,
        auto_compact=auto_compact,
        metadata=metadata,
    )
    # The rows first: a compaction the transcript records measures the context with the harness they show.
    responses = conversation.responses.values()
    transcript_usage.transcript_requests_record(session=session, keyed_by=session, responses=responses)
    stored = recorded.conversation_append(
        session=session,
        conversation=conversation,
        candidates=messages,
        start=0,
        source="import",
        advance=advance,
        before_boundary=partial(transcript_usage.transcript_harness_record, session=session, keyed_by=session),
    )
    transcript_usage.transcript_exact_record(session=session, keyed_by=session)
    session.refresh_from_db()
    return session, stored


@transaction.atomic
def session_import(
    *,
    user: User,
    project: Project,
    transcript: Transcript,
    name: str = "",
    model: str | None = None,
    context_window: int | None = None,
    auto_compact: bool | None = None,
    episode: int | None = None,
    on_progress: Progress | None = None,
) -> ImportResult:
    """``on_progress(done, total)``: messages handled of all the file's conversations to import."""
    conversation = _pick(transcript, episode)
    skipped: Counter = Counter(transcript.skipped)
    sides = [c for c in transcript.conversations if c.sidechain] if episode is None else []
    # Read first, then stored: the total is known before the first message is.
    main_messages = recorded.candidates(conversation, skipped)
    side_messages = [recorded.candidates(side, skipped) for side in sides]
    advance = ticker(on_progress, len(main_messages) + sum(len(m) for m in side_messages))
    base_name = name or conversation.title or conversation.external_id or f"{transcript.format} import"
    external_id = conversation.external_id or ""
    session, stored = _store(
        user=user,
        project=project,
        conversation=conversation,
        name=base_name,
        model=model,
        context_window=context_window,
        auto_compact=auto_compact,
        external_id=external_id,
        messages=main_messages,
        metadata={"imported_from": transcript.format, "conversation": conversation.key},
        advance=advance,
    )
    sidechains = []
    rejected = stored.rejected
    for n, (side, messages) in enumerate(zip(sides, side_messages, strict=True), start=1):
        side_session, side_stored = _store(
            user=user,
            project=project,
            conversation=side,
            name=f"{base_name} · sub-agent {n}",
            model=model,
            context_window=context_window,
            auto_compact=auto_compact,
            external_id=f"{external_id}:{side.key}" if external_id else "",
            messages=messages,
            metadata={"imported_from": transcript.format, "conversation": side.key, SIDECHAIN_OF: session.pk},
            advance=advance,
        )
        sidechains.append(side_session)
        rejected += side_stored.rejected
    return ImportResult(
        session=session,
        messages=stored.created,
        skipped=dict(skipped),
        sidechains=sidechains,
        rejected=rejected,
        cleaned=dict(transcript.cleaned),
    )


def import_summary(result: ImportResult) -> dict[str, Any]:
    """What ``ctx import --json`` prints and ``POST /sessions/import/`` answers."""
    return {
        "session": result.session.pk,
        "messages": result.messages,
        "status": session_status(result.session),
        "project": result.session.project_id,
        "skipped": result.skipped,
        "rejected": result.rejected,
        "cleaned": result.cleaned,
        "sidechains": [s.pk for s in result.sidechains],
    }
