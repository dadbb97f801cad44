"""Secrets by their name: a value assigned to a name that says it is a secret (``DB_PASSWORD=…``,
``aws_secret_access_key = …``, ``"accessToken": "…"``, ``Authorization: Bearer …``,
``--api-key …``, ``<password>…</password>``), in text (``assigned_values``) or under a dict key
(``keyed_value``). detect-secrets' keyword rules find quoted values after its list of names; these
read the forms it leaves (unquoted values, camelCase and header names, tokens, flags) and tell a
value from a reference (``password=password``, ``token: str``, ``$TOKEN``, ``self.secret``) by the
value's shape."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache

from detect_secrets.filters import heuristic

# A name's last word (or last two) that says its value is a secret. Human-chosen secrets (a password)
# may be any word; machine-made ones (a token, a key) look random.
_HUMAN = frozenset(
    {"password", "passwd", "pwd", "pass", "passphrase", "passcode", "passwords", "contraseña", "contrasena",
     "passwort", "mdp"}
)  # fmt: skip
_MACHINE = frozenset(
    {"secret", "secrets", "token", "credential", "credentials", "authorization", "apikey", "apikeys", "accesskey",
     "secretkey", "privatekey", "authkey", "authtoken", "accesstoken", "refreshtoken", "bearer", "dsn"}
)  # fmt: skip
# "<qualifier> key": an API key, an access key, a signing key; not a primary, public or cache key.
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "priv", "auth", "client", "service", "account", "db", "database",
     "signing", "encryption", "master", "app", "application", "ssh", "webhook", "shared", "hmac", "jwt",
     "license", "subscription", "consumer", "session", "admin", "root", "deploy", "pgp", "gpg", "crypt", "cipher"}
)  # fmt: skip
_KEY_WORDS = frozenset({"key", "keys"})
# Words after a secret's name that still name its value: ``secret_key_base``, ``api_key_value``.
_VALUE_SUFFIXES = frozenset({"value", "val", "base", "plain", "plaintext", "raw", "b64", "base64", "hex", "str"})
# What a text must hold (lower-cased) for a name of a secret to be in it.
GATE_WORDS = ("pass", "pwd", "secret", "token", "key", "credential", "auth", "contrase", "passwort", "mdp", "dsn")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^0-9A-Za-z\u00c0-\uffff]+")
# Values that are a type, a literal or a placeholder, not a secret.
_LITERALS = frozenset(
    {"null", "none", "nil", "true", "false", "undefined", "required", "optional", "string", "str", "bytes", "int",
     "integer", "number", "bool", "boolean", "object", "any", "text", "redacted", "hidden", "masked", "placeholder",
     "example", "sensitive", "secretstr", "unknown", "omitted", "removed", "changeme", "default", "empty",
     "password", "passwd", "secret", "token", "apikey", "api_key", "credentials"}
)  # fmt: skip
_REFERENCE = re.compile(
    r"\A(?:[A-Z]+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+|[a-z]+(?:_[a-z]+)*_[A-Za-z0-9]{12,})\Z"
)
# A bare value that is code: a call, an index, a member, a snake_case variable (``v4auth_header``).
_EXPRESSION = re.compile(
    r"\A[\w$.]*[(\[{]|\A[\w.]+(?:->|::)|\A[a-z][a-z0-9]*(?:_[a-z0-9]+)+\Z|\A!*[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+\Z"
)
_TEMPLATED = re.compile(
    r"\$\{|\{\{|\{%|%\(|\A<[^>]*>\Z|\A\{[\w.]*\}\Z|\A\$[\w{(]|\A%[\w(]|\A\[\[|\A\*{3}|\A\.\.\.|…|\A(?:urn|arn|mailto|data):"
)
_PATH = re.compile(r"\A(?:~?/|\.\.?/|[A-Za-z]:\\)")
# A passphrase: a few words (``correct horse battery staple``), not a sentence of prose.
_PHRASE = re.compile(r"\A[\w-]+(?: [\w-]+){1,7}\Z")
_SCHEME = re.compile(r"\A(?:bearer|basic|token|bot|digest|apikey|key)\s+(?=\S)", re.I)
_IDENTIFIER = re.compile(r"\A[A-Za-z_][A-Za-z_.-]*\Z")
# Letters in a key generator's order, not a name's (``vgINLZMfpobZ``, not ``AccessTokenProvider``).
_RANDOM_CASE = re.compile(r"[A-Z][a-z][A-Z]|[a-z][A-Z]{2}[a-z]")
_SPACE = re.compile(r"\s")
MIN_VALUE = 6
MAX_VALUE = 1_000


@lru_cache(maxsize=4096)
def words(name: str) -> tuple[str, ...]:
    """A name's words, lower-cased: ``AWS_SECRET_ACCESS_KEY`` → aws secret access key; ``accessToken``
    → access token; ``x-api-key`` → x api key; a dotted path's last part (``spring.datasource.password``)."""
    last = name.strip("-'\"`[]$@").rsplit(".", 1)[-1]
    return tuple(w.lower() for w in _SEPARATORS.split(_CAMEL.sub(" ", last)) if w)


@lru_cache(maxsize=4096)
def secret_name(name: str) -> str | None:
    """``"human"`` (a password), ``"machine"`` (a token, a key) or None: what a name says its value is."""
    parts = words(name)
    if len(parts) > 1 and parts[-1] in _VALUE_SUFFIXES:
        parts = parts[:-1]
    if not parts:
        return None
    last = parts[-1]
    if last in _HUMAN:
        return "human"
    if last in _MACHINE or (last in _KEY_WORDS and len(parts) > 1 and parts[-2] in _KEY_QUALIFIERS):
        return "machine"
    return None


def secret_kind(name: str) -> str:
    """The kind a secret found by its name is: AWS's secret key by its own, any other a keyword."""
    parts = words(name)
    return "aws-secret-key" if {"aws", "secret", "key"} <= set(parts) else "keyword"


def secret_value(value: str, sort: str, name: str = "", *, quoted: bool = True, env: bool = False) -> str | None:
    """The secret in ``value`` assigned to a name of ``sort`` (``secret_name``), or None where it is a
    reference, a type, a literal, a path or a placeholder. ``quoted``: it was in quotes (or a JSON
    string), so it may be any word, and a password may hold spaces; ``env``: an environment
    variable's (``DB_PASSWORD=hunter``): a bare word is its value, not a name."""
    value = _SCHEME.sub("", value.strip(), count=1)
    if not quoted:
        value = value.rstrip(".,;:)]}>")
        if value.startswith("-"):  # the next flag, a negative number
            return None
    if not MIN_VALUE <= len(value) <= MAX_VALUE or value.lower() in _LITERALS or "[secret:" in value:
        return None
    if _TEMPLATED.search(value) or _PATH.match(value) or "://" in value or len(set(value)) <= 2:
        return None
    spaced = _SPACE.search(value) is not None
    if spaced and (not quoted or sort != "human" or len(value) > 100 or not _PHRASE.match(value)):
        return None
    if _REFERENCE.match(value) or (not quoted and _EXPRESSION.match(value)):
        return None
    letters_only = _IDENTIFIER.match(value) is not None  # letters, "_", "-", "."
    if letters_only and any(word in value.lower() for word in words(name) if len(word) > 2):
        return None  # a name of its own (``"password": "passwordInput"``, ``token=access_token``)
    if heuristic.is_sequential_string(value) or (not letters_only and heuristic.is_not_alphanumeric_string(value)):
        return None
    random = not letters_only or bool(_RANDOM_CASE.search(value))  # a digit, a sign, or letters in no order
    if sort == "human":
        return value if quoted or env or random else None
    return value if len(value) >= 8 and not spaced and (random or env) else None


def is_identifier(value: str) -> bool:
    """Letters in a name's order (``BetaManagedAgentsThreadLimit``), not a key generator's."""
    return _IDENTIFIER.match(value) is not None and not _RANDOM_CASE.search(value)


def keyed_value(key: object, value: str, *, inherited: bool = False) -> str | None:
    """The secret in a dict's string ``value`` under ``key`` (a JSON body, a tool's input): its name
    says so, or (``inherited``) it sits in a list or object under such a name."""
    if not isinstance(key, str):
        return None
    sort = secret_name(key)
    if sort is None:
        return None
    return secret_value(value, "machine" if inherited else sort, key, quoted=not inherited)


# ``name = value``, ``name: value``, ``"name": "value"``, ``name := value``, ``name => value``: a name
# (not inside a longer one), an optional closing quote or bracket, the sign. The value is read after.
_ASSIGNMENT = re.compile(
    r"(?<![\w.$-])(?P<name>[A-Za-z_][\w.-]{0,80})(?P<close>[\"'`\]]{0,2})[ \t]*(?P<sign>={1,3}|:=|=>|:(?![:/]))[ \t]*@?"
)
# ``--password value``, ``--api-key=value``: a flag's argument is its value, whatever its shape.
_FLAG = re.compile(r"(?<![\w-])--(?P<name>[A-Za-z][\w-]{1,60})(?P<sign>=|[ \t]+)")
_TAG = re.compile(r"<([A-Za-z_][\w.-]{0,60})>([^<\n]{6,300})</\1>")
_VALUE = re.compile(r"\"([^\"\n]{0,1000})\"|'([^'\n]{0,1000})'|`([^`\n]{0,1000})`|([^\s\"'`&,;()\[\]{}<>]{1,1000})")
_SCHEME_PREFIX = re.compile(r"(?:bearer|basic|token|bot|digest)[ \t]+", re.I)


def _assigned(text: str, match: re.Match[str], flag: bool) -> tuple[str, str, int] | None:
    """The kind and secret assigned by ``match`` and where its value ends, or None."""
    name = match.group("name")
    sort = secret_name(name)
    if sort is None:
        return None
    at = match.end()
    scheme = _SCHEME_PREFIX.match(text, at)
    found = _VALUE.match(text, scheme.end() if scheme else at)
    if found is None:
        return None
    raw = next(g for g in found.groups() if g is not None)
    bare = found.group(4) is not None
    sign = match.group("sign")
    # An environment's ``NAME=value`` (a .env file, a shell): a bare word is its value.
    env = bare and name.isupper() and sign == "=" and not match.groupdict().get("close")
    secret = secret_value(raw, sort, name, quoted=not bare or (flag and sign == "="), env=env)
    return (secret_kind(name), secret, found.end()) if secret else None


def assigned_values(stretches: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(kind, value) of every secret assigned to a secret's name in ``stretches``."""
    for text in stretches:
        for pattern in (_ASSIGNMENT, _FLAG):
            match = pattern.search(text)
            while match:
                found = _assigned(text, match, pattern is _FLAG)
                if found:  # on after the value: what it holds is not read again
                    yield found[0], found[1]
                match = pattern.search(text, found[2] if found else match.end())
        if "</" in text:
            for match in _TAG.finditer(text):
                sort = secret_name(match.group(1))
                secret = sort and secret_value(match.group(2), sort, match.group(1))
                if secret:
                    yield secret_kind(match.group(1)), secret
