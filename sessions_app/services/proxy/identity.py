"""A proxied conversation's identity: which session a request belongs to (``conversation_key``),
what of a request is the conversation (``conversation_of``), and the name its session gets.

Real clients change the form of a conversation from request to request without changing what it
says: Claude Code moves its ``cache_control`` marker to the newest message, sends the newest user
message as text blocks once and as a string next time, puts ``role: "system"`` messages in the
middle, and begins its system prompt with a billing line whose suffix changes after it compacts its
own context. OpenCode sends its session id in a header (``x-session-id``) and today's date in its
system prompt. None of these is part of the conversation's identity; the messages' own identity
(their client ids) is ``proxy_messages.identity``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from compaction.injected import typed_text
from compaction.transcripts.responses import holds_a_compaction, is_compact_summary
from sessions_app.models import Project
from sessions_app.services import agent_sessions
from sessions_app.services.proxy.messages import as_list, canonical, encodes, identity
from sessions_app.services.redaction import public_text

EXTERNAL_ID_MAX = agent_sessions.SESSION_TEXT_LIMITS["external_id"]
NAME_MAX = 80
# Claude Code's first system line, e.g. ``x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=cli``.
_BILLING_LINE = re.compile(r"^x-anthropic-billing-header:[^\n]*(\n|$)", re.MULTILINE)
# OpenCode's line of its system prompt's <env> block, e.g. ``  Today's date: Thu Nov 26 2026``.
_DATE_LINE = re.compile(r"^[ \t]*Today's date: [^\n]*(\n|$)", re.MULTILINE)


def conversation_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """What ctxweb records of an Anthropic request: all of it but the ``system`` messages among its
    messages. A client adds those for the request it sends (Claude Code does, mid-conversation, not
    always in the same place); the conversation is what the user and the model said, as a transcript
    of it (``ctx import``) holds it. They still go upstream as they came. None for a request that is
    no part of the conversation: the client asking its model to summarize it (``compacting``)."""
    if compacting(body):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(_is_system(m) for m in messages):
        return body
    return {**body, "messages": [m for m in messages if not _is_system(m)]}


# The instruction Claude Code appends to the whole history when it compacts it (``/compact``, or
# automatically near its window). Its transcript keeps no trace of that request, only the summary
# the next requests start from (recorded as a compaction of the session: ``services.proxy``).
_COMPACT_INSTRUCTION = "Your task is to create a detailed summary of the conversation so far"


def compacting(body: dict[str, Any]) -> bool:
    """The request is the client summarizing its own conversation, not a turn of it."""
    messages = as_list(body.get("messages"))
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return False
    content = last.get("content")
    blocks: list[Any] = (
        [content] if isinstance(content, str) else [b.get("text") for b in as_list(content) if isinstance(b, dict)]
    )
    return any(isinstance(t, str) and _COMPACT_INSTRUCTION in t for t in blocks)


_CONTINUED = "This session is being continued from a previous conversation"


def continues_after_compaction(messages: list[Any]) -> bool:
    """The history starts over after the client compacted its conversation: it opens with the summary
    (Claude Code's words open it), or holds Codex's summary or a provider's compaction item after
    the user's messages Codex keeps."""
    if any(isinstance(m, dict) and (is_compact_summary(m) or holds_a_compaction(m)) for m in messages):
        return True
    first = messages[0] if messages else None
    if not isinstance(first, dict) or first.get("role") != "user":
        return False
    return any(isinstance(t, str) and t.lstrip().startswith(_CONTINUED) for t in _texts(first.get("content")))


def _texts(content: Any) -> list[Any]:
    return [content] if isinstance(content, str) else [b.get("text") for b in as_list(content) if isinstance(b, dict)]


def _is_system(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "system"


def conversation_key(body: dict[str, Any], header: str | None, agent_header: str | None = None) -> str:
    """The external id of the conversation a request belongs to: the ``ctxweb-session`` header; else
    the agent's session id (``metadata.user_id``, else ``agent_header``: OpenCode's ``x-session-id``)
    with a hash of the system prompt; else a hash of the conversation's start (system prompt and
    first message)."""
    user_id = _agent_session_id(body.get("metadata"), agent_header)
    if user_id is not None:
        # An agent's own session id covers several conversations: the main one, each subagent's, the
        # small requests it makes on the side (a title, a check). Their system prompts tell them apart;
        # a conversation the agent compacted itself keeps its system prompt, and so its key (it
        # continues in a fresh session linked to the old one).
        user_id = f"{user_id}#{prompt_hash(body)}"
    for given in (header, user_id):
        if isinstance(given, str) and given.strip():
            return _as_external_id(given.strip())
    first = [
        {"role": m.get("role"), "content": identity(m.get("content"))} if isinstance(m, dict) else m
        for m in as_list(body.get("messages"))[:1]
    ]
    start = {"system": prompt_identity(body.get("system")), "first": first}
    return "proxy-" + hashlib.sha256(canonical(start)).hexdigest()[:32]


def agent_conversation(
    body: dict[str, Any], header: str | None, agent_header: str | None = None
) -> tuple[str, str] | None:
    """``(agent session id, prompt hash)`` when the request names its agent's session (Claude Code
    does, in ``metadata.user_id``; OpenCode in ``agent_header``, its ``x-session-id``) and no
    ``ctxweb-session`` header names the session instead. The
    agent's main conversation is recorded under the bare id (the external id its hook's session
    has, so both meet in one session); its subagents and side requests under ``conversation_key``'s
    ``<id>#<prompt hash>``, as children of the main one (``services.proxy``)."""
    if isinstance(header, str) and header.strip():
        return None
    user_id = _agent_session_id(body.get("metadata"), agent_header)
    if user_id is None:
        return None
    return _as_external_id(user_id), prompt_hash(body)


def _as_external_id(given: str) -> str:
    """``given`` as a session's external id: hashed when a column can't hold it as it is (too long, a
    NUL, a lone surrogate) or when it holds a secret (a header is the caller's to fill)."""
    fits = len(given) <= EXTERNAL_ID_MAX and "\x00" not in given and given.isprintable() and encodes(given)
    fits = fits and public_text(given) == given
    return given if fits else "proxy-" + hashlib.sha256(canonical(given)).hexdigest()[:32]


def prompt_hash(body: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(prompt_identity(body.get("system")))).hexdigest()[:12]


def _agent_session_id(metadata: Any, agent_header: str | None) -> str | None:
    """``metadata.user_id``: Claude Code's session id, which it now sends inside a JSON object
    (``{"device_id": …, "account_uuid": …, "session_id": …}``) — the id its hook gives the session
    of its transcript — or the string as it came; else the agent's session id from a header
    (OpenCode's ``x-session-id``)."""
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id.strip():
        return agent_header.strip() if isinstance(agent_header, str) and agent_header.strip() else None
    try:
        parsed = json.loads(user_id)
    except ValueError:
        return user_id.strip()
    session_id = parsed.get("session_id") if isinstance(parsed, dict) else None
    return session_id.strip() if isinstance(session_id, str) and session_id.strip() else user_id.strip()


def system_text(system: Any) -> str:
    """A request's ``system`` (a string or a list of text blocks) as the session's system prompt."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n\n".join(b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def prompt_identity(system: Any) -> str:
    """The system prompt as part of a conversation's identity: its text (cache markers are not text)
    without Claude Code's billing line and OpenCode's date line (a conversation goes on past midnight)."""
    return _DATE_LINE.sub("", _BILLING_LINE.sub("", system_text(system))).strip()


def session_name(body: dict[str, Any], project: Project | None = None) -> str:
    """A proxied session's name: the first thing the user asked (the words of a user message that the
    harness did not inject: ``compaction.injected``, as checkpoints read them), shortened."""
    for message in as_list(body.get("messages")):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [b for b in as_list(content) if isinstance(b, dict)]
        words = " ".join(typed_text(content if isinstance(content, str) else blocks).split())
        if words:
            return agent_sessions.fit(words, NAME_MAX, project=project)
    return "proxy conversation"
