"""Calls to OpenAI's API through the official SDK, each ending within its timeout in all, retries
included (``provider_calls``). Errors come out as ``ProviderError``, ``permanent`` set."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from . import provider_calls
from .errors import openai_error_from

if TYPE_CHECKING:
    import openai

T = TypeVar("T")


def client(*, api_key: str, base_url: str | None) -> openai.OpenAI:
    """An SDK client whose every request ends within the timeout it is sent with. ``base_url``
    ends in ``/v1``, as the SDK's own default does."""
    import openai

    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, http_client=provider_calls.http_client())


def call(attempt: Callable[[float], T], *, timeout: float, max_retries: int) -> T:
    """``attempt(seconds)`` makes one SDK call with ``timeout=seconds``; it is made again on a
    transient error, at most ``max_retries`` times, as long as that fits in ``timeout``."""
    import openai

    return provider_calls.call(
        attempt, timeout=timeout, max_retries=max_retries, api_error=openai.APIError, classify=openai_error_from
    )
