"""Secrets by their name: whether a name says its value is a secret (``DB_PASSWORD``,
``aws_secret_access_key``, ``accessToken``, ``Authorization``, ``x-api-key``), and whether what it is
given is a value or a reference (``password=password``, ``token: str``, ``$TOKEN``, ``self.secret``),
told by the value's shape. ``secret_assignments`` reads the forms names are given values in, in text;
``compaction.redact`` under a dict's keys (``keyed_value``)."""

from __future__ import annotations

import re
from functools import lru_cache

from detect_secrets.filters import heuristic

# A name's last word (or last two) that says its value is a secret. Human-chosen secrets (a password)
# may be any word; machine-made ones (a token, a key) look random.
_HUMAN = frozenset(
    {"password", "passwd", "pwd", "pw", "passphrase", "passcode", "passwords", "contraseña", "contrasena",
     "passwort", "mdp", "pgpass"}
)  # fmt: skip
# "pass" names a password alone or after these (``DB_PASS``); ``allPass``, ``firstPass`` are not.
_PASS_QUALIFIERS = frozenset(
    {"db", "database", "key", "user", "admin", "root", "ftp", "smtp", "mail", "email", "redis", "mysql", "pg",
     "postgres", "sql", "app", "api", "ldap", "bind", "proxy", "auth", "login", "master", "sa", "service", "account",
     "default", "become"}
)  # fmt: skip
_MACHINE = frozenset(
    {"secret", "secrets", "token", "credential", "credentials", "authorization", "apikey", "apikeys", "accesskey",
     "secretkey", "privatekey", "authkey", "authtoken", "accesstoken", "refreshtoken", "bearer", "dsn", "auth",
     "authident", "secretstring"}
)  # fmt: skip
# "<qualifier> key": an API key, an access key, a signing key; not a primary, public or cache key.
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "priv", "auth", "client", "service", "account", "db", "database",
     "signing", "encryption", "master", "app", "application", "ssh", "webhook", "shared", "hmac", "jwt",
     "license", "subscription", "consumer", "session", "admin", "root", "deploy", "pgp", "gpg", "crypt", "cipher"}
)  # fmt: skip
_KEY_WORDS = frozenset({"key", "keys"})
# "<word> key" is a secret's name (``OPENAI_KEY``, ``stripe_key``) unless the word says it is not.
_NOT_SECRET_KEYS = frozenset(
    {"primary", "foreign", "public", "pub", "sort", "partition", "cache", "idempotency", "hash", "range", "row", "map",
     "dict", "object", "lookup", "group", "index", "unique", "composite", "natural", "surrogate", "host", "known",
     "react", "list", "item", "dedupe", "routing", "shard", "storage", "table", "join", "field", "column", "env",
     "translation", "i18n", "message", "label", "event", "state", "query", "param", "config", "setting", "option"}
)  # fmt: skip
# "<word> token" that is not a credential: a page's place in a listing.
_NOT_SECRET_TOKENS = frozenset({"next", "page", "continuation", "pagination", "sync", "resume", "cursor", "csrf_"})
# Words after a secret's name that still name its value: ``secret_key_base``, ``api_key_value``.
_VALUE_SUFFIXES = frozenset(
    {"value", "val", "base", "plain", "plaintext", "raw", "b64", "base64", "hex", "str", "data", "secure"}
)
# One word that ends with a secret's: ``PGPASSWORD``, ``MYSQLPASSWORD``, ``ghtoken``.
_HUMAN_ENDINGS = ("password", "passwd", "passphrase")
_MACHINE_ENDINGS = ("secret", "token", "apikey")
# What a text must hold (lower-cased) for a name of a secret to be in it.
GATE_WORDS = ("pass", "pwd", "pw", "secret", "token", "key", "credential", "auth", "contrase", "passwort", "mdp", "dsn")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^0-9A-Za-z\u00c0-\uffff]+")
# Values that are a type, a literal or a placeholder, not a secret.
_LITERALS = frozenset(
    {"null", "none", "nil", "true", "false", "undefined", "required", "optional", "string", "str", "bytes", "int",
     "integer", "number", "bool", "boolean", "boolean?", "string?", "object", "any", "text", "redacted", "hidden",
     "masked", "placeholder",
     "example", "sensitive", "secretstr", "unknown", "omitted", "removed", "changeme", "default", "empty",
     "password", "passwd", "secret", "token", "apikey", "api_key", "credentials",
     # "password" in other languages (a form's label), and defaults everyone knows, which are also the
     # names of images, users and hosts (``postgres``): replaced, they would hide those everywhere.
     "passwort", "contraseña", "contrasena", "mot de passe", "senha", "wachtwoord", "parola", "lösenord", "salasana",
     "hasło", "пароль", "パスワード", "密码", "비밀번호", "kennwort", "parolă", "lozinka", "adgangskode", "jelszó",
     "mật khẩu", "kata sandi", "api-schlüssel",
     "postgres", "localhost", "admin", "root", "guest", "test", "user", "mysql", "redis", "docker", "ubuntu", "debian",
     "changeit", "administrator", "demo", "sample"}
)  # fmt: skip
_REFERENCE = re.compile(
    r"\A(?:[A-Z]+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+"
    r"|[a-z]+(?:_[a-z]+)*_[A-Za-z0-9]{12,})\Z"
)
# A bare value that is code: a call, an index, a member, a snake_case variable (``v4auth_header``).
_EXPRESSION = re.compile(
    r"\A[\w$.]*[(\[{]|\A[\w.]+(?:->|::)|\A[a-z][a-z0-9]*(?:_[a-z0-9]+)+\Z|\A!*[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+\Z"
)
# A template or a placeholder: anchored, and a few strings anywhere (looked for as strings: values run
# to a thousand characters, and are read at every assignment of a long line).
_PLACEHOLDER = re.compile(
    r"\A(?:<[^>]*>\Z|\{[\w.]*\}\Z|\[[^\]]*\]+\Z|\$[\w{(]|%(?:\(|[sdrif]\b)|\[\[|\*{3}|\.\.\.|(?:urn|arn|mailto|data):)"
)
_TEMPLATE_MARKS = ("${", "{{", "{%", "%(", "…")


# A format string's field (``{self._get_token()}``, ``{policy}:{sas_key}``), a regular expression's
# syntax (``([a-f0-9]{48})``, ``(?=…``, ``\d``): code's strings, not values.
_FIELD_OR_PATTERN = re.compile(
    r"\{[A-Za-z_][\w.()\[\]'\"]*\}|\[[^\]]{0,40}-[^\]]{0,40}\]|\(\?|\\[dwsvb]|\{\d+(?:,\d*)?\}"
)


def _templated(value: str) -> bool:
    return (
        _PLACEHOLDER.match(value) is not None
        or any(mark in value for mark in _TEMPLATE_MARKS)
        or _FIELD_OR_PATTERN.search(value) is not None
    )


_PATH = re.compile(r"\A(?:~?/|\.\.?/|[A-Za-z]:\\)")
# A passphrase: a few words (``correct horse battery staple``), not a sentence of prose.
_PHRASE = re.compile(r"\A[\w-]+(?: [\w-]+){1,7}\Z")
_SCHEME = re.compile(r"\A(?:bearer|basic|token|bot|digest|apikey|key|aws4-hmac-sha256)\s+(?=\S)", re.I)
_IDENTIFIER = re.compile(r"\A[A-Za-z_][A-Za-z_.-]*\Z")
# Letters in a key generator's order, not a name's (``vgINLZMfpobZ``, not ``AccessTokenProvider``).
_RANDOM_CASE = re.compile(r"[A-Z][a-z][A-Z]|[a-z][A-Z]{2}[a-z]")
_SPACE = re.compile(r"\s")
# A class or type in code (``SyncX509WorkloadIdentityAuth``, ``_BedrockSigV4Auth``), given bare.
_PASCAL = re.compile(r"\A_?[A-Z][a-z]+(?:[A-Z0-9][a-z0-9]+)+[A-Z]?\Z")
_PART = re.compile(r"[A-Z][a-z0-9]*")  # a capitalised part of a name
# Code, given bare: a member read with an operator (``_.password?_.username+…``).
_CODE = re.compile(r"[A-Za-z_$][\w$]*\.[A-Za-z_$].*[?|+!]|[?|+!].*[A-Za-z_$][\w$]*\.[A-Za-z_$]")
_LABEL = re.compile(
    r"passwort|contraseña|contrasena|mot de passe|senha|wachtwoord|lösenord|hasło|пароль|kennwort|"
    # a form's message: "must be at least 8 characters", "Too short", "Reset link sent"
    r"\b(?:must|be|at|least|too|is|not|the|to|of|and|should|contain|characters?|invalid|match|sent|your|enter|please)\b",
    re.I,
)
# A file a setting names (``service-account.json``, ``certs/server.key``), not the secret in it.
_FILE = re.compile(
    r"\A[\w.-]+(?:/[\w.-]+)*\.(?:json|pem|key|crt|cer|p12|pfx|ya?ml|txt|env|ini|toml|conf|cfg|der|jks|keystore|p8|pub"
    r"|gpg|asc)\Z"
)
_YAML_TAG = re.compile(r"\A![A-Za-z_]+\Z")
_WORDLIKE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_SLUG = re.compile(r"\A[A-Za-z0-9_.-]+\Z")
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
    if last in _HUMAN or last.endswith(_HUMAN_ENDINGS):
        return "human"
    if last == "pass" and (len(parts) == 1 or parts[-2] in _PASS_QUALIFIERS):
        return "human"
    if last in ("token", "tokens") and len(parts) > 1 and parts[-2] in _NOT_SECRET_TOKENS:
        return None
    if (
        last in _MACHINE
        or "".join(parts[-2:]) in _MACHINE
        or (last in _KEY_WORDS and len(parts) > 1 and parts[-2] in _KEY_QUALIFIERS)
    ):
        return "machine"
    # An environment's ``<VENDOR>_KEY`` (``OPENAI_KEY``, ``STRIPE_KEY``); in code, ``thread_key`` is a name.
    own = name.strip("-'\"`[]$@").rsplit(".", 1)[-1]
    if last in _KEY_WORDS and len(parts) > 1 and parts[-2] not in _NOT_SECRET_KEYS and own.isupper():
        return "machine"
    return "machine" if last.endswith(_MACHINE_ENDINGS) and len(last) > 7 else None


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
    # A path, not a key that starts with "/" (base64's letters run in no order, and hold "+" and "=").
    path = _PATH.match(value) is not None and not _RANDOM_CASE.search(value) and not ("+" in value or "=" in value)
    if _templated(value) or path or "://" in value or len(set(value)) <= 2 or _FILE.match(value):
        return None
    if _YAML_TAG.match(value):
        return None  # Ansible's !vault, Home Assistant's !secret: the value follows
    spaced = _SPACE.search(value) is not None
    if spaced and (not quoted or sort != "human" or len(value) > 100 or not _PHRASE.match(value)):
        return None
    if spaced and (_LABEL.search(value) or any(w in value.lower() for w in words(name) if len(w) > 2)):
        return None  # a form's label: "Reset password", "Neues Passwort"
    pascal = sort != "human" and not env and _pascal(value)
    # A dotted name, not a token with a dot (Vault's ``hvs.CAESIu8jz…``: random letters after it).
    reference = _REFERENCE.match(value) is not None and not (len(value) >= 24 and _RANDOM_CASE.search(value))
    if reference or (not quoted and (_EXPRESSION.match(value) or pascal or _CODE.search(value))):
        return None
    letters_only = _IDENTIFIER.match(value) is not None  # letters, "_", "-", "."
    if _names_itself(value, letters_only, name):
        return None  # a name of its own (``"password": "passwordInput"``, ``secret: my-k8s-secret-name``)
    if heuristic.is_sequential_string(value) or (not letters_only and heuristic.is_not_alphanumeric_string(value)):
        return None
    random = not letters_only or bool(_RANDOM_CASE.search(value))  # a digit, a sign, or letters in no order
    if sort == "human":
        return value if quoted or env or random else None
    # A token or key of letters only in an environment (``AUTH=internal``) is a mode, unless it is long.
    return value if len(value) >= 8 and not spaced and (random or (env and len(value) >= 16)) else None


def _pascal(value: str) -> bool:
    """A class or type's name (``SyncX509WorkloadIdentityAuth``), not a key that reads like one by
    chance (``QiA0BoPsKoUdr5fylxz7``: parts of one or two characters, as random letters fall)."""
    return _PASCAL.match(value) is not None and sum(len(part) <= 2 for part in _PART.findall(value)) <= 1


def _names_itself(value: str, letters_only: bool, name: str) -> bool:
    """Whether a value holds its name's word as a name does: anywhere in letters (``passwordInput``),
    between separators in a slug (``my-k8s-secret-name``; ``password123`` is a password)."""
    low = value.lower()
    slug = len(value) <= 40 and _SLUG.match(value) is not None  # a name, not an 80-character key
    if _WORDLIKE.match(value) and {w for w in words(value) if len(w) > 2} & set(words(name)):
        return True  # a type or class of its own (``private_key: X25519PrivateKey``, ``token: OAuth2Token``)
    return any(
        len(word) > 2
        and word in low
        and (letters_only or (slug and re.search(rf"(?:^|[-_.]){re.escape(word)}(?:[-_.]|$)", low) is not None))
        for word in words(name)
    )


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


def lower_in_place(text: str) -> str:
    """``text`` lower-cased, each character in its place (positions found in it are positions in
    ``text``): a character whose lower case is longer (``İ``) stays as it is."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
