"""Secrets by their shape, the rules of this project's own: the keys of the providers agents use
(Anthropic, OpenAI, OpenRouter, Google, Hugging Face, Groq, npm, GitHub's fine-grained tokens,
Stripe's test keys, ctxweb's), whole private-key blocks, and JSON Web Tokens signature and all.
detect-secrets' rules (``compaction.secret_rules``) find the others.

A key may follow anything but a letter or an underscore of a longer word: ``=``, a quote, a dash, a
digit (``%22sk-…``), a letter of another script (``密钥是sk-ant-…``). Every rule is linear on any
text: a key is a bounded run after its prefix, and a match takes its whole run (``sk-sk-sk-…``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from detect_secrets.plugins.jwt import JwtTokenDetector

_BEFORE = r"(?<![A-Za-z_])"
_AFTER = r"(?![A-Za-z0-9_-])"


_DIGIT = re.compile(r"[0-9]")


def _cases(value: str) -> bool:
    return value != value.lower() and value != value.upper()  # str methods: keys run to 400 characters


def _random(value: str) -> bool:
    """A key generator's output: both cases and a digit (a file name or a word of 40 letters is not)."""
    return _cases(value) and _DIGIT.search(value) is not None


# kind, what its text must hold (lower-cased), its rule, what a match must also be.
Rule = tuple[str, tuple[str, ...], re.Pattern[str], Callable[[str], bool]]
RULES: tuple[Rule, ...] = (
    ("anthropic-api-key", ("sk-ant-",), re.compile(_BEFORE + r"sk-ant-[a-z]{2,12}\d{2}-[A-Za-z0-9_-]{20,400}"), bool),
    ("openrouter-api-key", ("sk-or-",), re.compile(_BEFORE + r"sk-or-v\d-[0-9a-f]{64}" + _AFTER), bool),
    # OpenAI's keys: sk-, sk-proj-, sk-svcacct-, sk-admin-, then 32+ characters of both cases and a digit.
    ("openai-api-key", ("sk-",), re.compile(_BEFORE + r"sk-(?!ant-|or-v\d-)[A-Za-z0-9_-]{32,400}"),
     lambda v: _random(v[3:])),
    ("ctxweb-api-key", ("ctx_",), re.compile(_BEFORE + r"ctx_[A-Za-z0-9_-]{40,120}"), lambda v: _cases(v[4:])),
    ("github-token", ("github_pat_",), re.compile(_BEFORE + r"github_pat_[A-Za-z0-9_]{60,255}"), bool),
    ("npm-token", ("npm_",), re.compile(_BEFORE + r"npm_[A-Za-z0-9]{36}" + _AFTER), lambda v: _random(v[4:])),
    ("google-api-key", ("aiza",), re.compile(_BEFORE + r"AIza[0-9A-Za-z_-]{35}" + _AFTER), bool),
    ("google-oauth-token", ("ya29.",), re.compile(_BEFORE + r"ya29\.[0-9A-Za-z_-]{20,2000}"), _random),
    ("google-oauth-secret", ("gocspx-",), re.compile(_BEFORE + r"GOCSPX-[0-9A-Za-z_-]{28}" + _AFTER), bool),
    ("huggingface-token", ("hf_",), re.compile(_BEFORE + r"hf_[A-Za-z0-9]{34}" + _AFTER), lambda v: _cases(v[3:])),
    ("groq-api-key", ("gsk_",), re.compile(_BEFORE + r"gsk_[A-Za-z0-9]{52}" + _AFTER), lambda v: _random(v[4:])),
    ("stripe-access-key", ("k_live_", "k_test_"), re.compile(_BEFORE + r"[rs]k_(?:live|test)_[0-9A-Za-z]{24,247}"),
     lambda v: _random(v[8:])),
    ("digitalocean-token", ("dop_v1_", "doo_v1_", "dor_v1_"), re.compile(_BEFORE + r"do[opr]_v1_[a-f0-9]{64}"), bool),
)  # fmt: skip
KINDS = frozenset({kind for kind, *_ in RULES} | {"private-key", "jwt"})
GATES: dict[str, tuple[str, ...]] = {}
for _kind, _needs, *_ in RULES:
    GATES[_kind] = GATES.get(_kind, ()) + _needs
GATES["private-key"] = ("-----begin",)
GATES["jwt"] = ("eyj",)
# How far past its prefix a key may run.
REACH_AFTER = {"openai-api-key": 420, "anthropic-api-key": 420, "github-token": 270, "google-oauth-token": 2_020,
               "stripe-access-key": 260}  # fmt: skip


def own(kind: str, stretch: str) -> Iterator[str]:
    """The keys of ``kind`` in ``stretch``."""
    for each, _, pattern, check in RULES:
        if each == kind:
            for match in pattern.finditer(stretch):
                if check(match.group(0)):
                    yield match.group(0)


# A private key's block: its header, a body of at most ~16,000 characters, its footer. Its lines may
# be strings of their own (a list of lines, a JSON array): ``joint`` is what is between them.
_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----")
_BLOCK = 16_000


def private_keys(text: str, starts: list[int], joint: str) -> Iterator[str]:
    """Every private key in ``text`` (``starts``: where "-----begin" is, lower-cased), each string of it
    apart where it spans several: header, body and footer; without a footer, to the string's end."""
    after = 0
    for at in starts:
        if at < after:
            continue
        header = _BEGIN.match(text, at)
        if header is None:
            continue
        footer = f"-----END {header.group(1)}-----"
        end = text.find(footer, header.end(), header.end() + _BLOCK)
        if end >= 0 and text.find("-----BEGIN", header.end(), end) < 0:
            after = end + len(footer)
        else:
            cut = text.find(joint, header.end())
            after = len(text) if cut < 0 else cut
        for piece in text[at:after].split(joint):
            if piece.strip():
                yield piece.strip("\n")


# A JSON Web Token: header and payload (base64url of JSON objects), a signature. It is tried at each
# "eyJ" of a run of base64url characters, the first four and the last four of a run (a token glued to
# a word: ``TOKEN=eyJ…``, ``%22eyJ…``, ``tokeneyJ…``): so a run of "eyJeyJ…" is read a bounded number
# of times.
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{8,40000}\.[A-Za-z0-9_-]{2,100000}(?:\.[A-Za-z0-9_.+/=-]{0,16000})?")
_RUN = re.compile(r"[A-Za-z0-9_-]*")
_TRIES = 4


def jwts(text: str, starts: list[int]) -> Iterator[str]:
    """Every JSON Web Token in ``text`` (``starts``: where "eyj" is, lower-cased)."""
    after = 0
    run_end, tried = -1, 0
    candidates = [at for at in starts if text.startswith("eyJ", at)]
    for n, at in enumerate(candidates):
        if at < after:
            continue
        if at >= run_end:  # a new run of base64url characters
            run_end, tried = _RUN.match(text, at).end(), 0  # type: ignore[union-attr]  # matches empty
        tried += 1
        last_of_run = sum(1 for later in candidates[n + 1 : n + 1 + _TRIES] if later < run_end) < _TRIES
        if tried > _TRIES and not last_of_run:
            continue
        match = _JWT.match(text, at)
        if match and JwtTokenDetector.is_formally_valid(_header_and_payload(match.group(0))):
            after = match.end()
            yield match.group(0).rstrip(".")


def _header_and_payload(token: str) -> str:
    return ".".join(token.split(".", 2)[:2])
