"""What the model sees now: the active messages, after the current checkpoint's summary, as an
Anthropic or OpenAI request (``GET …/context/``)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from compaction import context as engine_context
from sessions_app.models import (
    CONTEXT_STATES,
    AgentSession,
    Checkpoint,
    Message,
)
from sessions_app.selectors.usage import session_status


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
    """Checkpoint versions count up per session (docs/COMPACTION.md, checkpoints); called under the
    session's row lock."""
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
