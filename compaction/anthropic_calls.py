"""Calls to Anthropic's API through the official SDK, each ending within its timeout in all, retries
included (``provider_calls``). Errors come out as ``ProviderError``, ``permanent`` set."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from . import provider_calls
from .errors import provider_error_from

if TYPE_CHECKING:
    import anthropic

T = TypeVar("T")


def client(*, api_key: str, base_url: str | None) -> anthropic.Anthropic:
    """An SDK client whose every request ends within the timeout it is sent with."""
    import anthropic

    return anthropic.Anthropic(
        api_key=api_key, base_url=base_url, max_retries=0, http_client=provider_calls.http_client()
    )


def call(attempt: Callable[[float], T], *, timeout: float, max_retries: int) -> T:
    """``attempt(seconds)`` makes one SDK call with ``timeout=seconds``; it is made again on a
    transient error, at most ``max_retries`` times, as long as that fits in ``timeout``."""
    import anthropic

    return provider_calls.call(
        attempt, timeout=timeout, max_retries=max_retries, api_error=anthropic.APIError, classify=provider_error_from
    )
