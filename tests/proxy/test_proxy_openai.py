"""OpenAI's Chat Completions through the proxy (``/proxy/openai/v1/chat/completions``), with the
official ``openai`` SDK against the fake OpenAI server in ``tests/fakes/openai_server.py``: answers
as the upstream sent them, streamed or not; every message of a tool-using conversation recorded
once (in the Anthropic shape sessions hold); the answer's usage as the exact count; errors in
OpenAI's words."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from sessions_app.models import AgentSession, Message
from sessions_app.selectors import usage
from tests.fakes.openai_server import FakeOpenAI, count_tokens_for
from tests.proxy_client import assert_stored_nowhere

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "gpt-4o"
CALLER_KEY = "sk-callers-own-openai-key-0123456789"
READ_FILE = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": READ_FILE}}]


@pytest.fixture
def fake(settings: Any) -> Any:
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


def proxied(proxy_openai_sdk: Any, team: Any, **headers: str) -> openai.OpenAI:
    return proxy_openai_sdk({"ctxweb-api-key": team.bob.key, **headers}, api_key=CALLER_KEY)


def direct(fake: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(api_key=CALLER_KEY, base_url=f"{fake.base_url}/v1", max_retries=0)


def without_ids(raw: bytes) -> Any:
    """An answer's bytes with what the fake makes afresh each time (ids, timestamps) taken out."""
    text = raw.decode()
    if text.lstrip().startswith("{"):
        body = json.loads(text)
        return {k: v for k, v in body.items() if k not in ("id", "created")}
    events = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
    return [
        e if e == "[DONE]" else {k: v for k, v in json.loads(e).items() if k not in ("id", "created")} for e in events
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_caller_gets_what_the_upstream_sends(proxy_openai_sdk, team, fake, stream):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "stream": stream}
    answers = []
    for client in (direct(fake), proxied(proxy_openai_sdk, team)):
        fake.queue_message(
            "Reading.", tool_calls=[{"id": "call_1", "name": "read_file", "arguments": '{"path": "a.py"}'}]
        )
        response = client.chat.completions.with_raw_response.create(**body)
        answers.append((response.http_response.status_code, response.http_response.read(), response.headers))
    (status_a, bytes_a, _), (status_b, bytes_b, headers_b) = answers
    assert status_a == status_b == 200 and without_ids(bytes_a) == without_ids(bytes_b)
    assert headers_b["ctxweb-recorded"] == "yes"
    sent = fake.requests[-1]["headers"]
    assert sent["authorization"] == f"Bearer {CALLER_KEY}" and not any(k.startswith("ctxweb-") for k in sent)


def run_agent(client: openai.OpenAI, fake: FakeOpenAI, *, stream: bool) -> tuple[list[dict[str, Any]], Any]:
    """A tool-using agent that resends its whole history each time; its history and the last usage."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful agent."},
                                     {"role": "user", "content": "What does a.py do?"}]  # fmt: skip
    replies = [
        ("Let me look.", [{"id": "call_1", "name": "read_file", "arguments": '{"path": "a.py"}'}]),
        ("It parses the config.", []),
    ]
    last_usage = None
    for text, calls in replies:
        fake.queue_message(text, tool_calls=calls)
        kwargs: dict[str, Any] = {"model": MODEL, "messages": history, "tools": TOOLS}
        if stream:
            pieces: list[str] = []
            tool_calls: dict[int, dict[str, Any]] = {}
            for chunk in client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}):
                last_usage = chunk.usage or last_usage
                for choice in chunk.choices:
                    pieces.append(choice.delta.content or "")
                    for call in choice.delta.tool_calls or []:
                        known = tool_calls.setdefault(call.index, {"id": call.id, "name": None, "arguments": ""})
                        known["name"] = (call.function and call.function.name) or known["name"]
                        known["arguments"] += (call.function and call.function.arguments) or ""
            said: dict[str, Any] = {"role": "assistant", "content": "".join(pieces)}
            if tool_calls:
                said["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for _, c in sorted(tool_calls.items())
                ]
        else:
            completion = client.chat.completions.create(**kwargs)
            last_usage = completion.usage
            said = completion.choices[0].message.model_dump(
                exclude_none=True, include={"role", "content", "tool_calls"}
            )
        history.append(said)
        for call in said.get("tool_calls", []):
            history.append({"role": "tool", "tool_call_id": call["id"], "content": "def parse(): ..."})
    return history, last_usage


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_tool_loop_is_recorded_once_and_status_is_the_upstreams_usage(proxy_openai_sdk, team, fake, stream):
    _, last_usage = run_agent(proxied(proxy_openai_sdk, team), fake, stream=stream)
    session = AgentSession.objects.get(project=team.project)
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert session.system_prompt == "You are a careful agent." and session.model == MODEL
    assert [role for role, _ in stored] == ["user", "assistant", "tool", "assistant"]  # each once
    called = {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.py"}}
    assert stored[1][1] == [{"type": "text", "text": "Let me look."}, called]
    assert stored[2][1] == [{"type": "tool_result", "tool_use_id": "call_1", "content": "def parse(): ..."}]
    assert stored[3][1] == [{"type": "text", "text": "It parses the config."}]
    status = usage.session_status(session)
    assert status["token_source"] == "exact"
    assert status["used"] == last_usage.prompt_tokens + last_usage.completion_tokens
    assert last_usage.prompt_tokens == count_tokens_for(fake.requests[-1]["body"])


def test_ctxwebs_refusals_and_the_upstreams_errors_come_in_openais_words(proxy_openai_sdk, team, fake):
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(openai.AuthenticationError) as no_ctxweb_key:
        proxy_openai_sdk({}, api_key=CALLER_KEY).chat.completions.create(**ask)
    assert "ctxweb-api-key" in no_ctxweb_key.value.body["message"]
    with pytest.raises(openai.AuthenticationError) as no_own_key:  # ctxweb keeps no OpenAI key
        proxy_openai_sdk({}, api_key=team.bob.key).chat.completions.create(**ask)
    assert "Authorization" in no_own_key.value.body["message"]
    assert fake.requests == [] and not AgentSession.objects.exists()
    fake.queue_error(429, "Rate limit reached")
    with pytest.raises(openai.RateLimitError) as limited:
        proxied(proxy_openai_sdk, team).chat.completions.create(**ask)
    assert limited.value.body["message"] == "Rate limit reached"


def test_the_callers_openai_key_is_never_stored(proxy_openai_sdk, team, fake):
    run_agent(proxied(proxy_openai_sdk, team), fake, stream=True)
    assert_stored_nowhere(CALLER_KEY)


def test_a_stream_cut_upstream_ends_with_an_error_and_is_kept_until_the_retry(proxy_openai_sdk, team, fake):
    client = proxied(proxy_openai_sdk, team)
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "Explain a.py."}], "stream": True}
    whole = "It reads the configuration and checks every field."
    fake.queue_reply(whole)
    fake.queue_stream_cut(after_chunks=3)
    with pytest.raises(openai.APIError, match="broke off"):
        list(client.chat.completions.create(**ask))
    session = AgentSession.objects.get(project=team.project)
    cut = Message.objects.get(session=session, seq=2)
    assert cut.metadata["proxy"]["cut"] is True and whole not in json.dumps(cut.content)
    fake.queue_reply(whole)  # the agent asks again
    assert (
        "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**ask) if c.choices) == whole
    )
    rows = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert rows == [("user", "Explain a.py."), ("assistant", [{"type": "text", "text": whole}])]


def test_a_request_past_the_size_limit_is_refused_in_openais_words(team, fake, client, settings):
    settings.CTX_PROXY_MAX_BODY_BYTES = 100
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 200}]}
    answer = client.post(
        "/proxy/openai/v1/chat/completions", data=json.dumps(body), content_type="application/json",
        HTTP_CTXWEB_API_KEY=team.bob.key, HTTP_AUTHORIZATION=f"Bearer {CALLER_KEY}",
    )  # fmt: skip
    assert answer.status_code == 413 and "limit" in answer.json()["error"]["message"] and fake.requests == []
