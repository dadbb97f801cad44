"""API keys: made (the raw key shown once, only its hash stored), revoked, and checked on each request."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from django.utils import timezone

from sessions_app.models import (
    ApiKey,
)
from sessions_app.selectors import access

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

API_KEY_PREFIX = "ctx_"


_LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash_key(raw: str) -> str:
    # Keys are 256-bit random strings: a plain SHA-256 is enough (no dictionary to defend against).
    return hashlib.sha256(raw.encode()).hexdigest()


def apikey_create(*, user: User, name: str = "") -> tuple[ApiKey, str]:
    """A new key for the user. The raw key is returned once and never stored."""
    raw = API_KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(user=user, name=name[:100], prefix=raw[:12], key_hash=_hash_key(raw))
    return key, raw


def apikey_revoke(*, key: ApiKey) -> ApiKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def apikey_authenticate(raw: str) -> ApiKey | None:
    if not raw.startswith(API_KEY_PREFIX) or len(raw) < 20:
        return None
    key = access.apikey_live(raw[:12])
    if key is None or not hmac.compare_digest(key.key_hash, _hash_key(raw)) or not key.user.is_active:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > _LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key
