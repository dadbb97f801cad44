"""Generated secrets of every kind redaction knows, each with a text it sits in: for the engine's tests
(``tests/compaction/test_redact.py``) and the property that none of them is stored anywhere
(``tests/sessions_app/test_redaction.py``). Random, as a key generator makes them."""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Any

from hypothesis import strategies as st

from compaction.redact import HIGH_ENTROPY, KEYWORD

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def chars(alphabet: str, n: int) -> st.SearchStrategy[str]:
    """``n`` random characters of ``alphabet``, as a key generator makes them (not ``"0000…"``)."""
    return st.integers(0, 2**32).map(lambda seed: "".join(random.Random(seed).choices(alphabet, k=n)))


def mixed(alphabet: str, n: int) -> st.SearchStrategy[str]:
    """``n`` characters of ``alphabet`` holding an upper-case letter, a lower-case one and a digit."""
    return chars(alphabet, n - 3).map(lambda s: "A" + s + "z7")


def _jwt(payload: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(payload)}.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


def _pem(body: str) -> str:
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----"


# kind -> (the secret, the text it sits in): what a ``[secret:kind:…]`` must replace.
SECRETS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "aws-access-key": chars(string.ascii_uppercase + string.digits, 16).map(lambda s: ("AKIA" + s, "AKIA" + s)),
    "aws-secret-key": chars(B64, 40).map(lambda s: (s, f'aws_secret_access_key = "{s}"')),
    "github-token": chars(ALNUM, 36).map(lambda s: ("ghp_" + s, "ghp_" + s)),
    "gitlab-token": chars(URLSAFE, 20).map(lambda s: ("glpat-" + s, "glpat-" + s)),
    "slack-token": chars(ALNUM, 24).map(lambda s: ("xoxb-1234567890-12345678-" + s, "xoxb-1234567890-12345678-" + s)),
    "stripe-access-key": chars(ALNUM, 24).map(lambda s: ("sk_live_" + s, "sk_live_" + s)),
    "private-key": chars(B64, 200).map(lambda s: (s[:64], _pem(s))),
    # Up to a kilobyte and a half: a JWT runs far past the string that gates its rule.
    "jwt": st.tuples(st.integers(0, 10**9), st.integers(0, 1_000)).map(
        lambda p: (_jwt({"sub": p[0], "scope": "x" * p[1]}), _jwt({"sub": p[0], "scope": "x" * p[1]}))
    ),
    "basic-auth": mixed(ALNUM, 16).map(lambda s: (s, f"postgres://deploy:{s}@db.internal:5432/app")),
    "anthropic-api-key": chars(URLSAFE, 93).map(lambda s: ("sk-ant-api03-" + s, "sk-ant-api03-" + s)),
    "openai-api-key": mixed(URLSAFE, 48).map(lambda s: ("sk-proj-" + s, "sk-proj-" + s)),
    "ctxweb-api-key": mixed(URLSAFE, 43).map(lambda s: ("ctx_" + s, "ctx_" + s)),
    KEYWORD: mixed(ALNUM, 14).map(lambda s: (s, f'db_password = "{s}"')),
    HIGH_ENTROPY: mixed(B64, 48).map(lambda s: (s, f'"{s}"')),
}  # fmt: skip


def leaked(secret: str, text: str, piece: int = 12) -> bool:
    """Whether any ``piece`` characters of ``secret`` in a row are in ``text`` (a secret cut short,
    its prefix replaced and the rest left, is still leaked)."""
    if len(secret) <= piece:
        return secret in text
    return any(secret[i : i + piece] in text for i in range(len(secret) - piece + 1))
