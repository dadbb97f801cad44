"""Rate limits per API key and per user (429 with ``Retry-After``). Rates come from settings at
request time, so an operator (or a test) can change them without a restart of the class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:  # rest_framework.views imports the throttle classes: no import cycle at run time
    from rest_framework.request import Request


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Each key has its own budget: one runaway agent can't starve the others of its owner."""

    scope = "api_key"

    def get_rate(self) -> str | None:
        return settings.CTX_RATE_LIMIT_KEY or None

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        from sessions_app.models import ApiKey

        if not isinstance(request.auth, ApiKey):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class UserRateThrottle(SimpleRateThrottle):
    """All of a user's keys and browser requests together."""

    scope = "user"

    def get_rate(self) -> str | None:
        return settings.CTX_RATE_LIMIT_USER or None

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not request.user or not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}
