"""A project at a glance (the dashboard above its sessions): levels, the sessions closest to their
window, tokens ingested and saved per day, compactions by level and outcome, what failed or is
paused, and what the project's provider requests cost (the spend rollup). A bounded number of queries
however many sessions and requests the project holds; nothing is re-tokenized."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from compaction.policy import Policy
from compaction.tokens import calibrate
from compaction.types import Level
from sessions_app.models import (
    AgentSession,
    Compaction,
    CompactionStatus,
    DailyIngest,
    Project,
    SessionStatus,
)
from sessions_app.selectors.spend import project_spend
from sessions_app.selectors.usage import model_info, project_policy, session_usage, unleveled

LEVELS = [level.value for level in Level]
OUTCOMES = ["succeeded", "failed", "reverted", "in_progress"]  # in progress: queued or running
COMPACTION_LEVELS = ["compact", "summarize", "handoff"]  # what a compaction runs at (the levels past remind)
CLOSEST = 5
TROUBLE_LIMIT = 20


@dataclass(frozen=True)
class SessionUse:
    session: AgentSession
    used: int
    context_window: int
    usage_percent: float
    level: str

    @property
    def width(self) -> float:  # of its usage bar
        return min(100.0, self.usage_percent)


@dataclass(frozen=True)
class Day:
    day: date
    ingested: int  # tokens of the messages received that day (calibrated like STATUS)
    saved: int  # tokens compactions that finished that day took off (reverted ones excluded)


@dataclass(frozen=True)
class Trouble:
    session: AgentSession
    paused: bool
    level: str  # of the newest compaction ("" when there is none)
    error: str
    at: datetime | None


@dataclass(frozen=True)
class Cost:
    """What the project's provider requests cost over the dashboard's days (UTC days, as spend's)."""

    dollars: Decimal  # the priced requests' cost, to the cent
    requests: int
    unpriced_requests: int  # requests whose model has no price: not in ``dollars``
    saved_usd: Decimal  # what compaction kept out of them, at their models' input prices
    unpriced_models: list[str] = field(default_factory=list)
    since: date | None = None  # the first UTC day counted


@dataclass(frozen=True)
class ProjectDashboard:
    levels: dict[str, int]  # active sessions by level, every level present
    closest: list[SessionUse]  # the active sessions closest to their window, first the closest
    days: list[Day]  # the last ``days`` days, oldest first, days without anything at 0
    compactions: dict[str, dict[str, int]]  # level -> outcome -> count, over the same days
    trouble: list[Trouble]  # paused sessions, or whose newest compaction failed
    cost: Cost
    since: date


def project_dashboard(*, project: Project, days: int = 14, now: datetime | None = None) -> ProjectDashboard:
    now = now or timezone.now()
    today = timezone.localdate(now)
    since = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(since, datetime.min.time()))
    levels, closest = project_levels(project=project)
    return ProjectDashboard(
        levels=levels,
        closest=closest,
        days=_days(project, since, today, start),
        compactions=_compactions(project, start),
        trouble=_trouble(project),
        cost=_cost(project, days, now),
        since=since,
    )


def project_levels(*, project: Project, closest: int = CLOSEST) -> tuple[dict[str, int], list[SessionUse]]:
    """Active sessions by level (every level present) and the ``closest`` nearest to their window,
    first the closest: the dashboard's top, and ``ctx status`` without a session."""
    policy = project_policy(project).to_engine()  # once, not once per session
    active = AgentSession.objects.filter(project=project, status=SessionStatus.ACTIVE)
    return _levels(project, active, policy, closest)


def _levels(
    project: Project, active: QuerySet[AgentSession], policy: Policy, limit: int
) -> tuple[dict[str, int], list[SessionUse]]:
    """Active sessions by level and the closest to their window, from the stored level and usage (a
    grouped count over the index of (project, status, level) and the first ``limit`` rows of the index
    of (project, status, usage)); a session without them yet is worked out from its totals."""
    levels = {level: 0 for level in LEVELS}
    for level, n in active.order_by().values_list("level").annotate(n=Count("*")).values_list("level", "n"):
        levels[level] = levels.get(level, 0) + n
    known = active.exclude(level="").filter(usage_percent__gt=0)
    rows = _with_project(known.order_by("-usage_percent", "pk")[:limit], project)
    candidates = [_use(s, policy) for s in rows]
    for session, current in unleveled(active):
        use = SessionUse(session, current.used, current.context_window, current.usage_percent, current.level.value)
        # Counted above under what is stored ("", or a level without its usage).
        levels[session.level] = levels.get(session.level, 0) - 1
        levels[use.level] += 1
        candidates.append(use)
    levels.pop("", None)
    closest = sorted((u for u in candidates if u.used), key=lambda u: (-u.usage_percent, u.session.pk))[:limit]
    return levels, closest


def _with_project(sessions: QuerySet[AgentSession], project: Project) -> list[AgentSession]:
    found = list(sessions.defer("tools", "system_prompt", "metadata"))
    for session in found:
        # One project (and policy) object for all of them, not a copy per row from a join.
        session.project = project
    return found


def _use(session: AgentSession, policy: Policy) -> SessionUse:
    current = session_usage(session, policy=policy)
    return SessionUse(session, current.used, current.context_window, current.usage_percent, current.level.value)


def _days(project: Project, since: date, today: date, start: datetime) -> list[Day]:
    ingested: dict[date, int] = {}
    received = DailyIngest.objects.filter(project=project, day__gte=since, day__lte=today)
    for day, model, tokens in received.values_list("day", "model", "tokens"):
        ingested[day] = ingested.get(day, 0) + calibrate(tokens, model_info(model).calibration)
    saved = {
        row["day"]: row["saved"] or 0
        for row in Compaction.objects.filter(project=project, status=CompactionStatus.SUCCEEDED, finished_at__gte=start)
        .exclude(tokens_before__isnull=True)
        .exclude(tokens_after__isnull=True)
        .annotate(day=TruncDate("finished_at", tzinfo=timezone.get_current_timezone()))
        .values("day")
        .annotate(saved=Sum(F("tokens_before") - F("tokens_after")))
    }
    span = (today - since).days + 1
    return [
        Day(day, ingested.get(day, 0), max(saved.get(day, 0), 0))
        for day in (since + timedelta(days=n) for n in range(span))
    ]


def _compactions(project: Project, start: datetime) -> dict[str, dict[str, int]]:
    table = {level: {outcome: 0 for outcome in OUTCOMES} for level in COMPACTION_LEVELS}
    rows = (
        Compaction.objects.filter(project=project, created_at__gte=start)
        .order_by()
        .values("level", "status")
        .annotate(n=Count("pk"))
    )
    for row in rows:
        outcome = row["status"] if row["status"] in OUTCOMES else "in_progress"
        counts = table.setdefault(row["level"], {o: 0 for o in OUTCOMES})
        counts[outcome] += row["n"]
    return table


def _trouble(project: Project) -> list[Trouble]:
    """Paused sessions and those whose newest compaction failed: the candidates are the few rows of two
    partial indexes (paused sessions; failed compactions), then the newest compaction of those only."""
    paused = AgentSession.objects.filter(project=project, status=SessionStatus.ACTIVE, auto_paused=True)
    failed = Compaction.objects.filter(project=project, status=CompactionStatus.FAILED)
    candidates = set(paused.values_list("pk", flat=True)) | set(failed.values_list("session_id", flat=True))
    if not candidates:
        return []
    newest = Compaction.objects.filter(session=OuterRef("pk")).order_by("-pk")
    rows = (
        AgentSession.objects.filter(pk__in=candidates, status=SessionStatus.ACTIVE)
        .annotate(
            last_status=Subquery(newest.values("status")[:1]),
            last_level=Subquery(newest.values("level")[:1]),
            last_error=Subquery(newest.values("error")[:1]),
            last_at=Subquery(newest.values("finished_at")[:1]),
        )
        .filter(Q(auto_paused=True) | Q(last_status=CompactionStatus.FAILED))
        .defer("tools", "system_prompt", "metadata")
        .order_by("-last_activity_at", "-pk")[:TROUBLE_LIMIT]
    )
    found = []
    for row in rows:
        row.project = project  # the caller's object (and its policy), not a join per row
        found.append(
            Trouble(
                session=row,
                paused=row.auto_paused,
                level=row.last_level or "",
                error=(row.last_error or "") if row.last_status == CompactionStatus.FAILED else "",
                at=row.last_at,
            )
        )
    return found


def _cost(project: Project, days: int, now: datetime) -> Cost:
    """What the project's provider requests of the dashboard's days cost, from the spend rollup
    (``selectors.spend``, the tables below the dashboard): one aggregate over at most ``days`` ×
    models buckets."""
    spent = project_spend(project=project, days=days, by="model", now=now)
    total = spent.total
    return Cost(
        dollars=(total.cost_usd or Decimal(0)).quantize(Decimal("0.01")),
        requests=total.requests,
        unpriced_requests=total.unpriced_requests,
        saved_usd=total.saved_usd.quantize(Decimal("0.01")),
        unpriced_models=sorted(row.label for row in spent.rows if row.unpriced_requests),
        since=spent.since,
    )


def dashboard_payload(board: ProjectDashboard) -> dict[str, Any]:
    """The dashboard as JSON (``GET /projects/{id}/dashboard/``): the numbers the page shows."""
    cost = board.cost
    return {
        "since": board.since.isoformat(),
        "levels": board.levels,
        "closest": [session_use_payload(u) for u in board.closest],
        "days": [{"day": d.day.isoformat(), "ingested": d.ingested, "saved": d.saved} for d in board.days],
        "compactions": board.compactions,
        "trouble": [
            {
                "session": t.session.pk,
                "name": t.session.name,
                "paused": t.paused,
                "level": t.level,
                "error": t.error,
                "at": t.at.isoformat() if t.at else None,
            }
            for t in board.trouble
        ],
        "cost": {
            "dollars": str(cost.dollars),
            "requests": cost.requests,
            "unpriced_requests": cost.unpriced_requests,
            "saved_usd": str(cost.saved_usd),
            "unpriced_models": cost.unpriced_models,
            "since": cost.since.isoformat() if cost.since else None,
        },
    }


def session_use_payload(use: SessionUse) -> dict[str, Any]:
    return {
        "session": use.session.pk,
        "name": use.session.name,
        "used": use.used,
        "context_window": use.context_window,
        "usage_percent": use.usage_percent,
        "level": use.level,
    }
