"""What the proxy sends upstream for a session whose project has ``proxy_compaction`` on: the
session's compacted context in place of the agent's history, once a compaction has run, in the
API's own format (``wire``); a compaction run in the request when the session is past its summarize
threshold, or when the upstream refused the request as too long.
(``services.proxy`` records; this decides what goes.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction import redact
from compaction.errors import EngineError
from compaction.types import Level
from sessions_app.errors import Conflict
from sessions_app.models import AgentSession, Compaction, CompactionStatus
from sessions_app.selectors import usage
from sessions_app.selectors.model_context import current_checkpoint, session_context_messages
from sessions_app.services import agent_sessions, compaction_records, compaction_runs, redaction
from sessions_app.services.counting import CALIBRATION_MAX_RATIO
from sessions_app.services.proxy.sessions import proxy_session
from sessions_app.services.proxy.wire import WINDOW_BOUNDS, Context, Render, TooLong


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


def proxy_compact_for_retry(
    *, session: AgentSession, body: dict[str, Any], refusal: TooLong, render: Render
) -> Upstream:
    """The upstream refused the request as too long for the window: summarize the session now (its
    queued compaction, if one waits, else a new one) and answer the request to send instead, in the
    API's format (``render``); its ``body`` is None when no compaction could make one. Believed only
    when the request was as large by ctxweb's own count (within the factor tokenizers differ by): as
    the size the refusal names, or, when it names none, a size the session's window could be too
    small for. The maximum it names then teaches the session its real window first, so the summary
    fits under it; a refusal that names none teaches the request's size by ctxweb's count, the most
    the window can be as far as ctxweb can tell."""
    ours = usage.session_usage(session)
    if not _as_large(refusal.tokens, ours.used, ours.context_window):
        return Upstream(None)
    maximum = refusal.maximum if refusal.maximum is not None else ours.used
    if WINDOW_BOUNDS[0] <= maximum < ours.context_window:
        if session.context_window_override:  # the session's own window is more than the model takes
            session = agent_sessions.session_update(session=session, context_window_override=maximum)
        else:
            session = agent_sessions.session_window_learn(session=session, window=maximum)
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
    return proxy_upstream_request(session=proxy_session(session.pk) or session, body=body, render=render)


def _as_large(theirs: int | None, ours: int, window: int) -> bool:
    if theirs is None:
        return CALIBRATION_MAX_RATIO * ours >= window
    return theirs <= CALIBRATION_MAX_RATIO * ours and ours <= CALIBRATION_MAX_RATIO * theirs


@dataclass(frozen=True)
class Upstream:
    body: dict[str, Any] | None  # the request to send instead of the caller's; None: the caller's as it came
    compaction_id: int | None = None  # the compaction the sent context comes from


def proxy_upstream_request(*, session: AgentSession, body: dict[str, Any], render: Render) -> Upstream:
    """With the project's ``proxy_compaction`` on and a compaction in effect, the request goes upstream
    as the session's compacted context (its checkpoint's summary and the messages kept), rendered in
    the API's format by ``render`` with the rest of the caller's request as it came. Not when the
    request asks the provider to compact it itself (``provider_compacts``): the provider's compaction
    is not fought."""
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
    context = Context(session_context_messages(session), summarized=current_checkpoint(session) is not None)
    # The stored context is redacted; the caller's request holds the values: each marker goes upstream
    # as the value the caller sent (a marker whose value is no longer in its request stays a marker).
    secrets = redaction.value_redact(session.project, body).secrets
    return Upstream(redact.restore(render(context, body), secrets), in_effect)
