"""Values given to a secret's name in text (``secret_names`` tells the names and the values): the
forms configuration, code, shells and HTTP write them in —

- ``NAME=value``, ``name: value``, ``"name": "value"``, ``name := value``, ``name => value``,
  ``char name[32] = "value"``, ``name "value";``, ``"value" == name``;
- ``--name value``, ``--name=value``; ``<name>value</name>``;
- a name and its value apart: ``{"name": "DB_PASSWORD", "value": "…"}`` (as JSON text), a YAML
  ``name:``/``value:`` pair, ``<add key="ApiKey" value="…"/>``, ``define('DB_PASSWORD', '…')``;
- commands: ``curl -u user:…``, ``docker login -p …``, ``sshpass -p …``, ``mysql -p…``,
  ``IDENTIFIED BY '…'``, a netrc's ``login … password …``, ``setx NAME …``, ``set -gx NAME …``,
  ``aws configure set NAME …``; ``Cookie: name=…``; ``Bearer …`` anywhere.

Every rule starts at a name's first character (never inside a longer one) and reads a bounded run:
linear on any text."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator

from compaction.secret_names import secret_kind, secret_name, secret_value

# What a text must hold (lower-cased) for a command's form to be looked for: the other forms name a
# secret (``getenv("DB_PASSWORD", …)``, ``gh secret set``), whose words ``secret_names.GATE_WORDS`` has.
COMMAND_WORDS = (
    "curl", "login", "sshpass", "mysql", "identified by", "redis-cli", "mongo", "cookie", "bearer", "sig=",
    "sqlcmd", "rabbitmqctl", "htpasswd", "http -a", "http --auth", "https -a", "xh -a", "sqlplus", "expdp",
    "impdp", "ssh-keygen", "vault login", "_authtoken", "\ttrue\t", "\tfalse\t",
    "密码", "пароль", "mot de passe", "contraseña", "senha", "wachtwoord", "パスワード", "비밀번호",
)  # fmt: skip

_NAME = r"[A-Za-z_][\w.-]{0,80}"
_SPACED_WORD = r"(?:[ \t](?:[Kk]ey|KEY|[Tt]oken|TOKEN|[Ss]ecret|SECRET))"  # "API key: …", "Secret key = …"
# A name: after a ``$`` (PHP, Perl, PowerShell) or a Java ``-D``/Maven ``-P`` property; then what may
# close it (a quote, a bracket, markdown's ``**``), a type (``password: str =``, ``API_KEY: string =``,
# Go's ``apiKey string =``), the sign — ``=>`` before ``=``, or the value would be read from ``>``.
_ASSIGNMENT = re.compile(
    rf"(?:(?<![\w.$-])|(?<=\$)|(?<=-[DP]))(?P<name>{_NAME}{_SPACED_WORD}?)(?:\[\d*\])?(?P<close>[\"'`\]*_]{{0,3}})"
    r"(?:[ \t]*:[ \t]+[&\w.\[\]<>|]{1,40}[ \t]*(?==[ \t]*[^=>\s])|[ \t]+(?:string|int|bool|\[\]byte)[ \t]*(?==[^=>]))?"
    r"[ \t]*(?P<sign>=>|={1,3}|!==?|:=|:(?![:/]))[ \t]*(?:[*_]{1,2}[ \t]*)?@?"
)
_FLAG = re.compile(r"(?<![\w-])--(?P<name>[A-Za-z][\w-]{1,60})(?P<sign>=|[ \t]+)")
_SPACED = re.compile(rf"(?<![\w.$-])(?P<name>{_NAME})[ \t]+(?=[\"'][^\"'\n]{{1,300}}[\"'];)(?P<sign>)")
_COMPARED = re.compile(rf"([\"'])([^\"'\n]{{6,300}})\1[ \t]*[!=]==?[ \t]*(?P<name>{_NAME})")
_TAG = re.compile(r"<((?:[A-Za-z_][\w.-]{0,30}:)?[A-Za-z_][\w.-]{0,60})>([^<\n]{6,300})</\1>")
# A value: quoted (after a string prefix: ``b"…"``, ``r'…'``, ``f"…"``), or bare to a space or a sign.
_VALUE = re.compile(
    r"(?:[bBrRuUfF]{1,2}(?=[\"']))?(?:\"([^\"\n]{0,1000})\"|'([^'\n]{0,1000})'|`([^`\n]{0,1000})`"
    r"|([^\s\"'`&,;()\[\]{}<>]{1,1000}))"
)
_SCHEME_PREFIX = re.compile(r"(?:bearer|basic|token|bot|digest|aws4-hmac-sha256)[ \t]+", re.I)
_Q = r"[\"']"
# Columns: ``vault kv get``'s ``password    …``, a tab between (a spreadsheet, ``env`` as a table); a
# label on a line of its own and the value alone on the next (``Password:`` / ``Client Secret``);
# prose: "the admin password is …". Their values are bare: a word alone is not one.
_COLUMNS = re.compile(rf"(?m)^[ \t]*({_NAME})(?:[ \t]{{2,}}|\t)([^\s]{{6,1000}})[ \t]*\r?$")
_LABELLED = re.compile(rf"(?m)^[ \t]*({_NAME}(?:[ \t]{_NAME})?)[ \t]*:?[ \t]*\r?\n[ \t]*([^\s]{{8,1000}})[ \t]*\r?$")
_PROSE = re.compile(r"(?i)\b((?:password|passphrase|secret|token|key))[ \t]+is[ \t]+[\"'`]?([^\s\"'`]{6,1000})")
# A name and its value, apart: (what the lower-cased text must hold, the pattern: name, value).
_PAIRS: tuple[tuple[Collection[str], re.Pattern[str]], ...] = (
    (
        ("value",),
        re.compile(
            rf"{_Q}(?:name|key|Name|Key){_Q}[ \t]*:[ \t]*{_Q}({_NAME}){_Q}[ \t]*,[ \t]*{_Q}(?:value|Value){_Q}"
            rf"[ \t]*:[ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}"
        ),
    ),
    (
        ("value:",),
        re.compile(
            rf"\b(?:name|key):[ \t]*{_Q}?({_NAME}){_Q}?[ \t]*\r?\n[ \t]*(?:-[ \t]*)?value:[ \t]*{_Q}?"
            rf"([^\s\"']{{1,1000}})"
        ),
    ),
    (("value=",), re.compile(rf"\bkey={_Q}({_NAME}){_Q}[ \t]+value={_Q}([^\"'\n]{{1,1000}}){_Q}")),
    (
        (
            "define(",
            "setdefault(",
            "set_var(",
            "setenv(",
            "putenv(",
            "getenv(",
            "get(",
            "env(",
            "getordefault(",
            "getenvironmentvariable(",
            "fetch(",
        ),
        re.compile(
            rf"\b(?:define|setdefault|set_var|[Ss]etenv|putenv|Setenv|getenv|get|env|getOrDefault|"
            rf"GetEnvironmentVariable|fetch)\([ \t]*{_Q}({_NAME}){_Q}[ \t]*,[ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}"
        ),
    ),
    (("process.env",), re.compile(rf"\bprocess\.env\.({_NAME})[ \t]*(?:\|\||\?\?)[ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}")),
    (("<property",), re.compile(rf"<property[ \t]+name={_Q}({_NAME}){_Q}[ \t]+value={_Q}([^\"'\n]{{1,1000}}){_Q}")),
    (("<entry",), re.compile(rf"<entry[ \t]+key={_Q}({_NAME}){_Q}[ \t]*>([^<\n]{{1,1000}})</entry>")),
    (("set",), re.compile(rf"(?:\.|\b)set({_NAME})\([ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}[ \t]*\)")),
    # YAML: a block scalar's value on the line after its name (``password: |``), to its first space; a
    # bare ``name:`` at a line's end opens a block in code (``if reset_token:``), so it is not read.
    (
        ("variable",),
        re.compile(
            rf"\bvariable[ \t]+{_Q}({_NAME}){_Q}[ \t]*\{{[^}}]{{0,300}}?\bdefault[ \t]*=[ \t]*{_Q}"
            rf"([^\"'\n]{{1,1000}}){_Q}"
        ),
    ),
    ((":",), re.compile(rf"(?<![\w.-])({_NAME}):[ \t]*[|>][-+]?[ \t]*\r?\n[ \t]+([^\s#]\S{{5,1000}})")),
    (("#define",), re.compile(rf"#define[ \t]+({_NAME})[ \t]+{_Q}([^\"'\n]{{1,1000}}){_Q}")),
    (("env ", "arg "), re.compile(rf"\b(?:ENV|ARG)[ \t]+({_NAME})[ \t]+([^\s=]{{1,1000}})")),
    (
        ("|", "│", "║", "┃"),
        re.compile(rf"[|│║┃][ \t]*`?({_NAME})`?[ \t]*[|│║┃][ \t]*`?([^`|│║┃\s]{{1,1000}})`?[ \t]*[|│║┃]"),
    ),
    (("  ", "\t"), _COLUMNS),
    (("\n",), _LABELLED),
    ((" is ",), _PROSE),
    # A netrc's entry across lines: ``machine …`` or ``default``, a login, then the password.
    (
        ("machine", "default"),
        re.compile(
            r"\b(?:machine[ \t]+\S{1,200}|default)(?:\s+(?:login|account|port)\s+\S{1,200}){0,3}"
            r"\s+(password)\s+(\S{1,1000})"
        ),
    ),
    # An AWS parameter or secret read back: ``{"Name": "/prod/db/password", …, "Value": "…"}``.
    (
        ("value",),
        re.compile(
            rf"{_Q}Name{_Q}[ \t]*:[ \t]*{_Q}/?(?:[\w.-]{{1,80}}/){{0,8}}({_NAME}){_Q}[^{{}}]{{0,300}}?{_Q}Value{_Q}"
            rf"[ \t]*:[ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}"
        ),
    ),
    (("--",), re.compile(rf"{_Q}--({_NAME}){_Q}[ \t]*,[ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}")),
    (
        ("setx", "set -", "configure set"),
        re.compile(
            rf"(?:\bsetx|\bset[ \t]+-[gxUu]+|\bconfigure[ \t]+set)[ \t]+({_NAME})[ \t]+{_Q}?([^\s\"']{{1,1000}})"
        ),
    ),
)
# Commands' own places for a password: (what the lower-cased text must hold, the pattern: value).
_COMMANDS: tuple[tuple[Collection[str], re.Pattern[str]], ...] = (
    (("-u", "--user"), re.compile(r"(?<![\w-])(?:-u|--user)[ \t]+[\"']?[^\s:\"'@]{1,200}:([^\s\"']{1,1000})")),
    (
        ("login",),
        re.compile(
            r"\b(?:docker|podman|helm|nerdctl|az|oc)[ \t]+(?:registry[ \t]+|acr[ \t]+)?login\b[^\n]{0,300}?[ \t]"
            r"(?:-p|--password)[ \t]+[\"']?([^\s\"']{1,1000})"
        ),
    ),
    (("redis-cli",), re.compile(r"\bredis-cli\b[^\n]{0,300}?[ \t](?:-a|--pass)[ \t]+[\"']?([^\s\"']{1,1000})")),
    (
        ("mongo",),
        re.compile(
            r"\b(?:mongo|mongosh|mongodump|mongorestore)\b[^\n]{0,300}?[ \t](?:-p|--password)[ \t]+[\"']?"
            r"([^\s\"']{1,1000})"
        ),
    ),
    (
        ("echo",),
        re.compile(
            r"\becho[ \t]+[\"']?([^\s\"'|]{6,1000})[\"']?[ \t]*\|[^\n]{0,200}?(?:--with-token|--password-stdin)"
        ),
    ),
    (
        ("gh ",),
        re.compile(r"\bgh[ \t]+secret[ \t]+set[ \t]+\S{1,200}[^\n]{0,100}?(?:--body|-b)[ \t]+[\"']?([^\s\"']{1,1000})"),
    ),
    ((".login(",), re.compile(r"\.login\([ \t]*[\"'][^\"'\n]{0,200}[\"'][ \t]*,[ \t]*[\"']([^\"'\n]{1,1000})[\"']")),
    # Glued to its flag, the flag is replaced with it (a password alone is replaced only as a word).
    (("sshpass",), re.compile(r"\bsshpass[ \t]+-p[ \t]+[\"']?([^\s\"']{1,1000})")),
    (("sshpass",), re.compile(r"\bsshpass[ \t]+(-p[^\s\"']{1,1000})")),
    (("mysql",), re.compile(r"\bmysql(?:dump|admin|sh)?\b[^\n]{0,300}?[ \t](-p[^\s\"']{1,1000})")),
    (
        ("密码", "пароль", "mot de passe", "contraseña", "passwort", "senha", "wachtwoord", "パスワード", "비밀번호"),
        re.compile(
            r"(?:密码|пароль|mot de passe|contraseña|passwort|senha|wachtwoord|パスワード|비밀번호)"
            r"[ \t]*[:：=][ \t]*([^\s\"']{1,1000})",
            re.I,
        ),
    ),
    (("sig=",), re.compile(r"[?&]sig=([A-Za-z0-9%+/=]{20,200})")),
    (("identified",), re.compile(r"\bidentified[ \t]+by[ \t]+[\"']([^\"'\n]{1,1000})[\"']", re.I)),
    (("machine",), re.compile(r"\bmachine[ \t]+\S{1,200}[ \t]+login[ \t]+\S{1,200}[ \t]+password[ \t]+(\S{1,1000})")),
    (("requirepass",), re.compile(r"\brequirepass[ \t]+(\S{1,1000})")),
    (
        ("httpbasicauth",),
        re.compile(r"HTTPBasicAuth\([ \t]*[\"'][^\"'\n]{0,200}[\"'][ \t]*,[ \t]*[\"']([^\"'\n]{1,1000})[\"']"),
    ),
    (("mysql",), re.compile(r"\bmysql(?:dump|admin|sh)?\b[^\n]{0,300}?[ \t]-p([\"'])([^\"'\n]{1,1000})\1")),
    (("sqlcmd",), re.compile(r"\bsqlcmd\b[^\n]{0,300}?[ \t]-P[ \t]*[\"']?([^\s\"']{1,1000})")),
    (
        ("rabbitmqctl",),
        re.compile(r"\brabbitmqctl[ \t]+(?:add_user|change_password)[ \t]+\S{1,200}[ \t]+[\"']?([^\s\"']{1,1000})"),
    ),
    (
        ("htpasswd",),
        re.compile(
            r"\bhtpasswd[ \t]+-\w*b\w*[ \t]+(?:-\S+[ \t]+)*\S{1,500}[ \t]+\S{1,200}[ \t]+[\"']?([^\s\"']{1,1000})"
        ),
    ),
    (
        ("http -a", "http --auth", "https -a", "xh -a"),
        re.compile(
            r"\b(?:http|https|xh)[ \t][^\n]{0,300}?(?<![\w-])(?:-a|--auth)[ \t]+[\"']?[^\s:\"'@]{1,200}:"
            r"([^\s\"']{1,1000})"
        ),
    ),
    (
        ("sqlplus", "expdp", "impdp", "rman"),
        re.compile(r"\b(?:sqlplus|expdp|impdp|rman)[ \t]+(?:-\w+[ \t]+)*[\"']?\w{1,100}/([^\s@\"'/]{1,1000})@"),
    ),
    (("ssh-keygen",), re.compile(r"\bssh-keygen\b[^\n]{0,300}?[ \t]-[NP][ \t]+[\"']([^\"'\n]{1,1000})[\"']")),
    (
        ("vault login",),
        re.compile(r"\bvault[ \t]+login[ \t]+(?:-\S+[ \t]+)*([^\s\"'=-][^\s\"'=]{5,1000})(?=[ \t]*(?:$|\n))", re.M),
    ),
    (("_authtoken",), re.compile(r"/:_authToken[ \t]+[\"']?([^\s\"']{8,1000})")),
    # A Netscape cookie jar's line (curl -c, wget): domain, flag, path, secure, expiry, name, value.
    (
        ("\ttrue\t", "\tfalse\t"),
        re.compile(
            r"(?m)^(?:#HttpOnly_)?\S{1,300}\t(?:TRUE|FALSE)\t\S{1,1000}\t(?:TRUE|FALSE)\t\d{1,20}\t\S{1,200}\t([^\s]{8,4000})\r?$"
        ),
    ),
    (("bearer",), re.compile(r"(?<![\w-])Bearer[ \t]+([A-Za-z0-9._~+/=-]{16,4000})")),
)
_BEARER = _COMMANDS[-1][1]
_BARE = frozenset({_COLUMNS, _LABELLED, _PROSE})  # a value read without quotes: a word is not one
# Every literal a pattern needs (``secret_rules`` finds which a text holds in its one pass over it), and
# those in nearly every text (JSON's ":"), which it tests for on their own.
LITERALS = tuple(sorted({n for needs, _ in (*_PAIRS, *_COMMANDS) for n in needs} | {"cookie"}))
COMMON_LITERALS = (":", "--", "|", "set", "\n", "  ", " is ")
_PAIRS = tuple((frozenset(needs), p) for needs, p in _PAIRS)
_COMMANDS = tuple((frozenset(needs), p) for needs, p in _COMMANDS)
_COOKIE = re.compile(r"\bcookie:[ \t]*([^\n]{1,4000})", re.I)
_COOKIE_PAIR = re.compile(r"([\w.-]{1,100})=([^;\s]{1,4000})")


def assigned_values(
    text: str, present: frozenset[str], near: Iterable[int], stretches: Callable[[], list[str]]
) -> Iterator[tuple[str, str]]:
    """(kind, value) of every secret given to a secret's name: ``name = value`` tried where a name
    holding one of the gate words is (``near``: where those words start in ``text``), the other forms
    in ``stretches()`` (the text around them, made only when one of those forms may be there);
    ``present``: the literals of the pair and command patterns (``LITERALS``) the text holds."""
    done = -1
    for start in _name_starts(text, near):
        if start < done:
            continue  # inside a value already read
        match = _ASSIGNMENT.match(text, start)
        found = _assigned(text, match, False) if match else None
        if found:
            done = found[2]
            yield found[0], found[1]
    commands = [pattern for needs, pattern in _COMMANDS if not present.isdisjoint(needs)]
    cookies = "cookie" in present
    if not (commands or cookies or any(mark in text for mark in _STRETCH_MARKS)):
        return
    for stretch in stretches():
        for pattern in (_FLAG, _SPACED):
            if (pattern is _FLAG and "--" not in stretch) or (
                pattern is _SPACED and '";' not in stretch and "';" not in stretch
            ):
                continue
            match = pattern.search(stretch)
            while match:
                found = _assigned(stretch, match, pattern is _FLAG)
                if found:  # on after the value: what it holds is not read again
                    yield found[0], found[1]
                match = pattern.search(stretch, found[2] if found else match.end("name"))
        if "==" in stretch or "!=" in stretch:
            for match in _COMPARED.finditer(stretch):
                yield from _named(match.group("name"), match.group(2))
        if "</" in stretch:
            for match in _TAG.finditer(stretch):
                yield from _named(match.group(1), match.group(2))
        if commands or cookies:
            yield from _commands(stretch, commands, cookies)


# What a text must hold for one of the forms read in the stretches around a name (a flag, a spaced
# ``name "value";``, a comparison, a tag).
_STRETCH_MARKS = ("--", '";', "';", "==", "!=", "</")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _name_starts(text: str, near: Iterable[int]) -> list[int]:
    """Where the names holding the words at ``near`` start, in order: the start of each word's run of
    name characters (after a Java ``-D``), and of the word before it across one space (``API key:``)."""
    starts: set[int] = set()
    # Where the next "=", ":" and line end are, each found again only once passed: every character
    # is read at most once by each, however many words there are.
    eq = colon = newline = -1
    for at in near:
        if eq < at:
            eq = _next(text, "=", at)
        if colon < at:
            colon = _next(text, ":", at)
        if newline < at:
            newline = _next(text, "\n", at)
        if min(eq, colon) >= newline:
            continue  # no sign on the word's line: nothing is assigned to a name there
        start = at
        while start > 0 and at - start < 80 and text[start - 1] in _NAME_CHARS:
            start -= 1
        while start < at and text[start] in "-.":
            start += 1
        if text.startswith(("D", "P"), start) and start >= 1 and text[start - 1] == "-":
            starts.add(start + 1)  # -Djavax.net.ssl.keyStorePassword=…
        starts.add(start)
        if start >= 2 and text[start - 1] in " \t" and text[start - 2] in _NAME_CHARS:
            before = start - 1
            while before > 0 and start - before < 80 and text[before - 1] in _NAME_CHARS:
                before -= 1
            starts.add(before)
    return sorted(starts)


def _next(text: str, char: str, at: int) -> int:
    found = text.find(char, at)
    return found if found >= 0 else len(text)


def paired_values(present: frozenset[str], stretches: Callable[[], list[str]]) -> Iterator[tuple[str, str]]:
    """(kind, value) of every secret whose name and value are apart (``stretches()`` span lines, made
    only when the text holds a pattern's literals: ``present``)."""
    pairs = [pattern for needs, pattern in _PAIRS if not present.isdisjoint(needs)]
    if not pairs:
        return
    for text in stretches():
        for pattern in pairs:
            for match in pattern.finditer(text):
                yield from _named(match.group(1), match.group(2), quoted=pattern not in _BARE)


def _named(name: str, raw: str, *, quoted: bool = True) -> Iterator[tuple[str, str]]:
    sort = secret_name(name)
    secret = sort and secret_value(raw, sort, name, quoted=quoted)
    if secret:
        yield secret_kind(name), secret


def _commands(text: str, commands: list[re.Pattern[str]], cookies: bool) -> Iterator[tuple[str, str]]:
    for pattern in commands:
        for match in pattern.finditer(text):
            secret = secret_value(match.group(pattern.groups), "machine" if pattern is _BEARER else "human")
            if secret:
                yield "keyword", secret
    if cookies:
        for line in _COOKIE.finditer(text):
            for pair in _COOKIE_PAIR.finditer(line.group(1)):
                secret = secret_value(pair.group(2), "machine", pair.group(1))
                if secret:
                    yield "keyword", secret


def _assigned(text: str, match: re.Match[str], flag: bool) -> tuple[str, str, int] | None:
    """The kind and secret given by ``match`` and where its value ends, or None."""
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
    start = match.start("name")
    opener = text[start - 1 : start] if start else ""
    if opener in ('"', "'") and not match.group("close") and found.group(0).startswith(opener):
        return None  # a label's own closing quote ("Password:"), not a value's opening one
    if bare and (sign in ("==", "===", "!=", "!==") or text[found.end() : found.end() + 1] in ("(", "[", ".")):
        return None  # compared with another name, or code: a call, an index, a member
    # An environment's ``NAME=value`` (a .env file, a shell): a bare word is its value.
    env = bare and name.isupper() and sign == "=" and not match.groupdict().get("close")
    secret = secret_value(raw, sort, name, quoted=not bare or (flag and sign == "="), env=env)
    return (secret_kind(name), secret, found.end()) if secret else None
