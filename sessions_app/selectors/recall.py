"""What an agent asks ctxweb for mid-session (the MCP tools, docs/SEARCH.md): which session is its
own, and the text behind a recall id — ``m<seq>`` a message as it was first stored (the original a
compaction replaced, kept for revert), ``c<version>`` a checkpoint, ``h<id>`` a handoff document."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compaction.checkpoint import render_summary_text
from compaction.context import block_as_text
from sessions_app.errors import InvalidInput, NotFound
from sessions_app.models import AgentSession, ApiKey, Checkpoint, HandoffDocument, Message, MessageBackup, Role
from sessions_app.selectors import access

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RECALL_CHARS = 40_000  # a page of an answer: an agent's tool results are read whole into its context
_REF = re.compile(r"\A\s*(?:seq\s*)?([mch]?)\s*(\d{1,12})\s*\Z", re.I)


@dataclass(frozen=True)
class Recalled:
    ref: str  # as it is named: m45, c3, h12
    what: str  # what it is, in a line
    text: str  # the page asked for
    total: int  # characters in all
    offset: int
    next_offset: int | None  # where the next page starts; None at the end


def agent_session(user: User, api_key: ApiKey | None, ref: str | None, *, min_role: Role = Role.VIEWER) -> AgentSession:
    """The session an agent means: the one it names (an id or its own session id), else the one its
    key last sent a request in through the proxy, else its user's most recently active one."""
    if ref:
        return access.session_get_for(user, ref, min_role=min_role)
    mine = access.session_list_for(user).order_by()
    if api_key is not None:
        latest = (
            mine.filter(requests__api_key=api_key)
            .order_by("-requests__created_at")
            .values_list("pk", flat=True)
            .first()
        )
        if latest is not None:
            return access.session_get_for(user, latest, min_role=min_role)
    latest = mine.order_by("-last_activity_at", "-pk").values_list("pk", flat=True).first()
    if latest is None:
        raise NotFound("You have no session yet: name one (session), or send a request through the proxy first.")
    return access.session_get_for(user, latest, min_role=min_role)


def recall(session: AgentSession, ref: str, *, offset: int = 0, limit: int = RECALL_CHARS) -> Recalled:
    """The text behind ``ref`` in ``session``, from ``offset``; ``NotFound`` when there is none,
    ``InvalidInput`` for a ref that is not one."""
    match = _REF.match(ref or "")
    if match is None:
        raise InvalidInput(
            f"{ref!r} is not a recall id: m<seq> (a message), c<version> (a checkpoint), h<id> (a handoff).",
            code="invalid_ref",
        )
    kind, number = (match.group(1) or "m").lower(), int(match.group(2))
    name = f"{kind}{number}"
    if kind == "m":
        what, text = _message(session, number)
    elif kind == "c":
        what, text = _checkpoint(session, number)
    else:
        what, text = _handoff(session, number)
    if offset < 0 or (offset and offset >= len(text)):
        raise InvalidInput(f"offset is past the end of {name} ({len(text)} characters).", code="invalid_offset")
    page = text[offset : offset + limit]
    end = offset + len(page)
    return Recalled(name, what, page, len(text), offset, end if end < len(text) else None)


def _message(session: AgentSession, seq: int) -> tuple[str, str]:
    message = Message.objects.filter(session=session, seq=seq).first()
    if message is None:
        raise NotFound(f"Session {session.pk} has no message m{seq}.")
    # The oldest backup kept is the message as it was first stored; none, it was never compacted.
    backup = MessageBackup.objects.filter(message=message).order_by("pk").values_list("content", flat=True).first()
    original = backup is not None
    content = backup if original else message.content
    state = "the original a compaction replaced" if original else f"as stored ({message.state})"
    return f"m{seq}: {message.role} message, {state}", content_as_text(content)


def content_as_text(content: Any) -> str:
    """A message's content as an agent reads it: its text, a tool's output as it was, a call's input."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("content"), str):
            parts.append(block["content"])  # byte for byte: what the tool printed
        elif isinstance(block, dict):
            text = block_as_text(block)
            if text is None and block.get("type") == "thinking":
                text = str(block.get("thinking", ""))
            parts.append(text or "")
        else:
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n\n".join(parts)


def _checkpoint(session: AgentSession, version: int) -> tuple[str, str]:
    checkpoint = Checkpoint.objects.filter(session=session, version=version).first()
    if checkpoint is None:
        raise NotFound(f"Session {session.pk} has no checkpoint c{version}.")
    data = checkpoint.data or {}
    text = data.get("summary_text") or render_summary_text(data)
    return f"c{version}: checkpoint v{version}, up to m{checkpoint.upto_seq}", str(text)


def _handoff(session: AgentSession, pk: int) -> tuple[str, str]:
    document = HandoffDocument.objects.filter(session=session, pk=pk).first()
    if document is None:
        raise NotFound(f"Session {session.pk} has no handoff h{pk}.")
    return f"h{pk}: handoff document of {document.created_at:%Y-%m-%d %H:%M}", document.markdown or document.text
