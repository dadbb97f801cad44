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
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
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
)
from sessions_app.services.progress import Progress, ticker

ARCHIVABLE_STATES = (*CONTEXT_STATES, MessageState.SUMMARIZED)


def _sha256(value: Any) -> str:
    data = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


PARTS = ("sessions", "backups", "documents")


@dataclass
class SessionArchive:
    session_id: int
    project_id: int
    cutoff: datetime  # still inactive since before this when archived, or left alone
    message_ids: list[int]
    first_seq: int
    last_seq: int


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
    backups: dict[int, list[int]] = field(default_factory=dict)  # compaction id → backup ids
    documents: list[DocumentTrim] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "sessions_archived": len(self.sessions),
            "messages_archived": sum(len(s.message_ids) for s in self.sessions),
            "backups_purged": sum(len(ids) for ids in self.backups.values()),
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
    found = []
    candidates = AgentSession.objects.exclude(status=SessionStatus.ARCHIVED).select_related("project__policy")
    # Not while a compaction may still be reverted, or is queued or running.
    busy = Compaction.objects.filter(
        Q(status=CompactionStatus.SUCCEEDED, revertible_until__gt=now) | Q(status__in=ACTIVE_COMPACTION_STATUSES)
    ).values_list("session_id", flat=True)
    for session in candidates.exclude(pk__in=busy).order_by("pk"):
        days = older_than_days if older_than_days is not None else session.project.policy.prune_days
        cutoff = now - timedelta(days=days)
        if session.last_activity_at > cutoff:
            continue
        rows = list(
            Message.objects.filter(session=session, state__in=ARCHIVABLE_STATES)
            .order_by("seq")
            .values_list("pk", "seq")
        )
        seqs = [seq for _, seq in rows] or [0]
        found.append(SessionArchive(session.pk, session.project_id, cutoff, [pk for pk, _ in rows], seqs[0], seqs[-1]))
    return found


def _expired_backups(now: datetime) -> dict[int, list[int]]:
    """Backups no revert can use any more: the window passed, or the compaction was reverted."""
    expired = MessageBackup.objects.filter(
        Q(compaction__revertible_until__lt=now) | Q(compaction__status=CompactionStatus.REVERTED)
    ).values_list("compaction_id", "pk")
    backups: dict[int, list[int]] = defaultdict(list)
    for compaction_id, pk in expired.order_by("compaction_id", "pk"):
        backups[compaction_id].append(pk)
    return dict(backups)


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
        total = len(plan.sessions) + len(plan.backups) + len(plan.documents)
        tick = ticker(on_progress, total)
        with transaction.atomic():
            _archive_sessions(plan, tick)
            _purge_backups(plan, tick)
            _trim_documents(plan, tick)
    return {"dry_run": dry_run, **plan.counts()}


def _archive_sessions(plan: PrunePlan, tick: Callable[[int], None]) -> None:
    for item in plan.sessions:
        tick(1)
        session = AgentSession.objects.select_for_update().get(pk=item.session_id)
        if session.status == SessionStatus.ARCHIVED or session.last_activity_at > item.cutoff:
            continue  # archived or active again meanwhile: never twice, never a live session
        contents = list(
            Message.objects.filter(pk__in=item.message_ids).order_by("seq").values_list("content", flat=True)
        )
        Message.objects.filter(pk__in=item.message_ids).update(state=MessageState.ARCHIVED)
        session.status = SessionStatus.ARCHIVED
        session.active_message_count = 0
        session.message_tokens = 0
        session.exact_upto_seq = None
        session.save(update_fields=["status", "active_message_count", "message_tokens", "exact_upto_seq", "updated_at"])
        span = f"seq {item.first_seq}–{item.last_seq}" if item.message_ids else "no messages"
        ArchiveEntry.objects.create(
            kind=ArchiveKind.MESSAGES,
            project_id=item.project_id,
            session_id=item.session_id,
            what=f"{len(item.message_ids)} messages of session {item.session_id} ({span}), inactive since "
            f"{session.last_activity_at:%Y-%m-%d}",
            items=len(item.message_ids),
            content_hash=_sha256(contents),
            location=f"session {item.session_id}, state archived (GET /api/v1/sessions/{item.session_id}/messages/"
            "?state=archived)",
            created_at=plan.now,
        )


def _purge_backups(plan: PrunePlan, tick: Callable[[int], None]) -> None:
    for compaction_id, ids in plan.backups.items():
        tick(1)
        rows = MessageBackup.objects.filter(pk__in=ids).select_related("compaction__session")
        contents = [content for content in rows.order_by("pk").values_list("content", flat=True)]
        compaction = Compaction.objects.select_related("session").get(pk=compaction_id)
        deleted, _ = rows.delete()
        if not deleted:
            continue
        ArchiveEntry.objects.create(
            kind=ArchiveKind.BACKUPS,
            project_id=compaction.session.project_id,
            session_id=compaction.session_id,
            what=f"{deleted} revert backups of compaction {compaction_id} ({compaction.status}; revert window "
            f"ended {compaction.revertible_until:%Y-%m-%d %H:%M})"
            if compaction.revertible_until
            else f"{deleted} revert backups of compaction {compaction_id} ({compaction.status})",
            items=deleted,
            content_hash=_sha256(contents),
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
