"""Secrets out of ctxweb's copy of what agents send: every secret found in a text (or in the strings of
a message's content blocks; ``compaction.secret_rules`` finds them) is replaced by
``[secret:<kind>:<fingerprint>]``, where the fingerprint is the first four hex digits of an HMAC of
the value, so the same secret is recognisable across messages without being readable. Pure and
deterministic: the same value and rules give the same result, and redacting a redacted value changes
nothing."""

from __future__ import annotations

import bisect
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


@dataclass(frozen=True)
class _Finder:
    """The values found, as Aho-Corasick automatons: each string is read once, however many values.
    ``whole``: the values themselves, read leftmost-longest; ``prefixes``: their first ``_PREFIX``
    characters, each to the values that start so (the longest first), for the values that start inside
    another's occurrence (every occurrence of long words that repeat, as hostile text makes them, is
    found in time that grows with the square of their length: only their starts are looked for)."""

    whole: Any
    prefixes: Any


def _finder(found: dict[str, str]) -> _Finder:
    whole = ahocorasick.Automaton()
    by_prefix: dict[str, list[str]] = {}
    for value in found:
        whole.add_word(value, value)
        by_prefix.setdefault(value[:_PREFIX], []).append(value)
    whole.make_automaton()
    prefixes = ahocorasick.Automaton()
    for prefix, values in by_prefix.items():
        prefixes.add_word(prefix, (len(prefix), sorted(values, key=len, reverse=True)))
    prefixes.make_automaton()
    return _Finder(whole, prefixes)


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


def _stretches(text: str, found: dict[str, str], finder: _Finder) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each stretch of ``text`` to replace, in order: the values found, leftmost
    and longest, each stretch run on as far as a value that starts inside it runs (the kind of the
    longest), none that touches a marker already there or, for a short value, is part of a longer word."""
    kept = [m.span() for m in MARKER.finditer(text)] if "[secret:" in text else []
    stretches: list[tuple[int, int, str]] = []
    for end, value in finder.whole.iter_long(text):
        start = end - len(value) + 1
        if stretches and start < stretches[-1][1]:
            continue  # inside the stretch before, run on past this value's start
        if not _replaceable(text, start, end + 1, kept):
            continue
        stretches.append(_run_on(text, start, end + 1, value, found, finder, kept))
    return stretches


def _replaceable(text: str, start: int, end: int, kept: list[tuple[int, int]]) -> bool:
    after = bisect.bisect_right(kept, start, key=lambda span: span[1])  # the first marker ending past start
    if after < len(kept) and kept[after][0] < end:
        return False  # inside or across a marker
    return end - start >= _WHOLE_WORD_BELOW or not (_word_at(text, start - 1) or _word_at(text, end))


def _run_on(
    text: str, start: int, end: int, value: str, found: dict[str, str], finder: _Finder, kept: list[tuple[int, int]]
) -> tuple[int, int, str]:
    """The stretch of ``value``'s occurrence at ``start``, run on past ``end`` by each value that starts
    inside it and ends after it (a name's value read into the token beside it), again from there."""
    kind, longest = found[value], len(value)
    scanned = start + 1  # where the next look for values starting inside begins
    while scanned < end:
        reach, scanned_to = end, min(len(text), end + _PREFIX - 1)
        # A slice: the automaton reads the whole string it is given, whatever the range.
        for prefix_end, (size, values) in finder.prefixes.iter(text[scanned:scanned_to]):
            at = scanned + prefix_end - size + 1
            if at >= end:
                continue
            for other in values:  # the longest first
                if at + len(other) <= reach:
                    break  # ends inside what is covered already
                if text.startswith(other, at) and _replaceable(text, at, at + len(other), kept):
                    reach = at + len(other)
                    if len(other) > longest:
                        kind, longest = found[other], len(other)
                    break
        scanned, end = end, reach
    return start, end, kind


def _word_at(text: str, i: int) -> bool:
    """Whether ``text[i]`` is a character of a word; not the letter of an escape (``\\t``, ``\\n``)."""
    if not (0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")):
        return False
    return not (text[i] in "tnr" and i > 0 and text[i - 1] == "\\")


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
