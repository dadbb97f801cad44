"""How full a session is: model information (profiles, then the catalogue), the project's policy, the
usage breakdown and STATUS, all from the session's running totals (nothing is re-tokenized)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from compaction import model_catalog
from compaction.model_prices import TOKEN_KINDS, TokenPrices
from compaction.policy import Policy, preset
from compaction.status import Status
from compaction.tokens import DEFAULT_FRAMING, ESTIMATE_EXPECTED_ERROR, EXACT_EXPECTED_ERROR, calibrate
from compaction.types import Level, Usage
from compaction.usage import compute_usage, recommendation, usage_warnings
from sessions_app.models import (
    FALLBACK_NOTE,
    STEP_UP_NOTE,
    AgentSession,
    CompactionPolicy,
    CompactionStatus,
    HandoffDocument,
    ModelProfile,
    Project,
    SessionStatus,
)
from sessions_app.selectors import sql_rows
from sessions_app.selectors.budgets import session_budget_warnings

# ----------------------------------------------------------------------------- models and policy


@dataclass(frozen=True)
class ModelInfo:
    name: str
    context_window: int  # the input window: what a request's input must fit (an input cap counted)
    max_output_tokens: int
    calibration: float
    known: bool
    prices: TokenPrices | None = None

    @property
    def input_price(self) -> Decimal | None:
        return self.prices.input if self.prices else None


@dataclass(frozen=True)
class _Row:
    window: int | None
    max_output: int | None
    calibration: float
    prices: dict[str, Decimal | None]


_PROFILE_CACHE: dict[str, Any] = {"at": 0.0, "rows": {}}
_PROFILE_TTL = 30.0
_PRICE_FIELDS = {kind: f"{kind}_price_per_mtok" for kind in TOKEN_KINDS}


def _profiles() -> dict[str, _Row]:
    # A small table read on every status call: keep it in memory for a few seconds.
    now = time.monotonic()
    if now - _PROFILE_CACHE["at"] > _PROFILE_TTL:
        fields = ("name", "context_window", "max_output_tokens", "calibration_factor", *_PRICE_FIELDS.values())
        _PROFILE_CACHE["rows"] = {
            name: _Row(window, out, factor, dict(zip(TOKEN_KINDS, prices, strict=True)))
            for name, window, out, factor, *prices in ModelProfile.objects.values_list(*fields)
        }
        _PROFILE_CACHE["at"] = now
    return _PROFILE_CACHE["rows"]


def forget_model_profiles() -> None:
    _PROFILE_CACHE["at"] = 0.0


def model_info(name: str, *, on: date | None = None) -> ModelInfo:
    """A model's input window, max output, calibration and prices, field by field: its ModelProfile
    row (by name, a dated version of a named row, or a pattern such as ``claude-sonnet-*``) where the
    row sets the field, else the catalogue (the genai-prices package and its overlay), else the
    fallback. ``name`` is the row's name (a pattern for a pattern), which calibration updates. A model
    asked with its 1M-token window (``…[1m]``) takes the other fields from its plain name's row but
    not the window, unless a row is named with the suffix. ``on``: the prices of that UTC day (the
    package's change over time; an admin's override holds on every day)."""
    rows = _profiles()
    match = model_catalog.profile_match(name, tuple(rows))
    long_row = match is None and model_catalog.long_context_asked(name)
    if long_row:
        match = model_catalog.profile_match(model_catalog.without_long_context(name), tuple(rows))
    row = rows[match] if match else None
    spec = model_catalog.spec_for(name)
    window = row.window if row is not None and not long_row else None
    if window is None:
        window = spec.input_window if spec else model_catalog.FALLBACK_CONTEXT_WINDOW
    max_output = row.max_output if row is not None else None
    if max_output is None:
        max_output = spec.max_output_tokens if spec else model_catalog.FALLBACK_MAX_OUTPUT
    calibration = row.calibration if row is not None else spec.calibration if spec else 1.0
    prices = spec.prices if spec and spec.prices else TokenPrices()
    if on is not None and spec is not None:  # the package's price that day (a row's own has no dates)
        prices = model_catalog.prices_on(name, on) or prices
    if row is not None:
        prices = prices.overridden(**row.prices)
    return ModelInfo(
        name=match or (spec.name if spec else name),
        context_window=window,
        max_output_tokens=max_output,
        calibration=calibration,
        known=row is not None or spec is not None,
        prices=prices if prices.input is not None or prices.output is not None else None,
    )


def session_window(session: AgentSession, info: ModelInfo | None = None) -> int:
    """The input window the session's level is worked out against: its own override, else the one the
    provider taught it (``context_window_learnt``), else its model's."""
    if session.context_window_override:
        return session.context_window_override
    if session.context_window_learnt:
        return session.context_window_learnt
    return (info or model_info(session.model)).context_window


def project_policy(project: Project) -> CompactionPolicy:
    """The project's policy row. A project made without one (Django admin's "add project") works with
    the default preset (``policy_for``): that policy, not saved until someone edits it."""
    try:
        return project.policy
    except CompactionPolicy.DoesNotExist:
        policy = CompactionPolicy(project=project)
        policy.apply_engine(preset("default"), preset_name="default")
        return policy


def project_engine_policy(project: Project) -> Policy:
    """The project's policy as set, before any window: thresholds may still be in tokens. For readers
    that build it once for many sessions; each session's usage resolves it (``session_usage``)."""
    policy = getattr(project, "policy", None)
    return policy.to_engine() if policy is not None else preset("default")


def policy_for(session: AgentSession, info: ModelInfo | None = None) -> Policy:
    """The policy as it acts on this session: thresholds set in tokens resolved against its window
    (``Policy.for_window``), so every reader of the session (STATUS, automatic compaction, a run's
    plan, the proxy, the pages) sees the same fractions."""
    return project_engine_policy(session.project).for_window(session_window(session, info))


def auto_compact_enabled(session: AgentSession, policy: Policy) -> bool:
    return policy.auto if session.auto_compact is None else session.auto_compact


# ----------------------------------------------------------------------------- status


def session_usage(session: AgentSession, *, policy: Policy | None = None) -> Usage:
    """The breakdown from the session's running totals (exact when a fresh exact count exists)."""
    info = model_info(session.model)
    window = session_window(session, info)
    # A policy given for many sessions (built once per project) is resolved for this one's window;
    # one already resolved (policy_for) stays as it is.
    policy = (policy or project_engine_policy(session.project)).for_window(window)
    factor = info.calibration
    system = calibrate(session.system_tokens, factor)
    harness = harness_tokens(session, factor)
    tools = calibrate(session.tool_tokens, factor)
    summary = calibrate(session.summary_tokens, factor)
    exact = session.exact_tokens if _exact(session) else None
    if exact is not None:
        # The harness is inferred from the first counted reply; a count below it (a later reply that
        # read less) holds only what fits, so the parts add up to the count.
        system += min(harness, max(0, exact - system - tools - summary))
        messages = max(0, exact - system - tools - summary)
    else:
        system += harness
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


def harness_tokens(session: AgentSession, factor: float) -> int:
    """The part of a recorded transcript's context it doesn't show (the agent's own system prompt and
    tools): what its first counted response read beyond ctxweb's estimate of what the session held."""
    if session.harness_read_tokens is None or session.harness_raw_tokens is None:
        return 0
    return max(0, session.harness_read_tokens - calibrate(session.harness_raw_tokens, factor))


def unleveled(sessions: QuerySet[AgentSession]) -> list[tuple[AgentSession, Usage]]:
    """The sessions among ``sessions`` without a stored level and usage yet (from before they were
    stored, until the relevel job reaches them), each with its usage worked out from its totals (no
    message is read; each project's policy is built once). Readers that count, filter or rank by the
    stored figures add these."""
    rows = (
        sessions.filter(Q(level="") | Q(usage_percent__isnull=True))
        .select_related("project", "project__policy")
        .defer("tools", "system_prompt", "metadata")
    )
    policies: dict[int, Policy] = {}
    found = []
    for session in rows.iterator(chunk_size=500):
        if session.project_id not in policies:
            policies[session.project_id] = project_engine_policy(session.project)
        found.append((session, session_usage(session, policy=policies[session.project_id])))
    return found


def _exact(session: AgentSession) -> bool:
    return session.exact_tokens is not None and session.exact_upto_seq == session.last_seq


def _counted_at(session: AgentSession, compacted_at: datetime | None) -> datetime:
    """When STATUS's figures were counted: the exact count's time, else when the totals the estimate
    reads last moved (the newest message, or a compaction that changed messages since)."""
    if _exact(session) and session.exact_counted_at is not None:
        return session.exact_counted_at
    return max(filter(None, (session.last_activity_at, compacted_at)))


def _iso(moment: datetime) -> str:
    """As DRF writes a datetime: ISO 8601, UTC as ``Z``."""
    text = moment.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _pending_work(session: AgentSession, latest: Mapping[str, Any] | None) -> list[str]:
    """Background work that has waited too long: the broker or the workers may be down. ``latest``:
    the session's newest compaction (a queued one is always the newest: one at a time)."""
    now, limit = timezone.now(), settings.CTX_PENDING_WARNING_SECONDS
    warnings = []
    waiting = 0.0
    if latest is not None and latest["status"] == CompactionStatus.QUEUED:
        waiting = (now - max(filter(None, (latest["created_at"], latest["started_at"])))).total_seconds()
    if waiting > limit:
        warnings.append(
            f"A compaction has waited {int(waiting)} s for a worker; the task queue or the "
            "workers may be down. It runs when they are back; nothing is lost meanwhile."
        )
    waited = (now - session.last_activity_at).total_seconds()
    if settings.ANTHROPIC_API_KEY and session.exact_upto_seq != session.last_seq and waited > limit:
        warnings.append(f"The exact token count is pending ({int(waited)} s); these figures are estimates meanwhile.")
    return warnings


def continuation_of(session: AgentSession) -> int | None:
    """The session a handed-off one continues in (the newest, if it was handed off more than once)."""
    return (
        HandoffDocument.objects.filter(session=session, continuation__isnull=False)
        .order_by("-id")
        .values_list("continuation_id", flat=True)
        .first()
    )


# STATUS is read on every append and status call; compiling this through the ORM cost ten times
# running it (1.0 vs 0.1 ms here), so it is written out. Same table and columns as Compaction.
_LATEST_COMPACTION_SQL = """
    SELECT c.status, c.created_at, c.started_at, c.notes,
           (SELECT max(d.finished_at) FROM sessions_app_compaction d
             WHERE d.session_id = c.session_id AND d.status = %s AND d.revertible_until IS NOT NULL)
      FROM sessions_app_compaction c
     WHERE c.session_id = %s
     ORDER BY c.created_at DESC, c.id DESC
     LIMIT 1
"""


def _latest_compaction(session: AgentSession) -> dict[str, Any] | None:
    """The session's newest compaction (what STATUS warns about), with when a compaction last changed
    messages (a handoff document alone changes none): one query. None when there is no compaction."""
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(_LATEST_COMPACTION_SQL, [CompactionStatus.SUCCEEDED.value, session.pk])
        row = cursor.fetchone()
    if row is None:
        return None
    status, created_at, started_at, notes, last_changed_at = row
    return {
        "status": status,
        "created_at": _aware(created_at),
        "started_at": _aware(started_at),
        "notes": json.loads(notes) if isinstance(notes, str) else notes,  # Django has drivers hand JSON as text
        "last_changed_at": _aware(last_changed_at),
    }


def _aware(value: Any) -> Any:
    """A timestamp as the ORM would give it: SQLite hands raw SQL text, PostgreSQL aware datetimes."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def _warnings(
    session: AgentSession,
    info: ModelInfo,
    window: int,
    current: Usage,
    latest: Mapping[str, Any] | None,
    *,
    compacted: bool,
) -> list[str]:
    """What STATUS warns about: the usage itself, an unknown model, counts and transcripts that went
    wrong, paused or failed compactions, work that waits too long."""
    warnings = usage_warnings(current, compacted=compacted)
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
            f"{session.rejected_count:,} time(s), lines or messages recorded for this session (its transcript, or "
            f"requests through the proxy) could not be stored and were skipped. The latest: {session.rejected_reason}"
        )
    if session.unrecorded_requests and session.unrecorded_from and session.unrecorded_to:
        warnings.append(
            f"ctxweb's proxy forwarded {session.unrecorded_requests:,} request(s) of this session without recording "
            f"them (its database was unreachable), from {session.unrecorded_from:%Y-%m-%d %H:%M} to "
            f"{session.unrecorded_to:%Y-%m-%d %H:%M} UTC: their messages came with the next request it recorded, "
            "their usage did not."
        )
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
    warnings += _pending_work(session, latest)
    notes = latest["notes"] if latest is not None else None
    warnings += [note for note in notes or [] if note.startswith((FALLBACK_NOTE, STEP_UP_NOTE))]
    return warnings


def session_status(session: AgentSession) -> Status:
    """STATUS from the session's running totals; never re-tokenizes."""
    info = model_info(session.model)
    window = session_window(session, info)
    policy = policy_for(session, info)
    current = session_usage(session, policy=policy)
    auto = auto_compact_enabled(session, policy)
    latest = _latest_compaction(session)
    finished = latest["last_changed_at"] if latest is not None else None
    compacted = session.summary_tokens > 0 or finished is not None
    just_compacted = finished is not None and finished >= session.last_activity_at
    warnings = _warnings(session, info, window, current, latest, compacted=compacted)
    warnings += session_budget_warnings(session)
    open_ = session.status == SessionStatus.ACTIVE
    continued_in = None if open_ else continuation_of(session)
    if not open_:
        warnings.append(
            f"This session is {session.status.replace('_', ' ')}"
            + (f"; it continues in session {continued_in}." if continued_in else "; it takes no more messages.")
        )
    return {
        "model": session.model,
        "context_window": window,
        "system_prompt": current.system_prompt,
        "tool_definitions": current.tool_definitions,
        "messages": current.messages,
        "summary": current.summary,
        "reserved_output": current.reserved_output,
        "used": current.used,
        "free": current.free,
        "usage_percent": current.usage_percent,
        "level": current.level.value,
        "thresholds": current.thresholds.as_dict(),
        "threshold_tokens": current.thresholds.tokens(window),
        "will_compact": auto and not session.auto_paused and current.level >= Level.COMPACT,
        "compacted": compacted,
        "compacted_in_this_step": just_compacted,
        "can_continue": open_,
        "continued_in": continued_in,
        "recommendation": recommendation(current, just_compacted=just_compacted),
        "token_source": "exact" if _exact(session) else "estimate",
        "cached": _exact(session) and session.exact_cached,
        "counted_at": _iso(_counted_at(session, finished)),
        "expected_error": EXACT_EXPECTED_ERROR if _exact(session) else ESTIMATE_EXPECTED_ERROR,
        "warnings": warnings,
        "auto_compact": auto,
        "auto_paused": session.auto_paused,
        "message_count": session.message_count,
        "active_messages": session.active_message_count,
        "last_seq": session.last_seq,
        "calibration_factor": info.calibration,
    }
