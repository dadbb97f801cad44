"""Secrets out of ctxweb's copy of what agents send: every secret found in a text (or in the strings of
a message's content blocks; ``compaction.secret_rules`` finds them) is replaced by
``[secret:<kind>:<fingerprint>]``, where the fingerprint is the first four hex digits of an HMAC of
the value, so the same secret is recognisable across messages without being readable. Pure and
deterministic: the same value and rules give the same result, and redacting a redacted value changes
nothing."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compaction.secret_rules import (
    CUSTOM,
    HIGH_ENTROPY,
    KEYWORD,
    MARKER,
    Rules,
    compile_patterns,
    find_secrets,
    kinds,
    plausible_value,
)

__all__ = [
    "CUSTOM",
    "HIGH_ENTROPY",
    "KEYWORD",
    "MARKER",
    "Redacted",
    "Rules",
    "compile_patterns",
    "find_secrets",
    "fingerprint",
    "kinds",
    "marker",
    "redact",
    "restore",
]

# Content blocks whose fields a provider checks byte for byte (thinking signatures, encrypted
# reasoning): never rewritten.
_OPAQUE_FIELDS = {"thinking": "signature", "redacted_thinking": "data", "reasoning": "encrypted_content"}
# Ids that pair a tool call with its result (the caller's own, matched against its next request).
_ID_FIELDS = frozenset({"id", "tool_use_id", "call_id"})
# A dict key that names a secret (tool inputs, JSON bodies): its string value is one.
_SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|auth[_-]?key|private[_-]?key|"
    r"access[_-]?key|client[_-]?secret|credentials?)$",
    re.I,
)


@dataclass
class Redacted:
    value: Any
    found: Counter[str] = field(default_factory=Counter)  # kind -> secrets replaced
    secrets: dict[str, str] = field(default_factory=dict)  # marker -> the value it stands for (never stored)


def fingerprint(value: str, key: bytes) -> str:
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:4]


def marker(kind: str, value: str, key: bytes) -> str:
    return f"[secret:{kind}:{fingerprint(value, key)}]"


def redact(value: Any, rules: Rules) -> Redacted:
    """A JSON-like value (a message's content, a tool's input, a system prompt's blocks) with every
    string redacted; a string under a key that names a secret (``"password": "…"``) is one whole.
    Its strings are searched as one text (each on lines of its own, so no rule's match runs from one
    into the next), and a secret found anywhere in it is replaced everywhere in it. Ids, signatures
    and base64 payloads (images, documents) are left as they are."""
    if rules.looks_for_nothing:
        return Redacted(value)
    texts: list[str] = []
    keyed: dict[str, str] = {}
    _visit(value, texts.append, lambda v: keyed.setdefault(v, KEYWORD), KEYWORD not in rules.disabled)
    found = find_secrets(_JOINT.join(texts), rules) if texts else {}
    found = {**keyed, **found}
    if not found:
        return Redacted(value)
    counts: Counter[str] = Counter()
    secrets: dict[str, str] = {}
    pattern = _pattern(found)

    def walk(node: Any, key: str = "") -> Any:
        if isinstance(node, str):
            done = _replaced(node, found, rules, pattern)
            counts.update(done.found)
            secrets.update(done.secrets)
            return done.value
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            if node.get("type") == "base64":
                return node
            opaque = _OPAQUE_FIELDS.get(node.get("type"))  # type: ignore[arg-type]
            return {
                walk(k) if isinstance(k, str) and len(k) >= _LONG_KEY else k: (
                    v if k == opaque or k in _ID_FIELDS else walk(v, k)
                )
                for k, v in node.items()
            }
        return node

    return Redacted(walk(value), counts, secrets)


# Between the strings of one value searched as one text: a line of its own, with a NUL (no stored
# string holds one) that the private-key rule stops at.
_JOINT = "\n\x00\n"
_WHOLE_WORD_BELOW = 16
_LONG_KEY = 16


def _visit(node: Any, text: Callable[[str], Any], keyed: Callable[[str], Any], keywords: bool, key: Any = "") -> None:
    if isinstance(node, str):
        if keywords and isinstance(key, str) and key and _SECRET_KEY.search(key) and plausible_value(node):
            keyed(node)
        else:
            text(node)
    elif isinstance(node, list):
        for item in node:
            _visit(item, text, keyed, keywords)
    elif isinstance(node, dict) and node.get("type") != "base64":
        opaque = _OPAQUE_FIELDS.get(node.get("type"))  # type: ignore[arg-type]
        for k, v in node.items():
            if isinstance(k, str) and len(k) >= _LONG_KEY:  # a long key may itself be one (a map of tokens)
                text(k)
            if k != opaque and k not in _ID_FIELDS:
                _visit(v, text, keyed, keywords, k)


def _pattern(found: dict[str, str]) -> re.Pattern[str]:
    # Markers already in the text stay as they are (redacting twice changes nothing); every other
    # occurrence of a value found is replaced, the longest values first.
    # A short value (a password) only as a word of its own: "hunter22" is not replaced in "xhunter22y".
    values = sorted(found, key=lambda v: (-len(v), v))
    alternatives = (re.escape(v) if len(v) >= _WHOLE_WORD_BELOW else rf"(?<!\w){re.escape(v)}(?!\w)" for v in values)
    return re.compile(MARKER.pattern + "|" + "|".join(alternatives))


def _replaced(text: str, found: dict[str, str], rules: Rules, pattern: re.Pattern[str] | None = None) -> Redacted:
    if not found or not any(value in text for value in found):
        return Redacted(text)
    counts: Counter[str] = Counter()
    secrets: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        value = match.group(0)
        kind = found.get(value)
        if kind is None:
            return value
        counts[kind] += 1
        made = marker(kind, value, rules.key)
        secrets[made] = value
        return made

    return Redacted((pattern or _pattern(found)).sub(replace, text), counts, secrets)


def restore(value: Any, secrets: dict[str, str]) -> Any:
    """``value`` with each marker ``secrets`` knows put back to its value: what goes to a model on the
    caller's behalf holds what the caller sent, not markers (``secrets`` from ``redact`` of the
    caller's own request)."""
    if not secrets:
        return value
    if isinstance(value, str):
        return MARKER.sub(lambda m: secrets.get(m.group(0), m.group(0)), value) if "[secret:" in value else value
    if isinstance(value, list):
        return [restore(item, secrets) for item in value]
    if isinstance(value, dict):
        return {k: restore(v, secrets) for k, v in value.items()}
    return value
