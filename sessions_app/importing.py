"""Import a recorded transcript (Claude Code JSONL, OpenAI chat JSON, Anthropic Messages JSON) as
sessions: the main conversation as one, each sub-agent (sidechain) conversation as its own."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from compaction.messages import MessageError, normalize_message
from compaction.transcripts import Conversation, Transcript, TranscriptError, read_transcript

from . import services
from .errors import InvalidInput
from .models import AgentSession, Project


@dataclass
class ImportResult:
    session: AgentSession
    messages: int
    skipped: dict[str, int]
    sidechains: list[AgentSession] = field(default_factory=list)


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


def _sanitized(conversation: Conversation, skipped: Counter) -> list[Any]:
    """Validated messages; a tool_result whose call isn't in this conversation becomes text rather
    than failing the import (counted as ``orphan_tool_result``)."""
    calls: set[str] = set()
    out = []
    for i, raw in enumerate(conversation.messages):
        try:
            msg = normalize_message(raw, index=i)
        except MessageError:
            skipped["invalid_message"] += 1
            continue
        if isinstance(msg.content, list):
            blocks = []
            for block in msg.content:
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in calls:
                    skipped["orphan_tool_result"] += 1
                    inner = block.get("content", "")
                    if isinstance(inner, list):
                        inner = "\n".join(p.get("text", "") for p in inner if isinstance(p, dict))
                    block = {"type": "text", "text": f"[tool result for {block.get('tool_use_id')}]\n{inner}"}
                blocks.append(block)
            msg.content = blocks
            if msg.role == "tool" and not msg.tool_result_ids:
                msg.role = "user"
        calls.update(msg.tool_use_ids)
        out.append(msg)
    return out


def _store(
    *,
    user: AbstractBaseUser,
    project: Project,
    conversation: Conversation,
    name: str,
    model: str | None,
    context_window: int | None,
    auto_compact: bool | None,
    external_id: str,
    skipped: Counter,
    metadata: dict[str, Any],
) -> tuple[AgentSession, int]:
    messages = _sanitized(conversation, skipped)
    session = services.session_create(
        user=user,
        project=project,
        name=name,
        model=model or conversation.model or "claude-sonnet-4-5",
        system_prompt=conversation.system_prompt or "",
        tools=conversation.tools or [],
        external_id=external_id,
        context_window=context_window,
        auto_compact=auto_compact,
        metadata=metadata,
    )
    batch = settings.CTX_MAX_BATCH
    for start in range(0, len(messages), batch):
        services.message_append(session=session, messages=messages[start : start + batch])
    session.refresh_from_db()
    return session, len(messages)


@transaction.atomic
def session_import(
    *,
    user: AbstractBaseUser,
    project: Project,
    transcript: Transcript,
    name: str = "",
    model: str | None = None,
    context_window: int | None = None,
    auto_compact: bool | None = None,
    episode: int | None = None,
) -> ImportResult:
    conversation = _pick(transcript, episode)
    skipped: Counter = Counter(transcript.skipped)
    base_name = name or conversation.title or conversation.external_id or f"{transcript.format} import"
    external_id = conversation.external_id or ""
    session, count = _store(
        user=user,
        project=project,
        conversation=conversation,
        name=base_name,
        model=model,
        context_window=context_window,
        auto_compact=auto_compact,
        external_id=external_id,
        skipped=skipped,
        metadata={"imported_from": transcript.format, "conversation": conversation.key},
    )
    sidechains = []
    if episode is None:
        for n, side in enumerate((c for c in transcript.conversations if c.sidechain), start=1):
            side_session, _ = _store(
                user=user,
                project=project,
                conversation=side,
                name=f"{base_name} · sub-agent {n}",
                model=model,
                context_window=context_window,
                auto_compact=auto_compact,
                external_id=f"{external_id}:{side.key}" if external_id else "",
                skipped=skipped,
                metadata={"imported_from": transcript.format, "conversation": side.key, "sidechain_of": session.pk},
            )
            sidechains.append(side_session)
    return ImportResult(session=session, messages=count, skipped=dict(skipped), sidechains=sidechains)


def import_summary(result: ImportResult) -> dict[str, Any]:
    """What ``ctx import --json`` prints and ``POST /sessions/import/`` answers."""
    from .selectors import session_status

    return {
        "session": result.session.pk,
        "messages": result.messages,
        "status": session_status(result.session),
        "project": result.session.project_id,
        "skipped": result.skipped,
        "sidechains": [s.pk for s in result.sidechains],
    }
