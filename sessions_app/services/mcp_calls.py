"""Record what an agent asked ctxweb's MCP tools for in a session (``McpCall``): the tool, the id or
search it named (redacted like everything stored), whether it was found, how much was answered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessions_app.models import AgentSession, ApiKey, McpCall
from sessions_app.services.agent_sessions import fit

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def mcp_call_record(
    *,
    session: AgentSession,
    tool: str,
    asked: str,
    found: bool,
    chars: int,
    user: User | None,
    api_key: ApiKey | None,
) -> McpCall:
    return McpCall.objects.create(
        session=session,
        tool=tool,
        asked=fit(asked, 200, project=session.project),  # redacted whole, then cut: never inside a marker
        found=found,
        chars=chars,
        user=user,
        api_key=api_key,
    )
