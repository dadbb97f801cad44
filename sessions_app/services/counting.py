"""Token counting beyond the offline estimate: Anthropic's exact counts, calibration, and the
drop-in count endpoint shared by ``POST /count_tokens/`` and ``ctx count``."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compaction.errors import ProviderError
from compaction.messages import MessageError, normalize_message
from compaction.tokens import DEFAULT_FRAMING, calibrate
from sessions_app.engine import exact_counter, offline_tokenizer
from sessions_app.models import AgentSession, ModelProfile
from sessions_app.selectors import count_cache, model_context, usage
from sessions_app.services import agent_sessions
from sessions_app.services.webhook_events import session_level_record

# ----------------------------------------------------------------------------- the exact-count cache


def exact_cache_get(key: str) -> int | None:
    """The cached exact count under ``key`` (``count_cache.request_key``), counted as a hit or a miss.
    Read before any SDK client exists: a hit costs a cache lookup and nothing more."""
    found = count_cache.exact_count_cache().get(key)
    _stats_bump("hits" if found is not None else "misses")
    return found


def exact_cache_set(key: str, exact: int) -> None:
    count_cache.exact_count_cache().set(key, exact, timeout=settings.CTX_EXACT_COUNT_CACHE_SECONDS)


def _stats_bump(outcome: count_cache.Outcome) -> None:
    stats, key = count_cache.stats_cache(), count_cache.STATS_KEYS[outcome]
    try:
        stats.incr(key)
    except ValueError:  # the first of its kind (or the counter was evicted): start it
        if not stats.add(key, 1, timeout=None):
            # Another process started it first. Should it vanish again at once, one lookup goes
            # uncounted; the count itself is right.
            with contextlib.suppress(ValueError):
                stats.incr(key)


def session_count_exact(*, session_id: int) -> str:
    """Ask Anthropic for the exact size of the session's request and store it.

    The API call happens outside any transaction; the result is stored only if no message arrived
    meanwhile. Transient errors propagate (the task retries them); permanent ones, and transient ones
    on the last try, leave the estimate in place with a warning in STATUS. Returns what happened.
    """
    session = AgentSession.objects.select_related("project", "project__policy").filter(pk=session_id).first()
    if session is None or not settings.ANTHROPIC_API_KEY:
        return "skipped"
    snapshot_seq = session.last_seq
    raw_estimate = (
        session.system_tokens
        + session.tool_tokens
        + session.message_tokens
        + session.summary_tokens
        + DEFAULT_FRAMING.request
    )
    body = model_context.session_context(session)
    body.pop("status", None)
    request = {
        "model": body["model"],
        "system": body.get("system"),
        "tools": body.get("tools"),
        "messages": body["messages"],
    }
    if not request["messages"]:
        return "empty"
    key = count_cache.request_key(request)
    exact = exact_cache_get(key)
    cached = exact is not None
    if exact is None:
        counter = exact_counter()
        assert counter is not None  # ANTHROPIC_API_KEY is set (checked above), so there is a counter
        try:
            exact = counter.count_request(**request)
        except ProviderError as exc:
            session_count_warning(
                session_id=session_id, warning=f"Exact count unavailable ({exc}); showing the offline estimate."
            )
            raise
        exact_cache_set(key, exact)
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().get(pk=session_id)
        if locked.last_seq != snapshot_seq:
            return "stale"
        locked.exact_tokens = exact
        locked.exact_upto_seq = snapshot_seq
        locked.exact_cached = cached
        locked.exact_counted_at = timezone.now()
        locked.count_warning = ""
        locked.save(
            update_fields=["exact_tokens", "exact_upto_seq", "exact_cached", "exact_counted_at", "count_warning"]
        )
        session_level_record(locked)  # the exact figure may put it at another level (beat sends the webhook)
    model_calibration_update(model=session.model, exact=exact, raw_estimate=raw_estimate)
    return "counted"


def session_count_warning(*, session_id: int, warning: str) -> None:
    AgentSession.objects.filter(pk=session_id).update(count_warning=warning[:500])


# Requests this small are mostly framing; their ratio says little about the tokenizer.
CALIBRATION_MIN_TOKENS = 500
CALIBRATION_MAX_RATIO = 4  # an exact count beyond 4× the estimate, or under a quarter of it, teaches nothing
CALIBRATION_WINDOW = 50
# The shipped factor was measured on hundreds of requests; it counts as this many observations, so
# one unusual session can't swing every estimate of the model.
CALIBRATION_PRIOR_WEIGHT = 5


# Tokens a provider reads that no estimate of the request sees (the system prompt it adds for tool
# use: a few hundred), so that a small request's count is not judged by its ratio alone.
PLAUSIBLE_SLACK = 2_000


def plausible_count(*, exact: int, raw_estimate: int, slack: int = PLAUSIBLE_SLACK, unseen: int = 0) -> bool:
    """Whether ``exact`` can be a count of the request ``raw_estimate`` estimates: tokenizers differ by
    tens of percent, not by a factor of four (a broken or hostile upstream's figure is not believed).
    ``unseen``: tokens the request may have held that the estimate can't see (a recorded transcript
    lacks the harness's system prompt and tools), allowed above the estimate only."""
    return (
        exact <= CALIBRATION_MAX_RATIO * raw_estimate + slack + unseen
        and raw_estimate <= CALIBRATION_MAX_RATIO * exact + slack
    )


def model_calibration_update(*, model: str, exact: int, raw_estimate: int) -> float | None:
    """Fold one exact ÷ estimate observation into the model's calibration factor (running mean over
    the last ~50 observations, the starting factor weighing as a few)."""
    if raw_estimate < CALIBRATION_MIN_TOKENS:
        return None
    # A figure that is not a count of this request would move every estimate: no slack here.
    if not plausible_count(exact=exact, raw_estimate=raw_estimate, slack=0):
        return None
    info = usage.model_info(model)
    with transaction.atomic():
        profile = ModelProfile.objects.select_for_update().filter(name=info.name).first()
        if profile is None:
            return None
        ratio = exact / raw_estimate
        n = min(profile.calibration_samples + CALIBRATION_PRIOR_WEIGHT, CALIBRATION_WINDOW - 1)
        profile.calibration_factor = (profile.calibration_factor * n + ratio) / (n + 1)
        profile.calibration_samples += 1
        profile.save(update_fields=["calibration_factor", "calibration_samples", "updated_at"])
    usage.forget_model_profiles()
    return profile.calibration_factor


# ----------------------------------------------------------------------------- the drop-in count endpoint


@dataclass(frozen=True)
class CountResult:
    input_tokens: int
    source: str
    # An exact count served from the exact-count cache (Anthropic was not asked this time).
    cached: bool = False


def _is_system(system: Any) -> bool:
    if isinstance(system, str):
        return True
    return isinstance(system, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in system
    )


def count_request_tokens(body: Any, *, model: str | None = None) -> CountResult:
    """Count an Anthropic ``count_tokens`` request body: exactly when a key is set and the API answers,
    else the calibrated offline estimate. Raises ``MessageError`` for a malformed body."""
    if not isinstance(body, dict):
        raise MessageError("The body is a JSON object like Anthropic's count_tokens request.", code="invalid_body")
    model = model or body.get("model")
    if not isinstance(model, str) or not model:
        raise MessageError("'model' is required (a model name).", code="invalid_model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise MessageError("'messages' must be a non-empty list.", code="invalid_messages")
    limit = settings.CTX_MAX_COUNT_MESSAGES
    if len(messages) > limit:
        raise MessageError(
            f"'messages' holds {len(messages):,} messages; at most {limit:,} are counted in one request.",
            code="too_many_messages",
        )
    system, tools = body.get("system"), body.get("tools")
    if system is not None and not _is_system(system):
        raise MessageError(
            '\'system\' must be a string or a list of text blocks ({"type": "text", "text": "…"}).',
            code="invalid_system",
        )
    if tools is not None:
        agent_sessions.validate_tools(
            tools
        )  # what Anthropic refuses (not objects, no name, a name twice), refused here

    key = None
    if settings.ANTHROPIC_API_KEY:
        key = count_cache.request_key({"model": model, "system": system, "tools": tools, "messages": messages})
        # Only a request whose every message passed the check below was ever counted (a session's
        # request is made of stored, checked messages), so a hit skips it: on a large request the
        # check costs several times the lookup.
        cached = exact_cache_get(key)
        if cached is not None:
            return CountResult(cached, "exact", cached=True)
    normalized = [normalize_message(m, index=i) for i, m in enumerate(messages)]

    if key is not None:
        counter = exact_counter()
        assert counter is not None  # ANTHROPIC_API_KEY is set
        try:
            exact = counter.count_request(model=model, system=system, tools=tools, messages=messages)
        except ProviderError:
            pass  # fall back to the estimate below
        else:
            exact_cache_set(key, exact)
            return CountResult(exact, "exact")

    raw = (
        offline_tokenizer()
        .count_request(
            system=system, tools=tools, messages=[{"role": m.role, "content": m.content} for m in normalized]
        )
        .total
    )
    return CountResult(calibrate(raw, usage.model_info(model).calibration), "estimate")
