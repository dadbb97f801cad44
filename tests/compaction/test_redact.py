"""The redaction engine (``compaction.redact``): every generated secret of every kind is gone from
what it returns, wherever it sits (prose, code, escaped JSON, tool inputs and results); the same
secret gets the same marker; redacting twice changes nothing; and on the shared real transcripts it
changes almost no message that holds no secret."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.redact import (
    HIGH_ENTROPY,
    KEYWORD,
    MARKER,
    Rules,
    compile_patterns,
    find_secrets,
    kinds,
    redact,
)
from compaction.secret_assignments import LITERALS
from compaction.transcripts.formats import read_transcript
from tests.secret_values import BY_CONTEXT, PEM_LINES, SECRETS, jwt_sized, leaked

RULES = Rules(key=b"test-key")
SURROUNDINGS = st.sampled_from(
    [
        "{}",
        "Here is the config:\n{}\nthat should work.",
        "$ cat .env\n{}\n$ ",
        "```\n{}\n```",
    ]
)


def embed(where: str, text: str) -> str:
    return where.replace("{}", text)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(SECRETS)), data=st.data(), where=SURROUNDINGS)
def test_every_kind_of_secret_is_replaced_by_its_marker(kind, data, where):
    secret, text = data.draw(SECRETS[kind])
    done = redact(embed(where, text), RULES)
    assert not leaked(secret, done.value)
    assert done.found[kind] >= 1, (kind, done.found, done.value)
    assert f"[secret:{kind}:" in done.value


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(SECRETS)), data=st.data())
def test_secrets_in_content_blocks_tool_inputs_and_escaped_json_are_replaced(kind, data):
    secret, text = data.draw(SECRETS[kind])
    content = [
        {"type": "text", "text": f"I found {text} in the logs"},
        {"type": "tool_use", "id": "toolu_01", "name": "Bash",
         "input": {"command": f"echo '{text}'", "token": secret, "seen": {text: 1}}},
        {"type": "tool_result", "tool_use_id": "toolu_01",
         "content": [{"type": "text", "text": json.dumps({"out": text})}]},
    ]  # fmt: skip
    done = redact(content, RULES)
    assert not leaked(secret, json.dumps(done.value))
    assert done.value[1]["id"] == "toolu_01" and done.value[2]["tool_use_id"] == "toolu_01"  # ids untouched


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(SECRETS)), data=st.data(), where=SURROUNDINGS)
def test_redaction_is_deterministic_and_redacting_twice_changes_nothing(kind, data, where):
    _, text = data.draw(SECRETS[kind])
    once = redact(embed(where, text), RULES)
    assert redact(embed(where, text), RULES).value == once.value
    again = redact(once.value, RULES)
    assert again.value == once.value and not again.found
    # The same secret elsewhere gets the same marker; another key, another fingerprint (mostly).
    markers = set(MARKER.findall(once.value))
    assert markers <= set(MARKER.findall(redact(f"again:\n{text}", RULES).value))


def test_the_same_secret_has_the_same_marker_in_every_message():
    key = "ghp_" + "a1B2c3D4e5F6" * 3
    first = redact(f"export GITHUB_TOKEN={key}", RULES).value
    second = redact([{"type": "text", "text": f"token is {key}."}], RULES).value[0]["text"]
    (marker,) = MARKER.findall(first)
    assert marker in second and marker.startswith("[secret:github-token:")


def test_a_disabled_kind_is_left_and_a_projects_own_pattern_is_found():
    text = "AKIAABCDEFGHIJKLMNOP and ticket INTERNAL-7731-XK"
    assert redact(text, Rules(key=b"k", disabled=frozenset({"aws-access-key"}))).value.startswith("AKIA")
    own = Rules(key=b"k", patterns=compile_patterns([r"INTERNAL-\d+-[A-Z]{2}"]))
    done = redact(text, own)
    assert "INTERNAL-7731-XK" not in done.value and done.found["custom"] == 1
    assert set(kinds()) >= {"aws-access-key", "github-token", "jwt", KEYWORD, HIGH_ENTROPY, "anthropic-api-key"}


@pytest.mark.parametrize("value", ["QiA0BoPsKoUdr5fylxz7", "XyAbKoPs9dTeWq"])
def test_a_key_that_reads_like_a_class_name_by_chance_is_still_a_key(value):
    """A class name (``SyncX509WorkloadIdentityAuth``) given bare is code; random letters that fall
    into capitalised parts of one or two characters are a key (found by hypothesis)."""
    done = redact(f"authToken={value}", RULES)
    assert value not in done.value and done.found[KEYWORD] == 1


@pytest.mark.parametrize(
    "text",
    [
        "commit e83c5163316f89bfbde7d9ab23ca2e25604af290 fixed it",
        '{"sha": "e83c5163316f89bfbde7d9ab23ca2e25604af290", "id": "3f2b1c9e-8d7a-4e6f-9b0c-1a2d3e4f5a6b"}',
        '"integrity": "sha512-Q9X8Yb2k0lP1sD3fG4hJ5kL6mN7oP8qR9sT0uV1wX2yZ3aB4cD5eF6gH7iJ8kL9mN0oP1qR2sT3uV4w=="',
        '{"type": "thinking", "thinking": "hm", "signature": "EsQCCkYICxgCKkCiHauF2Q62eGbSzb4GxFiNFSp0SWTm0U5q"}',
        'api_key = os.environ["ANTHROPIC_API_KEY"]',
        'password: "${DB_PASSWORD}"',
        '"tool_use_id": "toolu_01Cz2Pnv7qNcnK1ZiocxWhQX", "requestId": "req_011CY1DbbVb9F8NCfb4b1CiC"',
        # Names of secrets given references, types and placeholders, not values.
        'password = request.POST["password"]',
        "password=password, token=api_token, secret=get_secret(), api_key=settings.API_KEY",
        "def login(token: str, credentials: AccessTokenProvider | None = None) -> None:",
        "FallbackCreditToken: TypeAlias = Union[str, BetaFallbackCreditTokenParam]",
        "PWD=/home/user/project\nOLDPWD=/home/user",
        '"password": "passwordInput", "token_type": "bearer", "max_tokens": 4096',
        "echo $TOKEN | docker login --password-stdin",
        "headers = {'Authorization': v4auth_header}",
        'password: ${{ secrets.DB_PASSWORD }}\nSECRET_KEY_INSECURE_PREFIX = "django-insecure-"',
        '__all__ = ["BetaManagedAgentsThreadLimitWorkflowRunErrorObject"]',
        '{"token": " world", "logprob": -0.12}, {"token": "ization", "logprob": -1.5}',
        "self._noAuthorization = !req.headers.authorization",
        "the --password flag suffers from the same problem; set password: <your password>",
        "key = X25519PrivateKey.generate()\nprivate_key: X25519PrivateKey = key\ntoken: OAuth2Token;",
        "token = SyncX509WorkloadIdentityAuth\nauth_token = _BedrockSigV4Auth",
        "Fix the login form password validation; add validation tests",
        '{"reset_password": "Reset password", "new_password": "Neues Passwort", "allPass": "overEvery"}',
        'model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "password": "boolean?", AUTH=internal',
        '_.auth=_.password?_.username+":"+_.password:null; "Password:"),o?Re.createElement(',
        "DB_PASSWORD=postgres\nimage: postgres:16\npsql -U postgres",
        "DATABASE_URL=postgresql://user:password@localhost/db\nSet the password in .env",
        '{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion"}',
        "GOOGLE_APPLICATION_CREDENTIALS=service-account.json\nprivate_key: certs/server.key",
        '{"password": "must be at least 8 characters", "pw2": "Too short", "label": "Kennwort"}',
        "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256",
        'assert line.thread_key == "toolu_123"\nif reset_token:\n    Token.objects.filter(user=user).delete()',
    ],
)
def test_what_only_looks_like_a_secret_stays(text):
    assert redact(text, RULES).value == text


@settings(max_examples=40, deadline=None)
@given(pem=PEM_LINES, data=st.data())
def test_a_private_key_split_into_strings_of_its_own_is_replaced_line_by_line(pem, data):
    line, lines = pem
    done = redact({"type": "text", "lines": lines, "after": "prose that stays"}, RULES)
    assert not leaked(line, json.dumps(done.value))
    assert done.value["after"] == "prose that stays" and done.found["private-key"] >= len(lines) - 2


@settings(max_examples=40, deadline=None)
@given(pem=PEM_LINES, tool=st.sampled_from(["Bash", "Read", "NotebookEdit", "mcp__ctx__recall"]))
def test_a_private_key_split_over_content_blocks_leaves_the_blocks_structure(pem, tool):
    """Each of a key's lines a block of its own, a tool call among them: the key's strings are
    replaced, not the blocks' types or the tool's name between them (replaced everywhere they are)."""
    line, lines = pem
    blocks = [{"type": "text", "text": each} for each in lines]
    blocks.insert(1, {"type": "tool_use", "id": "toolu_1", "name": tool, "input": {"command": "cat id_rsa"}})
    done = redact(blocks, RULES)
    assert not leaked(line, json.dumps(done.value))
    assert [b["type"] for b in done.value] == [b["type"] for b in blocks]
    assert done.value[1] == blocks[1]


@settings(max_examples=60, deadline=None)
@given(secret=SECRETS[KEYWORD].map(lambda p: p[0]), name=st.sampled_from(["DB_PASSWORD", "API_TOKEN", "client_secret"]))
def test_a_value_is_a_secret_by_the_name_an_object_gives_it(secret, name):
    """Under a secret's name, in a list or object under one, in a name/value pair (a Kubernetes
    environment), a password of several words, an Authorization header's credentials."""
    value = {
        "headers": {"Authorization": f"Bearer {secret}"},
        "secrets": [secret + "a", {"nested": secret + "b"}],
        "env": [{"name": name, "value": secret + "c"}],
        "passphrase": f"correct horse battery {secret}",
        "kept": ["plain words", "2026-11-27", 42],
    }
    done = redact(value, RULES)
    assert not leaked(secret, json.dumps(done.value))
    assert done.value["kept"] == value["kept"] and done.value["headers"]["Authorization"].startswith("Bearer [secret:")


def test_opaque_fields_a_provider_checks_are_never_rewritten():
    blocks = [
        {"type": "thinking", "thinking": "the key is ghp_" + "a1B2c3D4e5F6" * 3, "signature": "x" * 10 + "=="},
        {"type": "redacted_thinking", "data": "EsQCCkYICxgCKkCiHauF2Q62eGbSzb4GxFiNFSp0SWTm0U5qENU+mfupKqz185C7"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" + "A" * 60}},
    ]
    done = redact(blocks, RULES).value
    assert "ghp_" not in done[0]["thinking"] and done[0]["signature"] == blocks[0]["signature"]
    assert done[1:] == blocks[1:]


def _messages(shared: Path) -> list[Any]:
    found = []
    for path in sorted(shared.rglob("*")):
        if path.suffix not in (".jsonl", ".json", ".traj"):
            continue
        fmt = "claude-code" if "claude_code" in path.parts else "openai"
        for conversation in read_transcript(path.read_bytes(), fmt).conversations:
            found.extend(conversation.messages)
    return found


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    return []


# What a secret sits after: an assignment to a secret's name, a CSRF token's meta tag.
_SECRET_SLOT = re.compile(r"(secret|password|passwd|token|key|csrf)[\w\\\"'-]*(\W{0,4}content=)?\W{0,12}$", re.I)


def test_on_the_shared_transcripts_fewer_than_one_in_a_thousand_messages_change_without_a_secret(shared_data):
    """Every value the rules find in the shared transcripts, listed in the failure; a message counts
    against the rule when a value it would lose does not sit in a secret's slot (``secret_key_base:
    "…"``, ``<meta name="csrf-token" content="…">``): git SHAs, UUIDs, ids, signatures stay."""
    messages = _messages(shared_data)
    assert len(messages) > 1_000
    wrong, seen = 0, []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else message.content
        values = [
            (text, value, kind) for text in _strings(content) for value, kind in find_secrets(text, RULES).items()
        ]
        seen.extend((kind, value[:24]) for _, value, kind in values)
        in_slots = [bool(_SECRET_SLOT.search(text[: text.find(value)][-80:])) for text, value, _ in values]
        wrong += not all(in_slots)
        assert redact(content, RULES).found.total() == 0 or values  # what redact changes, find_secrets names
    assert wrong * 1_000 < len(messages), (wrong, len(messages), seen)


@pytest.mark.parametrize("value", [{"type": ["x"]}, {"type": {"a": 1}}, {"type": None, "x": [1, 2.5, True]}, {1: "a"}])
def test_any_json_value_reads_back_as_it_was_when_it_holds_no_secret(value):
    assert redact(value, RULES).value == value


def test_on_the_installed_packages_code_fewer_than_one_in_a_thousand_pieces_change():
    """Code is where names of secrets are given references, types and calls, not values: Django's,
    DRF's and the SDKs' own source, read in pieces of a message's size, keeps all but a handful of
    pieces as it is (what is found is listed in the failure: documentation examples of a token)."""
    import anthropic
    import django
    import openai
    import rest_framework

    pieces, found = 0, []
    for package in (django, rest_framework, anthropic, openai):
        for path in sorted(Path(package.__path__[0]).rglob("*.py")):
            text = path.read_text(errors="replace")
            for start in range(0, len(text), 8_000):
                pieces += 1
                if values := find_secrets(text[start : start + 8_000], RULES):
                    found.append((path.name, sorted(values)))
    assert pieces > 5_000
    assert len(found) * 1_000 < pieces, found


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(set(SECRETS) - BY_CONTEXT)), data=st.data())
def test_a_key_after_an_escape_of_another_json_library_is_not_left(kind, data):
    """Gson writes "=" as ``\\u003d``: a key glued to it is still replaced (by its kind, or whole)."""
    secret, _ = data.draw(SECRETS[kind])
    assert not leaked(secret, redact('{"url": "https://x.example/?k\\u003d' + secret + '"}', RULES).value)


def test_unescaping_quotes_makes_none_of_the_literals_the_name_forms_need():
    # The engine reads which literals a text holds once and uses the set for the text with its quotes
    # unescaped too: true only while no literal holds a backslash, or a quote but as its first character
    # (unescaping drops the backslash before a quote: what follows the quote was there already).
    assert LITERALS and not [literal for literal in LITERALS if '"' in literal[1:] or "\\" in literal]


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet="ab01-=. ", min_size=16, max_size=90),
    spans=st.lists(st.tuples(st.integers(0, 74), st.integers(16, 40)), min_size=1, max_size=4),
)
def test_values_that_overlap_are_replaced_as_one_stretch_with_nothing_of_them_left(text, spans):
    # Two rules finding values that overlap (a name's value running into a token beside it): every
    # character of every occurrence of either goes, the rest of the text stays as it was.
    values = sorted({text[at : at + size] for at, size in spans if at + size <= len(text)})
    rules = Rules(key=b"k", disabled=frozenset(kinds()), patterns=compile_patterns(map(re.escape, values)))
    starts = [(at, len(value)) for value in values for at in range(len(text)) if text.startswith(value, at)]
    covered = {i for at, size in starts for i in range(at, at + size)}
    done = redact(text, rules).value
    assert MARKER.sub("", done) == "".join(char for i, char in enumerate(text) if i not in covered)
    assert (MARKER.search(done) is not None) == bool(covered)


@pytest.mark.parametrize("before", ["token key-", "token Cookie: session=", "API key-"])
@pytest.mark.parametrize("scope", [0, 1_000, 9_000])
def test_a_name_s_value_that_runs_into_a_jwt_leaves_no_piece_of_it(before, scope):
    token = jwt_sized((7, scope))
    done = redact(f"{before}{token} done", RULES).value
    assert not leaked(token, done, 16) and done.endswith(" done")


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(SECRETS)), data=st.data(), end=st.sampled_from(["", "\n", "\t", " "]))
def test_a_json_document_holding_a_secret_stays_json(kind, data, end):
    # A tool's output that is JSON text (its strings escaped: ``{"output": "password\\t…\\n"}``) keeps its
    # quotes and braces: the secret goes, the document still parses, with the marker in its place.
    secret, text = data.draw(SECRETS[kind])
    document = json.dumps({"output": text + end, "exit": 0})
    done = redact(document, RULES)
    assert json.loads(done.value)["exit"] == 0
    assert not leaked(secret, done.value)
