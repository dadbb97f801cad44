"""What an append sets off: a compaction when the session crossed its policy's thresholds, an exact
count when an Anthropic key is configured. And what a policy change sets off: the same decision,
for every active session of the project (``project_reevaluate``); what a model profile's edit sets
off, for every session of any project (``sessions_relevel``).

Not part of the append itself: the caller runs it as its own step once the messages are stored
(``tasks.followup_send``), so the append service knows nothing of workers. The work is recorded here
(a queued Compaction row; a pending-count marker in the cache) and sent by the caller; a message
that never reaches the broker is re-sent by beat (``tasks.requeue_stale_compactions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from compaction.policy import Policy
from compaction.types import Level
from sessions_app.models import (
    ACTIVE_COMPACTION_STATUSES,
    AgentSession,
    Compaction,
    CompactionStatus,
    Project,
    SessionStatus,
)
from sessions_app.selectors import usage
from sessions_app.services.webhook_events import session_level_record


@dataclass(frozen=True)
class FollowUp:
    """The work one session's appends set off, for the caller to send to the workers."""

    session_id: int
    compaction_id: int | None = None  # an automatic compaction, queued
    count_in: float | None = None  # seconds until an exact count should run; None: no count
    notified: bool = False  # a webhook delivery was recorded (the level changed)


def append_followup(session: AgentSession | int) -> FollowUp:
    """What a session's new messages set off, decided from its running totals. ``session``: the row
    the append just wrote (``AppendResult.session``: its totals are current and its policy is then
    at hand for STATUS), or an id, read afresh. No lock is needed: the partial unique constraint on
    queued compactions lets one through however many appends decide at once."""
    if isinstance(session, int):
        found = AgentSession.objects.select_related("project", "project__policy").filter(pk=session).first()
        if found is None:
            return FollowUp(session)
        session = found
    notified = session_level_record(session)
    record = auto_queue(session)
    count_in = None
    if settings.ANTHROPIC_API_KEY:
        delay = settings.CTX_EXACT_COUNT_DEBOUNCE_SECONDS
        # One queued count per session per debounce window; it counts whatever is stored when it runs.
        if cache.add(f"ctx:exact-pending:{session.pk}", 1, timeout=delay):
            count_in = float(delay)
    return FollowUp(session.pk, record.pk if record is not None else None, count_in, notified)


def auto_level(session: AgentSession) -> Level | None:
    """The level an append should queue a compaction for, or None, from the session's running
    totals. A session that has not grown by the policy's minimum saving since
    its last compaction isn't compacted again (no churn after a skip, a failure or a revert)."""
    policy = usage.policy_for(session)
    if session.status != SessionStatus.ACTIVE or session.auto_paused:
        return None
    if not usage.auto_compact_enabled(session, policy):
        return None
    current = usage.session_usage(session, policy=policy)
    if current.level < Level.COMPACT:
        return None
    level = current.level
    if level == Level.HANDOFF and session.handoffs.filter(checkpoint__compaction__isnull=False).exists():
        level = Level.SUMMARIZE  # one automatic handoff document per session; continuing is the agent's call
    last = session.compactions.order_by("-id").values("status", "tokens_before", "tokens_after").first()
    if last is not None:
        if last["status"] in ACTIVE_COMPACTION_STATUSES:
            return None
        baseline = last["tokens_after"] if last["status"] == CompactionStatus.SUCCEEDED else last["tokens_before"]
        if baseline is not None and current.used - baseline < policy.min_saving(current.context_window):
            return None
    return level


def auto_queue(session: AgentSession) -> Compaction | None:
    level = auto_level(session)
    if level is None:
        return None
    try:
        with transaction.atomic():
            record = Compaction.objects.create(
                session=session, project_id=session.project_id, level=level.value, trigger="auto"
            )
    except IntegrityError:  # another process queued one first
        return None
    return record


def project_reevaluate(project: Project) -> list[int]:
    """After the project's policy changed: each of its sessions gets its level and usage stored anew
    (closed ones too: lists filter on them), and each active one that the new numbers put over a
    threshold gets a queued compaction, decided as after an append (``auto_queue``), without waiting
    for its next message. The queued compactions' ids, for the caller to send."""
    return sessions_relevel(AgentSession.objects.filter(project=project), decide_all=True).queued


@dataclass(frozen=True)
class Relevel:
    moved: int  # sessions whose stored level or usage changed
    queued: list[int]  # compactions queued for them, for the caller to send


def sessions_relevel(sessions: QuerySet[AgentSession] | None = None, *, decide_all: bool = False) -> Relevel:
    """Stores the level and usage of ``sessions`` (default: all) anew from their totals: for what
    changes figures without touching a session's row (a model profile's window or calibration, a
    policy) and for sessions whose figures were never worked out (from before the columns came).
    A level that moved is announced as after an append, and an active session whose level moved (any
    active session, with ``decide_all``) is decided as after an append: a compaction is queued when it
    is over a threshold. A level stored for the first time is neither announced nor decided on.
    Read and written in batches of ``RELEVEL_BATCH`` sessions, a transaction each (one commit per
    batch, not per session); each session's write is its own conditional UPDATE."""
    usage.forget_model_profiles()  # this process may still hold the profiles from before an edit
    chosen = sessions if sessions is not None else AgentSession.objects.all()
    ids = list(chosen.order_by("pk").values_list("pk", flat=True))
    rows = AgentSession.objects.select_related("project", "project__policy").defer("tools", "system_prompt", "metadata")
    moved, queued = 0, []
    policies: dict[int, Policy] = {}  # built once per project, not once per session
    for start in range(0, len(ids), RELEVEL_BATCH):
        with transaction.atomic():
            for session in rows.filter(pk__in=ids[start : start + RELEVEL_BATCH]).order_by("pk"):
                before = (session.level, session.usage_percent)
                if session.project_id not in policies:
                    policies[session.project_id] = usage.project_engine_policy(session.project)
                session_level_record(session, policy=policies[session.project_id])
                moved += (session.level, session.usage_percent) != before
                # A level worked out for the first time is no move: no decision is taken on it (as the
                # announcement isn't made), or an upgrade would compact every old session at once.
                level_moved = bool(before[0]) and session.level != before[0]
                if session.status == SessionStatus.ACTIVE and (level_moved or decide_all):
                    record = auto_queue(session)
                    if record is not None:
                        queued.append(record.pk)
    return Relevel(moved, queued)


RELEVEL_BATCH = 200  # sessions per transaction: row locks held for a few milliseconds at most
