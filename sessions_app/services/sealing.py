"""Secrets ctxweb must read back (not just check, as it checks its own API keys by their hash): a
project's upstream API key, and the raw transcript text the sync re-reads (``TranscriptChunk``: it
holds whatever the agent wrote, secrets included, and is needed byte for byte; the messages read from
it are redacted). Sealed with Fernet (AES-128-CBC and HMAC-SHA256, from ``cryptography``)
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


# Every Fernet token starts with its version byte, 0x80, base64-encoded.
_TOKEN_START = b"gAAAAA"


def seal_bytes(data: bytes) -> bytes:
    return _fernet().encrypt(data)


def is_sealed(data: bytes) -> bool:
    return data.startswith(_TOKEN_START)


def unseal_bytes(sealed: bytes) -> bytes | None:
    """The bytes, or None when no configured key opens them. Bytes kept before they were sealed (a
    transcript line starts with ``{``, never with a token's start) come back as they are."""
    if not is_sealed(sealed):
        return sealed
    try:
        return _fernet().decrypt(sealed)
    except InvalidToken:
        return None
