"""Secrets ctxweb must read back (not just check, as it checks its own API keys by their hash): a
project's upstream API key. Sealed with Fernet (AES-128-CBC and HMAC-SHA256, from ``cryptography``)
under ``CTX_ENCRYPTION_KEYS``: Fernet keys, comma-separated, the first sealing and every one opening,
so a key is rotated by putting a new one first. Unset, one key is derived from ``SECRET_KEY``:
changing that then makes what was sealed unreadable (``unseal`` answers None, and the admins enter
the secret again)."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


def _fernet() -> MultiFernet:
    keys = [k.strip() for k in settings.CTX_ENCRYPTION_KEYS.split(",") if k.strip()]
    if not keys:  # one derived from SECRET_KEY, for this purpose only
        digest = hashlib.sha256(b"ctxweb sealing\x00" + settings.SECRET_KEY.encode()).digest()
        keys = [base64.urlsafe_b64encode(digest).decode()]
    return MultiFernet([Fernet(k) for k in keys])


def seal(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def unseal(sealed: str) -> str | None:
    """The secret, or None when no configured key opens it (rotated away, or SECRET_KEY changed)."""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except (InvalidToken, ValueError):
        return None
