"""What the client raises: ``ApiError`` for an answer with an error status, ``Unreachable`` for no answer
from ctxweb itself. Both may carry ``retry_after`` (seconds the server asked to wait)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ApiError", "CtxError", "DeadlineExceeded", "Unreachable"]


class CtxError(Exception):
    """Anything this client raises."""

    retry_after: float | None = None


class ApiError(CtxError):
    """The server answered with an error status: ``{"detail", "code"}`` (and maybe more, in ``data``)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        data: Mapping[str, Any] | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.data: dict[str, Any] = dict(data or {})
        self.retry_after = retry_after


class Unreachable(CtxError):
    """No answer from ctxweb: the connection failed or timed out, or a proxy in front of it said it is down
    (then ``status`` is the proxy's 502/503/504)."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class DeadlineExceeded(Unreachable):
    """The retry budget was spent before this request could be sent."""
