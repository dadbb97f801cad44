"""Requests too large for the proxy to record (``CTX_PROXY_RECORD_MAX_BYTES``): forwarded whole, and
noted on their conversation's session instead (a rejection: STATUS warns, admin lists it), which
costs a few queries whatever their size. Their messages are not stored; the agent resends them with
its next request, which is recorded once it fits again (after the agent compacts its history)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessions_app.models import AgentSession, Project
from sessions_app.services import recorded
from sessions_app.services.proxy.sessions import proxy_session_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL


def proxy_oversized_note(
    *,
    user: User,
    project: Project,
    key: str,
    head: dict[str, Any],
    size: int,
    limit: int,
    agent: tuple[str, str] | None = None,
) -> AgentSession:
    """Note on conversation ``key``'s session (made on its first request, from the request's ``head``:
    its model and system prompt) that a request of ``size`` bytes went upstream unrecorded."""
    session = proxy_session_for(user=user, project=project, key=key, body=head, agent=agent)
    recorded.rejection_record(
        session=session,
        source="proxy",
        position=f"a request of {size:,} bytes",
        problem=(
            "too_large_to_record",
            f"forwarded but not recorded: over CTX_PROXY_RECORD_MAX_BYTES ({limit:,} bytes); "
            "its messages are recorded with the next request that fits",
        ),
    )
    return session
