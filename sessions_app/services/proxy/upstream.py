"""What the proxy sends upstream for a session whose project has ``proxy_compaction`` on: the
session's compacted context in place of the agent's history, once a compaction has run, with the
cache breakpoints placed where they keep paying off; a compaction run in the request when the
session is past its summarize threshold, or when the upstream refused the request as too long.
(``services.proxy`` records; this decides what goes.)"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from compaction import context as engine_context
from compaction.errors import EngineError
from compaction.types import Level
from sessions_app.errors import Conflict
from sessions_app.models import AgentSession, Compaction, CompactionStatus
from sessions_app.selectors import usage
from sessions_app.selectors.model_context import current_checkpoint, session_context_messages
from sessions_app.services import agent_sessions, compaction_records, compaction_runs
from sessions_app.services.counting import CALIBRATION_MAX_RATIO
from sessions_app.services.proxy.sessions import proxy_session


def compacts_upstream(session: AgentSession, body: dict[str, Any]) -> bool:
    """Whether the request may go upstream as the session's compacted context: the project's
    ``proxy_compaction`` is on, and the request does not ask the provider to compact it."""
    policy = getattr(session.project, "policy", None)
    return bool(policy is not None and policy.proxy_compaction and not provider_compacts(body))


def provider_compacts(body: dict[str, Any]) -> bool:
    """Whether the request asks the provider to compact its context itself (a ``compact_*`` edit in its
    ``context_management``), or manages it in a way ctxweb can't read (left to the provider to judge).
    The client's clearing edits (``clear_thinking``, ``clear_tool_uses``) compose with ctxweb's
    compaction: they go upstream as they came, applied by the provider to the compacted messages."""
    if "context_management" not in body:
        return False
    management = body["context_management"]
    edits = management.get("edits") if isinstance(management, dict) else None
    if not isinstance(edits, list):
        return True
    return any(not isinstance(e, dict) or not isinstance(e.get("type"), str) or e["type"].startswith("compact")
               for e in edits)  # fmt: skip


def proxy_compact_before_sending(session: AgentSession) -> bool:
    """From the summarize level on, the session's queued compaction runs here, before the request is
    forwarded, rather than when a worker gets to it: the request that crossed the line must not go
    upstream over the window (seconds, with a model writing the summary). True when one ran; a
    transient failure leaves it queued for the workers and the request goes as it is."""
    if usage.session_usage(session).level < Level.SUMMARIZE:
        return False
    queued = (
        Compaction.objects.filter(session=session, status=CompactionStatus.QUEUED).values_list("pk", flat=True).first()
    )
    return queued is not None and _run_now(queued)


def _run_now(compaction_id: int) -> bool:
    """Run a queued compaction in this request, not in a worker; True when it succeeded. A transient
    failure leaves it queued for the workers (as their task does)."""
    try:
        return compaction_runs.compaction_run(compaction_id) == "succeeded"
    except EngineError as exc:
        compaction_records.release_for_retry(compaction_id, str(exc))
        return False


# Anthropic's refusal of a request longer than the model's window is this, as its whole message.
_TOO_LONG = re.compile(r"prompt is too long: ([0-9]{1,12}) tokens > ([0-9]{1,12}) maximum")
WINDOW_BOUNDS = (1_024, 10_000_000)  # tokens: a window some model has


@dataclass(frozen=True)
class TooLong:
    tokens: int  # the request's, by the upstream's count
    maximum: int  # the model's window


def too_long_of(content: bytes) -> TooLong | None:
    """A 400's body, when it has the whole shape of a refusal as too long: an ``invalid_request_error``
    whose message is all "prompt is too long: N tokens > M maximum", N over M, M a window some model
    has. Not a message that merely holds the phrase: a validation error quotes the caller's text."""
    try:
        answer = json.loads(content)
    except (ValueError, RecursionError):
        return None
    error = answer.get("error") if isinstance(answer, dict) and answer.get("type") == "error" else None
    if not isinstance(error, dict) or error.get("type") != "invalid_request_error":
        return None
    said = _TOO_LONG.fullmatch(error["message"]) if isinstance(error.get("message"), str) else None
    if said is None:
        return None
    tokens, maximum = int(said.group(1)), int(said.group(2))
    return TooLong(tokens, maximum) if tokens > maximum and WINDOW_BOUNDS[0] <= maximum <= WINDOW_BOUNDS[1] else None


def proxy_compact_for_retry(*, session: AgentSession, body: dict[str, Any], refusal: TooLong) -> Upstream:
    """The upstream refused the request as too long for the window: summarize the session now (its
    queued compaction, if one waits, else a new one) and answer the request to send instead; its
    ``body`` is None when no compaction could make one. Believed only when the request was as large by
    ctxweb's own count (within the factor tokenizers differ by); the maximum it names then teaches the
    session its real window first, so the summary fits under it."""
    ours = usage.session_usage(session)
    if not (
        refusal.tokens <= CALIBRATION_MAX_RATIO * ours.used and ours.used <= CALIBRATION_MAX_RATIO * refusal.tokens
    ):
        return Upstream(None)
    if refusal.maximum < ours.context_window:
        if session.context_window_override:  # the session's own window is more than the model takes
            session = agent_sessions.session_update(session=session, context_window_override=refusal.maximum)
        else:
            session = agent_sessions.session_window_learn(session=session, window=refusal.maximum)
    waiting = Compaction.objects.filter(session=session, status=CompactionStatus.QUEUED).values_list("pk", flat=True)
    try:
        queued = (
            waiting.first()
            or compaction_runs.compaction_request(
                session=session, level=Level.SUMMARIZE.value, user=None, trigger="auto"
            ).pk
        )
    except Conflict:  # one is running in a worker: the refusal reaches the caller
        return Upstream(None)
    if not _run_now(queued):
        return Upstream(None)
    return proxy_upstream_request(session=proxy_session(session.pk) or session, body=body)


@dataclass(frozen=True)
class Upstream:
    body: dict[str, Any] | None  # the request to send instead of the caller's; None: the caller's as it came
    compaction_id: int | None = None  # the compaction the sent context comes from


MAX_CACHE_BREAKPOINTS = 4  # Anthropic refuses a request with more cache_control blocks than this


def proxy_upstream_request(*, session: AgentSession, body: dict[str, Any]) -> Upstream:
    """With the project's ``proxy_compaction`` on and a compaction in effect, the request goes upstream
    as the session's compacted context (its checkpoint's summary and the messages kept), the rest of
    the caller's request (model, system, tools, settings, ``context_management``) as it came. Not when
    the request asks the provider to compact it itself (``provider_compacts``): the provider's
    compaction is not fought. With thinking on, the assistant turn the request continues starts with
    a thought (``thinking_turn_kept``). Cache breakpoints: the stored messages' own are dropped (an
    agent moves its marker every request; the stored copies keep old ones), one goes after the summary
    (the prefix that changes only when a compaction runs) and one on the last message, within the
    API's limit of four."""
    if not compacts_upstream(session, body):
        return Upstream(None)
    in_effect = (
        Compaction.objects.filter(session=session, status=CompactionStatus.SUCCEEDED)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    if in_effect is None:
        return Upstream(None)
    messages = [
        _without_cache_marks(m) for m in engine_context.to_anthropic_messages(session_context_messages(session))
    ]
    if engine_context.thinking_enabled(body):
        messages = engine_context.thinking_turn_kept(messages)
    budget = MAX_CACHE_BREAKPOINTS - _cache_marks(body.get("system")) - _cache_marks(body.get("tools"))
    summarized = bool(messages) and current_checkpoint(session) is not None
    for index in ([0] if summarized else []) + [len(messages) - 1]:
        if budget > 0 and 0 <= index < len(messages):
            messages[index] = _with_cache_mark(messages[index])
            budget -= 1
    return Upstream({**body, "messages": messages}, in_effect)


def _cache_marks(value: Any) -> int:
    """The cache breakpoints a request's system prompt or tools carry: one per block or tool marked."""
    return (
        sum(1 for item in value if isinstance(item, dict) and "cache_control" in item) if isinstance(value, list) else 0
    )


def _without_cache_marks(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {**message, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in content]}


def _with_cache_mark(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    )
    if not blocks:
        return message
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return {**message, "content": blocks}
