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

from compaction import secret_commands, secret_names
from compaction.secret_names import GATE_WORDS, secret_kind, secret_name, secret_value

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
# A name at a line's start (or a JSON string's), then its value after a column's gap or alone on the
# next line. Tried only at the starts of the lines that hold a name's word (``paired_values``).
_COLUMNS = re.compile(
    rf"(?m)[ \t]*(?!pass\b)({_NAME}(?:[ \t]{_NAME})?)"
    rf"(?:(?:[ \t]{{2,}}|\t)([^\s]{{6,1000}})|[ \t]*:?[ \t]*\r?\n[ \t]*([\w+/=.~!#$%^&*-]{{8,1000}}))[ \t]*\r?$"
)
_SECRET_WORD = r"(?:password|passphrase|passwd|passcode|secret|token|api[ _-]?key|access[ _-]?key|secret[ _-]?key)"
# A sentence naming a secret, ended by ":", and the value alone a line or three below it ("Please use the
# following password to proceed:", "Your API token is:").
_ANNOUNCED = re.compile(
    rf"(?im)\b({_SECRET_WORD})\b[^\n:]{{0,120}}:[ \t]*\r?\n(?:[ \t]*\r?\n){{0,2}}"
    r"[ \t]*([\w+/=.~!#$%^&*-]{8,1000})[ \t]*\r?$"
)
_PROSE = re.compile(
    rf"(?i)\b({_SECRET_WORD})\b(?:'s|[^\n.:=]{{0,60}}?\b(?:is|was|set to)\b:?|[^\n.:=`]{{0,30}}?:|[ \t]+set[ \t]+to)"
    r"[ \t]+[\"'`]?([\w+/=.~!#$%^&*-]{6,1000})"
)
_USING = re.compile(r"\b[Uu]sing[ \t]+([Pp]assword|[Tt]oken)[ \t]+[\"'`]?([\w+/=.~!#$%^&*-]{6,1000})")
# Where the patterns that start at a secret's word are tried (found in the lower-cased text: a
# case-insensitive pattern tried at every character is several times slower).
_AT_WORD = re.compile(r"pass|secret|token|(?:api|access)[ _-]?key")
_JSON_PAIRS = re.compile(
    rf"{_Q}(?:(?:name|key|label|Name|Key|Label){_Q}[ \t]*:[ \t]*{_Q}({_NAME}){_Q}[ \t]*,[ \t]*{_Q}(?:value|Value)"
    rf"|Name{_Q}[ \t]*:[ \t]*{_Q}/?(?:[\w.-]{{1,80}}/){{0,8}}({_NAME}){_Q}[^{{}}]{{0,300}}?{_Q}Value"
    rf"|({_NAME}){_Q}[ \t]*:[ \t]*\{{[^{{}}]{{0,300}}?{_Q}value)"
    rf"{_Q}[ \t]*:[ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}"
)
_SETTER = re.compile(rf"(?:\.|\b)set({_NAME})\([ \t]*{_Q}([^\"'\n]{{1,1000}}){_Q}[ \t]*\)")
_BLOCK_SCALAR = re.compile(rf"(?<![\w.-])({_NAME}):[ \t]*[|>][-+]?[ \t]*\r?\n[ \t]+([^\s#]\S{{5,1000}})")
# What a text must hold for a pattern that starts at any name character to be tried: each of these
# starts at a literal, which the regular expression engine looks for as fast as a string search.
_GUARDS = {_SETTER: re.compile(r"set[A-Za-z_][\w.-]{0,80}\("), _BLOCK_SCALAR: re.compile(r":[ \t]*[|>]")}
# A name and its value, apart: (what the lower-cased text must hold, the pattern: name, value).
_PAIRS: tuple[tuple[Collection[str], re.Pattern[str]], ...] = (
    # JSON's pairs, in one pattern (one scan of the text's quotes): ``{"name": "DB_PASSWORD", "value": "…"}``
    # (``key``, ``label``: 1Password's items); an AWS parameter or secret read back (``{"Name":
    # "/prod/db/password", …, "Value": "…"}``); an object under a secret's name holding its value
    # (``terraform output -json``'s ``"db_password": {"sensitive": true, …, "value": "…"}``).
    (('"value', "'value"), _JSON_PAIRS),  # each of its forms ends in a quoted "value"
    (
        ("value:",),
        re.compile(
            rf"\b(?:name|key):[ \t]*{_Q}?({_NAME}){_Q}?[ \t]*\r?\n[ \t]*(?:-[ \t]*)?value:[ \t]*{_Q}?"
            rf"([^\s\"']{{1,1000}})"
        ),
    ),
    (("value=",), re.compile(rf"\bkey={_Q}({_NAME}){_Q}[ \t]+value={_Q}([^\"'\n]{{1,1000}}){_Q}")),
    # An HTML form's field: ``<input name="password" value="…">``.
    (("value=",), re.compile(rf"\bname={_Q}({_NAME}){_Q}[^<>\n]{{0,200}}?\bvalue={_Q}([^\"'\n]{{1,1000}}){_Q}")),
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
    (("set",), _SETTER),
    # YAML: a block scalar's value on the line after its name (``password: |``), to its first space; a
    # bare ``name:`` at a line's end opens a block in code (``if reset_token:``), so it is not read.
    (
        ("variable",),
        re.compile(
            rf"\bvariable[ \t]+{_Q}({_NAME}){_Q}[ \t]*\{{[^}}]{{0,300}}?\bdefault[ \t]*=[ \t]*{_Q}"
            rf"([^\"'\n]{{1,1000}}){_Q}"
        ),
    ),
    ((":",), _BLOCK_SCALAR),
    (("#define",), re.compile(rf"#define[ \t]+({_NAME})[ \t]+{_Q}([^\"'\n]{{1,1000}}){_Q}")),
    (("env ", "arg "), re.compile(rf"\b(?:ENV|ARG)[ \t]+({_NAME})[ \t]+([^\s=]{{1,1000}})")),
    (
        ("|", "│", "║", "┃"),
        re.compile(rf"[|│║┃][ \t]*`?({_NAME})`?[ \t]*[|│║┃][ \t]*`?([^`|│║┃\s]{{1,1000}})`?[ \t]*[|│║┃]"),
    ),
    (("  ", "\t", "\n"), _COLUMNS),
    ((":\n", ": \n", ":\r\n", ":\t\n"), _ANNOUNCED),
    ((":", " is", " was", " to "), _PROSE),
    (("using ",), _USING),
    # A netrc's entry across lines: ``machine …`` or ``default``, a login, then the password.
    (
        ("machine", "default"),
        re.compile(
            r"\b(?:machine[ \t]+\S{1,200}(?:\s+(?:login|account|port)\s+\S{1,200}){0,3}"
            r"|default(?:\s+(?:login|account|port)\s+\S{1,200}){1,3})\s+(password)\s+(\S{1,1000})"
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
_BARE = frozenset({_COLUMNS, _ANNOUNCED, _PROSE, _USING})
_STARTS_AT_WORD = frozenset({_ANNOUNCED, _PROSE})
_NAME_HEAD = rf"[ \t]*(?:[\w.-]{{1,80}}[ \t])?[\w.-]{{0,80}}?(?:{'|'.join(GATE_WORDS)})"  # lower-cased
_NAME_FIRST = re.compile(_NAME_HEAD)
_NAME_AFTER_LINE = re.compile("\n" + _NAME_HEAD)
_NAME_AFTER_QUOTE = re.compile("[\"']" + _NAME_HEAD)  # a value read without quotes: a word is not one
# Every literal a pattern needs (``secret_rules`` finds which a text holds in its one pass over it), and
# those in nearly every text (JSON's ":"), which it tests for on their own.
LITERALS = tuple(sorted({n for needs, _ in _PAIRS for n in needs} | secret_commands.LITERALS))
COMMON_LITERALS = (":", "--", "|", "set", "\n", "  ", " is", " was", " to ", "using ", ":\n", ": \n")
_PAIRS = tuple((frozenset(needs), p) for needs, p in _PAIRS)


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
    commands = secret_commands.present(present)
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
            yield from secret_commands.found(stretch, commands, cookies)


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
        low = secret_names.lower_in_place(text)  # positions in it are positions in the text
        words: list[int] | None = None
        for pattern in pairs:
            matches: Iterable[re.Match[str] | None]
            if pattern in _STARTS_AT_WORD:
                if words is None:
                    words = [m.start() for m in _AT_WORD.finditer(low)]
                matches = (pattern.match(text, at) for at in words)
            elif pattern is _COLUMNS:
                matches = (pattern.match(text, at) for at in _line_starts(text, low))
            elif (guard := _GUARDS.get(pattern)) is None or guard.search(text):
                matches = pattern.finditer(text)
            else:
                continue
            for match in matches:
                if match is not None:
                    name, value = (g for g in match.groups() if g is not None)  # the alternative that matched
                    yield from _named(name, value, quoted=pattern not in _BARE)


def _line_starts(text: str, low: str) -> list[int]:
    """The starts of the lines (and of the quoted strings) whose first words hold a name's word: each
    found by a pattern that starts at a line end or a quote, which the regular expression engine
    looks for as fast as a string search."""
    starts = [0] if _NAME_FIRST.match(low) else []
    starts += [found.start() + 1 for found in _NAME_AFTER_LINE.finditer(low)]
    starts += [found.start() + 1 for found in _NAME_AFTER_QUOTE.finditer(low)]
    return sorted(starts)


def _named(name: str, raw: str, *, quoted: bool = True) -> Iterator[tuple[str, str]]:
    sort = secret_name(name)
    secret = sort and secret_value(raw, sort, name, quoted=quoted)
    if secret:
        yield secret_kind(name), secret


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
