"""Sub-agents' sessions under the session whose agent started them (``AgentSession.spawned_by``): the
counts and names session lists show, and a session's own sub-agents."""

from __future__ import annotations

from django.db.models import Count, F, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from sessions_app.models import AgentSession


def with_sub_agent_links(sessions: QuerySet[AgentSession]) -> QuerySet[AgentSession]:
    """Each session with ``sub_agent_count`` (its sub-agents' sessions) and ``spawned_by_name`` (the
    name of the session that started it, or None). The count is a subquery per row, so a paged list
    pays for its page's rows only (the ``spawned_by`` index)."""
    counts = (
        AgentSession.objects.filter(spawned_by=OuterRef("pk"))
        .order_by()
        .values("spawned_by")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return sessions.annotate(
        sub_agent_count=Coalesce(Subquery(counts, output_field=IntegerField()), Value(0)),
        spawned_by_name=F("spawned_by__name"),
    )


def sub_agents_of(session: AgentSession) -> QuerySet[AgentSession]:
    """The sessions ``session``'s agent started, oldest first (as the agent started them)."""
    return (
        AgentSession.objects.filter(spawned_by=session)
        .defer("tools", "system_prompt", "metadata")
        .order_by("created_at", "pk")
    )
