"""Reads. Every query is scoped to what the asking user may see."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from compaction import context as engine_context
from compaction import model_catalog
from compaction.policy import Policy, preset
from compaction.tokens import DEFAULT_FRAMING, calibrate
from compaction.types import Level, Usage
from compaction.usage import compute_usage, recommendation, usage_warnings

from .errors import Forbidden, NotFound
from .models import (
    CONTEXT_STATES,
    FALLBACK_NOTE,
    ROLE_RANK,
    AgentSession,
    Checkpoint,
    Compaction,
    CompactionStatus,
    HandoffDocument,
    Membership,
    Message,
    ModelProfile,
    Project,
    Role,
)

# ----------------------------------------------------------------------------- access


def as_pk(ref: Any) -> int | None:
    """A reference that is a primary key: ASCII digits within a bigint, else None. (``str.isdigit``
    also holds for "²" and other digits ``int()`` refuses.)"""
    ref = str(ref)
    if not (ref.isascii() and ref.isdigit()):
        return None
    pk = int(ref)
    return pk if pk < 2**63 else None


def _storable(*values: Any) -> bool:
    """Whether these strings could match stored text: PostgreSQL refuses U+0000 in a query's text
    (as it refuses to store it), so a value holding one matches nothing."""
    return not any(isinstance(v, str) and "\x00" in v for v in values)


def project_list_for(user: AbstractBaseUser) -> QuerySet[Project]:
    return Project.objects.filter(memberships__user=user).distinct()


def role_in(user: AbstractBaseUser, project_id: int) -> Role | None:
    if not user.is_authenticated:
        return None
    role = Membership.objects.filter(project_id=project_id, user=user).values_list("role", flat=True).first()
    return Role(role) if role else None


def _require(role: Role | None, min_role: Role, what: str) -> None:
    if role is None:
        raise NotFound(f"{what} not found.")
    if ROLE_RANK[role] < ROLE_RANK[min_role]:
        raise Forbidden(f"Your role in this project ({role.value}) can't do this; it needs {min_role.value}.")


def project_get_for(user: AbstractBaseUser, project_id: Any, *, min_role: Role = Role.VIEWER) -> Project:
    try:
        pid = int(project_id)
    except (TypeError, ValueError):
        raise NotFound("Project not found.") from None
    if not 0 < pid < 2**63:
        raise NotFound("Project not found.")
    project = Project.objects.filter(pk=pid).first()
    _require(role_in(user, pid) if project else None, min_role, "Project")
    return project


def project_find_for(user: AbstractBaseUser, ref: str, *, min_role: Role = Role.VIEWER) -> Project:
    """A project by id or by name, among the user's projects."""
    if as_pk(ref) is not None:
        return project_get_for(user, ref, min_role=min_role)
    matches = list(project_list_for(user).filter(name=ref)[:2]) if _storable(ref) else []
    if not matches:
        raise NotFound(f"No project named {ref!r} among yours.")
    if len(matches) > 1:
        raise NotFound(f"Several of your projects are named {ref!r}; use the id.")
    return project_get_for(user, matches[0].pk, min_role=min_role)


def session_list_for(
    user: AbstractBaseUser, *, project: Any = None, status: str | None = None, q: str | None = None
) -> QuerySet[AgentSession]:
    qs = AgentSession.objects.filter(project__memberships__user=user).select_related("project", "project__policy")
    if project not in (None, ""):
        try:
            qs = qs.filter(project_id=int(project))
        except (TypeError, ValueError):
            return qs.none()
    if not _storable(status, q):
        return qs.none()
    if status:
        qs = qs.filter(status=status)
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(external_id__icontains=q) | Q(model__icontains=q))
    return qs.distinct()


def session_get_for(user: AbstractBaseUser, session_ref: Any, *, min_role: Role = Role.VIEWER) -> AgentSession:
    """A session by id (or, for strings that aren't ids, by external id) that the user may see."""
    qs = AgentSession.objects.select_related("project", "project__policy")
    ref = str(session_ref)
    pk = as_pk(ref)
    session = qs.filter(pk=pk).first() if pk is not None else None
    role = role_in(user, session.project_id) if session else None
    if role is None and ref and _storable(ref):
        # Not an id of theirs: maybe an external id (the agent's own session id) in one of their projects.
        candidates = list(qs.filter(external_id=ref, project__memberships__user=user)[:2])
        if len(candidates) == 1:
            session = candidates[0]
            role = role_in(user, session.project_id)
    _require(role, min_role, "Session")
    return session


def _owned(model: type, user: AbstractBaseUser, pk: Any, *, min_role: Role, what: str) -> Any:
    """A row hanging off a session, scoped like its session: 404 outside the user's projects."""
    key = as_pk(pk)
    row = None if key is None else model.objects.select_related("session", "session__project").filter(pk=key).first()
    _require(role_in(user, row.session.project_id) if row else None, min_role, what)
    return row


def compaction_get_for(user: AbstractBaseUser, pk: Any, *, min_role: Role = Role.VIEWER) -> Compaction:
    return _owned(Compaction, user, pk, min_role=min_role, what="Compaction")


def checkpoint_get_for(user: AbstractBaseUser, pk: Any) -> Checkpoint:
    return _owned(Checkpoint, user, pk, min_role=Role.VIEWER, what="Checkpoint")


def handoff_get_for(user: AbstractBaseUser, pk: Any) -> HandoffDocument:
    return _owned(HandoffDocument, user, pk, min_role=Role.VIEWER, what="Handoff")


def message_list(session: AgentSession, *, state: str = "active", after_seq: int | None = None) -> QuerySet[Message]:
    """``active``: what the model sees (untouched or reversibly compacted); ``all``: every stored message;
    or one state by name."""
    qs = Message.objects.filter(session=session)
    if state == "active":
        qs = qs.filter(state__in=CONTEXT_STATES)
    elif state != "all":
        qs = qs.filter(state=state)
    if after_seq is not None:
        qs = qs.filter(seq__gt=after_seq)
    return qs.order_by("seq")


# ----------------------------------------------------------------------------- models and policy


@dataclass(frozen=True)
class ModelInfo:
    name: str
    context_window: int
    max_output_tokens: int
    calibration: float
    known: bool


_PROFILE_CACHE: dict[str, Any] = {"at": 0.0, "rows": {}}
_PROFILE_TTL = 30.0


def _profiles() -> dict[str, tuple[int, int, float]]:
    # A small table read on every status call: keep it in memory for a few seconds.
    now = time.monotonic()
    if now - _PROFILE_CACHE["at"] > _PROFILE_TTL:
        rows = ModelProfile.objects.values_list("name", "context_window", "max_output_tokens", "calibration_factor")
        _PROFILE_CACHE["rows"] = {name: (window, out, factor) for name, window, out, factor in rows}
        _PROFILE_CACHE["at"] = now
    return _PROFILE_CACHE["rows"]


def forget_model_profiles() -> None:
    _PROFILE_CACHE["at"] = 0.0


def model_info(name: str) -> ModelInfo:
    rows = _profiles()
    match = model_catalog.best_match(name, tuple(rows))
    if match:
        window, out, factor = rows[match]
        return ModelInfo(match, window, out, factor, True)
    spec = model_catalog.spec_for(name)
    if spec:
        return ModelInfo(spec.name, spec.context_window, spec.max_output_tokens, spec.calibration, True)
    return ModelInfo(name, model_catalog.FALLBACK_CONTEXT_WINDOW, model_catalog.FALLBACK_MAX_OUTPUT, 1.0, False)


def policy_for(session: AgentSession) -> Policy:
    policy = getattr(session.project, "policy", None)
    return policy.to_engine() if policy is not None else preset("default")


def auto_compact_enabled(session: AgentSession, policy: Policy) -> bool:
    return policy.auto if session.auto_compact is None else session.auto_compact


# ----------------------------------------------------------------------------- status


def session_usage(session: AgentSession, *, policy: Policy | None = None) -> Usage:
    """The breakdown from the session's running totals (exact when a fresh exact count exists)."""
    info = model_info(session.model)
    policy = policy or policy_for(session)
    window = session.context_window_override or info.context_window
    factor = info.calibration
    system = calibrate(session.system_tokens, factor)
    tools = calibrate(session.tool_tokens, factor)
    summary = calibrate(session.summary_tokens, factor)
    if _exact(session):
        messages = max(0, session.exact_tokens - system - tools - summary)
    else:
        messages = calibrate(session.message_tokens + DEFAULT_FRAMING.request, factor)
    return compute_usage(
        model=session.model,
        context_window=window,
        system_prompt=system,
        tool_definitions=tools,
        messages=messages,
        summary=summary,
        policy=policy,
    )


def _exact(session: AgentSession) -> bool:
    return session.exact_tokens is not None and session.exact_upto_seq == session.last_seq


def _pending_work(session: AgentSession, latest: dict[str, Any] | None) -> list[str]:
    """Background work that has waited too long: the broker or the workers may be down. ``latest``:
    the session's newest compaction (a queued one is always the newest: one at a time)."""
    from django.conf import settings
    from django.utils import timezone

    now, limit = timezone.now(), settings.CTX_PENDING_WARNING_SECONDS
    warnings = []
    queued = latest is not None and latest["status"] == CompactionStatus.QUEUED
    waiting = (now - max(filter(None, (latest["created_at"], latest["started_at"])))).total_seconds() if queued else 0
    if waiting > limit:
        warnings.append(
            f"A compaction has waited {int(waiting)} s for a worker; the task queue or the "
            "workers may be down. It runs when they are back; nothing is lost meanwhile."
        )
    waited = (now - session.last_activity_at).total_seconds()
    if settings.ANTHROPIC_API_KEY and session.exact_upto_seq != session.last_seq and waited > limit:
        warnings.append(f"The exact token count is pending ({int(waited)} s); these figures are estimates meanwhile.")
    return warnings


def session_status(session: AgentSession) -> dict[str, Any]:
    """STATUS from the session's running totals; never re-tokenizes."""
    info = model_info(session.model)
    policy = policy_for(session)
    window = session.context_window_override or info.context_window
    factor = info.calibration
    exact = _exact(session)
    usage = session_usage(session, policy=policy)
    warnings = usage_warnings(usage)
    if not info.known:
        warnings.append(
            f"Model {session.model!r} is not known; assuming a {window:,}-token window. "
            "Set context_window on the session or add a model profile."
            if not session.context_window_override
            else f"Model {session.model!r} is not known; using the session's {window:,}-token window."
        )
    if session.count_warning:
        warnings.append(session.count_warning)
    if session.rejected_count:
        warnings.append(
            f"{session.rejected_count:,} line(s) or message(s) of the recorded transcript could not be stored and "
            f"were skipped; the rest was stored. The latest: {session.rejected_reason}"
        )
    auto = auto_compact_enabled(session, policy)
    if session.auto_paused:
        warnings.append(
            f"Automatic compaction is paused after {session.compaction_failures} failures in a row; "
            "a successful manual compaction resumes it."
        )
    last_failed = (
        session.compactions.filter(status__in=[CompactionStatus.FAILED, CompactionStatus.SUCCEEDED])
        .values("status", "error", "level")
        .first()
        if session.compaction_failures
        else None
    )
    if last_failed and last_failed["status"] == CompactionStatus.FAILED:
        warnings.append(f"The last {last_failed['level']} failed: {last_failed['error']}")
    latest = session.compactions.values("status", "created_at", "started_at", "notes").first()
    warnings += _pending_work(session, latest)
    warnings += [note for note in (latest or {}).get("notes") or [] if note.startswith(FALLBACK_NOTE)]
    return {
        "model": session.model,
        "context_window": window,
        "system_prompt": usage.system_prompt,
        "tool_definitions": usage.tool_definitions,
        "messages": usage.messages,
        "summary": usage.summary,
        "reserved_output": usage.reserved_output,
        "used": usage.used,
        "free": usage.free,
        "usage_percent": usage.usage_percent,
        "level": usage.level.value,
        "thresholds": usage.thresholds.as_dict(),
        "will_compact": auto and not session.auto_paused and usage.level >= Level.COMPACT,
        "compacted": session.summary_tokens > 0
        or session.compactions.filter(status=CompactionStatus.SUCCEEDED).exists(),
        "recommendation": recommendation(usage),
        "token_source": "exact" if exact else "estimate",
        "warnings": warnings,
        "auto_compact": auto,
        "auto_paused": session.auto_paused,
        "message_count": session.message_count,
        "active_messages": session.active_message_count,
        "last_seq": session.last_seq,
        "calibration_factor": factor,
    }


# ----------------------------------------------------------------------------- context


def session_context_messages(session: AgentSession) -> list[dict[str, Any]]:
    """The messages a model should see now: the latest summary (if any) then the active messages."""
    rows = message_list(session, state="active").values_list("role", "content")
    messages = [{"role": role, "content": content} for role, content in rows]
    checkpoint = current_checkpoint(session)
    if checkpoint is not None:
        summary_text = checkpoint.data.get("summary_text") or ""
        if summary_text:
            messages.insert(0, engine_context.summary_message(summary_text))
    return messages


def next_checkpoint_version(session: AgentSession) -> int:
    """Checkpoint versions count up per session (seed 002); called under the session's row lock."""
    latest = session.checkpoints.order_by("-version").values_list("version", flat=True).first()
    return (latest or 0) + 1


def current_checkpoint(session: AgentSession) -> Checkpoint | None:
    """The checkpoint whose summary stands in for the summarized messages: the newest not reverted."""
    return session.checkpoints.filter(reverted=False, reason="compaction").order_by("-version").first()


def session_context(session: AgentSession, *, fmt: str = "anthropic") -> dict[str, Any]:
    messages = session_context_messages(session)
    if fmt == "openai":
        body: dict[str, Any] = {
            "model": session.model,
            "messages": engine_context.to_openai_messages(messages, system=session.system_prompt or None),
        }
        if session.tools:
            body["tools"] = engine_context.openai_tools(session.tools)
    else:
        body = {"model": session.model, "messages": engine_context.to_anthropic_messages(messages)}
        if session.system_prompt:
            body["system"] = session.system_prompt
        if session.tools:
            body["tools"] = session.tools
    body["status"] = session_status(session)
    return body
