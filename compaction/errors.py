"""Errors the engine raises; ``permanent`` tells a caller whether trying again can help."""

from __future__ import annotations


class EngineError(Exception):
    def __init__(self, message: str, *, permanent: bool, code: str = "engine_error") -> None:
        super().__init__(message)
        self.permanent = permanent
        self.code = code


class ProviderError(EngineError):
    """A model provider (Anthropic) refused or failed a call."""

    def __init__(self, message: str, *, permanent: bool, status: int | None = None) -> None:
        super().__init__(message, permanent=permanent, code="provider_error")
        self.status = status


def provider_error_from(exc: Exception) -> ProviderError:
    """Classify an ``anthropic`` SDK exception: rate limits, overload, 5xx and timeouts are transient."""
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError | anthropic.APIConnectionError):
        return ProviderError(f"{type(exc).__name__}: {exc}", permanent=False)
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        transient = status in (408, 409, 429) or status >= 500
        return ProviderError(f"Anthropic API {status}: {exc.message}", permanent=not transient, status=status)
    return ProviderError(f"{type(exc).__name__}: {exc}", permanent=True)
