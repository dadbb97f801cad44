"""Where commands take a password or token (``compaction.secret_assignments`` reads the values given
to a secret's name): ``curl -u user:…``, ``docker login -p …``, ``mysql -p…``, ``IDENTIFIED BY '…'``,
``echo … | sudo -S``, ``keytool -storepass …``, a ``Cookie:`` header's values, ``Bearer …`` anywhere.
Each pattern is tried only where the text holds its literals, in the stretches around them; each reads
a bounded run: linear on any text."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from compaction.secret_names import secret_value

# What a text must hold (lower-cased) for a command's form to be looked for: the other forms name a
# secret (``getenv("DB_PASSWORD", …)``, ``gh secret set``), whose words ``secret_names.GATE_WORDS`` has.
COMMAND_WORDS = (
    "curl", "login", "sshpass", "mysql", "identified by", "redis-cli", "mongo", "cookie", "bearer", "sig=",
    "sqlcmd", "rabbitmqctl", "htpasswd", "http -a", "http --auth", "https -a", "xh -a", "sqlplus", "expdp",
    "impdp", "ssh-keygen", "vault login", "_authtoken", "\ttrue\t", "\tfalse\t", "set password", "auth=(",
    "auth = (", "basicauth(", "digestauth(", "auth ", "sudo -s", "chpasswd", "openssl", "zip -p", "7z ", "ldap",
    "smbclient", "keytool", "mc alias set", "mc config host add", "lftp", "net use", "mysqladmin",
    "convertto-securestring", "secret put", "env add", "secrets set", "<<<", "secretstring",
    "密码", "пароль", "mot de passe", "contraseña", "senha", "wachtwoord", "パスワード", "비밀번호",
)  # fmt: skip

# Commands' own places for a password: (what the lower-cased text must hold, the pattern: value).
_LISTED: tuple[tuple[Collection[str], re.Pattern[str]], ...] = (
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
    (
        ("identified",),
        re.compile(r"\bidentified[ \t]+(?:with[ \t]+\S{1,100}[ \t]+)?by[ \t]+[\"']([^\"'\n]{1,1000})[\"']", re.I),
    ),
    # Unquoted (Oracle's ``IDENTIFIED BY secret``): only as SQL writes it, in capitals.
    (
        ("identified",),
        re.compile(r"\bIDENTIFIED[ \t]+(?:WITH[ \t]+\S{1,100}[ \t]+)?BY[ \t]+([\w!#$%^&*+=/.~-]{6,1000})"),
    ),
    (
        ("set password",),
        re.compile(r"\bset[ \t]+password\b[^\n]{0,200}?=[ \t]*(?:password\()?[\"']([^\"'\n]{1,1000})[\"']", re.I),
    ),
    (
        ("auth=(", "auth = (", "basicauth(", "digestauth("),
        re.compile(
            r"(?:\bauth[ \t]*=[ \t]*\(|BasicAuth\(|DigestAuth\()[ \t]*[\"']"
            r"[^\"'\n]{0,200}[\"'][ \t]*,[ \t]*[\"']([^\"'\n]{1,1000})[\"']"
        ),
    ),
    (("auth ",), re.compile(r"(?m)(?:^|>)[ \t]*AUTH[ \t]+(?:\S{1,100}[ \t]+)?([^\s]{6,1000})[ \t]*$")),
    (("sudo -s",), re.compile(r"\becho[ \t]+[\"']?([^\s\"'|]{1,1000})[\"']?[ \t]*\|[ \t]*sudo[ \t]+-S\b")),
    (
        ("chpasswd",),
        re.compile(
            r"\becho[ \t]+[\"']?[^\s:\"']{1,100}:([^\s\"'|]{1,1000})[\"']?[ \t]*\|[ \t]*(?:sudo[ \t]+)?chpasswd"
        ),
    ),
    (
        ("openssl",),
        re.compile(
            r"\bopenssl\b[^\n]{0,300}?[ \t](?:-k|-pass[ \t]+pass:|-passin["
            r" \t]+pass:|-passout[ \t]+pass:)[ \t]*[\"']?([^\s\"']{1,1000})"
        ),
    ),
    (
        ("zip -p", "7z "),
        re.compile(r"\b(?:zip|7z|7za)\b[^\n]{0,300}?[ \t](?:-P[ \t]+|-p)[\"']?([^\s\"'-][^\s\"']{0,1000})"),
    ),
    (("ldap",), re.compile(r"\bldap\w{0,20}\b[^\n]{0,300}?[ \t]-w[ \t]+[\"']?([^\s\"']{1,1000})")),
    (("smbclient",), re.compile(r"\bsmbclient\b[^\n]{0,300}?[ \t]-U[ \t]+[\"']?[^\s%\"']{1,200}%([^\s\"']{1,1000})")),
    (
        ("keytool",),
        re.compile(
            r"\bkeytool\b[^\n]{0,300}?[ \t]-(?:storepass|keypass|src"
            r"storepass|deststorepass)[ \t]+[\"']?([^\s\"']{1,1000})"
        ),
    ),
    (
        ("mc alias set", "mc config host add"),
        re.compile(
            r"\bmc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)[ \t]+\S{1"
            r",100}[ \t]+\S{1,500}[ \t]+\S{1,200}[ \t]+[\"']?([^\s\"']{1,1000})"
        ),
    ),
    (("lftp",), re.compile(r"\blftp\b[^\n]{0,300}?[ \t]-u[ \t]+[\"']?[^\s,\"']{1,200},([^\s\"']{1,1000})")),
    (("net use",), re.compile(r"\bnet[ \t]+use\b[^\n]{0,300}?/user:\S{1,200}[ \t]+([^\s/][^\s]{0,1000})", re.I)),
    (("mysqladmin",), re.compile(r"\bmysqladmin\b[^\n]{0,300}?[ \t]password[ \t]+[\"']?([^\s\"']{1,1000})")),
    (
        ("convertto-securestring",),
        re.compile(r"ConvertTo-SecureString[ \t]+(?:-String[ \t]+)?[\"']([^\"'\n]{1,1000})[\"']", re.I),
    ),
    (
        ("secret put", "env add", "secrets set"),
        re.compile(
            r"\becho[ \t]+[\"']?([^\s\"'|]{6,1000})[\"']?[ \t]*\|[^\n]{0"
            r",100}?\b(?:secret[ \t]+put|env[ \t]+add|secrets[ \t]+set)\b"
        ),
    ),
    (
        ("<<<",),
        re.compile(
            r"\b(?:secret[ \t]+put|env[ \t]+add|secrets[ \t]+set)\b[^\n]{0,200}?<<<[ \t]*[\"']?([^\s\"']{6,1000})"
        ),
    ),
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
            r"(?m)^(?:#HttpOnly_)?\S{1,300}\t(?:TRUE|FALSE)\t\S{1,1000}"
            r"\t(?:TRUE|FALSE)\t\d{1,20}\t\S{1,200}\t([^\s]{8,4000})[ \t]*\r?$"
        ),
    ),
    (("bearer",), re.compile(r"(?<![\w-])Bearer[ \t]+([A-Za-z0-9._~+/=-]{16,4000})")),
)
_BEARER = _LISTED[-1][1]
_COMMANDS = tuple((frozenset(needs), pattern) for needs, pattern in _LISTED)
_BY_LITERAL: dict[str, list[int]] = {}
for _n, (_needs, _) in enumerate(_COMMANDS):
    for _need in _needs:
        _BY_LITERAL.setdefault(_need, []).append(_n)
LITERALS = frozenset({need for needs, _ in _LISTED for need in needs} | {"cookie"})
_COOKIE = re.compile(r"\bcookie:[ \t]*([^\n]{1,4000})", re.I)
_COOKIE_PAIR = re.compile(r"([\w.-]{1,100})=([^;\s]{1,4000})")


def present(literals: frozenset[str]) -> list[re.Pattern[str]]:
    """The command patterns whose literals the text holds, in their order."""
    found = {n for literal in literals for n in _BY_LITERAL.get(literal, ())}
    return [_COMMANDS[n][1] for n in sorted(found)]


def found(text: str, commands: list[re.Pattern[str]], cookies: bool) -> Iterator[tuple[str, str]]:
    for pattern in commands:
        for match in pattern.finditer(text):
            value = next(g for g in reversed(match.groups()) if g is not None)  # the alternative that matched
            secret = secret_value(value, "machine" if pattern is _BEARER else "human")
            if secret:
                yield "keyword", secret
    if cookies:
        for line in _COOKIE.finditer(text):
            for pair in _COOKIE_PAIR.finditer(line.group(1)):
                secret = secret_value(pair.group(2), "machine", pair.group(1))
                if secret:
                    yield "keyword", secret
