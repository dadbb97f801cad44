"""Errors services raise; the API, HTML views and CLI turn them into 4xx answers / messages."""

from __future__ import annotations

from collections.abc import Mapping


class ServiceError(Exception):
    status = 400
    code = "invalid"

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        field: str | None = None,
        errors: Mapping[str, list[str]] | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        self.field = field
        # More keys for the JSON answer: where a closed session continues; ``errors``, every field at
        # fault when input is checked as a whole (a policy), of which ``field`` is the first.
        self.extra: dict[str, object] = {**(extra or {}), **({"errors": dict(errors)} if errors else {})}


class InvalidInput(ServiceError):
    status = 400
    code = "invalid"


class TooLarge(ServiceError):
    status = 413
    code = "body_too_large"


class NotFound(ServiceError):
    """Also what a user gets for anything outside their projects: 404, never 403."""

    status = 404
    code = "not_found"


class Forbidden(ServiceError):
    """A member of the project whose role doesn't allow the action."""

    status = 403
    code = "permission_denied"


class Conflict(ServiceError):
    status = 409
    code = "conflict"
