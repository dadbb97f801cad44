"""A provider's own count of a session's context as the session's exact count: what a response's
``usage`` says its model read (and wrote), reported by the proxy's exchanges (``services.proxy``) and by
recorded transcripts (``services.transcript_usage``) alike.

The figure holds while the message it was reported with ends the session (``exact_upto_seq``), as an
exact count from Anthropic's count endpoint does (``services.counting``); the figure the model read
against ctxweb's offline estimate of the same request teaches the model's calibration."""

from __future__ import annotations

import hashlib
import logging
import time

from django.conf import settings
from django.core.cache import cache

from sessions_app.models import AgentSession
from sessions_app.selectors import sql_rows, usage
from sessions_app.services import agent_sessions, counting
from sessions_app.services.webhook_events import session_figures_record, session_level_record

log = logging.getLogger(__name__)

# How a warning about a transcript's figure begins (the next upload clears it when no figure applies).
TRANSCRIPT_WARNING = "The transcript says its model read"
USAGE_MAX = 100_000_000  # tokens: far beyond any model's window, well within the columns


def exact_usage_record(
    *,
    session: AgentSession,
    read: int,
    wrote: int,
    upto_seq: int,
    raw_request: int,
    source: str,
    unseen: int = 0,
    teach: bool = True,
) -> bool:
    """``read`` (input, cache reads and writes) + ``wrote`` as the session's exact count through
    ``upto_seq``, when that message still ends the session. ``raw_request``: ctxweb's offline estimate
    of what the model read; ``unseen``: what it may have read that the session doesn't hold. A figure
    past the session's window, or far from that estimate (``counting.plausible_count``), is a warning
    on the session instead. ``teach``: whether the figure against the estimate teaches the model's
    calibration (not when the session lacks part of what the model read). ``source`` names the
    reporter in logs."""
    window = usage.session_window(session)
    if read + wrote > window and _learnt_window_disproved(session, read, wrote, raw_request):
        session = agent_sessions.session_window_learn(session=session, window=_grown_window(session, read + wrote))
        window = usage.session_window(session)
    # A figure the model can't have read, or not of this request, is flagged, neither kept nor learnt from.
    why = ""
    if read + wrote > min(window, USAGE_MAX):
        why = f"more than its {window:,}-token window"
    elif not counting.plausible_count(exact=read, raw_estimate=raw_request, unseen=unseen):
        why = f"not a count of this request (ctxweb estimates {raw_request:,})"
    if why:
        log.warning("%s: session %s: a response's usage (%s tokens) was not believed", source, session.pk, read + wrote)
        counting.session_count_warning(
            session_id=session.pk,
            warning=f"{TRANSCRIPT_WARNING if source == 'transcript' else 'The upstream said its model read'} "
            f"{read + wrote:,} tokens of this session, {why}: not believed; the figures are ctxweb's estimate.",
        )
        return False
    exact = {
        "exact_tokens": read + wrote,
        "exact_upto_seq": upto_seq,
        "exact_cached": False,
        "exact_counted_at": session.last_activity_at,
        "count_warning": "",
    }
    # Only while that message is the session's last (an exact count holds for the messages it
    # counted); no lock: the level note is conditional on the figures it was worked out from. Most
    # often one UPDATE writes the figure with the level and usage it gives.
    if session_figures_record(session, exact, {"last_seq": upto_seq}):
        pass
    elif sql_rows.update_if(AgentSession, session.pk, exact, {"last_seq": upto_seq}):
        for field, value in exact.items():
            setattr(session, field, value)
        session_level_record(session)
    if teach:
        calibration_observe(model=session.model, exact=read, raw_estimate=raw_request)
    return True


def calibration_observe(*, model: str, exact: int, raw_estimate: int) -> None:
    """``exact`` tokens where ctxweb's offline count says ``raw_estimate``, for the model's calibration;
    one observation per model per CTX_PROXY_CALIBRATION_SECONDS: every response would otherwise write
    the model's one profile row (every agent of that model waiting on its lock) and move every figure
    worked out from the factor (the dashboard's cached costs, the stored levels)."""
    model_key = hashlib.sha256(model.encode(errors="replace")).hexdigest()[:24]
    now, interval = time.monotonic(), settings.CTX_PROXY_CALIBRATION_SECONDS
    if _interval_taken.get(model_key, 0.0) > now:
        return
    if len(_interval_taken) >= _MODELS_REMEMBERED:  # model names are the callers': kept few
        _interval_taken.clear()
    # This process asks the cache once an interval: a lesson taken, by it or another process, stands
    # for the interval (another's may thus come up to an interval late).
    _interval_taken[model_key] = now + interval
    if cache.add(f"ctx:proxy-calibrated:{model_key}", 1, timeout=interval):
        counting.model_calibration_update(model=model, exact=exact, raw_estimate=raw_estimate)


# Per model key: until when (``time.monotonic``) this process knows the interval's lesson is taken.
_interval_taken: dict[str, float] = {}
_MODELS_REMEMBERED = 1024


def forget_calibration_intervals() -> None:
    """What this process remembers of the lessons taken (tests roll back and clear the cache)."""
    _interval_taken.clear()


def _learnt_window_disproved(session: AgentSession, read: int, wrote: int, raw_request: int) -> bool:
    """A request the provider answered held more than the window it taught the session (the session has
    no override of its own): the learnt window is too small, when the figure is a count of it."""
    return (
        session.context_window_learnt is not None
        and not session.context_window_override
        and read + wrote <= USAGE_MAX
        and counting.plausible_count(exact=read, raw_estimate=raw_request)
    )


def _grown_window(session: AgentSession, tokens: int) -> int | None:
    """The model's own window again, when the request fitted it; else the request's size, the least
    the model was seen to take."""
    return None if tokens <= usage.model_info(session.model).context_window else tokens
