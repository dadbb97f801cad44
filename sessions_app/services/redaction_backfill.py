"""``ctx redact``: what was stored before redaction came (or before a project's rules found more), with
its secrets replaced in place: messages and the originals kept for revert (recounted, the sessions'
totals and levels following), sessions' names, prompts, tools and metadata, checkpoints, handoff
documents, compactions' instructions and errors, skipped lines, webhook payloads, the pruner's kept
text; the raw transcript text the sync keeps is sealed. Table by table in batches of ``BATCH`` rows,
each batch one transaction; the last row done is kept per table (``BackfillCursor``), so a run stopped
anywhere continues there. Redacting is idempotent: a row already clean is read and left."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Model, QuerySet

from compaction import redact
from sessions_app.engine import offline_tokenizer
from sessions_app.models import (
    CONTEXT_STATES,
    AgentSession,
    ArchiveEntry,
    BackfillCursor,
    Checkpoint,
    Compaction,
    HandoffDocument,
    IngestRejection,
    Message,
    MessageBackup,
    Project,
    TranscriptChunk,
    WebhookDelivery,
)
from sessions_app.services import agent_sessions, redaction, sealing
from sessions_app.services.webhook_events import session_level_record

BATCH = 500
CURSOR = "redact:"


@dataclass
class Progress:
    table: str
    read: int = 0  # rows looked at so far, in this table
    changed: int = 0  # rows with a secret (written, unless a dry run)
    found: Counter[str] = field(default_factory=Counter)  # kind -> secrets
    position: int = 0  # the last primary key read
    left: int = 0  # rows after the cursor when the table was begun
    done: bool = False  # the table is finished


@dataclass(frozen=True)
class _Target:
    table: str
    rows: Callable[[], QuerySet[Any]]  # the table's rows, with what the rewrite needs
    fields: tuple[str, ...]  # what is redacted
    project_of: Callable[[Any], int]
    write: Callable[[list[tuple[Any, dict[str, Any], Counter[str]]]], None] | None = None  # else a plain save


def stored_redact(*, dry_run: bool = False, batch: int = BATCH, restart: bool = False) -> Iterator[Progress]:
    """Walk every table that holds what agents sent; yields after each batch. ``dry_run`` writes
    nothing and keeps no cursor; ``restart`` forgets where an earlier run stopped."""
    rules: dict[int, redact.Rules] = {}

    def rules_of(project_id: int) -> redact.Rules:
        if project_id not in rules:
            rules[project_id] = redaction.project_rules(Project.objects.select_related("policy").get(pk=project_id))
        return rules[project_id]

    for target in _TARGETS:
        name = CURSOR + target.table
        start = 0 if dry_run or restart else _cursor(name)
        progress = Progress(target.table, position=start, left=target.rows().filter(pk__gt=start).count())
        while True:
            rows = list(target.rows().filter(pk__gt=progress.position).order_by("pk")[:batch])
            if not rows:
                break
            changes = []
            for row in rows:
                found: Counter[str] = Counter()
                new = {}
                for name_ in target.fields:
                    done = redact.redact(getattr(row, name_), rules_of(target.project_of(row)))
                    if done.found:
                        new[name_] = done.value
                        found.update(done.found)
                if new:
                    changes.append((row, new, found))
                    progress.found.update(found)
            progress.read += len(rows)
            progress.changed += len(changes)
            progress.position = rows[-1].pk
            if not dry_run:
                with transaction.atomic():
                    if changes:
                        (target.write or _save)(changes)
                    BackfillCursor.objects.update_or_create(name=name, defaults={"position": progress.position})
            yield progress
        progress.done = True
        yield progress
    if not dry_run:  # the sync's raw text is needed byte for byte: sealed, not redacted
        _seal_chunks()


def _cursor(name: str) -> int:
    return BackfillCursor.objects.filter(name=name).values_list("position", flat=True).first() or 0


def _save(changes: list[tuple[Any, dict[str, Any], Counter[str]]]) -> None:
    for row, new, _ in changes:
        for name, value in new.items():
            setattr(row, name, value)
        row.save(update_fields=list(new))


def _messages_write(changes: list[tuple[Any, dict[str, Any], Counter[str]]]) -> None:
    """Messages recounted as stored; each session's totals, exact count and audit follow, its level too."""
    tokenizer = offline_tokenizer()
    by_session: dict[int, list[tuple[Any, dict[str, Any], Counter[str]]]] = {}
    for change in changes:
        by_session.setdefault(change[0].session_id, []).append(change)
    sessions = AgentSession.objects.select_for_update().select_related("project").filter(pk__in=by_session)
    for session in sessions.order_by("pk"):
        delta, found = 0, Counter[str]()
        for row, new, kinds in by_session[session.pk]:
            content = new.get("content", row.content)
            tokens = tokenizer.count_message(row.role, content)
            if row.state in CONTEXT_STATES:
                delta += tokens - row.tokens
            Message.objects.filter(pk=row.pk).update(**new, tokens=tokens, tokens_exact=None)
            found.update(kinds)
        session.message_tokens += delta
        session.exact_upto_seq = None  # the exact count described the messages as they were
        fields = ["message_tokens", "exact_upto_seq", *redaction.redactions_add(session, found)]
        session.save(update_fields=[*fields, "updated_at"])
        session_level_record(session)


def _backups_write(changes: list[tuple[Any, dict[str, Any], Counter[str]]]) -> None:
    tokenizer = offline_tokenizer()
    for row, new, _ in changes:
        tokens = tokenizer.count_message(row.message.role, new["content"])
        MessageBackup.objects.filter(pk=row.pk).update(content=new["content"], tokens=tokens)


def _sessions_write(changes: list[tuple[Any, dict[str, Any], Counter[str]]]) -> None:
    """Through ``session_update`` (its token counts and level follow); the metadata as it is."""
    for row, new, _ in changes:
        texts = {k: v for k, v in new.items() if k in ("name", "system_prompt", "tools")}
        if texts:
            agent_sessions.session_update(session=row, **texts)
        if "metadata" in new:
            AgentSession.objects.filter(pk=row.pk).update(metadata=new["metadata"])


def _seal_chunks() -> None:
    """The sync's raw text, sealed where it was kept before sealing came (a chunk is one upload)."""
    for pk, data in TranscriptChunk.objects.values_list("pk", "data").iterator(chunk_size=BATCH):
        if not sealing.is_sealed(bytes(data)):
            TranscriptChunk.objects.filter(pk=pk).update(data=sealing.seal_bytes(bytes(data)))


def _by_session(model: type[Model], *fields: str) -> Callable[[], QuerySet[Any]]:
    return lambda: model._default_manager.select_related("session").only("pk", "session__project_id", *fields)


_TARGETS = (
    _Target(
        "messages",
        lambda: Message.objects.only(
            "pk", "session_id", "session__project_id", "role", "state", "tokens", "content", "metadata"
        ).select_related("session"),
        ("content", "metadata"),
        lambda row: row.session.project_id,
        _messages_write,
    ),
    _Target(
        "message backups",
        lambda: MessageBackup.objects.select_related("message__session").only(
            "pk", "content", "message__role", "message__session__project_id"
        ),
        ("content",),
        lambda row: row.message.session.project_id,
        _backups_write,
    ),
    _Target(
        "sessions",
        lambda: AgentSession.objects.select_related("project"),
        ("name", "system_prompt", "tools", "metadata"),
        lambda row: row.project_id,
        _sessions_write,
    ),
    _Target("checkpoints", _by_session(Checkpoint, "data"), ("data",), lambda row: row.session.project_id),
    _Target(
        "handoff documents",
        _by_session(HandoffDocument, "text", "markdown", "data"),
        ("text", "markdown", "data"),
        lambda row: row.session.project_id,
    ),
    _Target(
        "compactions",
        lambda: Compaction.objects.only("pk", "project_id", "instructions", "error", "notes"),
        ("instructions", "error", "notes"),
        lambda row: row.project_id,
    ),
    _Target(
        "skipped lines",
        _by_session(IngestRejection, "position", "detail"),
        ("position", "detail"),
        lambda row: row.session.project_id,
    ),
    _Target(
        "webhook deliveries",
        lambda: WebhookDelivery.objects.select_related("webhook").only("pk", "payload", "webhook__project_id"),
        ("payload",),
        lambda row: row.webhook.project_id,
    ),
    _Target(
        "archive",
        lambda: ArchiveEntry.objects.only("pk", "project_id", "content"),
        ("content",),
        lambda r: r.project_id,
    ),
    _Target(
        "projects", lambda: Project.objects.only("pk", "context_document"), ("context_document",), lambda row: row.pk
    ),
)
