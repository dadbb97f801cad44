"""Secrets out of ctxweb's copy of what agents send: every secret found in a text (or in the strings of
a message's content blocks; ``compaction.secret_rules`` finds them) is replaced by
``[secret:<kind>:<fingerprint>]``, where the fingerprint is the first four hex digits of an HMAC of
the value, so the same secret is recognisable across messages without being readable. Pure and
deterministic: the same value and rules give the same result, and redacting a redacted value changes
nothing."""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import ahocorasick  # type: ignore[import-not-found]  # a C extension without stubs

from compaction.secret_names import keyed_value, secret_name
from compaction.secret_rules import (
    CUSTOM,
    HIGH_ENTROPY,
    JOINT,
    KEYWORD,
    MARKER,
    Rules,
    compile_patterns,
    find_secrets,
    kinds,
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
_OPAQUE_FIELDS = {
    "thinking": "signature", "redacted_thinking": "data", "reasoning": "encrypted_content", "base64": "data",
}  # fmt: skip
# Ids that pair a tool call with its result (the caller's own, matched against its next request).
_ID_FIELDS = frozenset({"id", "tool_use_id", "call_id"})
# The keys of an object that names a variable and holds its value (``{"name": "DB_PASSWORD", "value":
# "…"}``: a Kubernetes or CI environment).
_NAME_KEYS = ("name", "key", "Name", "Key")
# Fields a reader of the message goes by (a block's type, a tool's name, an image's media type): a
# value found elsewhere in the message (``password = "tool_use"``) is not replaced in them, or the
# message would no longer read as what it is; a secret their own text holds still is.
_STRUCTURAL = frozenset({"type", "role", "status", "media_type", "name"})
_VALUE_KEYS = ("value", "Value")


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
    found = find_secrets(JOINT.join(texts), rules) if texts else {}
    found = {**keyed, **found}
    if not found:
        return Redacted(value)
    counts: Counter[str] = Counter()
    secrets: dict[str, str] = {}
    finder = _finder(found)

    def walk(node: Any, key: str = "") -> Any:
        if isinstance(node, str):
            done = _replaced(node, found, rules, finder)
            if done.found and key in _STRUCTURAL:  # only what its own text holds, not a word found elsewhere
                done = _replaced(node, find_secrets(node, rules), rules)
            counts.update(done.found)
            secrets.update(done.secrets)
            return done.value
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            opaque = _opaque_field(node)
            return {
                walk(k) if isinstance(k, str) and len(k) >= _LONG_KEY else k: (
                    v if k == opaque or k in _ID_FIELDS else walk(v, k)
                )
                for k, v in node.items()
            }
        return node

    return Redacted(walk(value), counts, secrets)


_WHOLE_WORD_BELOW = 16
_LONG_KEY = 16


def _visit(
    node: Any,
    text: Callable[[str], Any],
    keyed: Callable[[str], Any],
    keywords: bool,
    key: Any = "",
    under: bool = False,
) -> None:
    """Every string of ``node`` to ``text``, and to ``keyed`` the secrets a key names: a string under
    a secret's name (``"password": "…"``), the strings of a list or object under one (``under``), the
    value of a name/value pair whose name is one."""
    if isinstance(node, str):
        secret = keywords and (keyed_value(key, node) or (under and keyed_value("secret", node, inherited=True)))
        if secret:
            keyed(secret)
        text(node)
    elif isinstance(node, list):
        if keywords:
            _flagged(node, keyed)
        for item in node:
            _visit(item, text, keyed, keywords, "", under or _names_secret(key))
    elif isinstance(node, dict):
        opaque = _opaque_field(node)
        under = under or _names_secret(key)
        if keywords:
            _pair(node, keyed)
        for k, v in node.items():
            if isinstance(k, str) and len(k) >= _LONG_KEY:  # a long key may itself be one (a map of tokens)
                text(k)
            if k != opaque and k not in _ID_FIELDS:
                _visit(v, text, keyed, keywords, k, under)


def _names_secret(key: Any) -> bool:
    return isinstance(key, str) and bool(key) and secret_name(key) is not None


def _pair(node: dict[Any, Any], keyed: Callable[[str], Any]) -> None:
    name = next((node[k] for k in _NAME_KEYS if isinstance(node.get(k), str)), None)
    value = next((node[k] for k in _VALUE_KEYS if isinstance(node.get(k), str)), None)
    if name and value and (secret := keyed_value(name, value)):
        keyed(secret)


def _flagged(items: list[Any], keyed: Callable[[str], Any]) -> None:
    """A list that gives a name its value in the next item: a command's arguments (``["--password",
    "…"]``), a header as a pair (``["Authorization", "Bearer …"]``)."""
    for name, value in pairwise(items):
        if isinstance(name, str) and isinstance(value, str) and len(name) <= 100:
            secret = keyed_value(name.lstrip("-"), value) if name.startswith("--") or ":" not in name else None
            if secret:
                keyed(secret)


def _opaque_field(node: dict[Any, Any]) -> str | None:
    """The field of a block that is never rewritten: a thinking signature, encrypted reasoning, the
    data of a base64 source (an image, a document); the rest of the block is read as any other."""
    kind = node.get("type")
    return _OPAQUE_FIELDS.get(kind) if isinstance(kind, str) else None  # a "type" may be any JSON value


def _finder(found: dict[str, str]) -> Any:
    """The values found by their first ``_PREFIX`` characters, as one Aho-Corasick automaton: each
    string is read once, however many values; a value is checked in full only where its start is (an
    automaton of long words that repeat, as hostile text makes them, reads in time that grows with the
    square of their length)."""
    by_prefix: dict[str, list[str]] = {}
    for value in found:
        by_prefix.setdefault(value[:_PREFIX], []).append(value)
    automaton = ahocorasick.Automaton()
    for prefix, values in by_prefix.items():
        automaton.add_word(prefix, (len(prefix), sorted(values, key=len, reverse=True)))
    automaton.make_automaton()
    return automaton


_PREFIX = 64


def _replaced(text: str, found: dict[str, str], rules: Rules, finder: Any = None) -> Redacted:
    """``text`` with every occurrence of a value found replaced; values that overlap (a name's value
    that runs into a token: ``key-eyJ…`` beside the JWT ``eyJ…``) as one stretch, so no piece of either
    is left beside a marker; markers already in it stay as they are (redacting twice changes nothing);
    a short value (a password) only as a word of its own: "hunter22" is not replaced in "xhunter22y"."""
    if not found:
        return Redacted(text)
    stretches = _stretches(text, found, finder or _finder(found))
    if not stretches:
        return Redacted(text)
    counts: Counter[str] = Counter()
    secrets: dict[str, str] = {}
    parts, at = [], 0
    for start, end, kind in stretches:
        value = text[start:end]
        counts[kind] += 1
        made = marker(kind, value, rules.key)
        secrets[made] = value
        parts += [text[at:start], made]
        at = end
    parts.append(text[at:])
    return Redacted("".join(parts), counts, secrets)


def _stretches(text: str, found: dict[str, str], finder: Any) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each stretch of ``text`` to replace, in order: the occurrences of the
    values found, those that overlap merged (the kind of the longest among them), none that touches a
    marker already there or, for a short value, that is part of a longer word."""
    kept = [m.span() for m in MARKER.finditer(text)] if "[secret:" in text else []
    occurrences = []
    for end, (size, values) in finder.iter(text):
        start = end - size + 1
        # The longest value there with that start: the shorter ones with it lie inside it.
        value = next((value for value in values if text.startswith(value, start)), None)
        if value is not None:
            occurrences.append((start, -len(value), value))
    occurrences.sort()
    stretches: list[tuple[int, int, str]] = []
    longest = 0
    k = 0
    for start, size, value in occurrences:
        end = start - size
        while k < len(kept) and kept[k][1] <= start:
            k += 1
        if k < len(kept) and kept[k][0] < end:
            continue  # inside or across a marker
        if -size < _WHOLE_WORD_BELOW and (_word_at(text, start - 1) or _word_at(text, end)):
            continue
        if stretches and start < stretches[-1][1]:  # overlaps the stretch before: one stretch
            first, last, kind = stretches[-1]
            if -size > longest:
                kind, longest = found[value], -size
            stretches[-1] = (first, max(last, end), kind)
        else:
            stretches.append((start, end, found[value]))
            longest = -size
    return stretches


def _word_at(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")


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
