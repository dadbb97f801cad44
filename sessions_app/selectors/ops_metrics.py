"""What /metrics reads from the database at scrape time: the compaction queue, and sessions by level."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Count, Min
from django.utils import timezone

from sessions_app.models import AgentSession, Compaction, CompactionStatus, SessionStatus
from sessions_app.selectors.usage import unleveled

LEVELS = ("ok", "remind", "compact", "summarize", "handoff")


@dataclass(frozen=True)
class Gauges:
    queue_depth: int  # compactions queued, not yet claimed by a worker
    oldest_queued_seconds: float  # 0 when none waits
    running: int
    sessions_by_level: dict[str, int]  # active sessions


def gauges() -> Gauges:
    queued = Compaction.objects.filter(status=CompactionStatus.QUEUED).aggregate(
        n=Count("pk"), oldest=Min("created_at")
    )
    running = Compaction.objects.filter(status=CompactionStatus.RUNNING).count()
    oldest = queued["oldest"]
    age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
    active = AgentSession.objects.filter(status=SessionStatus.ACTIVE)
    stored = active.exclude(level="").exclude(usage_percent__isnull=True)
    by_level: Counter[str] = Counter(
        dict(stored.values_list("level").annotate(n=Count("pk")).values_list("level", "n"))
    )
    for _session, current in unleveled(active):  # none stored yet: worked out from its totals
        by_level[current.level.value] += 1
    return Gauges(queued["n"], max(age, 0.0), running, {level: by_level.get(level, 0) for level in LEVELS})
