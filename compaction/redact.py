"""Secrets out of ctxweb's copy of what agents send: every secret found in a text (or in the strings of
a message's content blocks) is replaced by ``[secret:<kind>:<fingerprint>]``, where the fingerprint is
the first four hex digits of an HMAC of the value, so the same secret is recognisable across messages
without being readable.

Detection is detect-secrets' maintained rule set (its regex detectors: AWS, GitHub, GitLab, Slack,
Stripe, JWTs, basic-auth URLs, private-key headers, …; its keyword detector on quoted assignments; its
base64 high-entropy strings with its heuristics), plus the keys this project knows (Anthropic, OpenAI,
ctxweb's own) and the patterns a project adds. Hex-only strings (git SHAs, digests) and UUIDs are never
high-entropy secrets. Pure and deterministic: the same text and rules give the same result, and
redacting a redacted text changes nothing."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP

MARKER = re.compile(r"\[secret:[a-z0-9-]{1,40}:[0-9a-f]{4}\]")
KEYWORD = "keyword"
HIGH_ENTROPY = "high-entropy"
CUSTOM = "custom"

# The keys this project knows, before detect-secrets' rules (their kinds win where both match). Each
# starts with its literal prefix (the regex engine jumps to it); a match inside a longer word is dropped.
_OWN_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private-key", re.compile(
        r"-----BEGIN ([A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.S)),
    ("anthropic-api-key", re.compile(r"sk-ant-[a-z]{2,12}\d{2}-[A-Za-z0-9_-]{20,}")),
    # OpenAI's keys: sk-, sk-proj-, sk-svcacct-, sk-admin-, then 32+ characters of both cases and a digit.
    ("openai-api-key", re.compile(
        r"sk-(?!ant-)(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])[A-Za-z0-9_-]{32,}")),
    ("ctxweb-api-key", re.compile(r"ctx_(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])[A-Za-z0-9_-]{40,}")),
)  # fmt: skip
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
# Rules that need a word on the same line (``password =``, ``cloudant_key:``): matched only near such
# words, so a long tool output costs one scan for them, not one per rule.
_HINT = re.compile(r"key|pw|pass|token|secret|contras", re.I)
_REACH = 200
_ESCAPED_QUOTE = re.compile(r'\\+"')
_LINE_RULES = frozenset({"aws-secret-key", "cloudant-credentials", "ibm-cloud-iam-key", "ibm-cos-hmac-credentials",
                         "softlayer-credentials"})  # fmt: skip
# A rule whose every match holds one of these strings is skipped on texts without them.
_NEEDS = {"artifactory-credentials": ("AKC", "AP"), "mailchimp-access-key": ("-us",), "telegram-bot-token": (":",),
          "discord-bot-token": (".",), "slack-token": ("xox", "hooks.slack.com"), "basic-auth": ("://",)}  # fmt: skip
# detect-secrets' names for its kinds, shortened where they are long; others are slugs of its name.
_KIND_NAMES = {
    "Azure Storage Account access key": "azure-storage-key",
    "NPM tokens": "npm-token",
    "Secret Keyword": KEYWORD,
    "JSON Web Token": "jwt",
    "Basic Auth Credentials": "basic-auth",
    "OpenAI Token": "openai-api-key",
}
# Not secrets: a public IP address is an address.
_SKIPPED_TYPES = {"Public IP (ipv4)"}
_HEX = re.compile(r"\A[0-9a-fA-F]+\Z")
# Names, not values: an environment variable (``ANTHROPIC_API_KEY``), a dotted reference
# (``settings.SECRET_KEY``), a provider's prefixed id (``toolu_01Cz…``, ``msg_01…``, ``req_…``).
_NAME = re.compile(r"\A(?:[A-Z][A-Z0-9_]*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z]+(?:_[a-z]+)*_[A-Za-z0-9]{12,})\Z")
_MIN_KEYWORD_VALUE = 6
# Values under these keys look random and are not secrets: signatures, digests, lockfile integrity.
_NOT_SECRET_BEFORE = re.compile(r"(?:signature|integrity|checksum|digest|hash|sha\d*|etag)\W{0,8}\Z", re.I)
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


@dataclass(frozen=True)
class Rules:
    """What to look for: ``key`` makes the fingerprints (a deployment's own, so a guess at a short
    secret can't be checked against a marker); ``disabled`` kinds are not looked for; ``patterns``
    are a project's own (kind, compiled pattern); a pattern with a group redacts the first group."""

    key: bytes
    disabled: frozenset[str] = frozenset()
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()


@dataclass
class Redacted:
    value: Any
    found: Counter[str] = field(default_factory=Counter)  # kind -> secrets replaced
    secrets: dict[str, str] = field(default_factory=dict)  # marker -> the value it stands for (never stored)


def kinds() -> list[str]:
    """Every kind the built-in rules name (what a project may switch off)."""
    names = {kind for kind, _ in _OWN_RULES} | {kind for kind, _ in _library_rules()}
    return sorted(names | {KEYWORD, HIGH_ENTROPY, "jwt"})


def fingerprint(value: str, key: bytes) -> str:
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:4]


def marker(kind: str, value: str, key: bytes) -> str:
    return f"[secret:{kind}:{fingerprint(value, key)}]"


def redact_text(text: str, rules: Rules) -> Redacted:
    found = find_secrets(text, rules)
    if not found:
        return Redacted(text)
    counts: Counter[str] = Counter()
    secrets: dict[str, str] = {}
    # Markers already in the text stay as they are (redacting twice changes nothing); every other
    # occurrence of a value found is replaced, the longest values first.
    values = sorted(found, key=lambda v: (-len(v), v))
    pattern = re.compile(MARKER.pattern + "|" + "|".join(re.escape(v) for v in values))

    def replace(match: re.Match[str]) -> str:
        value = match.group(0)
        kind = found.get(value)
        if kind is None:
            return value
        counts[kind] += 1
        made = marker(kind, value, rules.key)
        secrets[made] = value
        return made

    return Redacted(pattern.sub(replace, text), counts, secrets)


def redact(value: Any, rules: Rules) -> Redacted:
    """A JSON-like value (a message's content, a tool's input, a system prompt's blocks) with every
    string redacted; a string under a key that names a secret (``"password": "…"``) is one whole.
    Base64 payloads (images, documents) are left as they are."""
    counts: Counter[str] = Counter()
    secrets: dict[str, str] = {}

    def walk(node: Any, key: str = "") -> Any:
        if isinstance(node, str):
            if key and _SECRET_KEY.search(key) and _plausible_value(node) and KEYWORD not in rules.disabled:
                counts[KEYWORD] += 1
                made = marker(KEYWORD, node, rules.key)
                secrets[made] = node
                return made
            done = redact_text(node, rules)
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
                k: v if k == opaque or k in _ID_FIELDS else walk(v, k if isinstance(k, str) else "")
                for k, v in node.items()
            }
        return node

    return Redacted(walk(value), counts, secrets)


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


def _plausible_value(value: str) -> bool:
    return (
        len(value) >= _MIN_KEYWORD_VALUE
        and not any(c.isspace() for c in value)
        and not MARKER.fullmatch(value)
        and not heuristic.is_templated_secret(value)
        and not heuristic.is_prefixed_with_dollar_sign(value)
    )


def find_secrets(text: str, rules: Rules) -> dict[str, str]:
    """Secret value -> its kind, the first rule's where several match."""
    found: dict[str, str] = {}
    for kind, value in _candidates(text, rules):
        if value and value not in found and not _inside_marker(value):
            found[value] = kind
    return found


def _inside_marker(value: str) -> bool:
    return "[secret:" in value or bool(
        re.fullmatch(r"secret:[a-z0-9-]*:?[0-9a-f]{0,4}\]?|[a-z0-9-]+:[0-9a-f]{4}", value)
    )


def _candidates(text: str, rules: Rules) -> Iterator[tuple[str, str]]:
    off = rules.disabled
    for kind, pattern in rules.patterns:
        if kind not in off:
            yield from ((kind, _value(m)) for m in pattern.finditer(text))
    for kind, pattern in _OWN_RULES:
        if kind not in off:
            yield from (
                (kind, m.group(0)) for m in pattern.finditer(text) if text[m.start() - 1 : m.start()] not in _WORD
            )
    lines = _hinted_lines(text)
    for kind, pattern in _library_rules():
        if kind in off or (kind in _NEEDS and not any(s in text for s in _NEEDS[kind])):
            continue
        for searched in lines if kind in _LINE_RULES else (text,):
            yield from ((kind, _value(m)) for m in pattern.finditer(searched))
    if "jwt" not in off and "eyJ" in text:
        yield from (("jwt", token) for token in _jwts(text))
    # The quoted-value rules, also on the text with its quotes unescaped (a JSON document in a tool's
    # output): their values hold no quote or backslash, so they are found in the text as it is.
    quoted = [text, _ESCAPED_QUOTE.sub('"', text)] if '\\"' in text else [text]
    if KEYWORD not in off:
        yield from (
            (KEYWORD, value) for each in quoted for line in _hinted_lines(each) for value in _keyword_values(line)
        )
    if HIGH_ENTROPY not in off:
        yield from ((HIGH_ENTROPY, value) for each in quoted for value in _high_entropy(each))


def _hinted_lines(text: str) -> list[str]:
    """The stretches of ``text`` around each word secrets are assigned to (``_REACH`` characters either
    side, within its line), overlapping ones merged, in order."""
    found: list[str] = []
    start = end = -1
    for match in _HINT.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        line_end = len(text) if line_end < 0 else line_end
        lo, hi = max(line_start, match.start() - _REACH), min(line_end, match.end() + _REACH)
        if lo <= end:
            end = max(end, hi)
            continue
        if end > start:
            found.append(text[start:end])
        start, end = lo, hi
    if end > start:
        found.append(text[start:end])
    return found


def _value(match: re.Match[str]) -> str:
    """The first group that matched, or the whole match."""
    groups = [g for g in match.groups() if g]
    return groups[0] if groups else match.group(0)


@cache
def _library_rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """detect-secrets' regex detectors as (kind, pattern), in its order; JWTs apart (they are checked
    for shape), private keys apart (the whole block, not its header, is the secret)."""
    rules = []
    for secret_type, plugin in get_mapping_from_secret_type_to_class().items():
        if secret_type in _SKIPPED_TYPES or not issubclass(plugin, RegexBasedDetector):
            continue
        if secret_type in ("JSON Web Token", "Private Key"):
            continue
        kind = _KIND_NAMES.get(secret_type) or re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")
        detector: Any = plugin
        patterns: list[re.Pattern[str]] = list(detector.denylist)
        if secret_type == "AWS Access Key":  # its second pattern is the secret key beside the id
            rules.append(("aws-access-key", patterns[0]))
            rules.extend(("aws-secret-key", p) for p in patterns[1:])
            continue
        rules.extend((kind, p) for p in patterns)
    return tuple(rules)


def _jwts(text: str) -> Iterator[str]:
    for pattern in JwtTokenDetector.denylist:
        for match in pattern.finditer(text):
            if JwtTokenDetector.is_formally_valid(match.group(0)):
                yield match.group(0)


def _keyword_values(line: str) -> Iterator[str]:
    for pattern, group in QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items():
        for match in pattern.finditer(line):
            value = match.group(group)
            if _plausible_value(value) and not _filtered(value, line):
                yield value


_BASE64 = Base64HighEntropyString()


def _high_entropy(text: str) -> Iterator[str]:
    for match in _BASE64.regex.finditer(text):
        value = match.group(2).rstrip("\\")  # the escape of a closing quote in escaped JSON
        if len(value) < 20 or _HEX.match(value):
            continue
        if _BASE64.calculate_shannon_entropy(value) <= _BASE64.entropy_limit:
            continue
        if _NOT_SECRET_BEFORE.search(text, max(0, match.start() - 40), match.start()):
            continue
        if not _filtered(value, _line_of(text, match.start(), match.end())):
            yield value


def _filtered(value: str, line: str) -> bool:
    """detect-secrets' heuristics for what only looks like a secret."""
    return (
        bool(_NAME.match(value))
        or heuristic.is_sequential_string(value)
        or heuristic.is_potential_uuid(value)
        or heuristic.is_likely_id_string(value, line)
        or heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_indirect_reference(line)
        or heuristic.is_not_alphanumeric_string(value)
    )


def _line_of(text: str, start: int, end: int) -> str:
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    return text[first : last if last >= 0 else len(text)]


def compile_patterns(patterns: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """A project's own patterns (validated like the preserve patterns) as rules of kind ``custom``."""
    return tuple((CUSTOM, re.compile(p)) for p in patterns)
