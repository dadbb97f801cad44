"""Calls to Anthropic's API through the official SDK, each ending within its timeout in all.

The SDK's own ``timeout`` is httpx's: it bounds each read, so an upstream sending a byte now and then
holds a call (and the worker or web request making it) for as long as it likes; and its retries
wait whatever ``retry-after`` asks. Here a call's timeout bounds the whole call, retries included:
the SDK never retries itself (``max_retries=0``); ``call`` does, each attempt with what is left of
the timeout as its total (``http_deadline.TotalTimeoutTransport`` holds it to that), and gives up at
once when the wait before the next attempt would reach the deadline. Errors come out as
``ProviderError``, ``permanent`` set (a timeout is transient)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from .errors import provider_error_from

if TYPE_CHECKING:
    import anthropic

T = TypeVar("T")

RETRY_WAIT, MAX_RETRY_WAIT = 0.5, 8.0  # seconds before a retry, doubling: the SDK's own figures


def client(*, api_key: str, base_url: str | None) -> anthropic.Anthropic:
    """An SDK client whose every request ends within the timeout it is sent with."""
    import anthropic
    import httpx2

    from .http_deadline import TotalTimeoutTransport

    return anthropic.Anthropic(
        api_key=api_key, base_url=base_url, max_retries=0, http_client=httpx2.Client(transport=TotalTimeoutTransport())
    )


def call(attempt: Callable[[float], T], *, timeout: float, max_retries: int) -> T:
    """``attempt(seconds)`` makes one SDK call with ``timeout=seconds``; it is made again on a
    transient error, at most ``max_retries`` times, as long as that fits in ``timeout``."""
    import anthropic

    from .http_deadline import Deadline  # httpx2 loads with the SDK, not with the engine

    deadline, retries = Deadline(timeout), 0
    while True:
        try:
            return attempt(max(deadline.left(), 0.001))
        except anthropic.APIError as exc:
            error = provider_error_from(exc)
            wait = _retry_wait(exc, retries)
            if not _retryable(exc, error.permanent) or retries >= max_retries or wait >= deadline.left():
                raise error from exc
        time.sleep(wait)
        retries += 1


def _retryable(exc: Exception, permanent: bool) -> bool:
    """As the SDK decides: the API's ``x-should-retry`` when it says, else whether the error is transient."""
    import anthropic

    said = exc.response.headers.get("x-should-retry") if isinstance(exc, anthropic.APIStatusError) else None
    return said == "true" if said in ("true", "false") else not permanent


def _retry_wait(exc: Exception, retries: int) -> float:
    """What the API asks to wait (``retry-after-ms``, ``retry-after`` in seconds), else the backoff."""
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        headers = exc.response.headers
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            try:
                seconds = float(str(headers.get(name, ""))) * scale
            except ValueError:
                continue
            return max(seconds, 0.0)
    return min(RETRY_WAIT * 2.0**retries, MAX_RETRY_WAIT)
