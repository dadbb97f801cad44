"""Writes. Every change to ctxweb's data goes through a function here."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone

from compaction import jsonvalues
from compaction.messages import NormalizedMessage
from compaction.policy import PRESETS, preset
from compaction.tokens import OfflineTokenizer

from . import queueing
from .errors import Conflict, InvalidInput
from .models import (
    AgentSession,
    ApiKey,
    CompactionPolicy,
    Membership,
    Message,
    Project,
    Role,
    SessionStatus,
    ToolUse,
)


@lru_cache(maxsize=1)
def offline_tokenizer() -> OfflineTokenizer:
    return OfflineTokenizer()


# ----------------------------------------------------------------------------- projects


PROJECT_NAME_MAX = 200  # the column
PROJECT_DESCRIPTION_MAX = 10_000  # shown on every project page: a paragraph, not a document


@transaction.atomic
def project_create(*, user: AbstractBaseUser, name: str, description: str = "") -> Project:
    name = name.strip()
    if not name:
        raise InvalidInput("A project needs a name.", code="invalid_name", field="name")
    _check_text(name, "name", limit=PROJECT_NAME_MAX)
    _check_text(description, "description", limit=PROJECT_DESCRIPTION_MAX)
    project = Project.objects.create(name=name, description=description, created_by=user)
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    policy = CompactionPolicy(project=project)
    preset_name = settings.CTX_DEFAULT_POLICY_PRESET
    policy.apply_engine(preset(preset_name), preset_name=preset_name)
    policy.save()
    return project


@transaction.atomic
def membership_set(*, project: Project, user: AbstractBaseUser, role: str) -> Membership:
    if role not in Role.values:
        raise InvalidInput(f"Role must be one of {', '.join(Role.values)}.", code="invalid_role", field="role")
    if role != Role.ADMIN:
        _keep_an_admin(project, leaving=user)
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return membership


@transaction.atomic
def membership_remove(*, project: Project, user: AbstractBaseUser) -> None:
    _keep_an_admin(project, leaving=user)
    Membership.objects.filter(project=project, user=user).delete()


def _keep_an_admin(project: Project, *, leaving: AbstractBaseUser) -> None:
    """A project always keeps one admin, or nobody could manage it again."""
    admins = Membership.objects.select_for_update().filter(project=project, role=Role.ADMIN)
    if not admins.exclude(user=leaving).exists():
        raise Conflict("A project needs at least one admin; make someone else admin first.", code="last_admin")


def policy_update(*, policy: CompactionPolicy, changes: dict[str, Any]) -> CompactionPolicy:
    """Edited numbers: validated as in Django admin (the model's clean), then marked custom."""
    for name, value in changes.items():
        setattr(policy, name, value)
    policy.preset = "custom"
    policy.full_clean()
    policy.save()
    return policy


def policy_apply_preset(*, policy: CompactionPolicy, preset_name: str) -> CompactionPolicy:
    if preset_name not in PRESETS:
        raise InvalidInput(f"Unknown preset {preset_name!r}; choose one of {', '.join(PRESETS)}.", field="preset")
    keep_auto, keep_model = policy.auto, policy.summarizer_model
    policy.apply_engine(preset(preset_name), preset_name=preset_name)
    policy.auto, policy.summarizer_model = keep_auto, keep_model
    policy.full_clean()
    policy.save()
    return policy


# ----------------------------------------------------------------------------- sessions


# The columns' sizes; longer values are refused here rather than by the database.
SESSION_TEXT_LIMITS = {"name": 200, "model": 100, "external_id": 200}


def _check_text(value: Any, field: str, *, limit: int | None = None, nul: bool = True) -> None:
    """A string the database can hold: within ``limit`` characters, no NUL (unless ``nul`` is False),
    no lone surrogate. Raises InvalidInput naming the field."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string.", code="invalid", field=field)
    if limit is not None and len(value) > limit:
        raise InvalidInput(
            f"{field} is {len(value):,} characters long; at most {limit:,} are allowed.", code="too_long", field=field
        )
    if nul and "\x00" in value:
        raise InvalidInput(f"{field} must not contain NUL characters.", code="null_characters_not_allowed", field=field)
    if jsonvalues.has_lone_surrogate(value):
        raise InvalidInput(f"{field} holds a lone UTF-16 surrogate.", code="invalid_unicode", field=field)


def _check_session_fields(fields: dict[str, Any]) -> None:
    for field, value in fields.items():
        if field in SESSION_TEXT_LIMITS or field == "system_prompt":
            _check_text(value, field, limit=SESSION_TEXT_LIMITS.get(field))
    if "model" in fields and not fields["model"].strip():
        raise InvalidInput("model must name a model.", code="invalid_model", field="model")


def validate_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidInput("tools must be a list of tool schemas.", code="invalid_tools", field="tools")
    unstorable = jsonvalues.problem(tools, where="tools")
    if unstorable is not None:
        raise InvalidInput(unstorable[1] + ".", code=unstorable[0], field="tools")
    if jsonvalues.holds_nul(tools):
        raise InvalidInput("tools must not contain NUL characters.", code="null_characters_not_allowed", field="tools")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise InvalidInput(
                f"tools[{i}] must be an object with a string 'name'.", code="invalid_tools", field="tools"
            )
        schema = tool.get("input_schema", tool.get("parameters"))
        if schema is not None and not isinstance(schema, dict):
            raise InvalidInput(
                f"tools[{i}].input_schema must be a JSON schema object.", code="invalid_tools", field="tools"
            )
        if tool["name"] in names:
            raise InvalidInput(
                f"tools[{i}]: the name {tool['name']!r} is used twice.", code="invalid_tools", field="tools"
            )
        names.add(tool["name"])
    return tools


def session_create(
    *,
    user: AbstractBaseUser,
    project: Project,
    name: str = "",
    model: str = "claude-sonnet-4-5",
    system_prompt: str = "",
    tools: list[dict[str, Any]] | None = None,
    external_id: str = "",
    context_window: int | None = None,
    auto_compact: bool | None = None,
    parent: AgentSession | None = None,
    metadata: dict[str, Any] | None = None,
) -> AgentSession:
    tools = validate_tools(tools)
    _check_session_fields(
        {"name": name, "model": model, "external_id": external_id or "", "system_prompt": system_prompt or ""}
    )
    tokenizer = offline_tokenizer()
    session = AgentSession(
        project=project,
        owner=user,
        name=name,
        external_id=external_id or "",
        model=model,
        context_window_override=context_window,
        system_prompt=system_prompt or "",
        tools=tools,
        auto_compact=auto_compact,
        parent=parent,
        metadata=metadata or {},
        system_tokens=tokenizer.count_system(system_prompt),
        tool_tokens=tokenizer.count_tools(tools),
    )
    try:
        with transaction.atomic():
            session.save()
    except IntegrityError:
        raise Conflict(
            f"This project already has a session with external_id {external_id!r}.",
            code="duplicate_external_id",
            field="external_id",
        ) from None
    return session


SESSION_EDITABLE = ("name", "model", "system_prompt", "tools", "context_window_override", "auto_compact", "status")


def session_update(*, session: AgentSession, **changes: Any) -> AgentSession:
    unknown = set(changes) - set(SESSION_EDITABLE)
    if unknown:
        raise InvalidInput(f"Can't change {', '.join(sorted(unknown))}.", code="read_only")
    _check_session_fields({k: ("" if k == "system_prompt" and v is None else v) for k, v in changes.items()})
    tokenizer = offline_tokenizer()
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().get(pk=session.pk)
        fields = []
        for key, value in changes.items():
            if key == "tools":
                value = validate_tools(value)
                locked.tool_tokens = tokenizer.count_tools(value)
                fields.append("tool_tokens")
            if key == "system_prompt":
                value = value or ""
                locked.system_tokens = tokenizer.count_system(value)
                fields.append("system_tokens")
            setattr(locked, key, value)
            fields.append(key)
        if {"tools", "system_prompt", "model"} & set(changes):
            locked.exact_tokens = None  # the exact count described another request
            fields.append("exact_tokens")
        locked.save(update_fields=[*fields, "updated_at"])
    return locked


def session_delete(*, session: AgentSession) -> None:
    session.delete()


# ----------------------------------------------------------------------------- messages


@dataclass
class AppendResult:
    messages: list[Message]
    created: int
    session: AgentSession
    # client_ids that were already stored with another role or content: the stored message is answered
    mismatched: frozenset[str] = frozenset()


def message_append(*, session: AgentSession, messages: list[NormalizedMessage]) -> AppendResult:
    """Store a batch of validated messages at the end of a session, all or nothing.

    Counting happens before the lock (it is the slow part); seq assignment, the tool-call check,
    the insert and the running totals happen under the session's row lock, so concurrent appends
    get gapless seqs and totals that equal the sum over stored rows. A message whose client_id is
    already stored is not stored again: the stored one is answered in its place.
    """
    tokenizer = offline_tokenizer()
    counts = [tokenizer.count_message(m.role, m.content) for m in messages]
    now = timezone.now()
    with transaction.atomic():
        locked = lock_open_session(session)
        client_ids = [m.client_id for m in messages if m.client_id]
        existing = (
            {row.client_id: row for row in Message.objects.filter(session=locked, client_id__in=client_ids)}
            if client_ids
            else {}
        )
        fresh = [(m, n) for m, n in zip(messages, counts, strict=True) if not (m.client_id and m.client_id in existing)]
        check_tool_uses(locked, [m for m, _ in fresh])
        check_tool_results(locked, [m for m, _ in fresh])

        rows: list[Message] = []
        seq = locked.last_seq
        for msg, tokens in fresh:
            seq += 1
            created_at = msg.created_at or now
            if timezone.is_naive(created_at):
                created_at = created_at.replace(tzinfo=UTC)
            rows.append(
                Message(
                    session=locked,
                    seq=seq,
                    role=msg.role,
                    content=msg.content,
                    tokens=tokens,
                    client_id=msg.client_id,
                    created_at=created_at,
                    metadata=msg.metadata,
                )
            )
        if rows:
            Message.objects.bulk_create(rows)
            uses = [ToolUse(session=locked, tool_use_id=tid, seq=row.seq) for row in rows for tid in _tool_use_ids(row)]
            if uses:
                ToolUse.objects.bulk_create(uses)
            locked.last_seq = seq
            locked.message_count += len(rows)
            locked.active_message_count += len(rows)
            locked.message_tokens += sum(row.tokens for row in rows)
            locked.last_activity_at = now
            locked.save(
                update_fields=[
                    "last_seq",
                    "message_count",
                    "active_message_count",
                    "message_tokens",
                    "last_activity_at",
                    "updated_at",
                ]
            )
            after_append(locked)
    by_client = {row.client_id: row for row in rows if row.client_id}
    by_client.update(existing)
    ordered: list[Message] = []
    fresh_iter = iter(rows)
    for msg in messages:
        if msg.client_id and msg.client_id in existing:
            ordered.append(existing[msg.client_id])
        else:
            ordered.append(next(fresh_iter))
    mismatched = frozenset(
        m.client_id
        for m in messages
        if m.client_id in existing
        and (existing[m.client_id].role, existing[m.client_id].content) != (m.role, m.content)
    )
    return AppendResult(messages=ordered, created=len(rows), session=locked, mismatched=mismatched)


def lock_open_session(session: AgentSession) -> AgentSession:
    """The session's row, locked (inside a transaction), if it still takes messages."""
    locked = AgentSession.objects.select_for_update().get(pk=session.pk)
    if locked.status != SessionStatus.ACTIVE:
        raise Conflict(
            f"Session {locked.pk} is {locked.status.replace('_', ' ')}; append to its continuation instead.",
            code="session_closed",
        )
    return locked


def _tool_use_ids(row: Message) -> list[str]:
    if isinstance(row.content, str):
        return []
    return [b["id"] for b in row.content if isinstance(b, dict) and b.get("type") == "tool_use"]


def check_tool_uses(session: AgentSession, messages: list[NormalizedMessage]) -> None:
    """Every tool_use id is new in the session: a result must name exactly one call (Anthropic
    refuses a request that holds an id twice)."""
    ids = [tid for msg in messages for tid in msg.tool_use_ids]
    if not ids:
        return
    seen: set[str] = set()
    twice = next((tid for tid in ids if tid in seen or seen.add(tid)), None)  # type: ignore[func-returns-value]
    if twice is None:
        stored = ToolUse.objects.filter(session=session, tool_use_id__in=ids)
        twice = stored.values_list("tool_use_id", flat=True).first()
    if twice is not None:
        raise InvalidInput(
            f"tool_use id {twice!r} is used twice in this session; every tool call needs an id of its own.",
            code="duplicate_tool_use_id",
        )


def check_tool_results(session: AgentSession, messages: list[NormalizedMessage]) -> None:
    seen_in_batch: set[str] = set()
    needed: dict[str, int] = {}
    for index, msg in enumerate(messages):
        for result_id in msg.tool_result_ids:
            if result_id not in seen_in_batch:
                needed.setdefault(result_id, index)
        seen_in_batch.update(msg.tool_use_ids)
    if not needed:
        return
    known = set(
        ToolUse.objects.filter(session=session, tool_use_id__in=list(needed)).values_list("tool_use_id", flat=True)
    )
    missing = [tid for tid in needed if tid not in known]
    if missing:
        raise InvalidInput(
            f"tool_result for {missing[0]!r} has no earlier tool_use with that id in this session"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + ".",
            code="unknown_tool_use_id",
        )


def after_append(session: AgentSession) -> None:
    """Work an append sets off once it is committed: a compaction when the level calls for one, an
    exact count when a key is configured. Runs under the session's row lock."""
    from .compacting import auto_queue  # compacting imports this module

    auto_queue(session)
    if settings.ANTHROPIC_API_KEY:
        delay = settings.CTX_EXACT_COUNT_DEBOUNCE_SECONDS
        # One queued count per session per debounce window; it counts whatever is stored when it runs.
        if cache.add(f"ctx:exact-pending:{session.pk}", 1, timeout=delay):
            from .tasks import count_exact_tokens  # tasks import services: import late

            transaction.on_commit(lambda: queueing.send(count_exact_tokens, session.pk, countdown=delay))


# ----------------------------------------------------------------------------- API keys

API_KEY_PREFIX = "ctx_"
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash_key(raw: str) -> str:
    # Keys are 256-bit random strings: a plain SHA-256 is enough (no dictionary to defend against).
    return hashlib.sha256(raw.encode()).hexdigest()


def apikey_create(*, user: AbstractBaseUser, name: str = "") -> tuple[ApiKey, str]:
    """A new key for the user. The raw key is returned once and never stored."""
    raw = API_KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(user=user, name=name[:100], prefix=raw[:12], key_hash=_hash_key(raw))
    return key, raw


def apikey_revoke(*, key: ApiKey) -> ApiKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def apikey_authenticate(raw: str) -> ApiKey | None:
    if not raw.startswith(API_KEY_PREFIX) or len(raw) < 20:
        return None
    key = ApiKey.objects.select_related("user").filter(prefix=raw[:12], revoked_at__isnull=True).first()
    if key is None or not hmac.compare_digest(key.key_hash, _hash_key(raw)) or not key.user.is_active:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > _LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key
