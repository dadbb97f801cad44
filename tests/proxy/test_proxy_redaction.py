"""Redaction through the proxy: the request goes upstream as the agent sent it, secrets included; the
session stores neither the request's secrets nor the reply's; and with transparent compaction the
compacted request carries the values the agent sent, never a marker in their place."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.redact import MARKER
from sessions_app.models import AgentSession
from tests.redacted import table_text
from tests.secret_values import SECRETS, leaked

pytestmark = pytest.mark.django_db(transaction=True)

AWS_MARKER = re.compile(r"\[secret:aws-access-key:[0-9a-f]{4}\]")
MODEL = "tiny-window-model"
WINDOW = 8_000


def token(n: int) -> str:
    return f"ghp_{n:04d}Zq8mW2xK4vN7bT1cR5yL9pD3fH6jA0sE"


def test_the_request_goes_as_sent_and_neither_it_nor_the_reply_is_stored_in_the_clear(proxy_sdk, team, fake):
    client = proxy_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": "with-secrets"})
    aws, password = "AKIAQ7XW2ZK9PL4M8N3R", "Vx9!kQ2#mZ7@pL4$"
    history = [
        {"role": "user", "content": f'Connect with AWS key {aws} and password: "{password}"'},
    ]
    fake.queue_reply(f"Connected. Your token is {token(1)}.")
    answer = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, system=f"Deploy key {token(2)}", messages=history
    )
    assert token(1) in answer.content[0].text  # the agent gets the reply as the model wrote it
    sent = fake.requests_for("messages")[-1]["body"]
    assert aws in json.dumps(sent) and token(2) in json.dumps(sent) and "[secret:" not in json.dumps(sent)
    stored = table_text()
    for secret in (aws, password, token(1), token(2)):
        assert not leaked(secret, stored)
    session = AgentSession.objects.get(external_id="with-secrets")
    assert AWS_MARKER.search(session.name)  # named from the user's first words, as they are stored
    # Replaced: the key in the message (the name is made of it), the tokens in the system prompt and the reply.
    assert session.redactions["aws-access-key"] == 1 and session.redactions["github-token"] == 2


KINDS = sorted(SECRETS)


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=st.tuples(*(SECRETS[kind] for kind in KINDS)), n=st.integers(0, 10**6))
def test_every_kind_in_requests_tool_calls_and_replies_reaches_the_provider_and_not_the_store(
    proxy_sdk, team, fake, drawn, n
):
    secrets, texts = [s for s, _ in drawn], [t for _, t in drawn]
    client = proxy_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": f"kinds-{n}-{len(fake.requests)}"})
    half = len(texts) // 2
    history: list[dict[str, Any]] = [{"role": "user", "content": "Check the config:\n" + "\n".join(texts[:half])}]
    fake.queue_message(
        [
            {
                "type": "tool_use",
                "id": f"toolu_k{n}",
                "name": "Bash",
                "input": {"command": "cat .env", "token": secrets[0]},
            }
        ],
        stop_reason="tool_use",
    )
    first = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, system=texts[-1], messages=history)
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    output = "\n".join(texts[half:])
    history.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_k{n}", "content": output}]}
    )
    fake.queue_reply("Seen: " + " ".join(texts[:3]))
    client.messages.create(model="claude-sonnet-4-5", max_tokens=64, system=texts[-1], messages=history)
    sent = json.dumps([r["body"] for r in fake.requests_for("messages")[-2:]])
    stored = table_text()
    for secret in secrets:
        assert secret in sent or json.dumps(secret)[1:-1] in sent  # upstream as the agent sent it
        assert not leaked(secret, stored)


@pytest.mark.slow
def test_transparent_compaction_sends_the_agents_values_not_markers(proxy_sdk, team, fake, small_window):
    client = proxy_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": "compacted-secrets"})
    history: list[dict[str, Any]] = []
    compacted = 0
    for n in range(60):
        output = "\n".join(f"src/m{n}.py:{i}: ok" for i in range(30)) + f"\nexport GITHUB_TOKEN={token(n)}"
        history.append({"role": "user", "content": f"Step {n}: run the check; its log:\n{output}"})
        fake.queue_reply(f"Step {n} passed; token {token(n)} works.")
        answer = client.messages.with_raw_response.create(model=MODEL, max_tokens=128, messages=history)
        history.append({"role": "assistant", "content": [{"type": "text", "text": answer.parse().content[0].text}]})
        compacted += "ctxweb-compacted" in answer.headers
        if compacted >= 3:
            break
    assert compacted >= 3, "no compaction ran"
    bodies = [json.dumps(r["body"]) for r in fake.requests_for("messages")]
    assert not any(MARKER.search(body) for body in bodies)  # values, never markers, went upstream
    last = bodies[-1]
    assert token(n) in last  # the newest turn, kept verbatim, with the agent's value
    stored = table_text()
    assert not any(leaked(token(k), stored) for k in range(n + 1))
