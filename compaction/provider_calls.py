"""Calls to a model provider's API through its official SDK (Anthropic's, OpenAI's), each ending
within its timeout in all.

An SDK's own ``timeout`` is httpx's: it bounds each read, so an upstream sending a byte now and then
holds a call (and the worker or web request making it) for as long as it likes; and its retries
wait whatever ``retry-after`` asks. Here a call's timeout bounds the whole call, retries included:
the SDK never retries itself (``max_retries=0``); ``call`` does, each attempt with what is left of
the timeout as its total (``http_deadline.TotalTimeoutTransport`` holds it to that), and gives up at
once when the wait before the next attempt would reach the deadline. Errors come out as
``ProviderError``, ``permanent`` set (a timeout is transient). Both SDKs send through httpx2 and
raise errors of the same shape (``APIError``; ``APIStatusError`` with the ``response``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ProviderError

if TYPE_CHECKING:
    import httpx2

T = TypeVar("T")

RETRY_WAIT, MAX_RETRY_WAIT = 0.5, 8.0  # seconds before a retry, doubling: the SDKs' own figures


def http_client() -> httpx2.Client:
    """The HTTP client an SDK client is given: every request ends within the timeout it is sent with."""
    import httpx2

    from .http_deadline import TotalTimeoutTransport

    return httpx2.Client(transport=TotalTimeoutTransport())


def call(
    attempt: Callable[[float], T],
    *,
    timeout: float,
    max_retries: int,
    api_error: type[Exception],
    classify: Callable[[Exception], ProviderError],
) -> T:
    """``attempt(seconds)`` makes one SDK call with ``timeout=seconds``; it is made again on a
    transient error, at most ``max_retries`` times, as long as that fits in ``timeout``. ``api_error``:
    the SDK's base error class; ``classify`` turns one into a ``ProviderError``."""
    from .http_deadline import Deadline  # httpx2 loads with the SDK, not with the engine

    deadline, retries = Deadline(timeout), 0
    while True:
        try:
            return attempt(max(deadline.left(), 0.001))
        except api_error as exc:
            error = classify(exc)
            wait = _retry_wait(exc, retries)
            if not _retryable(exc, error.permanent) or retries >= max_retries or wait >= deadline.left():
                raise error from exc
        time.sleep(wait)
        retries += 1


def _headers(exc: Exception) -> Any:
    """The answer's headers of an SDK's status error, else None (a timeout, a lost connection)."""
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None) if getattr(exc, "status_code", None) is not None else None


def _retryable(exc: Exception, permanent: bool) -> bool:
    """As the SDKs decide: the API's ``x-should-retry`` when it says, else whether the error is transient."""
    headers = _headers(exc)
    said = headers.get("x-should-retry") if headers is not None else None
    return said == "true" if said in ("true", "false") else not permanent


def _retry_wait(exc: Exception, retries: int) -> float:
    """What the API asks to wait (``retry-after-ms``, ``retry-after`` in seconds), else the backoff."""
    headers = _headers(exc)
    if headers is not None:
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            try:
                seconds = float(str(headers.get(name, ""))) * scale
            except ValueError:
                continue
            return max(seconds, 0.0)
    return min(RETRY_WAIT * 2.0**retries, MAX_RETRY_WAIT)
