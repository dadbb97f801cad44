"""Secrets by their shape, the rules of this project's own: the keys of the providers agents use
(Anthropic, OpenAI, OpenRouter, Google, Hugging Face, Groq, npm, GitHub's fine-grained tokens,
Stripe's test keys, ctxweb's), whole private-key blocks, and JSON Web Tokens signature and all.
detect-secrets' rules (``compaction.secret_rules``) find the others.

A key may follow anything but a letter or an underscore of a longer word: ``=``, a quote, a dash, a
digit (``%22sk-…``), a letter of another script (``密钥是sk-ant-…``). Every rule is linear on any
text: a key is a bounded run after its prefix, and a match takes its whole run (``sk-sk-sk-…``)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator

from detect_secrets.plugins.jwt import JwtTokenDetector

from compaction.secret_names import secret_value

# A generic prefix (``sk-``, ``hf_``) must not be inside a longer word: not after a letter or "_", except
# the letter of an escape (``\nsk-…`` in escaped JSON), of a URL's ``%3D`` or a terminal colour's ``…32m``.
_EOL = r"(?:\r?\n|(?:\\r)?\\n)"  # a line's end, or its escape in JSON text
_BEFORE = r"(?:(?<![A-Za-z_])|(?<=\\[ntr])|(?<=%[0-9A-Fa-f]{2})|(?<=[0-9]m)|(?<=\\u[0-9a-fA-F]{4}))"
_AFTER = r"(?![A-Za-z0-9_-])"
_DIGIT = re.compile(r"[0-9]")


def _cases(value: str) -> bool:
    return value != value.lower() and value != value.upper()  # str methods: keys run to 400 characters


def _random(value: str) -> bool:
    """A key generator's output: both cases and a digit (a file name or a word of 40 letters is not)."""
    return _cases(value) and _DIGIT.search(value) is not None


def _digit(value: str) -> bool:
    return _DIGIT.search(value) is not None


def _password(value: str) -> bool:
    return secret_value(value, "human") is not None


def _slashed_password(value: str) -> bool:
    return ("@" in value or "/" in value) and _password(value)


def _pem_in_base64(value: str) -> bool:
    """A PEM private key in base64 (a kubeconfig's ``client-key-data``, a Kubernetes secret's ``tls.key``)."""
    try:
        head = base64.b64decode(value[:64] + "=" * (-len(value[:64]) % 4), validate=False)
    except (ValueError, binascii.Error):
        return False
    return b"PRIVATE KEY" in head


def _rule(kind: str, needs: tuple[str, ...], pattern: str, check: Callable[[str], bool] = bool) -> Rule:
    return kind, needs, re.compile(pattern), check


# kind, what its text must hold (lower-cased), its rule (where it has a group, the group is the secret),
# what a match must also be.
Rule = tuple[str, tuple[str, ...], re.Pattern[str], Callable[[str], bool]]
RULES: tuple[Rule, ...] = (
    _rule("anthropic-api-key", ("sk-ant-",), r"sk-ant-[a-z]{2,12}\d{2}-[A-Za-z0-9_-]{20,400}"),
    _rule("openrouter-api-key", ("sk-or-",), r"sk-or-v\d-[0-9a-f]{64}" + _AFTER),
    _rule("deepseek-api-key", ("sk-",), _BEFORE + r"sk-[0-9a-f]{32}" + _AFTER, _digit),
    # OpenAI's keys: sk-, sk-proj-, sk-svcacct-, sk-admin-, then 32+ characters of both cases and a digit.
    _rule("openai-api-key", ("sk-",), _BEFORE + r"sk-(?!ant-|or-v\d-)[A-Za-z0-9_-]{32,400}", lambda v: _random(v[3:])),
    _rule("ctxweb-api-key", ("ctx_",), _BEFORE + r"ctx_[A-Za-z0-9_-]{40,120}", lambda v: _cases(v[4:])),
    _rule("github-token", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{60,255}"),
    _rule("npm-token", ("npm_",), _BEFORE + r"npm_[A-Za-z0-9]{36}" + _AFTER, lambda v: _random(v[4:])),
    _rule("google-api-key", ("aiza",), r"AIza[0-9A-Za-z_-]{35}" + _AFTER),
    _rule("google-oauth-token", ("ya29.",), r"ya29\.[0-9A-Za-z_-]{20,2000}", _random),
    _rule("google-oauth-secret", ("gocspx-",), r"GOCSPX-[0-9A-Za-z_-]{28}" + _AFTER),
    _rule("huggingface-token", ("hf_",), _BEFORE + r"hf_[A-Za-z0-9]{34}" + _AFTER, lambda v: _cases(v[3:])),
    _rule("groq-api-key", ("gsk_",), r"gsk_[A-Za-z0-9]{52}" + _AFTER, lambda v: _random(v[4:])),
    _rule("stripe-access-key", ("k_live_", "k_test_"), r"[rs]k_(?:live|test)_[0-9A-Za-z]{24,247}",
          lambda v: _random(v[8:])),
    _rule("digitalocean-token", ("dop_v1_", "doo_v1_", "dor_v1_"), r"do[opr]_v1_[a-f0-9]{64}"),
    _rule("xai-api-key", ("xai-",), _BEFORE + r"xai-[A-Za-z0-9]{60,100}" + _AFTER, _random),
    _rule("perplexity-api-key", ("pplx-",), r"pplx-[A-Za-z0-9]{40,64}" + _AFTER, _digit),
    _rule("langsmith-api-key", ("lsv2_",), r"lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}"),
    _rule("tavily-api-key", ("tvly-",), r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}" + _AFTER),
    _rule("replicate-api-token", ("r8_",), _BEFORE + r"r8_[A-Za-z0-9]{37}" + _AFTER, _random),
    _rule("pinecone-api-key", ("pcsk_",), r"pcsk_[A-Za-z0-9_]{40,120}", _digit),
    _rule("slack-token", ("xapp-",), r"xapp-\d-[A-Za-z0-9-]{40,200}"),
    _rule("shopify-token", ("shpat_", "shpss_", "shpca_", "shppa_"), r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"),
    _rule("linear-api-key", ("lin_api_",), r"lin_api_[A-Za-z0-9]{40}" + _AFTER),
    _rule("doppler-token", ("dp.st.", "dp.ct.", "dp.sa."), r"dp\.(?:st|ct|sa)\.[A-Za-z0-9_.-]{40,100}"),
    _rule("figma-token", ("figd_",), r"figd_[A-Za-z0-9_-]{40,60}"),
    _rule("notion-token", ("ntn_", "secret_"), _BEFORE + r"(?:ntn_[A-Za-z0-9]{40,50}|secret_[A-Za-z0-9]{43})" + _AFTER,
          _random),
    _rule("databricks-token", ("dapi",), _BEFORE + r"dapi[a-f0-9]{32}(?:-\d)?" + _AFTER, _digit),
    _rule("postman-api-key", ("pmak-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    _rule("heroku-api-key", ("hrku-",), r"HRKU-[A-Za-z0-9_-]{20,100}"),
    _rule("atlassian-api-token", ("atatt",), r"ATATT[A-Za-z0-9_=-]{150,300}"),
    _rule("age-secret-key", ("age-secret-key-1",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    _rule("stripe-webhook-secret", ("whsec_",), r"whsec_[A-Za-z0-9+/=]{24,100}", _digit),
    _rule("supabase-token", ("sbp_",), r"sbp_[a-f0-9]{40}"),
    _rule("vault-token", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.[A-Za-z0-9_-]{20,200}", _random),
    _rule("grafana-token", ("glsa_",), r"glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}"),
    _rule("sentry-token", ("sntrys_", "sntryu_"), r"sntry[su]_[A-Za-z0-9+/=_-]{40,300}"),
    _rule("netlify-token", ("nfp_",), r"nfp_[A-Za-z0-9]{36,40}", _digit),
    _rule("neon-api-key", ("napi_",), _BEFORE + r"napi_[a-z0-9]{50,80}" + _AFTER, _digit),
    _rule("planetscale-token", ("pscale_tkn_", "pscale_pw_"), r"pscale_(?:tkn|pw)_[A-Za-z0-9_.-]{32,64}"),
    _rule("nvidia-api-key", ("nvapi-",), r"nvapi-[A-Za-z0-9_-]{60,70}"),
    # A token as a URL's user (``https://ghp_…@github.com``): random letters, not a name.
    _rule("basic-auth", ("://",), r"://([A-Za-z0-9_-]{20,200})@(?=[\w\[])", _random),
    # The password of a URL, whatever it holds (detect-secrets' rule leaves those with #, !, …).
    _rule("basic-auth", ("://",), r"://[^\s/@:\"'<>]{0,200}:([^\s@/\"'<>]{1,400})@(?=[\w\[])", _password),
    _rule("private-key", ("ls0tls1crudjt",), r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]{40,20000}", _pem_in_base64),
    # Its lines, broken by a newline or, in JSON text, its escape; the last not the next label's word.
    _rule("putty-private-key", ("private-lines:",),
          rf"Private-Lines:[ \t]*\d{{1,4}}{_EOL}((?:[A-Za-z0-9+/=]{{4,200}}{_EOL}){{0,199}}[A-Za-z0-9+/=]{{4,200}})"
          r"(?![A-Za-z0-9+/=:-])"),
    # An AWS secret key given bare beside its access key id (``AKIA… wJalr…``: a CSV, a console's copy).
    _rule("aws-secret-key", ("akia", "asia"),
          r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}[\s,;:|\"']{1,10}([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", _random),
    _rule("mailgun-api-key", ("key-",), _BEFORE + r"key-[0-9a-z]{32}" + _AFTER, _digit),
    _rule("square-token", ("sq0atp-",), _BEFORE + r"sq0atp-[0-9A-Za-z_-]{22,60}" + _AFTER),
    _rule("square-token", ("eaaa",), r"(?<![A-Za-z0-9+/=_-])EAAA[A-Za-z0-9_-]{56,100}" + _AFTER, _random),
    _rule("discord-webhook", ("/api/webhooks/",),
          r"discord(?:app)?\.com/api/webhooks/\d{5,30}/([A-Za-z0-9_-]{40,100})"),
    _rule("rubygems-api-key", ("rubygems_",), r"rubygems_[0-9a-f]{48}", _digit),
    _rule("sentry-dsn", ("sentry",), r"://([0-9a-f]{32})(?::[0-9a-f]{32})?@[\w.-]{0,100}sentry", _digit),
    # A URL's parameters that carry a credential (an API key, a session, an OAuth code, a signature).
    _rule("url-credential", ("key=", "code=", "sessionid=", "session_id=", "sid=", "signature=", "sig="),
          r"[?&;](?i:key|api_?key|code|session_?id|sessionid|sid|signature|sig|x-goog-signature|x-amz-signature)"
          r"=([A-Za-z0-9%._~+/=-]{16,4000})", _digit),
    # A token as a URL's user before a password everyone knows (``https://<token>:x-oauth-basic@…``).
    _rule("basic-auth", ("://",), r"://([A-Za-z0-9_-]{20,200}):(?:x-oauth-basic|x-access-token|)@(?=[\w\[])", _random),
    # A URL's password holding an unescaped ``@`` or ``/``: to the last ``@`` before the host.
    _rule("basic-auth", ("://",), r"://[^\s/@:\"'<>]{1,200}:([^\s\"'<>]{1,400})@(?=[\w\[])", _slashed_password),
)  # fmt: skip
KINDS = frozenset({kind for kind, *_ in RULES} | {"private-key", "jwt"})
GATES: dict[str, tuple[str, ...]] = {}
for _kind, _needs, *_ in RULES:
    GATES[_kind] = GATES.get(_kind, ()) + _needs
GATES["private-key"] = ("-----begin", *GATES["private-key"])
GATES["jwt"] = ("eyj",)
# How far past its prefix a key may run.
REACH_AFTER = {"openai-api-key": 420, "anthropic-api-key": 420, "github-token": 270, "google-oauth-token": 2_020,
               "stripe-access-key": 260, "atlassian-api-token": 310, "basic-auth": 1_000,
               "private-key": 20_020, "putty-private-key": 20_020, "url-credential": 4_100}  # fmt: skip


def own(kind: str, stretch: str) -> Iterator[str]:
    """The keys of ``kind`` in ``stretch``."""
    for each, _, pattern, check in RULES:
        if each == kind:
            for match in pattern.finditer(stretch):
                value = match.group(1) if pattern.groups else match.group(0)
                if check(value):
                    yield value


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
        first, *rest = text[at:after].split(joint)
        yield first.strip("\n")
        for piece in rest:
            if _KEY_PIECE.search(piece) or _KEY_TAIL.fullmatch(piece.strip()):
                yield piece.strip("\n")


# A string after the header's own that is part of the key: a footer, or a run of base64. Anything
# else between (a block's "type": "text", a tool's name) is the message's structure, not the key:
# replacing it would replace it everywhere in the message.
_KEY_PIECE = re.compile(r"-----END |[A-Za-z0-9+/=]{16}")
_KEY_TAIL = re.compile(r"(?=.*[0-9+/=])[A-Za-z0-9+/=]{12,}")  # a body's last line


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
