"""The pruner (docs/OPERATIONS.md, "The pruner"): archive what has gone quiet, purge what may no longer be
reverted, trim the project context document — and log each action.

- Messages of a session inactive longer than its policy's ``prune_days`` are archived: their state
  becomes ``archived`` (out of the context, still listed and downloadable) and the session is closed
  as ``archived``. A session with a compaction still inside its revert window waits for it.
- Backups of compactions whose revert window has passed are purged.
- A project context document longer than ``context_doc_max_lines`` loses its oldest lines to the
  archive log, while every Markdown header stays where it was.

A dry run computes the same plan and writes nothing, so its counts are the real run's counts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from sessions_app.models import (
    ACTIVE_COMPACTION_STATUSES,
    CONTEXT_STATES,
    AgentSession,
    ArchiveEntry,
    ArchiveKind,
    Compaction,
    CompactionStatus,
    Message,
    MessageBackup,
    MessageState,
    Project,
    SessionStatus,
    TranscriptChunk,
)
from sessions_app.selectors.usage import project_policy, session_usage
from sessions_app.services.progress import Progress, ticker

ARCHIVABLE_STATES = (*CONTEXT_STATES, MessageState.SUMMARIZED)


def _sha256(value: Any) -> str:
    data = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


# Rows read at a time when hashing what is archived or purged: one session's messages can be many MB.
STREAM_ROWS = 500


def _sha256_of_list(items: Iterable[Any]) -> str:
    """``_sha256(list(items))``, without holding the list: the same JSON text, hashed as it is made."""
    digest = hashlib.sha256(b"[")
    for index, item in enumerate(items):
        digest.update(((", " if index else "") + json.dumps(item, sort_keys=True, ensure_ascii=False)).encode("utf-8"))
    digest.update(b"]")
    return digest.hexdigest()


PARTS = ("sessions", "backups", "documents")


@dataclass
class SessionArchive:
    session_id: int
    project_id: int
    cutoff: datetime  # still inactive since before this when archived, or left alone
    messages: int  # how many of its messages are archived (a plan holds counts, never the rows)


@dataclass
class DocumentTrim:
    project_id: int
    kept: str
    archived: str
    lines: int


@dataclass
class PrunePlan:
    now: datetime
    sessions: list[SessionArchive] = field(default_factory=list)
    backups: dict[int, int] = field(default_factory=dict)  # compaction id → how many backups
    documents: list[DocumentTrim] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "sessions_archived": len(self.sessions),
            "messages_archived": sum(s.messages for s in self.sessions),
            "backups_purged": sum(self.backups.values()),
            "context_documents_trimmed": len(self.documents),
            "context_lines_archived": sum(d.lines for d in self.documents),
        }


def trim_document(text: str, max_lines: int) -> tuple[str, str]:
    """(kept, archived): drop the oldest non-header lines until the document fits; headers stay."""
    lines = text.splitlines()
    excess = len(lines) - max_lines
    if excess <= 0:
        return text, ""
    kept, archived = [], []
    for line in lines:
        if excess > 0 and not line.lstrip().startswith("#"):
            archived.append(line)
            excess -= 1
        else:
            kept.append(line)
    return "\n".join(kept) + ("\n" if text.endswith("\n") else ""), "\n".join(archived)


def prune_plan(
    *, now: datetime | None = None, older_than_days: int | None = None, parts: tuple[str, ...] = PARTS
) -> PrunePlan:
    """What a run would do now. ``older_than_days`` overrides every policy's ``prune_days``."""
    now = now or timezone.now()
    plan = PrunePlan(now=now)
    if "sessions" in parts:
        plan.sessions = _inactive_sessions(now, older_than_days)
    if "backups" in parts:
        plan.backups = _expired_backups(now)
    if "documents" in parts:
        plan.documents = _long_documents()
    return plan


def _inactive_sessions(now: datetime, older_than_days: int | None) -> list[SessionArchive]:
    """Per project (its policy's cutoff), the sessions quiet since before it: the session index
    (project, status, last activity) finds them without reading the others."""
    # Not while a compaction may still be reverted, or is queued or running.
    busy = Compaction.objects.filter(
        Q(status=CompactionStatus.SUCCEEDED, revertible_until__gt=now) | Q(status__in=ACTIVE_COMPACTION_STATUSES)
    ).values("session_id")
    found = []
    for project in Project.objects.select_related("policy").order_by("pk"):
        days = older_than_days if older_than_days is not None else project_policy(project).prune_days
        cutoff = now - timedelta(days=days)
        quiet = (
            AgentSession.objects.filter(project=project, last_activity_at__lte=cutoff)
            .exclude(status=SessionStatus.ARCHIVED)
            .exclude(pk__in=busy)
            .annotate(archivable=Count("messages", filter=Q(messages__state__in=ARCHIVABLE_STATES)))
            .order_by("pk")
            .values_list("pk", "archivable")
        )
        found += [SessionArchive(pk, project.pk, cutoff, archivable) for pk, archivable in quiet]
    return found


def _expired_backups(now: datetime) -> dict[int, int]:
    """Backups no revert can use any more (the window passed, or the compaction was reverted): how
    many, per compaction."""
    expired = Compaction.objects.filter(Q(revertible_until__lt=now) | Q(status=CompactionStatus.REVERTED))
    counted = expired.annotate(n=Count("backups")).filter(n__gt=0).order_by("pk").values_list("pk", "n")
    return dict(counted)


def _long_documents() -> list[DocumentTrim]:
    trims = []
    for project in Project.objects.exclude(context_document="").select_related("policy").order_by("pk"):
        kept, archived = trim_document(project.context_document, project.policy.context_doc_max_lines)
        if archived:
            trims.append(DocumentTrim(project.pk, kept, archived, len(archived.splitlines())))
    return trims


def prune_run(
    *,
    now: datetime | None = None,
    older_than_days: int | None = None,
    dry_run: bool = False,
    parts: tuple[str, ...] = PARTS,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Plan, then (unless ``dry_run``) carry the plan out in one transaction; answers the counts.
    ``on_progress(done, total)``: after each session archived, compaction's backups purged, document
    trimmed (the CLI's progress bar)."""
    plan = prune_plan(now=now, older_than_days=older_than_days, parts=parts)
    if not dry_run:
        # Each session, compaction and document in a transaction of its own: a run over months of
        # history holds no lock for long and no more than one session's rows at a time.
        total = len(plan.sessions) + len(plan.backups) + len(plan.documents)
        tick = ticker(on_progress, total)
        _archive_sessions(plan, tick)
        _purge_backups(plan, tick)
        _trim_documents(plan, tick)
    return {"dry_run": dry_run, **plan.counts()}


def _archive_sessions(plan: PrunePlan, tick: Callable[[int], None]) -> None:
    for item in plan.sessions:
        tick(1)
        with transaction.atomic():
            _archive_session(plan, item)


def _archive_session(plan: PrunePlan, item: SessionArchive) -> None:
    session = AgentSession.objects.select_for_update().get(pk=item.session_id)
    if session.status == SessionStatus.ARCHIVED or session.last_activity_at > item.cutoff:
        return  # archived or active again meanwhile: never twice, never a live session
    archivable = Message.objects.filter(session=session, state__in=ARCHIVABLE_STATES).order_by("seq")
    span = archivable.aggregate(first=Min("seq"), last=Max("seq"))
    content_hash = _sha256_of_list(archivable.values_list("content", flat=True).iterator(chunk_size=STREAM_ROWS))
    archived = archivable.update(state=MessageState.ARCHIVED)
    # The text a transcript sync re-reads: a later upload gets the whole file again (or session_closed).
    TranscriptChunk.objects.filter(session=session).delete()
    session.status = SessionStatus.ARCHIVED
    session.active_message_count = 0
    session.message_tokens = 0
    session.exact_upto_seq = None
    current = session_usage(session)  # what is left: its summary, prompt and tools (no announcement)
    session.level, session.usage_percent = current.level.value, current.usage_percent
    session.save(
        update_fields=[
            "status",
            "active_message_count",
            "message_tokens",
            "exact_upto_seq",
            "level",
            "usage_percent",
            "updated_at",
        ]
    )
    seqs = f"seq {span['first']}–{span['last']}" if archived else "no messages"
    ArchiveEntry.objects.create(
        kind=ArchiveKind.MESSAGES,
        project_id=item.project_id,
        session_id=item.session_id,
        what=f"{archived} messages of session {item.session_id} ({seqs}), inactive since "
        f"{session.last_activity_at:%Y-%m-%d}",
        items=archived,
        content_hash=content_hash,
        location=f"session {item.session_id}, state archived (GET /api/v1/sessions/{item.session_id}/messages/"
        "?state=archived)",
        created_at=plan.now,
    )


def _purge_backups(plan: PrunePlan, tick: Callable[[int], None]) -> None:
    for compaction_id in plan.backups:
        tick(1)
        with transaction.atomic():
            _purge_compaction_backups(plan, compaction_id)


def _purge_compaction_backups(plan: PrunePlan, compaction_id: int) -> None:
    compaction = Compaction.objects.select_for_update(of=("self",)).select_related("session").get(pk=compaction_id)
    rows = MessageBackup.objects.filter(compaction=compaction)
    content_hash = _sha256_of_list(
        rows.order_by("pk").values_list("content", flat=True).iterator(chunk_size=STREAM_ROWS)
    )
    deleted, _ = rows.delete()
    if not deleted:
        return
    ArchiveEntry.objects.create(
        kind=ArchiveKind.BACKUPS,
        project_id=compaction.session.project_id,
        session_id=compaction.session_id,
        what=f"{deleted} revert backups of compaction {compaction_id} ({compaction.status}; revert window "
        f"ended {compaction.revertible_until:%Y-%m-%d %H:%M})"
        if compaction.revertible_until
        else f"{deleted} revert backups of compaction {compaction_id} ({compaction.status})",
        items=deleted,
        content_hash=content_hash,
        location="purged (the compaction can no longer be reverted)",
        created_at=plan.now,
    )


def _trim_documents(plan: PrunePlan, tick: Callable[[int], None]) -> None:
    for planned in plan.documents:
        tick(1)
        project = Project.objects.select_for_update(of=("self",)).select_related("policy").get(pk=planned.project_id)
        # Trim what is there now (it may have been edited since the plan), not the planned text.
        kept, archived = trim_document(project.context_document, project.policy.context_doc_max_lines)
        if not archived:
            continue
        trim = DocumentTrim(project.pk, kept, archived, len(archived.splitlines()))
        project.context_document = trim.kept
        project.save(update_fields=["context_document"])
        ArchiveEntry.objects.create(
            kind=ArchiveKind.CONTEXT_DOCUMENT,
            project=project,
            what=f"the oldest {trim.lines} lines of {project.name!r}'s context document (headers kept)",
            items=trim.lines,
            content_hash=_sha256(trim.archived),
            location="this archive entry (content)",
            content=trim.archived,
            created_at=plan.now,
        )
