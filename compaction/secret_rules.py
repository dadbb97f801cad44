"""Finding secrets in a text (``compaction.redact`` replaces them): detect-secrets' maintained rules
(its regex detectors: AWS, GitHub, GitLab, Slack, Stripe, basic-auth URLs, …; its keyword rules on
quoted assignments; base64 high-entropy strings with its heuristics; its JWT validator), the keys this
project knows (Anthropic, OpenAI, ctxweb's own, whole private-key blocks) and a project's own patterns.

Fast and linear on any text: one Aho-Corasick pass says which rules' strings a text holds and where,
and each such rule runs only around those places; no rule's regular expression can try again from
every position of a long run (docs/REDACTION.md, "Hostile input")."""

from __future__ import annotations

import html
import json
import math
import re
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache, cached_property, partial
from typing import Any

import ahocorasick  # type: ignore[import-not-found]  # a C extension without stubs
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

from compaction import secret_assignments, secret_commands, secret_names, secret_tokens

MARKER = re.compile(r"\[secret:[a-z0-9-]{1,40}:[0-9a-f]{4}\]")
KEYWORD = "keyword"
HIGH_ENTROPY = "high-entropy"
CUSTOM = "custom"

# Between the strings of one value searched as one text (``compaction.redact``): a line of its own,
# with a NUL no stored string holds.
JOINT = "\n\x00\n"
# What a text must hold for a kind to be tried at all, looked for in its lower-cased text in one pass
# (an Aho-Corasick automaton) instead of one regular expression per rule over every text. A kind
# without a gate (a rule a newer detect-secrets brings; a rule that is cheap on its own) is always
# tried; the rules that read a secret's name on its line are tried where a name is assigned a long
# run of key characters (``_ASSIGNED``).
_LIBRARY_GATES: dict[str, tuple[str, ...]] = {
    "aws-access-key": ("a3t", "abia", "acca", "akia", "asia"),
    "azure-storage-key": ("accountkey=",), "basic-auth": ("://",),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "gitlab-token": ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-",
                     "glagent-", "gloas-"),
    "mailchimp-access-key": ("-us",), "npm-token": ("/:_authtoken",), "pypi-token": ("pypi-",),
    "sendgrid-api-key": ("sg.",), "slack-token": ("xox", "hooks.slack.com"), "square-oauth-secret": ("sq0csp-",),
    "stripe-access-key": ("k_live_",),
    "softlayer-credentials": ("api.softlayer.com",), "cloudant-credentials": (".cloudant.com",),
}  # fmt: skip
# A kind both rule sets have is tried where either's strings are.
_GATES = {
    kind: tuple(dict.fromkeys(_LIBRARY_GATES.get(kind, ()) + secret_tokens.GATES.get(kind, ())))
    for kind in {**_LIBRARY_GATES, **secret_tokens.GATES}
}
_MULTILINE = frozenset({"putty-private-key"})  # kinds whose value spans lines
_LINE_RULES = frozenset({"aws-secret-key", "cloudant-credentials", "ibm-cloud-iam-key", "ibm-cos-hmac-credentials",
                         "softlayer-credentials"})  # fmt: skip
_ASSIGNED = re.compile(r"(?:key|pw|pass|token).{0,24}?[\"'=: ][\"']?[a-z0-9/+_\-]{24}")  # on the lower-cased text
# Words of a secret's name (``secret_names``; detect-secrets' DENYLIST among them) and of the commands
# that take a password (``secret_assignments``), looked for in the lower-cased text.
_NAME_GATES = secret_names.GATE_WORDS + secret_commands.COMMAND_WORDS
_NAME_WORD = "named:"  # an automaton hit that is one of them, not a kind
_LINE_WORD = "line:"  # an automaton hit that is a name a line rule reads
_LITERAL_WORD = "literal:"  # an automaton hit that is a literal a pair or command pattern needs
# Gates on the text as it is: upper-case prefixes that are common words in lower case.
_CASED_GATES = {"artifactory-credentials": ("AKC", "AP"), "twilio-api-key": ("AC", "SK")}
# Gates that are patterns: a rule whose own pattern starts at any digit or letter (``\d{8,10}:…``,
# ``[MNO]…``) runs only around where its value's tail is, which a pattern starting at a sign finds
# several times faster.
_PATTERN_GATES = {
    "telegram-bot-token": re.compile(r":[0-9A-Za-z_-]{35}"),
    "discord-bot-token": re.compile(r"\.[0-9A-Za-z_-]{6}\.[0-9A-Za-z_-]{27}"),
}
_REACH = 200
_HEURISTIC_REACH = 100
# How far past its gate's string a rule's value may run: most keys are under 200 characters; a PyPI
# token a few hundred; a private key block (a 4096-bit RSA key is ~3,300) spans lines.
_REACH_AFTER = {**secret_tokens.REACH_AFTER, "pypi-token": 2_000, "gitlab-token": 1_100, "basic-auth": 1_000,
                "azure-storage-key": 400}  # fmt: skip
_ESCAPED_QUOTE = re.compile(r'\\+"')
# detect-secrets' names for its kinds, shortened where they are long; others are slugs of its name.
_KIND_NAMES = {
    "Azure Storage Account access key": "azure-storage-key",
    "NPM tokens": "npm-token",
    "Secret Keyword": KEYWORD,
    "JSON Web Token": "jwt",
    "Basic Auth Credentials": "basic-auth",
    "OpenAI Token": "openai-api-key",
}
# Not secrets: a public IP address is an address. And rules ours replace: detect-secrets' OpenAI rule
# (``sk-[…]*[…]{20}T3BlbkFJ…``) backtracks over a run of "sk-sk-sk-…" from every "sk-" in it, and our
# openai-api-key rule finds every key it finds.
_SKIPPED_TYPES = {"Public IP (ipv4)", "OpenAI Token"}
# detect-secrets' npm rule (``//.+/:_authToken=\s*((npm_.+)|…).*``) tries ``.+`` from every "//" of a
# line: in a line of many it takes time that grows with their square. Here it starts at its literal (the
# registry's URL before it is not needed to tell an npm token).
_SAFER = {"npm-token": re.compile(r"/:_authToken=\s*((?:npm_[A-Za-z0-9]{36})|(?:[A-Fa-f0-9-]{36}))")}
_HEX = re.compile(r"\A[0-9a-fA-F]+\Z")
# Names, not values: an environment variable (``ANTHROPIC_API_KEY``), a dotted reference
# (``settings.SECRET_KEY``), a provider's prefixed id (``toolu_01Cz…``, ``msg_01…``, ``req_…``).
_NAME = re.compile(r"\A(?:[A-Z][A-Z0-9_]*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z]+(?:_[a-z]+)*_[A-Za-z0-9]{12,})\Z")
_MIN_KEYWORD_VALUE = 6
# Values under these keys look random and are not secrets: signatures, digests, lockfile integrity.
_NOT_SECRET_BEFORE = re.compile(
    r"(?:signature|integrity|checksum|digest|hash|sha\d*|etag|\bid|[a-z_]id|_id|uid|next_?(?:page_?)?token|cursor)"
    r"\W{0,8}\Z",
    re.I,
)
_MIN_GROUP = 8


@dataclass(frozen=True)
class Rules:
    """What to look for: ``key`` makes the fingerprints (a deployment's own, so a guess at a short
    secret can't be checked against a marker); ``disabled`` kinds are not looked for; ``patterns``
    are a project's own (kind, compiled pattern); a pattern with a group redacts the first group."""

    key: bytes
    disabled: frozenset[str] = frozenset()
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()

    @cached_property
    def looks_for_nothing(self) -> bool:
        return not self.patterns and self.disabled.issuperset(kinds())


@cache
def kinds() -> tuple[str, ...]:
    """Every kind the built-in rules name (what a project may switch off)."""
    names = secret_tokens.KINDS | {kind for kind, _ in _library_rules()}
    return tuple(sorted(names | {KEYWORD, HIGH_ENTROPY, "aws-secret-key"}))


def find_secrets(text: str, rules: Rules) -> dict[str, str]:
    """Secret value -> its kind, the first rule's where several match."""
    found: dict[str, str] = {}
    if rules.looks_for_nothing:  # every kind switched off and no pattern of its own
        return found
    low = _lower(text)
    hits = _gated(low)
    for kind, read in _candidates(text, rules, low=low, hits=hits):
        value = _unclosed(read)
        if value and value not in found and not _inside_marker(value):
            found[value] = kind
    if _NAME_WORD not in hits and not _ESCAPED_WORD.search(low):
        return found  # decoding makes no name's word (nor a command's): the decoded text gives no more
    for decoded, encodings in _decoded(text):
        for kind, read in _candidates(decoded, rules, names_only=True):
            value = _unclosed(read)
            for each in (value, *(encode(value) for encode in encodings)):
                if each and each in text and each not in found and not _inside_marker(each):
                    found[each] = kind
    return found


# A text as a reader sees it through the colours a terminal shows (``grep --color``), the escapes of a
# URL (``?next=…%3Faccess_token%3D…``) or of HTML (``password=&quot;…&quot;``): read again decoded,
# and each secret found there replaced where it is in the text, as it is or as it was encoded.
_SGR = re.compile(r"\x1b\[[0-9;]{0,40}[A-Za-z]")
_PERCENT = re.compile(r"%(?:3[DdAa]|2[27])")  # an escaped sign or quote an assignment needs: = : " '
_ESCAPED = re.compile(r"%25(?:3[DdAa]|2[27])")  # the same, escaped twice
_ENTITY = re.compile(r"&(?:quot|apos|lt|gt|#3[49]|#x2[27]|#6[0-2]|#x3[CcDdEe]);")  # an escaped quote, sign, bracket
# A JSON string's escapes (a tool's output holding JSON text: ``{"output": "password    …\n"}``): the
# rules that read across lines or need a raw character read it unescaped.
# An escape, or a quote that is none: a string's own, read as a line's end (what a string holds is
# read as lines of its own, as a rule anchored at a line's start or end needs).
_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})|"')
_JSON_CHARS = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


# A value read on to the end of the JSON string it is in (a rule's value runs to a space or ";", a
# cookie's, a column's): the string's closing quote, its escapes before it and what closes the objects
# around it are not the secret's, and replacing them would leave the document unreadable.
_JSON_CLOSE = re.compile(r'(?:\\[ntr])*"[\s}\],]*\Z')


def _unclosed(value: str) -> str:
    return _JSON_CLOSE.sub("", value) if '"' in value else value


def _json_unescaped(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code is None:
            return "\n"
        return chr(int(code[1:], 16)) if code[0] == "u" else _JSON_CHARS.get(code, code)

    return _JSON_ESCAPE.sub(one, text)


def _json_escaped(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _json_escaped_ascii(value: str) -> str:
    return json.dumps(value)[1:-1]


# A writer of JSON may escape what is not ASCII (``\u00e9``) or not: a value is looked for both ways.
_JSON_ESCAPINGS = (_json_escaped, _json_escaped_ascii)


def _decoded(text: str, *, json_levels: int = 2) -> Iterator[tuple[str, tuple[Callable[[str], str], ...]]]:
    # A one-character test first: a search for one character is many times faster than for several.
    if "\x1b" in text and "\x1b[" in text:
        yield _SGR.sub("", text), ()
    if "%" in text:
        if _PERCENT.search(text):
            encodings = (partial(urllib.parse.quote, safe=""), urllib.parse.quote, urllib.parse.quote_plus)
            yield urllib.parse.unquote(text), encodings
        if "%25" in text and _ESCAPED.search(text):  # encoded twice (a URL inside a URL's parameter)
            twice = urllib.parse.unquote(urllib.parse.unquote(text))
            yield twice, (lambda v: urllib.parse.quote(urllib.parse.quote(v, safe=""), safe=""),)
    if "&" in text and _ENTITY.search(text):
        yield html.unescape(text), (html.escape,)
    # JSON text: escapes in it, or a string of the message that is a JSON document (``{"output": "…"}``:
    # its own quotes read as line ends).
    escaped = json_levels > 0 and (
        ("\\" in text and ("\\n" in text or "\\u" in text or "\\t" in text))
        or ('"' in text and (text.startswith(("{", "[")) or _JSON_DOCUMENT.search(text) is not None))
    )
    if escaped and (plain := _json_unescaped(text)) != text:
        yield plain, _JSON_ESCAPINGS
        # Colours, URL escapes or entities inside the escaped text: read once more, as they are read above.
        # JSON text in JSON text (a tool's output quoting a command's JSON output) is read once more.
        again = _decoded(plain, json_levels=json_levels - 1)
        yield from ((view, (*codes, _json_escaped)) for view, codes in again)


_JSON_DOCUMENT = re.compile(re.escape(JOINT) + r"[ \t]*[{\[]")  # a string of a message's that starts as one


# What escapes in JSON text may hide of a name or a command: a cookie jar's tabs, a letter not ASCII
# (``\u5bc6\u7801`` is "密码", password).
_ESCAPED_WORD = re.compile(r"\\t(?:true|false)\\t|\\u(?!00[0-7])[0-9a-f]{4}")


def _inside_marker(value: str) -> bool:
    return "[secret:" in value or bool(
        re.fullmatch(r"secret:[a-z0-9-]*:?[0-9a-f]{0,4}\]?|[a-z0-9-]+:[0-9a-f]{4}", value)
    )


def _candidates(
    text: str,
    rules: Rules,
    *,
    names_only: bool = False,
    low: str | None = None,
    hits: dict[str, list[int]] | None = None,
) -> Iterator[tuple[str, str]]:
    """(kind, value) of every secret the rules find in ``text`` (``low``: it lower-cased, ``hits``: its
    gates', when the caller has them); ``names_only``: only those a name gives (a decoded view of a
    text: its keys by shape were found in the text as it is)."""
    low = _lower(text) if low is None else low
    hits = _gated(low) if hits is None else hits
    if not names_only:
        yield from _by_shape(text, low, hits, rules)
    yield from _by_name(text, low, hits, rules, entropy=not names_only)


def _by_shape(text: str, low: str, hits: dict[str, list[int]], rules: Rules) -> Iterator[tuple[str, str]]:
    off = rules.disabled
    for kind, pattern in rules.patterns:
        if kind not in off:
            for match in pattern.finditer(text):
                yield kind, _first_group(match)
    # The kinds the text passed the gate of, the ungated ones and those read on a line, in rule order.
    kinds = [k for k in _ALWAYS if k not in off]
    kinds += [k for k in hits if k in _RULES and k not in off]
    for kind, needs in _CASED_GATES.items():
        if kind not in off and any(need in text for need in needs):
            kinds.append(kind)
            hits[kind] = sorted(at for need in needs for at, _ in _spans(text, need))
    for kind, gate in _PATTERN_GATES.items():
        if kind not in off and (tails := [match.start() for match in gate.finditer(text)]):
            kinds.append(kind)
            hits[kind] = tails
    named = _LINE_WORD in hits  # a name a line rule reads (key, pw, pass, token) is in the text
    # Private keys and JWTs first: their whole value is one secret, found from where their prefix is.
    if "private-key" not in off and "private-key" in hits:
        for piece in secret_tokens.private_keys(text, hits["private-key"], JOINT):
            yield "private-key", piece
    if "jwt" not in off and "jwt" in hits:
        for token in secret_tokens.jwts(text, hits["jwt"]):
            yield "jwt", token
    assigned: list[str] | None = None
    for kind in sorted(kinds, key=_ORDER.__getitem__) if len(kinds) > 1 else kinds:
        if kind in hits:  # around where its gate's strings are: a rule never scans all of a long text
            starts = ((at, at) for at in hits[kind])
            searched = _near(text, starts, _REACH_AFTER.get(kind, _REACH), lines=kind not in _MULTILINE)
        elif kind in _LINE_RULES:  # on the lines that assign a name a key-like value
            if assigned is None:  # their values are runs of 24 or more key characters
                spans = _assigned_spans(low, hits[_LINE_WORD]) if named else []
                assigned = _near(text, spans)
            searched = assigned
        else:
            searched = [text]
        for rule in _RULES[kind]:
            for stretch in searched:
                if rule is None:  # this project's own rule of that kind
                    yield from ((kind, value) for value in secret_tokens.own(kind, stretch))
                else:
                    for match in rule.finditer(stretch):
                        value = _value(match, kind)
                        # A URL's password is a password: not a default everyone knows (``postgres``),
                        # not a placeholder (``password``, ``{self.password}``).
                        if kind != "basic-auth" or secret_names.secret_value(value, "human") is not None:
                            yield kind, value


def _assigned_spans(low: str, words: list[int]) -> list[tuple[int, int]]:
    """``_ASSIGNED``'s matches in ``low``, tried only where its words start (``words``, from the
    automaton): what ``finditer`` gives, without a regular expression tried at every character."""
    spans: list[tuple[int, int]] = []
    for at in sorted(words):
        if spans and at < spans[-1][1]:
            continue  # inside a match already found
        if found := _ASSIGNED.match(low, at):
            spans.append(found.span())
    return spans


def _by_name(
    text: str, low: str, hits: dict[str, list[int]], rules: Rules, *, entropy: bool
) -> Iterator[tuple[str, str]]:
    off = rules.disabled
    # Values given to a secret's name, also in the text with its quotes unescaped (a JSON document in
    # a tool's output): their values hold no quote or backslash, so they are found in the text as it is.
    quoted = [text, _ESCAPED_QUOTE.sub('"', text)] if '\\"' in text else [text]
    if _NAME_WORD in hits:
        # The same in both texts: unescaping quotes makes no literal (none holds a backslash, none a quote
        # but as its first character).
        literals = frozenset(k[len(_LITERAL_WORD) :] for k in hits if k.startswith(_LITERAL_WORD))
        literals |= {common for common in secret_assignments.COMMON_LITERALS if common in low}
        if "\n" in literals and low.count("\n") == 2 * low.count(JOINT):
            literals -= {"\n"}  # only the joints between strings: no line of a text ends there
        for each in quoted:
            if each is text:  # where the automaton found the words
                spans = sorted((at, at) for at in hits[_NAME_WORD])
            else:
                each_low = _lower(each)
                spans = sorted(span for word in _NAME_GATES for span in _spans(each_low, word))
            near = [at for at, _ in spans]
            lined = partial(_near, each, spans)
            for kind, value in secret_assignments.assigned_values(each, literals, near, lined):
                if kind not in off:
                    yield kind, value
            for kind, value in secret_assignments.paired_values(literals, partial(_near, each, spans, lines=False)):
                if kind not in off:
                    yield kind, value
    if entropy and HIGH_ENTROPY not in off:
        for each in quoted:
            for value in _high_entropy(each):
                yield HIGH_ENTROPY, value


@cache
def _rules_by_kind() -> tuple[tuple[str, tuple[re.Pattern[str] | None, ...]], ...]:
    """Every rule by kind, ours first (their kind wins where both match); ours as None (their rules
    are ``secret_tokens``'), private keys and JWTs apart (they are found from their prefix)."""
    by_kind: dict[str, list[re.Pattern[str] | None]] = {}
    for kind, *_ in secret_tokens.RULES:
        by_kind[kind] = [None]
    for kind, pattern in _library_rules():
        by_kind.setdefault(kind, []).append(pattern)
    return tuple((kind, tuple(patterns)) for kind, patterns in by_kind.items())


_lower = secret_names.lower_in_place


def _gated(low: str) -> dict[str, list[int]]:
    """Where in the (lower-cased) text each gate's strings start, by kind; and the names the keyword
    and line rules read, by a key of their own."""
    hits: dict[str, list[int]] = {}
    for end, (size, kinds) in _automaton().iter(low):
        for kind in kinds:
            hits.setdefault(kind, []).append(end - size + 1)
    return hits


@cache
def _automaton() -> Any:
    by_need: dict[str, set[str]] = {}
    for kind, needs in _GATES.items():
        for need in needs:
            by_need.setdefault(need, set()).add(kind)
    for word in ("key", "pw", "pass", "token"):
        by_need.setdefault(word, set()).add(_LINE_WORD)
    for word in _NAME_GATES:
        by_need.setdefault(word, set()).add(_NAME_WORD)
    for literal in set(secret_assignments.LITERALS) - set(secret_assignments.COMMON_LITERALS):
        by_need.setdefault(literal, set()).add(_LITERAL_WORD + literal)
    automaton = ahocorasick.Automaton()
    for need, kinds in by_need.items():
        automaton.add_word(need, (len(need), tuple(kinds)))
    automaton.make_automaton()
    return automaton


def _near(text: str, spans: Iterable[tuple[int, int]], after: int = _REACH, *, lines: bool = True) -> list[str]:
    """The stretches of ``text`` from ``_REACH`` characters before each of ``spans`` (in order) to
    ``after`` past its end, within its line unless ``lines`` is False; overlapping ones merged."""
    found: list[str] = []
    start = end = -1
    for at, to in spans:
        lo, hi = max(0, at - _REACH), min(len(text), to + after)
        if lines:
            # Only as far as the stretch reaches: a search to the text's ends from every hit of a
            # line without end would take time that grows with the square of its length.
            lo = max(lo, text.rfind("\n", lo, at) + 1)
            line_end = text.find("\n", to, hi)
            hi = hi if line_end < 0 else line_end
        if lo <= end:
            end = max(end, hi)
            continue
        if end > start:
            found.append(text[start:end])
        start, end = lo, hi
    if end > start:
        found.append(text[start:end])
    return found


def _spans(text: str, word: str) -> Iterator[tuple[int, int]]:
    at = text.find(word)
    while at >= 0:
        yield at, at + len(word)
        at = text.find(word, at + len(word))


def _value(match: re.Match[str], kind: str = "") -> str:
    """What a detect-secrets rule matched that is the secret: its longest group, where that is the
    value after a name (``://user:(password)@``, ``aws…key = "(…)"``); else the whole match (a group
    of a few characters is a prefix, as GitHub's ``(ghp|gho|…)_…``), without the delimiters some
    rules take in (a space or quote before, ``=`` or ``:``)."""
    groups = [g for g in match.groups() if g]
    longest = max(groups, key=len) if groups else ""
    if kind == "basic-auth" and longest:  # the password, however short: not the user with it
        return longest
    return longest if len(longest) >= _MIN_GROUP else match.group(0).strip(" \t\r\n\"'=:")


def _first_group(match: re.Match[str]) -> str:
    """A project's own pattern: its first group that matched, or the whole match."""
    groups = [g for g in match.groups() if g]
    return groups[0] if groups else match.group(0)


@cache
def _library_rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """detect-secrets' regex detectors as (kind, pattern), in its order; JWTs apart (they are checked
    for shape), private keys apart (the whole block, not its header, is the secret)."""
    rules = []
    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    for secret_type, plugin in plugins.items():
        if secret_type in _SKIPPED_TYPES or not issubclass(plugin, RegexBasedDetector):
            continue
        if secret_type in ("JSON Web Token", "Private Key"):
            continue
        kind = _KIND_NAMES.get(secret_type) or re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")
        patterns: list[re.Pattern[str]] = list(plugin.denylist)
        if kind in _SAFER:
            patterns = [_SAFER[kind]]
        if secret_type == "AWS Access Key":  # its second pattern is the secret key beside the id
            rules.append(("aws-access-key", patterns[0]))
            rules.extend(("aws-secret-key", p) for p in patterns[1:])
            continue
        rules.extend((kind, p) for p in patterns)
    return tuple(rules)


_BASE64 = Base64HighEntropyString()
_BASE64_CHARS = frozenset(_BASE64.charset)


def _high_entropy(text: str) -> Iterator[str]:
    if '"' not in text and "'" not in text:
        return  # its values are quoted
    for match in _BASE64.regex.finditer(text):
        value = match.group(2).rstrip("\\")  # the escape of a closing quote in escaped JSON
        if len(value) < 20 or _HEX.match(value) or ("/" in value and "-" in value):
            continue  # hex (a digest), or a path of slugs (``nvidia/Nemotron-3-Super``): neither is base64
        if _entropy(value) <= _BASE64.entropy_limit:
            continue
        if _NOT_SECRET_BEFORE.search(text, max(0, match.start() - 40), match.start()):
            continue
        if not _filtered(value, _line_of(text, match.start(), match.end())):
            yield value


def _entropy(value: str) -> float:
    """Shannon entropy of a base64 value, bits a character: detect-secrets' measure (it counts each of
    its 65 characters over the value, 65 passes), in one."""
    size = len(value)
    counts = Counter(value)
    return -sum(n / size * math.log2(n / size) for char, n in counts.items() if char in _BASE64_CHARS)


def _filtered(value: str, line: str) -> bool:
    """detect-secrets' heuristics for what only looks like a secret."""
    return (
        bool(_NAME.match(value))
        or heuristic.is_sequential_string(value)
        or heuristic.is_potential_uuid(value)
        or heuristic.is_likely_id_string(value, line)
        or heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or (("(" in line or "[" in line) and heuristic.is_indirect_reference(line))  # a call, an index
        or heuristic.is_not_alphanumeric_string(value)
        or secret_names.is_identifier(value)
    )


def _line_of(text: str, start: int, end: int) -> str:
    """The line around ``start``…``end``, as far as ``_HEURISTIC_REACH`` either side (the heuristics
    read a name just before a value; one of them takes time with the square of what it reads)."""
    reach_lo, reach_hi = max(0, start - _HEURISTIC_REACH), min(len(text), end + _HEURISTIC_REACH)
    first = text.rfind("\n", reach_lo, start) + 1 or reach_lo
    last = text.find("\n", end, reach_hi)
    return text[first : last if last >= 0 else reach_hi]


def compile_patterns(patterns: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """A project's own patterns (validated like the preserve patterns) as rules of kind ``custom``."""
    return tuple((CUSTOM, re.compile(p)) for p in patterns)


# Every rule by kind (ours first), each kind's place in that order, and the kinds tried on every text
# (no gate: cheap on their own, or read on the lines that assign a name a value).
_RULES = dict(_rules_by_kind())
_ORDER = {kind: n for n, kind in enumerate(_RULES)}
_ALWAYS = [kind for kind in _RULES if kind not in {**_GATES, **_CASED_GATES, **_PATTERN_GATES} or kind in _LINE_RULES]
