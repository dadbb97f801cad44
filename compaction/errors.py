"""Errors the engine raises; ``permanent`` tells a caller whether trying again can help."""

from __future__ import annotations


class EngineError(Exception):
    def __init__(self, message: str, *, permanent: bool, code: str = "engine_error") -> None:
        super().__init__(message)
        self.permanent = permanent
        self.code = code


class ProviderError(EngineError):
    """A model provider (Anthropic, OpenAI) refused or failed a call."""

    def __init__(self, message: str, *, permanent: bool, status: int | None = None) -> None:
        super().__init__(message, permanent=permanent, code="provider_error")
        self.status = status


def provider_error_from(exc: Exception) -> ProviderError:
    """Classify an ``anthropic`` SDK exception: rate limits, overload, 5xx and timeouts are transient."""
    import anthropic

    return _classify(exc, "Anthropic", anthropic.APIConnectionError, anthropic.APIStatusError)


def openai_error_from(exc: Exception) -> ProviderError:
    """Classify an ``openai`` SDK exception as ``provider_error_from`` does an ``anthropic`` one."""
    import openai

    return _classify(exc, "OpenAI", openai.APIConnectionError, openai.APIStatusError)


def _classify(
    exc: Exception, provider: str, connection: type[Exception], status_error: type[Exception]
) -> ProviderError:
    # A timeout is a connection error in both SDKs.
    if isinstance(exc, connection):
        return ProviderError(f"{type(exc).__name__}: {exc}", permanent=False)
    if isinstance(exc, status_error):
        status = int(getattr(exc, "status_code", 0))
        transient = status in (408, 409, 429) or status >= 500
        message = getattr(exc, "message", str(exc))
        return ProviderError(f"{provider} API {status}: {message}", permanent=not transient, status=status)
    return ProviderError(f"{type(exc).__name__}: {exc}", permanent=True)
