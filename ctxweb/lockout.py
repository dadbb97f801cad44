"""Sign-in lockout (django-axes, configured in settings): which address an attempt came from."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR; behind our proxy (CTX_BEHIND_PROXY) the last X-Forwarded-For entry instead, the
    one the proxy appended itself: every earlier one is whatever the client chose to send."""
    if settings.CTX_BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").rsplit(",", 1)[-1].strip()
        if forwarded:
            return forwarded
    return request.META.get("REMOTE_ADDR", "")
